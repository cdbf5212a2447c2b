"""The streaming jobs on a real Flink cluster, reading Apache Kafka topics through Beam's Java KafkaIO (the
cluster's expansion service) and writing through ``WriteToKafka``: for the same records and seed, each job's
output topic carries what the local path's carries (keys and values; the local path adds an ``id`` header that
Beam's ``WriteToKafka`` cannot), its files hold the same records, and its counts (read, parsed, dead letters by
reason: a message delivered twice is a ``duplicate``, a broken one its parse error) are the same. Both read their
topics to the end they had (``stop=end``). The summary-client and event-level jobs here; the k-anonymity and
measurement jobs are held to the same in ``test_failover_on_flink``, on input delivered the same way, with their
TaskManager killed on the way. And a job stopped with a savepoint and resumed from it continues without a gap
(every record read once) and without a second release (every verdict sent once), with the local path's verdicts.
Deterministic (seeded noise, fixed records): no false-failure probability to state."""
from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pipelines import generate, kanon
from pipelines.flink import rest
from pipelines.flink.cluster import HOME_ENVIRONMENT
from tests.support.flink import (
    BROKEN,
    committed_offsets,
    delivered_twice,
    finished_job,
    output_records,
    produce_at_event_time,
    run_counts,
    wait_for,
)
from tests.support.kafka import consume_all, fresh_topic

pytestmark = pytest.mark.flink

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, list[dict]]:
    """Each input's records, in event-time order (as a producer keyed by group or device keeps a partition)."""
    data = tmp_path_factory.mktemp("data")
    for arguments in (
        ["ara", "--output", str(data / "ara"), "--devices", "300", "--days", "3"],
        ["event-level", "--output", str(data / "event-level"), "--sources", "400", "--days", "3"],
    ):
        assert generate.main([*arguments, "--seed", "7", "--format", "jsonl", "--quiet"]) == 0
    files = {"ara-sources": "ara/sources-*", "ara-triggers": "ara/triggers-*",
             "event-sources": "event-level/sources-*", "event-triggers": "event-level/triggers-*"}
    loaded = {}
    for name, pattern in files.items():  # the generators' JSON Lines: the wire form a producer sends
        lines = [line for path in sorted(data.glob(pattern)) for line in path.read_text().splitlines()]
        assert lines
        loaded[name] = sorted((json.loads(line) for line in lines), key=lambda record: record["event_time_micros"])
    return loaded


JOBS = {  # job -> (module, its topic inputs (option, records), options)
    "summary-client-ara": ("pipelines.summary_client", [("--sources", "ara-sources"), ("--triggers", "ara-triggers")],
                           []),
    "event-level": ("pipelines.event_level", [("--sources", "event-sources"), ("--triggers", "event-triggers")], []),
}


def _topic_messages(address: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    return sorted((message.key(), message.value()) for message in consume_all(address, topic))


@pytest.mark.parametrize("name", list(JOBS))
def test_a_streaming_job_on_flink_releases_from_kafka_what_the_local_path_releases(name, records, on_flink,
                                                                                   flink_cluster, apache_kafka,
                                                                                   tmp_path):
    module, inputs, options = JOBS[name]
    address = apache_kafka.address
    topic_options = []
    for option, records_name in inputs:
        topic = fresh_topic(records_name)
        rows = records[records_name]
        # at-least-once delivery: every 25th record a second time; and two broken messages at the end
        produce_at_event_time(address, topic, delivered_twice(rows), extra=BROKEN)
        topic_options.append((option, topic))
    main = importlib.import_module(module).main
    client = ["ara"] if name == "summary-client-ara" else []
    outputs = {}
    for where, extra in (("local", []), ("flink", [*on_flink, "--job_name", f"stream-{name}"])):
        out_topic = fresh_topic(f"{name}-{where}")
        arguments = [*client, *(part for option, topic in topic_options
                                for part in (option, f"kafka://{address}/{topic}?stop=end&group={where}")),
                     *options, "--seed", "3", "--output", str(tmp_path / where), "--output-topic",
                     f"kafka://{address}/{out_topic}", *extra]
        assert main(arguments) == 0
        outputs[where] = (_topic_messages(address, out_topic), output_records(tmp_path / where), run_counts(tmp_path / where))
    (local_topic, local_files, local_counts), (flink_topic, flink_files, flink_counts) = outputs["local"], outputs["flink"]
    assert local_topic and flink_topic == local_topic
    assert flink_files == local_files
    assert flink_counts == local_counts
    assert local_counts["dead_lettered_by_reason"].get("duplicate", 0) > 0 and local_counts["dead_lettered"] > 2
    finished_job(flink_cluster, f"stream-{name}")


def _kanon_on_flink(address: str, topic: str, verdicts: str, output: Path, flink_cluster, job_name: str,
                    *extra: str) -> subprocess.Popen:
    """The k-anonymity job's driver on the cluster, in a process of its own (it waits for the job, which runs until
    it is stopped), reading ``topic`` from where its state says."""
    environment = {**os.environ, HOME_ENVIRONMENT: str(flink_cluster.home)}
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines.kanon", "--input", f"kafka://{address}/{topic}?group=resumed", "--seed", "3",
         "--output", str(output), "--output-topic", f"kafka://{address}/{verdicts}", "--runner", "FlinkRunner",
         "--flink_master", flink_cluster.rest, "--checkpointing_interval", "2000", "--job_name", job_name, *extra],
        cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _running(flink_cluster, job_name: str) -> bool:
    job = rest.job_named(flink_cluster.rest, job_name)
    return job is not None and job["state"] == "RUNNING" and rest.completed_checkpoints(flink_cluster.rest,
                                                                                         job["jid"]) > 0


