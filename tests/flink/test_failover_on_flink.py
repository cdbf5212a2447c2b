"""Failover with privacy: a streaming job on Flink, checkpointed every 2 s, whose TaskManager is killed with
SIGKILL at two points of its run (each right after a new chunk of records reached its topics; the second
restore is from a checkpoint of the restored job) and started again. Flink restores the job from its last
completed checkpoint: Beam's state (the AboveThreshold instances, the device-epoch filters, the deduplication
ids, the files' records) and KafkaIO's positions, which it reads on from; what the job had sent after that
checkpoint it sends again, with the same values. So the output topic, deduplicated by the records' stable ids,
equals an uninterrupted run's (the local path's on the same records), no id ever carries two different values,
and the counts say every record was read once. The input is delivered the way an at-least-once producer delivers
it (every 25th record twice) and ends with two broken messages: the run's counts, the ``duplicate`` and parse
dead letters included, are the uninterrupted run's.

* k-anonymity, with secure noise and ``--emit all`` (a record for every group and hour with users, whatever its
  verdict): the ids are the uninterrupted run's, and each carries one verdict. Secure noise is drawn from a
  secret fixed at submission (``pipelines.runners.noise_source``): a fresh draw for an hour evaluated again after
  the restore would give about one verdict in twenty near the threshold a second value.
* measurement (Cookie Monster), with seeded noise: the query results, the reports and every device-epoch
  filter's consumption (``--emit-budgets``) equal the uninterrupted run's: no filter was reset, no budget given
  back.

What KafkaIO and Beam's state do across the restore is what the assertions check: the group's committed offsets
only move with completed checkpoints, the job reads on from its checkpointed positions (not from the group's),
and its state is the checkpoint's. Deterministic outcome (the kill points vary with timing, the outputs may
not): no false-failure probability to state.
"""
from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from pipelines import generate, kanon, measurement
from pipelines.flink import rest
from pipelines.flink.cluster import HOME_ENVIRONMENT
from tests.support.flink import (
    BROKEN,
    committed_offsets,
    delivered_twice,
    job_story,
    output_records,
    produce_at_event_time,
    run_counts,
    wait_for,
)
from tests.support.kafka import consume_all, fresh_topic

pytestmark = pytest.mark.flink

ROOT = Path(__file__).resolve().parents[2]
KILLS = 2  # a restore from a job that was itself restored, at the cost of about 40 s a kill
CHUNKS = KILLS + 1
# The records' days are to come. Beam's KafkaIO moves an idle partition's watermark with the wall clock (its
# CreateTime policy): data of the past, sent chunk by chunk with pauses between, would see each pause push the
# watermark past every later record, which would then all be late. Live data, or data ahead of the clock, does not.
START = (datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=2)).isoformat()


def _jsonl(pattern: str, directory: Path) -> list[dict]:
    lines = [line for path in sorted(directory.glob(pattern)) for line in path.read_text().splitlines()]
    return sorted((json.loads(line) for line in lines), key=lambda record: record["event_time_micros"])


def _chunks(records: list[dict], bounds: list[int]) -> list[list[dict]]:
    """``records`` split at the event times ``bounds`` (so that several inputs are cut at the same times)."""
    chunks: list[list[dict]] = [[] for _ in range(len(bounds) + 1)]
    for record in records:
        chunks[sum(record["event_time_micros"] >= bound for bound in bounds)].append(record)
    return chunks


