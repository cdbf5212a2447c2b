"""Sustained throughput of the streaming jobs from a Kafka topic to a Kafka topic on the local runner.

    python benchmarks/streaming_throughput.py [--quick] [--json PATH] [--runs 3] [--data DIR]
        [--jobs kanon,measurement,summary_client,event_level]

Starts a local broker (tansu, ``pipelines.local_broker``), generates each job's dataset once (cached under
--data) and produces it to a topic as JSON messages. Then, for each job:

* **throughput**: the whole job (``pipelines.<job>`` with ``kafka://...?stop=end`` inputs and ``--output-topic``)
  in a fresh process per run, each run with its own consumer group (so it reads the topic from the start) and
  output topic; events/s = events read / the job's run time (building the pipeline, reading every message,
  evaluating, producing every output and draining), median of the runs; peak RSS: the job process's plus its
  topic source process's (``transforms.core.bus.stream_process``);
* **ceiling**: in the same session, the broker's raw rate on the same messages: a plain confluent-kafka
  consumer reading the topic without decoding (and the producer's rate when the data was sent); the job's
  ratio to the consumer's rate;
* **floor** (every job): the same job with its stateful step dropping every event (``stream_floor.py``), the
  transport the job pays on these topics; the job's ratio to it (target 0.7);
* **sustained rate** (measurement): for the job and its floor, the events beyond a tenth of the devices (their
  own topics) over the extra time they take, median runs, so that start-up, building the pipeline and the drain
  cancel out;
* **latency** (k-anonymity): the job runs live (``stop=never``) while a producer sends the joins in event-time
  order at half the measured sustained rate; for each hour with a verdict change, the time from the producer
  sending the first join that makes the hour final (its end plus the allowed lateness: the source's watermark
  passes it then) to the first verdict of that hour on the output topic; p50 and p95 over those hours;
* **durability** (docs/durability.md): every job run keeps its state in a SQLite store of its own (the default a
  user gets), and each is paired with a run of the same job without one (``--state-store none``), the two sides
  alternating; the cost is 1 - (rate with the store) / (rate without), on the whole run and (measurement) on the
  sustained rate;
* **restore**: 100,000 device records in a fresh store (the microbenchmark's 20,000 devices half-way through
  their events, made by the budgeting replay itself, copied under new ids), restored as a restarted job restores
  them (the snapshot and every key read, the shard's record rebuilt and written, every device decoded), in a
  fresh process, median of the runs. (A drained run's store holds no device: each is final at the end of the input.)

Datasets: k-anonymity 200,000 joins, 2,000 groups, 30 days; measurement: the Cookie Monster microbenchmark
(knob1 = 0.1, knob2 = 0.1: 20,000 devices, about 280,000 events), policy cookie_monster; the ARA summary client
(``summary_client ara``): 5,000 devices over 30 days, 305,243 sources and triggers; event-level: 5,000 devices over
30 days, about 308,000 sources and triggers, epsilon 14. Each topic in event-time order. ``--quick``: a tenth of
each. Never part of the test suite.
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
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import ROOT, benchmark_parser, run_child, runs_of, write_json  # noqa: E402
from streaming_jobs import JOBS, generate, input_records  # noqa: E402

from pipelines.local_broker import LocalBroker  # noqa: E402

DEVICE_JOBS = ("summary_client", "event_level")  # the device jobs beside measurement, benchmarked alike
LATENESS_SECONDS = 3600
HOUR = 3_600_000_000

_JOB_CHILD = """
import json, os, resource, sys, time
name, floor = sys.argv[1].removesuffix("-floor"), sys.argv[1].endswith("-floor")
if floor:
    sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
    import stream_floor
    stream_floor.install()
