"""The k-anonymity job survives a crash (docs/durability.md): it reads a live topic, is killed with SIGKILL at
different moments (before its first snapshot, in the middle of a snapshot, between snapshots, in the middle of
the end's snapshot, just after it), and is started again with the same ``--job-id``; what it releases, counted
once per stable id as a consumer of the output topic would, is what an uninterrupted run releases, no id is
released with two different values, and the restarted run's files hold everything the job released. With secure
noise, every drawn threshold survives two restarts. Also: a store that cannot be opened at the start, a store
that fails in the middle of a run, a second process of a running job, and a PostgreSQL store. The device jobs'
crash tests are in ``test_crash_recovery_devices.py``.

Real processes, a real broker (``tests.support.kafka``) and a real SQLite store; kill points are chosen by the
store's fault variable (``PM_BEAM_KILL_IN_SNAPSHOT``: inside or just after a given snapshot, moments no outside
signal can hit) or by the job's progress line. Deterministic outcomes (seeded noise; the secure-noise test checks
only identities): no false-failure probability to state."""
from __future__ import annotations

import json
import signal
import sqlite3
import stat
import struct
import time
from pathlib import Path

import pytest

from pipelines import generate, kanon
from schemas.codecs import JOIN_EVENT
from tests.support import crash
from tests.support.crash import no_job_outlives_its_test  # noqa: F401  (autouse fixture)
from tests.support.files import read_rows
from tests.support.kafka import consume_all, fresh_topic, produce
from tests.support.keys import run_key
from transforms.core.durable.sealing import Seal

DATASET = ["--groups", "120", "--joins", "9000", "--days", "8", "--seed", "31", "--format", "jsonl", "--quiet"]
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
    path.write_bytes(b"\n".join(crash.messages(joins)) + b"\n")
    assert kanon.main(["--input", str(path), "--output", str(directory / "out"), "--seed", "3",
                       "--runner=FnApiRunner"]) == 0
    return crash.lines(directory / "out", "verdicts")


def _kanon_arguments(address: str, topic: str, verdicts: str, output: Path, store: Path | str, *, stop: str,
                     seed: bool = True) -> list[str]:
    """The k-anonymity job of the crash tests; ``store``: a SQLite file, or a store URI."""
    uri = store if isinstance(store, str) else f"sqlite:///{store}"
    return ["pipelines.kanon", "--input", f"kafka://{address}/{topic}?group=crash&stop={stop}", "--output",
            str(output), "--output-topic", f"kafka://{address}/{verdicts}", "--state-store", uri,
            "--job-id", "kanon-crash", "--progress-seconds", "0.2", *crash.SNAPSHOTS, *LATENESS,
            *(["--seed", "3"] if seed else [])]


# (kill point, fault variable or None, records read when a SIGKILL without a fault variable is sent)
KANON_KILL_POINTS = [
    ("before the first snapshot", None, 0),
    ("in the middle of the first snapshot", "1", None),
    ("in the middle of the third snapshot", "3", None),
    ("between snapshots, a third of the way", None, 3000),
    ("in the middle of the end's snapshot", "end", None),
    ("just after the end's snapshot", "after:end", None),
]


@pytest.mark.parametrize(("moment", "fault", "read"), KANON_KILL_POINTS, ids=[p[0] for p in KANON_KILL_POINTS])
def test_the_kanon_job_killed_and_restarted_releases_what_an_uninterrupted_run_does(
        kafka_broker, joins, reference_verdicts, tmp_path, moment, fault, read):
    topic, verdicts = fresh_topic("crash-joins"), fresh_topic("crash-verdicts")
    store = tmp_path / "state.sqlite"
    messages = crash.messages(joins)
    if fault == "end" or fault == "after:end":  # killed while it finishes: the whole topic, read to its end
        produce(kafka_broker.address, topic, messages)
        job = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="end"),
                     fault)
        printed, _ = job.communicate(timeout=300)
        feeder = None
    else:
        chunks = crash.chunks(messages)
        produce(kafka_broker.address, topic, chunks[0])  # the topic exists before the job joins it
        job = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="never"),
                     fault)
        started = "".join(crash.reading(job))
        if read == 0:  # nothing read yet
            job.kill()
        # a fault in the Nth snapshot needs N firings while the topic is fed: in a slow hour the runner took the
        # pieces 0.1 s apart in fewer than three firings (CI, session 14), so those are fed 0.3 s apart
        feeder = crash.feed(kafka_broker.address, topic, chunks[1:], pause_seconds=0.3 if fault else crash.PAUSE_SECONDS)
        if read == 0:
            printed = started + job.communicate(timeout=120)[0]
        else:
            printed = started + (crash.killed_by_fault(job, feeder) if fault else crash.kill_when_read(job, read))
    assert job.returncode == -signal.SIGKILL, printed
    if feeder is not None:
        feeder.join()
    snapshotted = crash.snapshots(store)
    again = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "again", store, stop="end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert ("state: job kanon-crash restored" in rest) == (snapshotted > 0), rest
    # the restarted run's files hold everything the job released, before the crash and after
    assert crash.lines(tmp_path / "again", "verdicts") == reference_verdicts, moment
    # on the topic: each verdict under its stable id, with one value, and nothing else
    released = crash.by_id(consume_all(kafka_broker.address, verdicts))
    assert all(len(values) == 1 for values in released.values()), moment
    expected = {f"{v['interest_group']}/{v['step']}": json.dumps(v, sort_keys=True)
                for v in map(json.loads, reference_verdicts)}
    assert {key: next(iter(values)) for key, values in released.items()} == expected, moment
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["parameters"]["job_id"] == "kanon-crash"