def _bounds(records: list[dict]) -> list[int]:
    times = [record["event_time_micros"] for record in records]
    return [times[len(times) * index // CHUNKS] for index in range(1, CHUNKS)]


def _produce_chunk(address: str, topic: str, chunks: list[list[dict]], index: int) -> int:
    """Chunk ``index`` sent at its event times, at least once; the last ends with the broken messages."""
    return produce_at_event_time(address, topic, chunks[index], extra=BROKEN if index == CHUNKS - 1 else ())


def _same_counts(flink: Path, local: Path, records: int, sent: int, topics: int) -> None:
    """The Flink run's counts are the uninterrupted run's: every message of the ``topics`` read once across the
    restores (``records`` distinct records, ``sent`` with the copies an at-least-once producer added), each copy a
    ``duplicate`` and each broken message a dead letter."""
    copies = sent - records
    counts = run_counts(flink)
    assert counts == run_counts(local)
    broken = topics * len(BROKEN)
    assert counts["read"] == records + copies + broken and counts["parsed"] == records
    assert counts["dead_lettered_by_reason"]["duplicate"] == copies > 0
    assert counts["dead_lettered"] == copies + broken


def _driver(module: str, arguments: list[str], flink_cluster, job_name: str) -> subprocess.Popen:
    """A streaming job's driver on the cluster, in a process of its own, checkpointing every 2 s."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *arguments, "--runner", "FlinkRunner", "--flink_master", flink_cluster.rest,
         "--checkpointing_interval", "2000", "--job_name", job_name],
        cwd=ROOT, env={**os.environ, HOME_ENVIRONMENT: str(flink_cluster.home)}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


def _checkpoints(flink_cluster, job_name: str) -> dict:
    job = rest.job_named(flink_cluster.rest, job_name)
    if job is None or job["state"] != "RUNNING":
        return {}
    return rest.checkpoints(flink_cluster.rest, job["jid"])["counts"]


def _more_restores(flink_cluster, job_name: str, restores: int) -> int | None:
    """The job's restores when there are more than ``restores``, else None; read once (the job leaves RUNNING
    between two reads while Flink restarts it, and its counts are then not reported)."""
    restored = _checkpoints(flink_cluster, job_name).get("restored", 0)
    return restored if restored > restores else None


def _run_with_kills(flink_cluster, job_name: str, driver: subprocess.Popen, produce_chunk, expected: dict) -> int:
    """Produce the chunks one by one; after each of the first ``KILLS``, SIGKILL the TaskManager as soon as the job
    has checkpointed since its last restore, start a new one, and wait until Flink restored the job. Then wait
    until every record is in a checkpoint (``expected``: topic -> (address, group, records)) and drain the job
    through its driver (SIGTERM). Returns the restores Flink made."""
    restores = 0

    def story() -> str:
        return job_story(flink_cluster, job_name)

    for index in range(CHUNKS):
        produce_chunk(index)
        completed = wait_for(lambda: _checkpoints(flink_cluster, job_name).get("completed"), 180,
                             "the job running and checkpointed", explain=story)
        if index == KILLS:
            break
        wait_for(lambda c=completed: _checkpoints(flink_cluster, job_name).get("completed", 0) > c, 60,
                 "a checkpoint with the new chunk's records in flight", explain=story)
        flink_cluster.kill_taskmanager()
        flink_cluster.restart_taskmanager()
        restores = wait_for(lambda r=restores: _more_restores(flink_cluster, job_name, r), 180,
                            "Flink restoring the job from its last checkpoint", explain=story)
    for topic, (address, group, count) in expected.items():
        wait_for(lambda t=topic, a=address, g=group, n=count: committed_offsets(a, t, g) == n, 180,
                 f"every record of {topic} in a completed checkpoint", explain=story)
    driver.send_signal(signal.SIGTERM)
    printed, _ = driver.communicate(timeout=300)
    assert driver.returncode == 0, printed[-4000:]
    return restores


def _values_by_id(messages, id_of) -> dict:
    values = defaultdict(set)
    for message in messages:
        values[id_of(json.loads(message.value()))].add(message.value())
    return values


def test_killed_taskmanagers_leave_the_k_anonymity_verdicts_of_an_uninterrupted_run(flink_cluster, apache_kafka,
                                                                                      tmp_path):
    data = tmp_path / "joins"
    assert generate.main(["kanon", "--output", str(data), "--groups", "120", "--joins", "8000", "--days", "8",
                          "--start", START, "--seed", "11", "--format", "jsonl", "--quiet"]) == 0
    joins = _jsonl("joins-*", data)
    sent_joins = delivered_twice(joins)
    chunks = _chunks(sent_joins, _bounds(joins))
    address, topic, verdicts = apache_kafka.address, fresh_topic("joins"), fresh_topic("verdicts")
    driver = _driver("pipelines.kanon", ["--input", f"kafka://{address}/{topic}?group=failover", "--emit", "all",
                                         "--output", str(tmp_path / "flink"), "--output-topic",
                                         f"kafka://{address}/{verdicts}"], flink_cluster, "failover-kanon")
    try:
        restores = _run_with_kills(flink_cluster, "failover-kanon", driver,
                                   lambda index: _produce_chunk(address, topic, chunks, index),
                                   {topic: (address, "failover", len(sent_joins) + len(BROKEN))})
    finally:
        driver.kill()
    assert restores >= KILLS
    # the uninterrupted run: the local path on the same joins, read to the end
    reference = fresh_topic("verdicts-local")
    assert kanon.main(["--input", f"kafka://{address}/{topic}?stop=end&group=local", "--emit", "all", "--output",
                       str(tmp_path / "local"), "--output-topic", f"kafka://{address}/{reference}"]) == 0

    def verdict_id(verdict: dict) -> tuple:
        return verdict["interest_group"], verdict["step"]

    sent = _values_by_id(consume_all(address, verdicts), verdict_id)
    uninterrupted = _values_by_id(consume_all(address, reference), verdict_id)
    assert sent.keys() == uninterrupted.keys() and len(sent) > 500
    assert all(len(values) == 1 for values in sent.values())  # no hour of a group ever had two verdicts
    _same_counts(tmp_path / "flink", tmp_path / "local", len(joins), len(sent_joins), topics=1)
    flink_file = {verdict_id(json.loads(line)) for line in output_records(tmp_path / "flink")["verdicts"]}
    assert flink_file == set(uninterrupted)


def test_killed_taskmanagers_neither_reset_a_filter_nor_change_a_query_result(flink_cluster, apache_kafka, tmp_path):
    data = tmp_path / "micro"
    assert generate.main(["microbenchmark", "--output", str(data), "--knob1", "0.1", "--knob2", "0.1",
                          "--batch-size", "40", "--products", "2", "--start", START, "--seed", "7", "--format",
                          "jsonl", "--quiet"]) == 0
    inputs = {"impressions": _jsonl("impressions-*", data), "conversions": _jsonl("conversions-*", data)}
    sent = {name: delivered_twice(records) for name, records in inputs.items()}
    bounds = _bounds(inputs["conversions"])
    chunks = {name: _chunks(records, bounds) for name, records in sent.items()}
    address = apache_kafka.address
    topics = {"impressions": fresh_topic("impressions"), "conversions": fresh_topic("conversions")}
    results = fresh_topic("results")

    def options(group: str, stop: str) -> list[str]:
        return ["--impressions", f"kafka://{address}/{topics['impressions']}?group={group}{stop}",
                "--conversions", f"kafka://{address}/{topics['conversions']}?group={group}{stop}",
                "--batch-size", "40", "--seed", "3", "--emit-budgets"]

    def produce_chunk(index: int) -> None:
        for name, topic in topics.items():
            _produce_chunk(address, topic, chunks[name], index)

    driver = _driver("pipelines.measurement", [*options("failover", ""), "--output", str(tmp_path / "flink"),
                                               "--output-topic", f"kafka://{address}/{results}"],
                     flink_cluster, "failover-measurement")
    try:
        restores = _run_with_kills(flink_cluster, "failover-measurement", driver, produce_chunk, {
            topic: (address, "failover", len(sent[name]) + len(BROKEN)) for name, topic in topics.items()})
    finally:
        driver.kill()
    assert restores >= KILLS
    reference = fresh_topic("results-local")
    assert measurement.main([*options("local", "&stop=end"), "--output", str(tmp_path / "local"), "--output-topic",
                             f"kafka://{address}/{reference}"]) == 0

    def result_id(result: dict) -> tuple:
        return result["querier_site"], result["query_key"], result["batch_index"]

    answered = _values_by_id(consume_all(address, results), result_id)
    uninterrupted = _values_by_id(consume_all(address, reference), result_id)
    assert answered == uninterrupted and answered  # each query answered once, with the uninterrupted run's result
    flink_files, local_files = output_records(tmp_path / "flink"), output_records(tmp_path / "local")
    # the reports, the results and every (device, querier, epoch) filter's consumption: no filter was reset
    assert flink_files == local_files and any("budgets" in name for name in flink_files)
    _same_counts(tmp_path / "flink", tmp_path / "local", sum(map(len, inputs.values())), sum(map(len, sent.values())),
                 topics=len(topics))
