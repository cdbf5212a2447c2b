"""Throughput of the pipelines on the local Flink cluster against the local runner, on the same data.

    python benchmarks/flink_throughput.py [--quick] [--json PATH] [--runs 3] [--data DIR] [--only CASE ...]

Starts the cluster of ``make flink-up`` on free ports (``pipelines.flink.cluster``: a JobManager, a TaskManager
with two slots, Beam's job server, the Kafka expansion service, the Python worker pool) and Apache Kafka's broker
(``pipelines.kafka_broker``), generates the datasets once (cached under --data), then for each case runs the
whole job (building the pipeline, submitting, running, the driver's judgement and release) in a fresh process,
alternating local, Flink at parallelism 1 and Flink at parallelism 2, ``--runs`` times:

* **batch k-anonymity**: ``pipelines.kanon`` on Avro joins (local: the FnApiRunner);
* **batch measurement**: ``pipelines.measurement`` (Cookie Monster) on the microbenchmark (local: FnApiRunner);
* **streaming k-anonymity**: ``pipelines.kanon`` from a Kafka topic read to its end (``stop=end``) to a topic
  (local: the DirectRunner's topic path; Flink: Beam's KafkaIO through the expansion service).

events/s = events read / the run's wall time, median of the runs (and the median wall time); ratio = Flink's
rate / the local runner's.
**Start-up**: the same job on five joins, whose time is all fixed cost. **Where the time goes** (the last
Flink run of each case, from Flink's REST API): the driver's time before Flink has the job (building the graph,
expanding KafkaIO, staging the job's artefacts, translating it), the job's time on the cluster, and the driver's
time after it (reading and judging the outputs, the summary); and the three busiest stages with their busy time
(Flink's ``accumulated-busy-time``, summed over the stage's subtasks).
**Memory**: the peak over the run of the resident memory of the cluster's processes (the TaskManager, the
worker pool and its SDK workers; the JobManager, the job server and the expansion service) and of the driver;
locally, the driver's (which is the whole job).

Datasets: 200,000 joins of 2,000 groups over 30 days; the microbenchmark at knob1 = 0.1, knob2 = 0.1 (20,000
devices, about 280,000 events). ``--quick``: a tenth of each, one run. Never part of the test suite.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import ROOT, benchmark_parser, cached, runs_of, write_json  # noqa: E402

from pipelines.flink import rest  # noqa: E402
from pipelines.flink.cluster import HOME_ENVIRONMENT, FlinkCluster  # noqa: E402
from pipelines.kafka_broker import KafkaBroker  # noqa: E402
from pipelines.processes import free_port  # noqa: E402

KANON = {"joins": 200_000, "groups": 2_000, "days": 30}
KANON_QUICK = {"joins": 20_000, "groups": 200, "days": 30}
MEASUREMENT = {"knob1": 0.1, "knob2": 0.1}
MEASUREMENT_QUICK = {"knob1": 1.0, "knob2": 0.1}  # a tenth of the devices
SIDES = ("local", "flink p=1", "flink p=2")


def _generate(kind: str, directory: str, parameters: dict, *extra: str) -> None:
    if cached(directory, parameters):
        return
    print(f"generating {kind} into {directory} ...", flush=True)
    subprocess.run([sys.executable, "-m", "pipelines.generate", kind, "--output", directory, "--seed", "1", "--quiet",
                    *(f"--{name}={value}" for name, value in parameters.items()), *extra], check=True, cwd=ROOT)


def _jsonl(pattern: Path) -> list[dict]:
    lines = [line for path in sorted(pattern.parent.glob(pattern.name)) for line in path.read_text().splitlines()]
    return sorted((json.loads(line) for line in lines), key=lambda record: record["event_time_micros"])


def _produce(address: str, topic: str, records: list[dict]) -> None:
    """Every record as a JSON message timestamped with its event time (the Flink path's watermark follows it)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": address, "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000})
    for index, record in enumerate(records):
        producer.produce(topic, value=json.dumps(record).encode(), timestamp=record["event_time_micros"] // 1000)
        if index % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def _tree_rss_mb(pids: list[int]) -> float:
    """The resident memory of ``pids`` and all their descendants, in MB (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, stack = 0, list(pids)
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


class _PeakMemory:
    """The peak, sampled twice a second, of the resident memory of some process trees."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.peak = pids, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss_mb(self.pids))
            time.sleep(0.5)

    def __enter__(self) -> _PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _run(module: str, arguments: list[str], cluster: FlinkCluster | None, job_name: str | None) -> dict:
    """One job in a fresh process: its wall time, its summary's counts, the peak memory of it (and, on Flink, of
    the cluster), and on Flink the job's times from the REST API."""
    environment = dict(os.environ)
    if cluster is not None:
        environment[HOME_ENVIRONMENT] = str(cluster.home)
    output = tempfile.mkdtemp(prefix="pm-beam-flink-bench-")
    command = [sys.executable, "-m", module, *arguments, "--output", output]
    started, started_at = time.monotonic(), time.time()
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    pids = [process.pid, *(cluster.record.pids.values() if cluster is not None and cluster.record else [])]
    with _PeakMemory(pids) as memory:
        printed, _ = process.communicate()
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{printed[-3000:]}")
    summary = json.loads(Path(output, "summary.json").read_text())
    result = {"seconds": seconds, "read": summary["counts"]["read"], "peak_rss_mb": memory.peak}
    if job_name is not None:
        result.update(_profile(cluster, job_name, started_at, seconds))
    return result


def _busy_seconds(vertex: dict) -> float:
    """A stage's busy time in seconds from Flink's job details (its duration where Flink reports none: NaN)."""
    busy = float(vertex["metrics"].get("accumulated-busy-time", "nan"))
    return (vertex["duration"] if busy != busy else busy) / 1000


def _profile(cluster: FlinkCluster, job_name: str, started_at: float, seconds: float) -> dict:
    """Where a Flink run's time went: before Flink had the job (from the driver's start, wall clock, to the job's
    creation), on the cluster (the job's duration), after it; and its busiest stages."""
    job = rest.job_named(cluster.rest, job_name)
    details = rest.job(cluster.rest, job["jid"])
    before = max(details["start-time"] / 1000 - started_at, 0.0)
    on_cluster = details["duration"] / 1000
    # a stage's busy time (summed over its subtasks; Flink's accumulated-busy-time): a streaming stage's duration
    # is the job's, its busy time is what it worked
    stages = sorted(((_busy_seconds(vertex), vertex["name"][:70]) for vertex in details["vertices"]), reverse=True)
    return {"before_seconds": before, "on_cluster_seconds": on_cluster,
            "after_seconds": max(seconds - before - on_cluster, 0.0), "busiest_stages": stages[:3]}


def _case(name: str, module: str, arguments: list[str], cluster: FlinkCluster, runs: int,
          topic_of=None) -> dict:
    """``runs`` rounds of the three sides on one case; each side's median rate, the ratios, memory, profile."""
    results: dict[str, list[dict]] = {side: [] for side in SIDES}
    for index in range(runs):
        for side in SIDES:
            job_name = None if side == "local" else f"bench-{name}-{uuid.uuid4().hex[:6]}"
            extra = list(topic_of(side)) if topic_of else []
            if side == "local":
                runner = [] if topic_of else ["--runner=FnApiRunner"]
            else:
                runner = ["--runner", "FlinkRunner", "--flink_master", cluster.rest, "--parallelism", side[-1],
                          "--job_name", job_name]
            results[side].append(_run(module, [*arguments, *extra, *runner], None if side == "local" else cluster,
                                      job_name))
            print(f"{name} run {index + 1}/{runs} {side}: {results[side][-1]['seconds']:.1f} s", flush=True)
    rates = {side: statistics.median(r["read"] / r["seconds"] for r in results[side]) for side in SIDES}
    return {
        "case": name,
        "events": results["local"][0]["read"],
        "events_per_second": {side: round(rate) for side, rate in rates.items()},
        "median_seconds": {side: round(statistics.median(r["seconds"] for r in results[side]), 2) for side in SIDES},
        "ratio_to_local": {side: round(rates[side] / rates["local"], 3) for side in SIDES[1:]},
        "seconds": {side: [round(r["seconds"], 2) for r in results[side]] for side in SIDES},
        "peak_rss_mb": {side: round(max(r["peak_rss_mb"] for r in results[side])) for side in SIDES},
        "profile": {side: {key: (round(value, 2) if isinstance(value, float) else value)
                           for key, value in results[side][-1].items()
                           if key in ("before_seconds", "on_cluster_seconds", "after_seconds", "busiest_stages")}
                    for side in SIDES[1:]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "a tenth of each dataset, one run (a smoke test)")
    parser.add_argument("--only", action="append", metavar="CASE", help="run this case only (repeatable), e.g. "
                        "--only 'streaming kanon'")
    args = parser.parse_args(argv)
    runs = runs_of(args)
    kanon, micro = (KANON_QUICK, MEASUREMENT_QUICK) if args.quick else (KANON, MEASUREMENT)
    data = Path(args.data or tempfile.gettempdir()) / f"pm-beam-flink-bench-{kanon['joins']}"
    _generate("kanon", str(data / "joins"), kanon)
    _generate("kanon", str(data / "joins-jsonl"), kanon, "--format", "jsonl")
    _generate("microbenchmark", str(data / "micro"), micro)
    _generate("kanon", str(data / "start-up"), {"joins": 5, "groups": 1, "days": 1})
    home = Path(tempfile.mkdtemp(prefix="pm-beam-flink-bench-cluster-"))
    with FlinkCluster(home, rest_port=free_port()) as cluster, KafkaBroker() as broker:
        topic = f"joins-{uuid.uuid4().hex[:8]}"
        _produce(broker.address, topic, _jsonl(data / "joins-jsonl" / "joins-*"))
        groups = iter(range(10**6))

        def from_topic(side: str) -> list[str]:
            """A consumer group of its own per run (a run's job id, whose local state starts empty), and the
            local runner's state store in the run's temporary directory, not the working directory's."""
            read = ["--input", f"kafka://{broker.address}/{topic}?stop=end&group=bench-{next(groups)}"]
            if side != "local":
                return read
            return [*read, "--state-store", f"sqlite:///{tempfile.mkdtemp(prefix='pm-beam-flink-bench-state-')}/s.db"]

        micro_inputs = ["--impressions", str(data / "micro" / "impressions-*"), "--conversions",
                        str(data / "micro" / "conversions-*")]
        plans = {
            "start-up (5 joins)": ("pipelines.kanon", ["--input", str(data / "start-up" / "joins-*")], None),
            "batch kanon": ("pipelines.kanon", ["--input", str(data / "joins" / "joins-*")], None),
            "batch measurement": ("pipelines.measurement", [*micro_inputs, "--batch-size", "200"], None),
            "streaming kanon": ("pipelines.kanon", [], from_topic),
        }
        unknown = set(args.only or ()) - set(plans)
        if unknown:
            raise SystemExit(f"--only: no case {sorted(unknown)}; the cases: {list(plans)}")
        cases = [_case(name, module, arguments, cluster, runs, topic_of=topic_of)
                 for name, (module, arguments, topic_of) in plans.items() if not args.only or name in args.only]
    print(f"\n{'case':24}{'events':>9}" + "".join(f"{side + ' ev/s':>16}" for side in SIDES)
          + f"{'p=1/local':>11}{'p=2/local':>11}" + "".join(f"{side + ' s':>13}" for side in SIDES))
    for case in cases:
        print(f"{case['case']:24}{case['events']:>9,}" + "".join(f"{case['events_per_second'][side]:>16,}"
                                                                 for side in SIDES)
              + f"{case['ratio_to_local']['flink p=1']:>11.2f}{case['ratio_to_local']['flink p=2']:>11.2f}"
              + "".join(f"{case['median_seconds'][side]:>13.1f}" for side in SIDES))
    for case in cases:
        for side, profile in case["profile"].items():
            print(f"{case['case']} {side}: before the cluster {profile['before_seconds']} s, on it "
                  f"{profile['on_cluster_seconds']} s, after {profile['after_seconds']} s; busiest stages "
                  + "; ".join(f"{name} {seconds:.1f} s" for seconds, name in profile["busiest_stages"]))
        print(f"{case['case']} peak RSS MB: " + ", ".join(f"{side} {mb:,}" for side, mb in case["peak_rss_mb"].items()))
    main_case = next((case for case in cases if case["case"] == "batch kanon"), cases[0])
    write_json(args.json, {
        "name": "flink_throughput",
        "runs": runs,
        "events_per_second": main_case["events_per_second"]["flink p=2"],
        "peak_rss_mb": main_case["peak_rss_mb"]["flink p=2"],
        "reference_events_per_second": main_case["events_per_second"]["local"],
        "ratio": main_case["ratio_to_local"]["flink p=2"],
        "cases": cases,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
