"""Streaming jobs that survive a crash (README, "What survives a crash"): the k-anonymity job and the measurement
job read live topics, are killed with SIGKILL at different moments (before their first snapshot, in the middle of
a snapshot, between snapshots, in the middle of the end's snapshot, just after it), and are started again with the
same ``--job-id``; what they release, counted once per stable id as a consumer of the output topic would, is
what an uninterrupted run releases, no id is released with two different values, and the restarted run's files
hold everything the job released. Also: a store that cannot be opened at the start, a store that fails in the
middle of a run, and a second process of a running job.

Real processes, a real broker (``tests.support.kafka``) and a real SQLite store; kill points are chosen by the
store's fault variable (``PM_BEAM_KILL_IN_SNAPSHOT``: inside or just after a given snapshot, moments no outside
signal can hit) or by the job's progress line. Deterministic outcomes (seeded noise; the secure-noise test checks
only identities): no false-failure probability to state."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from pipelines import generate, kanon
from schemas.codecs import JOIN_EVENT, row_to_dict
from tests.support.files import read_rows
from tests.support.kafka import consume_all, fresh_topic, produce
from transforms.core.durable.store import FAULT_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]
DATASET = ["--groups", "120", "--joins", "9000", "--days", "8", "--seed", "31", "--format", "jsonl", "--quiet"]
CHUNKS = 25  # a live topic: once the job reads, the joins are produced in this many pieces ...
PAUSE_SECONDS = 0.2  # ... this far apart, so that the job fires (and snapshots) several times while reading
# A piece spans about 8 hours of event time and lands on several partitions, which a consumer may read in any
# order while the others are at their end (and do not hold the watermark back): a day of allowed lateness keeps
# every join in time, so that the jobs release the batch job's verdicts
LATENESS = ["--allowed-lateness-seconds", "86400"]


@pytest.fixture(scope="module")
def joins(tmp_path_factory):
    directory = tmp_path_factory.mktemp("joins")
    assert generate.main(["kanon", "--output", str(directory), *DATASET]) == 0
    rows, dead = read_rows(sorted(directory.glob("joins-*")), JOIN_EVENT)
    assert not dead
    return sorted(rows, key=lambda join: join.event_time_micros)


@pytest.fixture(scope="module")
def reference_verdicts(joins, tmp_path_factory) -> list[str]:
    """What an uninterrupted run releases: the batch job's verdicts (a topic gives the same, tested elsewhere)."""
    directory = tmp_path_factory.mktemp("reference")
    path = directory / "joins.jsonl"
    path.write_bytes(b"\n".join(_messages(joins)) + b"\n")
    assert kanon.main(["--input", str(path), "--output", str(directory / "out"), "--seed", "3",
                       "--runner=FnApiRunner"]) == 0
    return _lines(directory / "out", "verdicts")


def _messages(rows) -> list[bytes]:
    return [json.dumps(row_to_dict(row)).encode() for row in rows]


def _lines(output: Path, prefix: str) -> list[str]:
    return sorted(line for path in output.glob(f"{prefix}-*") for line in path.read_text().splitlines())


