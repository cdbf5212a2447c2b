"""What the crash tests share (``tests/pipelines/test_crash_recovery*.py``): jobs in processes of their own that
a test kills (never outliving it), live topics fed in pieces, the store's snapshot count, releases by stable id."""
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
from collections.abc import Callable
from pathlib import Path

import pytest

from schemas.codecs import row_to_dict
from tests.support.kafka import produce
from transforms.core.durable.store import FAULT_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]
CHUNKS = 20  # a live topic: once the job reads, the records are produced in this many pieces ...
PAUSE_SECONDS = 0.1  # ... this far apart, ...
SNAPSHOTS = ["--snapshot-seconds", "0.25"]  # ... and the job fires (and snapshots) several times while reading


def messages(rows) -> list[bytes]:
    """Each row as a JSON message."""
    return [json.dumps(row_to_dict(row)).encode() for row in rows]


def lines(output: Path, prefix: str) -> list[str]:
    """The sorted lines of a run's ``prefix`` output files."""
    return sorted(line for path in output.glob(f"{prefix}-*") for line in path.read_text().splitlines())


def chunks(records: list) -> list[list]:
    """``records`` in ``CHUNKS`` pieces, in order."""
    size = -(-len(records) // CHUNKS)
    return [records[start:start + size] for start in range(0, len(records), size)]


def feed(address: str, topic: str, pieces: list[list[bytes]], pause_seconds: float = PAUSE_SECONDS) -> threading.Thread:
    """Produce ``pieces``, ``pause_seconds`` apart, in a thread (a live topic)."""
    def run() -> None:
        for chunk in pieces:
            time.sleep(pause_seconds)
            produce(address, topic, chunk)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_job_outlives_its_test():
    """Kill, at the end of a test, every job it started that still runs (a failed test leaves none behind)."""
    yield
    while _STARTED:
        job = _STARTED.pop()
        if job.poll() is None:
            job.kill()
            job.communicate()


def start(arguments: list[str], fault: str | None = None) -> subprocess.Popen:
    """A job in a process of its own (killed at the end of the test if it still runs); ``fault``: the store's
    fault variable."""
    env = {key: value for key, value in os.environ.items() if key != FAULT_ENVIRONMENT}
    if fault:
        env[FAULT_ENVIRONMENT] = fault
    job = subprocess.Popen([sys.executable, "-m", *arguments], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    _STARTED.append(job)
    return job


def read_until(job: subprocess.Popen, done, what: str, seconds: float = 120) -> list[str]:
    """The job's output lines up to the first for which ``done(line)`` holds."""
    assert job.stdout is not None
    deadline = time.monotonic() + seconds
    printed = []
    for line in job.stdout:
        printed.append(line)
        if done(line):
            return printed
        assert time.monotonic() < deadline, f"the job did not {what} in {seconds} s"
    raise AssertionError(f"the job ended before it could {what}: " + "".join(printed))


def reading(job: subprocess.Popen) -> list[str]:
    """Wait until the job reads its topics (its first progress line); what it printed until then."""
    return read_until(job, lambda line: line.startswith("progress:"), "start reading")


def killed_by_fault(job: subprocess.Popen, feeder: threading.Thread, seconds: float = 60) -> str:
    """Wait for the job to be killed by its fault variable; its output. It must happen while the topic is fed or
    within ``seconds`` after."""
    feeder.join()
    try:
        return job.communicate(timeout=seconds)[0]
    except subprocess.TimeoutExpired:
        job.kill()
        raise AssertionError("the fault point was not reached: " + job.communicate()[0][-2000:]) from None


def kill_when_read(job: subprocess.Popen, read: int, snapshotted: Callable[[], int] | None = None) -> str:
    """SIGKILL the job once its progress line says it has read at least ``read`` records and, with
    ``snapshotted`` (the store's count of committed snapshots), once it has committed a snapshot; its output."""
    def enough(line: str) -> bool:
        return line.startswith("progress: read ") and int(
            line.removeprefix("progress: read ").split(" ", 1)[0].replace(",", "")) >= read

    printed = read_until(job, enough, f"read {read} records")
    if snapshotted is not None:  # a slow machine may read that many before the first snapshot is committed
        deadline = time.monotonic() + 60
        while snapshotted() == 0:
            assert time.monotonic() < deadline and job.poll() is None, "".join(printed)
            time.sleep(0.05)
    job.kill()
    rest, _ = job.communicate(timeout=120)
    return "".join(printed) + rest


def killed_while_fed(arguments: list[str], address: str, topic: str, pieces: list[list[bytes]], read: int,
                     snapshotted: Callable[[], int] | None = None) -> str:
    """Start the job, feed ``pieces`` to ``topic`` once it reads, and SIGKILL it once it has read ``read``
    records (and committed a snapshot, with ``snapshotted``: ``kill_when_read``); its output."""
    job = start(arguments)
    started = "".join(reading(job))
    feeder = feed(address, topic, pieces)
    printed = started + kill_when_read(job, read, snapshotted)
    feeder.join()
    assert job.returncode == -signal.SIGKILL, printed
    return printed


def snapshots(store: Path) -> int:
    """How many snapshots the store has committed (0 before the first, or without a store yet)."""
    if not store.exists():
        return 0
    with sqlite3.connect(store) as connection:
        return sum(count for (count,) in connection.execute("SELECT snapshots FROM steps"))


def logged(store: Path) -> int:
    """How many entries the store's release logs hold (each a snapshot's releases not yet acknowledged)."""
    if not store.exists():
        return 0
    with sqlite3.connect(store) as connection:
        return connection.execute("SELECT COUNT(*) FROM releases").fetchone()[0]


def keyed(store: Path) -> int:
    """How many keyed records (devices, groups, buffered input) the store's snapshots hold."""
    with sqlite3.connect(store) as connection:
        return connection.execute("SELECT COUNT(*) FROM keyed").fetchone()[0]


def by_id(released) -> dict[str, set[str]]:
    """The values of the messages ``released`` under each stable id (a consumer keyed on the id keeps one)."""
    values: dict[str, set[str]] = defaultdict(set)
    for message in released:
        values[dict(message.headers())["id"].decode()].add(json.dumps(json.loads(message.value()), sort_keys=True))
    return values