module = __import__("pipelines." + name, fromlist=["parse_job", "run"])  # its arguments: sys.argv[2:]
job, beam_args = module.parse_job(sys.argv[2:])
started = time.perf_counter()
summary = module.run(job, beam_args)
elapsed = time.perf_counter() - started
assert summary["status"] == "ok", summary
peak_kb = sum(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"seconds": elapsed, "events": summary["counts"]["parsed"], "peak_rss_mb": peak_kb / 1024}))
"""


def _child(arguments: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _JOB_CHILD, *arguments], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _produce(address: str, topic: str, values: list[bytes]) -> float:
    """Send ``values``; the producer's messages per second."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": address, "linger.ms": 5})
    started = time.perf_counter()
    for index, value in enumerate(values):
        producer.produce(topic, value=value)
        if index % 20_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return len(values) / (time.perf_counter() - started)


def _consume_rate(address: str, topics: list[str], expected: int) -> float:
    """A plain consumer reading ``expected`` messages of ``topics`` without decoding them: messages per second,
    from its first fetch (partitions assigned, no group rebalance) to the last message."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": address, "group.id": f"ceiling-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50, "queued.min.messages": 200_000})
    assignment = []
    for topic in topics:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        assignment += [TopicPartition(topic, number, OFFSET_BEGINNING) for number in partitions]
    consumer.assign(assignment)
    count, started = 0, time.perf_counter()
    deadline = time.monotonic() + 120
    while count < expected and time.monotonic() < deadline:
        count += len(consumer.consume(50_000, timeout=0.5))
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def _messages(records: list[dict]) -> list[bytes]:
    return [json.dumps(record).encode() for record in records]


def _latency(address: str, joins: list[dict], rate: float, data_dir: str) -> dict:
    """The k-anonymity job live at ``rate`` joins/s: hour -> seconds from the join that made it final being sent
    to its first verdict on the output topic (p50, p95, hours measured)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    topic, verdicts = f"live-{uuid.uuid4().hex[:8]}", f"live-verdicts-{uuid.uuid4().hex[:8]}"
    values = _messages(joins)
    producer = Producer({"bootstrap.servers": address, "linger.ms": 1})
    producer.produce(verdicts, value=b"{}")  # create the output topic before anyone reads it
    producer.produce(topic, value=values[0])
    producer.flush(30)
    output = tempfile.mkdtemp(prefix="pm-beam-stream-latency-")
    job = subprocess.Popen(
        [sys.executable, "-m", "pipelines.kanon", "--input", f"kafka://{address}/{topic}", "--output", output,
         "--output-topic", f"kafka://{address}/{verdicts}", "--progress-seconds", "1000",
         "--state-store", f"sqlite:///{output}/state.sqlite"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    arrivals: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        consumer = Consumer({"bootstrap.servers": address, "group.id": f"lat-{uuid.uuid4().hex[:8]}"})
        partitions = consumer.list_topics(verdicts, timeout=10).topics[verdicts].partitions
        consumer.assign([TopicPartition(verdicts, number, OFFSET_BEGINNING) for number in partitions])
        while not stop.is_set():
            for message in consumer.consume(1000, timeout=0.2):
                if message.error() is None and message.value() != b"{}":
                    step = json.loads(message.value())["step"]
                    arrivals.setdefault(step, time.perf_counter())
        consumer.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    time.sleep(8)  # the job starts and reaches the topic
    made_final: dict[int, float] = {}  # hour -> when the first join at or after its final time was sent
    pending_hour = joins[0]["event_time_micros"] // HOUR
    started = time.perf_counter()
    for index, (join, value) in enumerate(zip(joins, values, strict=True)):
        due = started + index / rate
        while (now := time.perf_counter()) < due:
            time.sleep(min(due - now, 0.01))
        producer.produce(topic, value=value)
        producer.poll(0)
        while (pending_hour + 1) * HOUR + LATENESS_SECONDS * 1_000_000 <= join["event_time_micros"]:
            made_final.setdefault(pending_hour, time.perf_counter())
            pending_hour += 1
    producer.flush(30)
    time.sleep(10)
    job.terminate()
    job.wait(timeout=120)
    stop.set()
    watcher.join()
    latencies = sorted(arrivals[hour] - sent for hour, sent in made_final.items() if hour in arrivals)
    if not latencies:
        return {"hours": 0}
    return {"hours": len(latencies), "p50_seconds": round(statistics.median(latencies), 3),
            "p95_seconds": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 3),
            "rate_events_per_second": round(rate)}


def _job_runs(name: str, address: str, topics: dict[str, str], extra: list[str], runs: int, events: int,
              durable: bool = True, leading: tuple[str, ...] = ()) -> list:
    """``runs`` runs of the job ``name`` (``<job>-floor``: its transport floor, ``stream_floor``) on ``topics``,
    each with a state store of its own (``durable``) or none; each result names its store (``store``).
    ``leading``: the command's first arguments (the summary client's client)."""
    results = []
    for index in range(runs):
        group, output_topic = f"bench-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
        inputs = [item for option, topic in topics.items()
                  for item in (option, f"kafka://{address}/{topic}?stop=end&group={group}")]
        output = tempfile.mkdtemp(prefix=f"pm-beam-stream-{name}-")
        store = f"{output}/state.sqlite" if durable else None
        results.append(_child([name, *leading, *inputs, "--output", output, "--output-topic",
                               f"kafka://{address}/{output_topic}",
                               "--progress-seconds", "1000", "--state-store",
                               f"sqlite:///{store}" if store else "none", *extra]))
        assert results[-1]["events"] == events, results[-1]
        results[-1]["store"] = store
        side = "" if durable else " without a state store"
        print(f"{name} run {index + 1}/{runs}{side}: {results[-1]['seconds']:.2f} s ({events:,} events)", flush=True)
    return results


def _paired_runs(name: str, address: str, topics: dict[str, str], extra: list[str], runs: int,
                 events: int, leading: tuple[str, ...] = ()) -> tuple[list, list]:
    """``runs`` runs with a state store and ``runs`` without, alternating (machine drift falls on both sides)."""
    durable, memory = [], []
    for _ in range(runs):
        durable += _job_runs(name, address, topics, extra, 1, events, leading=leading)
        memory += _job_runs(name, address, topics, extra, 1, events, durable=False, leading=leading)
    return durable, memory


def _rate(results: list) -> float:
    return statistics.median(r["events"] / r["seconds"] for r in results)


def _sustained(full: list, tenth: list) -> float:
    """Events per second in steady state: the events the full dataset has beyond a tenth of its devices over the
    extra time they took (median runs), so that start-up, building the pipeline and the drain cancel out."""
    return (full[0]["events"] - tenth[0]["events"]) / (statistics.median(r["seconds"] for r in full)
                                                       - statistics.median(r["seconds"] for r in tenth))


def _bench_job(name: str, address: str, topics: dict[str, str], extra: list[str], runs: int, events: int,
               leading: tuple[str, ...] = ()) -> dict:
    """The job's paired runs (with and without its store), its floor's runs (``stream_floor``), and the
    broker's ceiling, on ``topics``."""
    results, memory = _paired_runs(name, address, topics, extra, runs, events, leading)
    floor = _job_runs(f"{name}-floor", address, topics, extra, runs, events, durable=False, leading=leading)
    ceiling = _consume_rate(address, list(topics.values()), events)
    rate, without, floor_rate = _rate(results), _rate(memory), _rate(floor)
    return {"name": f"streaming_{name}", "runs": runs, "events": events, "events_per_second": round(rate),
            "slowest_events_per_second": round(min(r["events"] / r["seconds"] for r in results)),
            "floor_events_per_second": round(floor_rate), "floor_seconds": [round(r["seconds"], 3) for r in floor],
            "floor_ratio": round(rate / floor_rate, 3),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in results), 1),
            "reference_events_per_second": round(ceiling), "ratio": round(rate / ceiling, 3),
            "seconds": [round(r["seconds"], 3) for r in results],
            "without_store_events_per_second": round(without),
            "without_store_seconds": [round(r["seconds"], 3) for r in memory],
            "durability_cost": round(1 - rate / without, 3), "store": results[-1]["store"]}