def test_a_live_job_drops_what_its_sinks_wrote_and_a_restart_in_the_same_output_releases_all_once(
        kafka_broker, joins, reference_verdicts, tmp_path):
    """The release log keeps only what the sinks have not yet written (``transforms.core.durable.acknowledgement``):
    read live in many firings, the job's store holds a few of their entries; killed then, and started again with
    the same output, its files hold every verdict once (the earlier run's spill and the log's re-emitted entries
    together) and its topic every verdict under one value."""
    topic, verdicts = fresh_topic("acked-joins"), fresh_topic("acked-verdicts")
    store, output = tmp_path / "state.sqlite", tmp_path / "out"
    messages = crash.messages(joins)
    chunks = crash.chunks(messages)
    produce(kafka_broker.address, topic, chunks[0])
    job = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, output, store, stop="never"))
    printed = "".join(crash.reading(job))
    feeder = crash.feed(kafka_broker.address, topic, chunks[1:], pause_seconds=0.8)  # 0.4 s apart, CI in a slow hour
    # took two or three pieces in one poll and wrote 6 snapshots
    feeder.join()
    printed += "".join(crash.read_until(job, lambda line: f"read {len(messages):,} " in line, "read everything"))
    deadline = time.monotonic() + 20  # the last pieces' firings, and their sinks' acknowledgements: about 2 s, more
    while crash.logged(store) > 3 and time.monotonic() < deadline:  # in the machine's slow hours (4 entries at 2 s)
        time.sleep(0.25)
    job.kill()
    printed += job.communicate(timeout=120)[0]
    snapshotted, logged = crash.snapshots(store), crash.logged(store)
    assert snapshotted >= 10 and logged <= 3, printed
    again = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, output, store, stop="end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert crash.lines(output, "verdicts") == reference_verdicts
    released = crash.by_id(consume_all(kafka_broker.address, verdicts))
    assert all(len(values) == 1 for values in released.values())
    assert len(released) == len(reference_verdicts)
    assert not (tmp_path / "state.sqlite.spill").exists() or not any((tmp_path / "state.sqlite.spill").iterdir())


def _group_instances(store: Path) -> dict[str, tuple[int, float]]:
    """Per interest group in the store, its running AboveThreshold instance: (start step, noisy threshold's nu),
    its row opened with the run's key (rows are sealed, ``transforms.core.durable.sealing``)."""
    from schemas.proto import state_pb2

    seal = Seal(run_key())
    with sqlite3.connect(store) as connection:
        rows = connection.execute("SELECT job_id, step, key, value FROM keyed").fetchall()
    instances = {}
    for job_id, step, name, value in rows:
        key, record = seal.open_keyed(value, "keyed", job_id, step, name)
        if not key.startswith("k/"):
            continue
        group = state_pb2.KAnonGroupState.FromString(record)
        if group.HasField("instance") and group.instance.HasField("threshold_noise"):
            instances[key[2:]] = (group.instance.start_step, group.instance.threshold_noise)
    return instances


def _store_bytes(store: Path) -> bytes:
    """The store's file and its write-ahead log, as whoever reads the disk sees them."""
    return b"".join(path.read_bytes() for path in (store, store.with_name(store.name + "-wal")) if path.exists())