def _chunks(messages: list) -> list[list]:
    size = -(-len(messages) // CHUNKS)
    return [messages[start:start + size] for start in range(0, len(messages), size)]


def _feed(address: str, topic: str, chunks: list[list[bytes]]) -> threading.Thread:
    """Produce ``chunks``, ``PAUSE_SECONDS`` apart, in a thread (a live topic)."""
    def run() -> None:
        for chunk in chunks:
            time.sleep(PAUSE_SECONDS)
            produce(address, topic, chunk)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _start(arguments: list[str], fault: str | None = None) -> subprocess.Popen:
    env = {**os.environ, FAULT_ENVIRONMENT: fault} if fault else dict(os.environ)
    env.pop(FAULT_ENVIRONMENT, None) if not fault else None
    return subprocess.Popen([sys.executable, "-m", *arguments], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _reading(job: subprocess.Popen, seconds: float = 120) -> list[str]:
    """Wait until the job reads its topics (its first progress line); what it printed until then."""
    assert job.stdout is not None
    deadline = time.monotonic() + seconds
    printed = []
    for line in job.stdout:
        printed.append(line)
        if line.startswith("progress:"):
            return printed
        assert time.monotonic() < deadline, f"the job did not start reading in {seconds} s"
    raise AssertionError("the job ended before reading: " + "".join(printed))


def _killed_by_fault(job: subprocess.Popen, feeder: threading.Thread, seconds: float = 60) -> str:
    """Wait for the job to be killed by its fault variable; its output. It must happen while the topic is fed or
    within ``seconds`` after."""
    feeder.join()
    try:
        return job.communicate(timeout=seconds)[0]
    except subprocess.TimeoutExpired:
        job.kill()
        raise AssertionError("the fault point was not reached: " + job.communicate()[0][-2000:]) from None


def _kill_when_read(job: subprocess.Popen, read: int, seconds: float = 120) -> str:
    """SIGKILL the job once its progress line says it has read at least ``read`` records; its output."""
    assert job.stdout is not None
    deadline = time.monotonic() + seconds
    printed = []
    for line in job.stdout:
        printed.append(line)
        if line.startswith("progress: read "):
            count = int(line.removeprefix("progress: read ").split(" ", 1)[0].replace(",", ""))
            if count >= read:
                job.kill()
                break
        assert time.monotonic() < deadline, f"the job did not read {read} records in {seconds} s"
    rest, _ = job.communicate(timeout=120)
    return "".join(printed) + rest


def _snapshots(store: Path) -> int:
    """How many snapshots the store has committed (0 before the first, or without a store yet)."""
    if not store.exists():
        return 0
    with sqlite3.connect(store) as connection:
        return sum(count for (count,) in connection.execute("SELECT snapshots FROM steps"))


def _by_id(messages) -> dict[str, set[str]]:
    """The values released under each stable id (a consumer keyed on the id keeps one)."""
    values: dict[str, set[str]] = defaultdict(set)
    for message in messages:
        values[dict(message.headers())["id"].decode()].add(json.dumps(json.loads(message.value()), sort_keys=True))
    return values


def _kanon_arguments(address: str, topic: str, verdicts: str, output: Path, store: Path, *, stop: str,
                     seed: bool = True) -> list[str]:
    return ["pipelines.kanon", "--input", f"kafka://{address}/{topic}?group=crash&stop={stop}", "--output",
            str(output), "--output-topic", f"kafka://{address}/{verdicts}", "--state-store", f"sqlite:///{store}",
            "--job-id", "kanon-crash", "--progress-seconds", "0.2", *LATENESS, *(["--seed", "3"] if seed else [])]


# (kill point, fault variable or None, records read when a SIGKILL without a fault variable is sent)
KANON_KILL_POINTS = [
    ("before the first snapshot", None, 0),
    ("in the middle of the first snapshot", "1", None),
    ("in the middle of the third snapshot", "3", None),
    ("between snapshots, a third of the way", None, 3000),
    ("between snapshots, near the end", None, 8000),
    ("in the middle of the end's snapshot", "end", None),
    ("just after the end's snapshot", "after:end", None),
]


@pytest.mark.parametrize(("moment", "fault", "read"), KANON_KILL_POINTS, ids=[p[0] for p in KANON_KILL_POINTS])
def test_the_kanon_job_killed_and_restarted_releases_what_an_uninterrupted_run_does(
        kafka_broker, joins, reference_verdicts, tmp_path, moment, fault, read):
    topic, verdicts = fresh_topic("crash-joins"), fresh_topic("crash-verdicts")
    store = tmp_path / "state.sqlite"
    messages = _messages(joins)
    if fault == "end" or fault == "after:end":  # killed while it finishes: the whole topic, read to its end
        produce(kafka_broker.address, topic, messages)
        job = _start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="end"),
                     fault)
        printed, _ = job.communicate(timeout=300)
        feeder = None
    else:
        chunks = _chunks(messages)
        produce(kafka_broker.address, topic, chunks[0])  # the topic exists before the job joins it
        job = _start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="never"),
                     fault)
        started = "".join(_reading(job))
        if read == 0:  # nothing read yet
            job.kill()
        feeder = _feed(kafka_broker.address, topic, chunks[1:])
        printed = started + (_killed_by_fault(job, feeder) if fault else _kill_when_read(job, read))
    assert job.returncode == -signal.SIGKILL, printed
    if feeder is not None:
        feeder.join()
    snapshotted = _snapshots(store)
    again = _start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "again", store, stop="end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert ("state: job kanon-crash restored" in rest) == (snapshotted > 0), rest
    # the restarted run's files hold everything the job released, before the crash and after
    assert _lines(tmp_path / "again", "verdicts") == reference_verdicts, moment
    # on the topic: each verdict under its stable id, with one value, and nothing else
    released = _by_id(consume_all(kafka_broker.address, verdicts))
    assert all(len(values) == 1 for values in released.values()), moment
    expected = {f"{v['interest_group']}/{v['step']}": json.dumps(v, sort_keys=True)
                for v in map(json.loads, reference_verdicts)}
    assert {key: next(iter(values)) for key, values in released.items()} == expected, moment
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["parameters"]["job_id"] == "kanon-crash"