def _tenth(records: list[dict]) -> list[dict]:
    """The records of a tenth of the devices (CRC-32 of the device id)."""
    return [record for record in records if zlib.crc32(record["device_id"].encode("utf-8")) % 10 == 0]


def _floor_and_sustained(address: str, topics: dict[str, str], extra: list[str], runs: int, impressions: list,
                         conversions: list, result: dict) -> dict:
    """The sustained rates of the measurement job with and without its state store and of its floor
    (``_sustained``: against runs on a tenth of the devices, in topics of their own)."""
    events = len(impressions) + len(conversions)
    floor = [{"events": events, "seconds": value} for value in result["floor_seconds"]]
    small = {option: f"{topic}-tenth" for option, topic in topics.items()}
    _produce(address, small["--impressions"], _messages(_tenth(impressions)))
    _produce(address, small["--conversions"], _messages(_tenth(conversions)))
    small_events = len(_tenth(impressions)) + len(_tenth(conversions))
    job_small, memory_small = _paired_runs("measurement", address, small, extra, runs, small_events)
    floor_small = _job_runs("measurement-floor", address, small, extra, runs, small_events, durable=False)
    job = [{"events": events, "seconds": value} for value in result["seconds"]]
    memory = [{"events": events, "seconds": value} for value in result["without_store_seconds"]]
    sustained, sustained_without = _sustained(job, job_small), _sustained(memory, memory_small)
    return {"tenth_events": small_events, "tenth_seconds": [round(r["seconds"], 3) for r in job_small],
            "without_store_tenth_seconds": [round(r["seconds"], 3) for r in memory_small],
            "floor_tenth_seconds": [round(r["seconds"], 3) for r in floor_small],
            "sustained_events_per_second": round(sustained),
            "without_store_sustained_events_per_second": round(sustained_without),
            "sustained_durability_cost": round(1 - sustained / sustained_without, 3),
            "floor_sustained_events_per_second": round(_sustained(floor, floor_small))}


