"""``make demo-stream``: the streaming jobs on a local event bus, live.

    python -m pipelines.demo_stream [--output DIR] [--rate 4000] [--seed 7]

1. starts a local Kafka-protocol broker (tansu, in memory: ``pipelines.local_broker``);
2. generates k-anonymity joins (400 groups, 40,000 joins over 10 days) and a small Cookie Monster
   microbenchmark (20 devices, 640 events);
3. starts the streaming k-anonymity job (topic ``joins`` to topic ``verdicts``) and the streaming measurement job
   (topics ``impressions`` and ``conversions`` to topic ``results``), each a real consumer of the broker;
4. replays the joins at ``--rate`` joins per second and the measurement events at 50 per second, each in event-time
   order, as producers would;
5. prints verdict changes and query results as they arrive on the output topics, and a count line every five
   seconds;
6. once the replay is done and the outputs are quiet, stops the jobs with SIGTERM (they drain, commit their
   offsets and write their summaries), then the broker, and prints where everything is.

Everything it starts is stopped on the way out, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pipelines import common
from pipelines.local_broker import BrokerUnavailable, LocalBroker
from schemas.codecs import CONVERSION, IMPRESSION, JOIN_EVENT, read_files, row_to_dict
from schemas.option_values import POSITIVE_INTEGER, SEED
from schemas.time_units import iso_micros

MEASUREMENT_RATE = 50  # events per second: the local streaming measurement job replays device by device
QUIET_SECONDS = 15  # outputs idle this long after the replay: the jobs have caught up


def _rows(directory: Path, prefix: str, spec) -> list:
    """The valid rows of the files ``<directory>/<prefix>-*``, in event-time order (as a producer sends them)."""
    rows, _ = read_files(sorted(directory.glob(f"{prefix}-*")), spec)
    return sorted(rows, key=lambda row: row.event_time_micros)


def _replay(address: str, topic: str, rows: list, rate: float, stop: threading.Event) -> None:
    """Send ``rows`` to ``topic`` at ``rate`` messages per second, in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": address, "linger.ms": 5})
    started = time.monotonic()
    for index, row in enumerate(rows):
        if stop.is_set():
            break
        delay = started + index / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, value=json.dumps(row_to_dict(row)).encode())
        producer.poll(0)
    producer.flush(30)