def test_with_secure_noise_restarts_keep_every_drawn_threshold_and_release_each_verdict_once(
        kafka_broker, joins, tmp_path):
    """Secure noise, killed twice between snapshots: every instance that runs on across a restart keeps the
    noisy threshold it drew (none is drawn again), and no verdict id is ever released with two values. A window
    of 2,000 hours (and k = 100, above its noise bound) puts the whole dataset in one instance per group
    (instances restart at multiples of w), so that every group stored at the first kill still runs the same
    instance at the second."""
    topic, verdicts = fresh_topic("secure-joins"), fresh_topic("secure-verdicts")
    store = tmp_path / "state.sqlite"
    chunks = crash.chunks(crash.messages(joins))
    produce(kafka_broker.address, topic, chunks[0])

    def arguments(output: str, stop: str) -> list[str]:
        return [*_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / output, store, stop=stop,
                                  seed=False), "--window-hours", "2000", "--k", "100"]

    crash.killed_while_fed(arguments("first", "never"), kafka_broker.address, topic, chunks[1:12], 3000,
                           lambda: crash.snapshots(store))
    before = _group_instances(store)
    crash.killed_while_fed(arguments("second", "never"), kafka_broker.address, topic, chunks[12:], 8000)
    after = _group_instances(store)
    assert before and set(before) <= set(after), (len(before), len(after))
    assert all(after[group] == before[group] for group in before)
    at_rest = _store_bytes(store)  # sealed: no noisy threshold and no group id is readable in the file
    assert not [nu for _, nu in after.values() if struct.pack("<d", nu) in at_rest]
    assert not [group for group in after if group.encode() in at_rest]
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    again = crash.start(arguments("again", "end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    released = crash.by_id(consume_all(kafka_broker.address, verdicts))
    assert released and all(len(values) == 1 for values in released.values())
    assert sorted(json.dumps(json.loads(line), sort_keys=True) for line in crash.lines(tmp_path / "again", "verdicts")) == \
        sorted(next(iter(values)) for values in released.values())


def test_a_store_that_cannot_be_opened_fails_the_start_in_one_line(kafka_broker, tmp_path):
    topic = fresh_topic("no-store")
    produce(kafka_broker.address, topic, [b"{}"])
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    job = crash.start(["pipelines.kanon", "--input", f"kafka://{kafka_broker.address}/{topic}?stop=end", "--output",
                  str(tmp_path / "out"), "--state-store", f"sqlite:///{blocked}/state.sqlite"])
    printed, _ = job.communicate(timeout=120)
    assert job.returncode == 1, printed
    [error] = [line for line in printed.splitlines() if line.startswith("error:")]
    assert f"state store sqlite:///{blocked}/state.sqlite: cannot open" in error
    assert "Traceback" not in printed


def test_a_second_process_of_a_running_job_is_refused(kafka_broker, joins, tmp_path):
    topic, verdicts = fresh_topic("twice"), fresh_topic("twice-verdicts")
    store = tmp_path / "state.sqlite"
    produce(kafka_broker.address, topic, crash.messages(joins[:100]))
    first = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="never"))
    try:
        crash.reading(first)
        second = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "second", store,
                                         stop="end"))
        printed, _ = second.communicate(timeout=120)
        assert second.returncode == 1, printed
        assert "error: job 'kanon-crash' is running in another process" in printed
    finally:
        first.kill()
        first.communicate()


def test_a_store_failing_in_the_middle_of_a_run_stops_the_job_and_a_restart_loses_nothing(
        kafka_broker, joins, reference_verdicts, tmp_path):
    """Another writer holds the store's database locked after the job's first snapshot: the job's next snapshot
    times out, the job stops in one line (exit 1) with nothing committed to the consumer group, and once the store
    is free again a restart releases the verdicts of an uninterrupted run."""
    topic, verdicts = fresh_topic("store-fails"), fresh_topic("store-fails-verdicts")
    store = tmp_path / "state.sqlite"
    chunks = crash.chunks(crash.messages(joins))
    produce(kafka_broker.address, topic, chunks[0])
    arguments = _kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="never")
    arguments[arguments.index(f"sqlite:///{store}")] = f"sqlite:///{store}?timeout=1"
    job = crash.start(arguments)
    started = "".join(crash.reading(job))
    feeder = crash.feed(kafka_broker.address, topic, chunks[1:])
    deadline = time.monotonic() + 60
    while crash.snapshots(store) == 0:
        assert time.monotonic() < deadline and job.poll() is None, started
        time.sleep(0.05)
    locker = sqlite3.connect(store, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        printed, _ = job.communicate(timeout=120)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    feeder.join()
    assert job.returncode == 1, started + printed
    [error] = [line for line in (started + printed).splitlines() if line.startswith("error:")]
    assert "cannot write the state of kanon-crash/verdicts" in error and "database is locked" in error
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_broker.address, "group.id": "crash"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        assert all(p.offset < 0 for p in consumer.committed([TopicPartition(topic, n) for n in partitions], timeout=10))
    finally:
        consumer.close()
    again = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "again", store, stop="end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert crash.lines(tmp_path / "again", "verdicts") == reference_verdicts


def _postgres_snapshots(url: str) -> int:
    """How many snapshots the PostgreSQL store at ``url`` has committed (0 before its tables exist)."""
    import psycopg

    with psycopg.connect(url) as connection:
        try:
            return connection.execute("SELECT COALESCE(SUM(snapshots), 0) FROM steps").fetchone()[0]
        except psycopg.errors.UndefinedTable:
            return 0


def test_the_kanon_job_restarts_from_a_postgresql_store(kafka_broker, joins, reference_verdicts, tmp_path,
                                                        postgres_url):
    """The same kill between snapshots, with the job's state in PostgreSQL (a real server, ``tests.support.
    postgres``): the restart restores it and releases an uninterrupted run's verdicts."""
    topic, verdicts = fresh_topic("pg-joins"), fresh_topic("pg-verdicts")
    chunks = crash.chunks(crash.messages(joins))
    produce(kafka_broker.address, topic, chunks[0])

    crash.killed_while_fed(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", postgres_url,
                                            stop="never"), kafka_broker.address, topic, chunks[1:], 5000,
                           lambda: _postgres_snapshots(postgres_url))
    again = crash.start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "again", postgres_url,
                                         stop="end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert "state: job kanon-crash restored" in rest
    assert crash.lines(tmp_path / "again", "verdicts") == reference_verdicts


