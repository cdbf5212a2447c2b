"""A real Flink cluster and a real Apache Kafka broker for the tests of the Flink path (tests/flink/).

``flink_cluster`` (session scope) starts the cluster of ``pipelines.flink.cluster`` in a temporary directory, its
REST API on a free port of 127.0.0.1, fetching Flink and building Beam's job server on first use (into the
cache every later run reuses), and stops every process by its process id at the end; heartbeats are frequent, so
that a killed TaskManager is noticed in seconds (the failover tests). ``apache_kafka`` (session scope) starts
Apache Kafka's broker (``pipelines.kafka_broker``). Without Java or Maven the tests are skipped with the reason;
a fetch or a start that fails with them present fails the tests.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from pipelines.flink import rest
from pipelines.flink.cluster import HOME_ENVIRONMENT, FlinkCluster
from pipelines.kafka_broker import KafkaBroker
from pipelines.processes import free_port

# A killed TaskManager's heartbeat calls fail (its port is closed): Flink declares it lost after two of them
# (heartbeat.rpc-failure-threshold), 1 to 2 s after the kill with a heartbeat every second (Flink's default: 10 s).
# The timeout stays Flink's (50 s), for a TaskManager that stops answering without its connection failing: 4 s
# declared a TaskManager starved of the CPU by the other tests lost, and each such failure restarts the job
# (cluster.TUNING's exponential-delay restarts).
FAILOVER_SETTINGS = {"heartbeat.interval": "1000"}
# The test cluster's and broker's JVMs compile with C1 alone and collect with the serial collector: each lives for
# minutes and runs little data, and on 2 cores C2's compiler threads and G1's concurrent ones competed with the
# tests for the CPU. The Flink tests of tests/flink/test_streaming_on_flink.py alone took 247 CPU-seconds so, against
# 271 with the JVM's defaults (benchmarks/README.md, "The test suite's time").
SHORT_LIVED_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

T = TypeVar("T")


def _require_java_and_maven() -> None:
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None and not (tool == "java" and os.environ.get("JAVA_HOME")):
            pytest.skip(f"{tool} is not installed: the Flink tests need Java 17 and Maven (docs/flink.md)")


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory) -> Iterator[FlinkCluster]:
    _require_java_and_maven()
    cluster = FlinkCluster(tmp_path_factory.mktemp("flink"), rest_port=free_port(), settings=FAILOVER_SETTINGS,
                           java_options=SHORT_LIVED_JVM)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture()
def on_flink(flink_cluster, monkeypatch) -> list[str]:
    """The options of a run on the test cluster, which takes the rest from the cluster's record."""
    monkeypatch.setenv(HOME_ENVIRONMENT, str(flink_cluster.home))
    return ["--runner", "FlinkRunner", "--flink_master", flink_cluster.rest]


@pytest.fixture(scope="session")
def apache_kafka() -> Iterator[KafkaBroker]:
    _require_java_and_maven()
    with KafkaBroker(java_options=SHORT_LIVED_JVM) as broker:
        yield broker


BROKEN = [b"{broken", b"[]"]  # two messages that are no record: dead letters on both paths


def run_counts(output: Path) -> dict:
    """A run's counts from its ``summary.json``: read, parsed, dead letters and dead letters by reason."""
    counts = json.loads((output / "summary.json").read_text())["counts"]
    return {key: counts[key] for key in ("read", "parsed", "dead_lettered", "dead_lettered_by_reason")}


def delivered_twice(records: list[dict], every: int = 25) -> list[dict]:
    """``records`` as an at-least-once producer may deliver them: every ``every``-th a second time, right after
    the first (a copy the jobs dead-letter as a ``duplicate``)."""
    return [record for index, record in enumerate(records) for _ in range(2 if index % every == 0 else 1)]


def produce_at_event_time(address: str, topic: str, records: Iterable[dict], *, keys: Iterable[bytes] | None = None,
                          extra: Iterable[bytes] = ()) -> int:
    """Send each record as one JSON message whose Kafka timestamp is its event time (what the runner's watermark
    follows on the Flink path), then the ``extra`` raw messages at the last record's time (not behind the
    watermark, whatever the records' days); waits for every acknowledgement."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": address, "linger.ms": 5})
    failures: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    count = 0
    key_list = list(keys) if keys is not None else None
    last_millis = 0  # Kafka's "now" for a message without a timestamp
    for index, record in enumerate(records):
        last_millis = record["event_time_micros"] // 1000
        producer.produce(topic, value=json.dumps(record).encode(), key=None if key_list is None else key_list[index],
                         timestamp=last_millis, on_delivery=delivered)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    for value in extra:
        producer.produce(topic, value=value, timestamp=last_millis, on_delivery=delivered)
        count += 1
    assert producer.flush(30) == 0 and not failures, failures[:3]
    return count


def committed_offsets(address: str, topic: str, group: str) -> int:
    """The sum over ``topic``'s partitions of ``group``'s committed offsets (what a job has checkpointed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": address, "group.id": group})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed([TopicPartition(topic, number) for number in partitions], timeout=10)
        return sum(max(partition.offset, 0) for partition in committed)
    finally:
        consumer.close()


def wait_for(condition: Callable[[], T], seconds: float, what: str, poll: float = 0.5,
             explain: Callable[[], str] | None = None) -> T:
    """Poll ``condition`` until it returns a true value (returned); an AssertionError naming ``what`` after
    ``seconds``, followed by what ``explain()`` says (the state of the job waited for)."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} within {seconds:g} s" + ("" if explain is None else f": {explain()}"))
        time.sleep(poll)


def job_story(cluster: FlinkCluster, name: str) -> str:
    """The state of the job called ``name``, its checkpoint counts and the latest failures Flink recorded (root
    causes first), for a test's failure message."""
    job = rest.job_named(cluster.rest, name)
    if job is None:
        return f"no job called {name} on the cluster"
    counts = rest.checkpoints(cluster.rest, job["jid"])["counts"]
    history = rest.call(cluster.rest, f"/jobs/{job['jid']}/exceptions").get("exceptionHistory", {})
    failures = [(entry.get("stacktrace") or entry.get("exceptionName") or "?").splitlines()[0][:300]
                for entry in history.get("entries", [])[:5]]
    return f"job {job['state']}, checkpoints {counts}; failures, latest first: {failures or 'none'}"


def finished_job(cluster: FlinkCluster, name: str) -> dict:
    """The Flink job called ``name``, which must have finished."""
    job = rest.job_named(cluster.rest, name)
    assert job is not None and job["state"] == "FINISHED", job
    return job


def output_records(directory: Path) -> dict[str, list[str]]:
    """Every output file's records under ``directory`` (recursively, staging directories left out), sorted, by
    the file's path relative to it without the shard suffix; JSON records normalised, Avro as JSON."""
    import fastavro

    outputs: dict[str, list[str]] = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or ".staging-" in str(path) or path.suffix not in (".avro", ".jsonl", ".csv"):
            continue
        name = str(path.relative_to(directory)).split("-0")[0]
        if path.suffix == ".avro":
            with path.open("rb") as handle:
                records = [json.dumps(record, sort_keys=True, default=repr) for record in fastavro.reader(handle)]
        elif path.suffix == ".jsonl":
            records = [json.dumps(json.loads(line), sort_keys=True) for line in path.read_text().splitlines()]
        else:
            records = path.read_text().splitlines()
        outputs.setdefault(name, []).extend(records)
    return {name: sorted(records) for name, records in outputs.items()}