def _bench_device_job(name: str, address: str, data: str, quick: bool, runs: int) -> dict:
    """``_bench_job`` of a device job of ``DEVICE_JOBS`` on its dataset, each input a topic in event-time order."""
    job = JOBS[name]
    generate(job, data, quick)
    topics, events = {}, 0
    for option, prefix, _ in job.inputs:
        rows = input_records(data, prefix)
        topics[option] = f"{name}-{option.strip('-')}-{uuid.uuid4().hex[:8]}"
        _produce(address, topics[option], _messages(rows))
        events += len(rows)
    return _bench_job(name, address, topics, list(job.extra), runs, events, job.leading)


_RECORDS_CHILD = """
import sys, zlib
from collections import defaultdict
from pipelines import measurement
from schemas.codecs import CONVERSION, IMPRESSION, read_files
from schemas.proto import state_pb2
from transforms.budgeting.mechanisms.device import DeviceState, replay, sort_events
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.budgeting.state import device_codec
from transforms.core.device_state import DeviceRecord
from transforms.core.durable.step import DurableStep
from transforms.core.mechanisms.noise import SeededSource
from transforms.core.noise_key import resolve_key
import glob
data, store, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
job, _ = measurement.parse_job(["--impressions", "x", "--conversions", "y", "--output", "o", "--policy", "cookie_monster"])
config, policy, source = job.config, make_policy("cookie_monster"), SeededSource(1)
events = defaultdict(list)
for prefix, spec in (("impressions-", IMPRESSION), ("conversions-", CONVERSION)):
    rows, _ = read_files(sorted(glob.glob(f"{data}/{prefix}*")), spec)
    for row in rows:
        events[row.device_id].append(row)
codec, shard, encoded = device_codec(config), state_pb2.DeviceShardState(version=3), []
for device_id, rows in sorted(events.items()):
    rows = sort_events(rows)
    half = rows[: len(rows) // 2 + 1]  # a device half-way through its events, as a running job holds it
    record = DeviceRecord(DeviceState(config.new_filters()))
    list(replay(device_id, half, record.state, config, policy, source))
    record.cut = half[-1].event_time_micros + 1
    encoded.append((device_id, codec.encode(record)))
for n in range(wanted):
    device_id, data_bytes = encoded[n % len(encoded)]
    shard.devices[f"{device_id}/{n // len(encoded)}"] = data_bytes
step = DurableStep(f"sqlite:///{store}", "restore", "devices", resolve_key(None)).open()
step.save(shard, "devices", set(shard.devices), [], [], fired_micros=0)
print('{"devices": %d}' % len(encoded))
"""