def test_a_job_stopped_with_a_savepoint_resumes_without_a_gap_or_a_second_release(flink_cluster, apache_kafka,
                                                                                   tmp_path):
    # enough joins that the first half already makes groups k-anonymous (verdicts sent before the stop)
    assert generate.main(["kanon", "--output", str(tmp_path / "joins"), "--groups", "200", "--joins", "12000",
                          "--days", "10", "--seed", "21", "--format", "jsonl", "--quiet"]) == 0
    [path] = (tmp_path / "joins").glob("joins-*.jsonl")
    joins = sorted((json.loads(line) for line in path.read_text().splitlines()),
                   key=lambda record: record["event_time_micros"])
    address = apache_kafka.address
    topic, verdicts, reference = fresh_topic("joins"), fresh_topic("verdicts"), fresh_topic("verdicts-local")
    half = len(joins) // 2
    produce_at_event_time(address, topic, joins[:half])
    first = _kanon_on_flink(address, topic, verdicts, tmp_path / "first", flink_cluster, "savepoint-first")
    try:
        wait_for(lambda: _running(flink_cluster, "savepoint-first"), 120, "the first job running and checkpointed")
        # the first half read and checkpointed, and the verdicts it made final sent
        wait_for(lambda: committed_offsets(address, topic, "resumed") == half, 120, "the first half read")
        wait_for(lambda: _topic_messages(address, verdicts), 60, "verdicts of the first half")
        job = rest.job_named(flink_cluster.rest, "savepoint-first")
        savepoint = rest.stop_with_savepoint(flink_cluster.rest, job["jid"], None, drain=False)
        printed, _ = first.communicate(timeout=120)
    finally:
        first.kill()
    # the driver reports the savepoint and releases nothing: the job is to be resumed
    assert first.returncode == 0, printed[-3000:]
    assert f"--savepoint_path {savepoint}" in printed
    summary = json.loads((tmp_path / "first" / "summary.json").read_text())
    assert summary["status"] == "suspended" and summary["savepoint"] == savepoint
    assert not list((tmp_path / "first").glob("verdicts-*"))
    sent_before = _topic_messages(address, verdicts)
    produce_at_event_time(address, topic, joins[half:])
    second = _kanon_on_flink(address, topic, verdicts, tmp_path / "second", flink_cluster, "savepoint-second",
                             "--savepoint_path", savepoint)
    try:
        wait_for(lambda: _running(flink_cluster, "savepoint-second"), 120, "the resumed job running")
        # every join is in the job's checkpointed position (KafkaIO commits it with each checkpoint)
        wait_for(lambda: committed_offsets(address, topic, "resumed") == len(joins), 120, "the resumed job reading every join")
        second.send_signal(signal.SIGTERM)  # the driver drains the job: its last hours become final
        printed, _ = second.communicate(timeout=180)
    finally:
        second.kill()
    assert second.returncode == 0, printed[-3000:]
    assert rest.restored_from(flink_cluster.rest, rest.job_named(flink_cluster.rest, "savepoint-second")["jid"])
    counts = json.loads((tmp_path / "second" / "summary.json").read_text())["counts"]
    assert counts["read"] == counts["parsed"] == len(joins)  # no gap, nothing twice: the state held the first half
    # the local path on every join, read to the end
    assert kanon.main(["--input", f"kafka://{address}/{topic}?stop=end&group=local", "--seed", "3", "--output",
                       str(tmp_path / "local"), "--output-topic", f"kafka://{address}/{reference}"]) == 0
    sent = _topic_messages(address, verdicts)
    assert sent_before and set(sent_before) <= set(sent)
    assert sent == _topic_messages(address, reference)
    ids = Counter((json.loads(value)["interest_group"], json.loads(value)["step"]) for _, value in sent)
    assert max(ids.values()) == 1  # each verdict sent once: nothing released before the stop was sent again
    assert output_records(tmp_path / "second")["verdicts"] == output_records(tmp_path / "local")["verdicts"]