class _Watcher:
    """Reads the output topics and prints what arrives; remembers when the last message came."""

    def __init__(self, address: str, topics: list[str]) -> None:
        self.address, self.topics = address, topics
        self.counts = dict.fromkeys(topics, 0)
        self.last = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.address, "group.id": "demo-stream-watcher"})
        assignment = []
        for topic in self.topics:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            assignment += [TopicPartition(topic, number, OFFSET_BEGINNING) for number in partitions]
        consumer.assign(assignment)
        while not self.stop.is_set():
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is not None or not message.value() or message.value() == b"{}":
                    continue
                self.last = time.monotonic()
                self.counts[message.topic()] += 1
                record = json.loads(message.value())
                if "k_anonymous" in record:
                    state = "k-anonymous" if record["k_anonymous"] else "not k-anonymous"
                    print(f"  verdict  {record['interest_group']}: {state} from {iso_micros(record['step_start_micros'])}",
                          flush=True)
                else:
                    print(f"  result   {record['querier_site']} {record['query_key']} batch {record['batch_index']}: "
                          f"{record['report_count']} reports, {record['status']}", flush=True)
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.demo_stream", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--output", default="demo-output/stream", help="where the jobs write (default demo-output/stream)")
    parser.add_argument("--rate", type=POSITIVE_INTEGER, default=4000, help="joins per second (default 4000)")
    parser.add_argument("--seed", type=SEED, default=7, help="seed of the data and of the noise (default 7)")
    args = parser.parse_args(argv)
    common.configure_logging()
    output = Path(args.output)
    data = output / "data"
    for kind, extra in (("kanon", ["--groups", "400", "--joins", "40000", "--days", "10"]),
                        ("microbenchmark", ["--knob1", "1.0", "--knob2", "0.1", "--batch-size", "20"])):
        subprocess.run([sys.executable, "-m", "pipelines.generate", kind, "--output", str(data / kind), "--seed",
                        str(args.seed), "--quiet", *extra], check=True)
    joins = _rows(data / "kanon", "joins", JOIN_EVENT)
    events = {"impressions": _rows(data / "microbenchmark", "impressions", IMPRESSION),
              "conversions": _rows(data / "microbenchmark", "conversions", CONVERSION)}
    try:
        broker = LocalBroker().start()
    except BrokerUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    jobs: dict[str, subprocess.Popen] = {}
    stop = threading.Event()
    watcher = _Watcher(broker.address, ["verdicts", "results"])
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        bus = f"kafka://{broker.address}"
        print(f"broker (tansu, in memory) at {broker.address}, pid {broker.pid}", flush=True)
        _create_topics(broker.address, ["joins", "impressions", "conversions", "verdicts", "results"])
        commands = {
            "kanon": ["pipelines.kanon", "--input", f"{bus}/joins?group=demo", "--output-topic", f"{bus}/verdicts"],
            "measurement": ["pipelines.measurement", "--impressions", f"{bus}/impressions?group=demo",
                            "--conversions", f"{bus}/conversions?group=demo", "--batch-size", "20",
                            "--output-topic", f"{bus}/results"],
        }
        store = output / "state.sqlite"  # the jobs' durable state (docs/durability.md): fresh, as the broker is
        for stale in output.glob("state.sqlite*"):
            stale.unlink()
        for name, command in commands.items():
            (output / name).mkdir(parents=True, exist_ok=True)
            command += ["--state-store", f"sqlite:///{store}"]
            log = open(output / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
            jobs[name] = subprocess.Popen([sys.executable, "-m", *command, "--output", str(output / name), "--seed",
                                           str(args.seed), "--progress-seconds", "5"], stdout=log, stderr=subprocess.STDOUT)
            print(f"started the streaming {name} job (pid {jobs[name].pid}, log {output / f'{name}.log'})", flush=True)
        watcher.thread.start()
        producers = [threading.Thread(target=_replay, args=(broker.address, "joins", joins, args.rate, stop))]
        producers += [threading.Thread(target=_replay, args=(broker.address, topic, rows,
                                                             MEASUREMENT_RATE * len(rows) / sum(map(len, events.values())),
                                                             stop))
                      for topic, rows in events.items()]
        print(f"replaying {len(joins):,} joins at {args.rate:,}/s and {sum(map(len, events.values())):,} measurement "
              f"events at {MEASUREMENT_RATE}/s; verdict changes and query results as they arrive:", flush=True)
        for producer in producers:
            producer.start()
        next_line = time.monotonic() + 5
        while not stop.is_set() and (any(p.is_alive() for p in producers) or time.monotonic() - watcher.last < QUIET_SECONDS):
            time.sleep(0.2)
            if time.monotonic() > next_line:
                next_line += 5
                print(f"-- {watcher.counts['verdicts']:,} verdicts, {watcher.counts['results']:,} query results so far",
                      flush=True)
        print("stopping the jobs (SIGTERM: they drain, commit and write their summaries) ...", flush=True)
    finally:
        stop.set()
        for job in jobs.values():
            if job.poll() is None:
                job.send_signal(signal.SIGTERM)
        for job in jobs.values():
            try:
                job.wait(timeout=120)
            except subprocess.TimeoutExpired:
                job.kill()
        watcher.stop.set()
        broker.stop()
        signal.signal(signal.SIGINT, previous)
    print(f"{watcher.counts['verdicts']:,} verdicts and {watcher.counts['results']:,} query results on the topics")
    for name, job in jobs.items():
        summary = output / name / "summary.json"
        print(f"{name}: exit {job.returncode}, summary {summary if summary.exists() else '(none)'}, "
              f"log {output / f'{name}.log'}")
    return 0 if jobs and all(job.returncode == 0 for job in jobs.values()) else 1


def _create_topics(address: str, names: list[str]) -> None:
    """Create the demo's topics with one partition each (the broker would create them with its default on first
    use; one partition keeps the replay's event-time order)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": address})
    for future in admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1) for name in names]).values():
        future.result(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