_RESTORE_CHILD = """
import json, sys, time
from transforms.core.collector import streaming_collector
from schemas.proto import state_pb2
from transforms.budgeting.state import device_codec
from transforms.core.durable.step import DurableStep
from transforms.budgeting.mechanisms.device import MeasurementConfig
from transforms.core.noise_key import resolve_key
store, wanted = sys.argv[1], int(sys.argv[2])
collector = streaming_collector()  # as in a streaming run, where the restore happens
collector.__enter__()  # held until the child exits (a dropped one would restore the defaults at once)
started = time.perf_counter()
step = DurableStep(f"sqlite:///{store}", "restore", "devices", resolve_key(None)).open()
restored = step.restore(state_pb2.DeviceShardState, "devices", natural_micros=0)
read = time.perf_counter()
codec = device_codec(MeasurementConfig())
devices = {device_id: codec.decode(data) for device_id, data in restored.shard.devices.items()}
shard_bytes = restored.shard.SerializeToString()  # the shard's record, as the step writes it into Beam state
done = time.perf_counter()
assert len(devices) == wanted, len(devices)
print(json.dumps({"seconds": done - started, "read_seconds": read - started, "keys": len(devices),
                  "records_mb": len(shard_bytes) / 1e6}))
"""


def _restore(data: str, runs: int, keys: int = 100_000) -> dict:
    """The time to restore ``keys`` devices as a restarted job does (the snapshot and every key read from the
    store, the shard's record rebuilt and written, every device decoded): records of the microbenchmark's devices
    half-way through their events (impressions and filters, made by the budgeting replay itself), copied under
    new ids until there are ``keys``, in a fresh SQLite store; timed in a fresh process, median of ``runs``."""
    store = os.path.join(tempfile.mkdtemp(prefix="pm-beam-restore-"), "state.sqlite")
    made = run_child(_RECORDS_CHILD, [data, store, str(keys)])
    results = [run_child(_RESTORE_CHILD, [store, str(keys)]) for _ in range(runs)]
    for result in results:
        print(f"restore of {keys:,} devices: {result['seconds']:.2f} s (store read {result['read_seconds']:.2f} s, "
              f"{result['records_mb']:.0f} MB of records)", flush=True)
    return {"keys": keys, "seconds": round(statistics.median(r["seconds"] for r in results), 3),
            "read_seconds": round(statistics.median(r["read_seconds"] for r in results), 3),
            "records_mb": round(results[0]["records_mb"], 1), "distinct_devices": made["devices"]}


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "a tenth of each dataset, one run each (a smoke test)")
    parser.add_argument("--jobs", default="kanon,measurement,summary_client,event_level",
                        help="which jobs (default all four: kanon,measurement,summary_client,event_level)")
    args = parser.parse_args(argv)
    runs, jobs = runs_of(args), args.jobs.split(",")
    data_root = args.data or os.path.join(tempfile.gettempdir(), "pm-beam-stream-bench" + ("-quick" if args.quick else ""))
    results = []
    with LocalBroker() as broker:
        print(f"broker (tansu, in memory) at {broker.address}", flush=True)
        if "kanon" in jobs:
            data = os.path.join(data_root, "kanon")
            kanon = JOBS["kanon"]
            generate(kanon, data, args.quick)
            (_, prefix, _), = kanon.inputs
            rows = input_records(data, prefix)
            topic = f"joins-{uuid.uuid4().hex[:8]}"
            produced = _produce(broker.address, topic, _messages(rows))
            result = _bench_job("kanon", broker.address, {"--input": topic}, [], runs, len(rows))
            result["producer_events_per_second"] = round(produced)
            result["latency"] = _latency(broker.address, rows, result["events_per_second"] / 2, data)
            results.append(result)
        if "measurement" in jobs:
            data = os.path.join(data_root, "measurement")
            measurement = JOBS["measurement"]
            generate(measurement, data, args.quick)
            # each topic in event-time order, as devices would send them (the generator writes impressions by device)
            impressions, conversions = (input_records(data, prefix) for _, prefix, _ in measurement.inputs)
            topics = {"--impressions": f"impressions-{uuid.uuid4().hex[:8]}",
                      "--conversions": f"conversions-{uuid.uuid4().hex[:8]}"}
            produced = _produce(broker.address, topics["--impressions"], _messages(impressions))
            _produce(broker.address, topics["--conversions"], _messages(conversions))
            extra, events = list(measurement.extra), len(impressions) + len(conversions)
            result = _bench_job("measurement", broker.address, topics, extra, runs, events)
            result["producer_events_per_second"] = round(produced)
            result.update(_floor_and_sustained(broker.address, topics, extra, runs, impressions, conversions, result))
            result["restore"] = _restore(data, runs)
            results.append(result)
        for name in (name for name in DEVICE_JOBS if name in jobs):
            results.append(_bench_device_job(name, broker.address, os.path.join(data_root, name), args.quick, runs))
    print(f"{'job':24}{'events/s (median)':>20}{'slowest':>9}{'floor/s':>9}{'of floor':>9}{'ceiling/s':>11}"
          f"{'peak RSS MB':>13}{'p95 latency s':>15}")
    for result in results:
        latency = result.get("latency", {}).get("p95_seconds", "-")
        print(f"{result['name']:24}{result['events_per_second']:>20,}{result['slowest_events_per_second']:>9,}"
              f"{result['floor_events_per_second']:>9,}{result['floor_ratio']:>9.3f}"
              f"{result['reference_events_per_second']:>11,}{result['peak_rss_mb']:>13,.0f}{latency!s:>15}")
    for result in results:
        print(f"{result['name']}: with its state store {result['events_per_second']:,} events/s, without "
              f"{result['without_store_events_per_second']:,}: durability costs {result['durability_cost']:.1%} of the "
              "whole run" + (f", {result['sustained_durability_cost']:.1%} of the sustained rate "
                             f"({result['sustained_events_per_second']:,} against "
                             f"{result['without_store_sustained_events_per_second']:,})"
                             if "sustained_durability_cost" in result else ""))
        if "restore" in result:
            print(f"{result['name']}: restoring {result['restore']['keys']:,} devices takes "
                  f"{result['restore']['seconds']:.2f} s")
    for result in results:
        if "sustained_events_per_second" in result:
            print(f"{result['name']}: sustained (beyond a tenth of the devices): job "
                  f"{result['sustained_events_per_second']:,}/s, floor {result['floor_sustained_events_per_second']:,}/s")
    print("targets: >= 40,000 events/s each (median), >= 30,000 in the slowest run, >= 0.7 of the job's floor; peak "
          "RSS <= 1024 MB, p95 latency <= 5 s at half the sustained rate; durability <= 25 % of the sustained rate, "
          "restoring 100,000 keys <= 10 s")
    write_json(args.json, results[0] if len(results) == 1 else {"name": "streaming_throughput", "jobs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
