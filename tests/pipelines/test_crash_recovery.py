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
from pipelines.common import read_records
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


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test():
    yield
    while _STARTED:
        job = _STARTED.pop()
        if job.poll() is None:
            job.kill()
            job.communicate()


def _start(arguments: list[str], fault: str | None = None) -> subprocess.Popen:
    """A job in a process of its own (killed at the end of the test if it still runs); ``fault``: the store's
    fault variable."""
    env = {key: value for key, value in os.environ.items() if key != FAULT_ENVIRONMENT}
    if fault:
        env[FAULT_ENVIRONMENT] = fault
    job = subprocess.Popen([sys.executable, "-m", *arguments], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    _STARTED.append(job)
    return job


def _read_until(job: subprocess.Popen, done, what: str, seconds: float = 120) -> list[str]:
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


def _reading(job: subprocess.Popen) -> list[str]:
    """Wait until the job reads its topics (its first progress line); what it printed until then."""
    return _read_until(job, lambda line: line.startswith("progress:"), "start reading")


def _killed_by_fault(job: subprocess.Popen, feeder: threading.Thread, seconds: float = 60) -> str:
    """Wait for the job to be killed by its fault variable; its output. It must happen while the topic is fed or
    within ``seconds`` after."""
    feeder.join()
    try:
        return job.communicate(timeout=seconds)[0]
    except subprocess.TimeoutExpired:
        job.kill()
        raise AssertionError("the fault point was not reached: " + job.communicate()[0][-2000:]) from None


def _kill_when_read(job: subprocess.Popen, read: int) -> str:
    """SIGKILL the job once its progress line says it has read at least ``read`` records; its output."""
    def enough(line: str) -> bool:
        return line.startswith("progress: read ") and int(
            line.removeprefix("progress: read ").split(" ", 1)[0].replace(",", "")) >= read

    printed = _read_until(job, enough, f"read {read} records")
    job.kill()
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
        if read == 0:
            printed = started + job.communicate(timeout=120)[0]
        else:
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


MEASUREMENT = ("--policy", "cookie_monster", "--batch-size", "3", "--seed", "5", "--emit-budgets")
MEASUREMENT_LATENESS = ["--allowed-lateness-seconds", str(7 * 86_400)]  # a piece spans 2.4 days of event time


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """200 devices' impressions and conversions over 60 days, and what the batch job releases from them."""
    from pipelines import measurement
    from tests.support.measurement_data import random_population, write_jsonl

    impressions, conversions = random_population(seed=17, devices=200)
    directory = tmp_path_factory.mktemp("population")
    files = write_jsonl(directory / "i.jsonl", impressions), write_jsonl(directory / "c.jsonl", conversions)
    assert measurement.main(["--impressions", files[0], "--conversions", files[1], "--output",
                             str(directory / "batch"), *MEASUREMENT]) == 0
    return impressions, conversions, directory / "batch"


def _measurement_arguments(address: str, topics: tuple[str, str], results: str, output: Path, store: Path, *,
                           stop: str) -> list[str]:
    return ["pipelines.measurement", "--impressions", f"kafka://{address}/{topics[0]}?group=crash&stop={stop}",
            "--conversions", f"kafka://{address}/{topics[1]}?group=crash&stop={stop}", "--output", str(output),
            "--output-topic", f"kafka://{address}/{results}", "--state-store", f"sqlite:///{store}",
            "--job-id", "measurement-crash", "--progress-seconds", "0.2", *MEASUREMENT_LATENESS, *MEASUREMENT]


def _events_in_time_order(impressions, conversions) -> list[tuple[int, bytes]]:
    """Every event as (0 impression or 1 conversion, message), in event-time order (as a device's producer sends)."""
    events = [(row.event_time_micros, 0, row) for row in impressions] + [(row.event_time_micros, 1, row)
                                                                        for row in conversions]
    return [(kind, _messages([row])[0]) for _, kind, row in sorted(events, key=lambda event: event[:2])]


def _produce_events(address: str, topics: tuple[str, str], events: list[tuple[int, bytes]]) -> None:
    for kind in (0, 1):
        messages = [message for which, message in events if which == kind]
        if messages:
            produce(address, topics[kind], messages)


MEASUREMENT_KILL_POINTS = [
    ("before the first snapshot", None, 0),
    ("in the middle of the second snapshot", "2", None),
    ("between snapshots, halfway", None, 500),
    ("in the middle of the end's snapshot", "end", None),
    ("just after the end's snapshot", "after:end", None),
]


@pytest.mark.parametrize(("moment", "fault", "read"), MEASUREMENT_KILL_POINTS,
                         ids=[p[0] for p in MEASUREMENT_KILL_POINTS])
def test_the_measurement_job_killed_and_restarted_releases_the_same_reports_and_budgets(
        kafka_broker, population, tmp_path, moment, fault, read):
    """Reports and budgets are per device and equal the batch job's; which reports share a query batch follows the
    firings (different in every live run), so the query results are compared by their shape, and each result's
    id must carry one value."""
    impressions, conversions, batch = population
    topics, results = (fresh_topic("crash-impressions"), fresh_topic("crash-conversions")), fresh_topic("results")
    store = tmp_path / "state.sqlite"
    events = _events_in_time_order(impressions, conversions)
    if fault in ("end", "after:end"):
        _produce_events(kafka_broker.address, topics, events)
        job = _start(_measurement_arguments(kafka_broker.address, topics, results, tmp_path / "first", store,
                                            stop="end"), fault)
        printed = job.communicate(timeout=300)[0]
    else:
        # both topics exist before the job joins them: the first piece, and the first conversion (conversions
        # start later) moved to it, each topic still in event-time order
        first_conversion = next(event for event in events if event[0] == 1)
        chunks = _chunks([event for event in events if event is not first_conversion])
        _produce_events(kafka_broker.address, topics, [*chunks[0], first_conversion])
        job = _start(_measurement_arguments(kafka_broker.address, topics, results, tmp_path / "first", store,
                                            stop="never"), fault)
        started = "".join(_reading(job))
        if read == 0:
            job.kill()
        feeder = threading.Thread(target=lambda: [(time.sleep(PAUSE_SECONDS), _produce_events(
            kafka_broker.address, topics, chunk)) for chunk in chunks[1:]], daemon=True)
        feeder.start()
        if read == 0:
            printed = started + job.communicate(timeout=120)[0]
        else:
            printed = started + (_killed_by_fault(job, feeder) if fault else _kill_when_read(job, read))
        feeder.join()
    assert job.returncode == -signal.SIGKILL, printed
    snapshotted = _snapshots(store)
    again = _start(_measurement_arguments(kafka_broker.address, topics, results, tmp_path / "again", store,
                                          stop="end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert ("state: job measurement-crash restored" in rest) == (snapshotted > 0), rest
    output = tmp_path / "again"
    for prefix in ("reports", "SENSITIVE_device_epoch_budgets"):
        assert _lines(output, prefix) == _lines(batch, prefix), (moment, prefix)
    assert all(row["consumed_epsilon"] <= row["capacity_epsilon"]
               for row in map(json.loads, _lines(output, "SENSITIVE_device_epoch_budgets")))

    def shape(lines: list[str]) -> list[tuple]:
        return sorted((r["query_key"], r["batch_index"], r["report_count"]) for r in map(json.loads, lines))

    released = _by_id(consume_all(kafka_broker.address, results))
    assert all(len(values) == 1 for values in released.values()), moment
    files = _lines(output, "query_results")
    assert sorted(json.dumps(json.loads(line), sort_keys=True) for line in files) == sorted(
        next(iter(values)) for values in released.values()), moment
    assert shape(files) == shape(_lines(batch, "query_results")) != [], moment


def _group_instances(store: Path) -> dict[str, tuple[int, float]]:
    """Per interest group in the store, its running AboveThreshold instance: (start step, noisy threshold's nu)."""
    from schemas.proto import state_pb2

    with sqlite3.connect(store) as connection:
        rows = connection.execute("SELECT key, value FROM keyed WHERE key LIKE 'k/%'").fetchall()
    instances = {}
    for key, value in rows:
        group = state_pb2.KAnonGroupState.FromString(value)
        if group.HasField("instance") and group.instance.HasField("threshold_noise"):
            instances[key[2:]] = (group.instance.start_step, group.instance.threshold_noise)
    return instances


def test_with_secure_noise_restarts_keep_every_drawn_threshold_and_release_each_verdict_once(
        kafka_broker, joins, tmp_path):
    """Secure noise, killed twice between snapshots: every instance that runs on across a restart keeps the
    noisy threshold it drew (none is drawn again), and no verdict id is ever released with two values. A window
    of 2,000 hours (and k = 100, above its noise bound) puts the whole dataset in one instance per group
    (instances restart at multiples of w), so that every group stored at the first kill still runs the same
    instance at the second."""
    topic, verdicts = fresh_topic("secure-joins"), fresh_topic("secure-verdicts")
    store = tmp_path / "state.sqlite"
    chunks = _chunks(_messages(joins))
    produce(kafka_broker.address, topic, chunks[0])

    def arguments(output: str, stop: str) -> list[str]:
        return [*_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / output, store, stop=stop,
                                  seed=False), "--window-hours", "2000", "--k", "100"]

    job = _start(arguments("first", "never"))
    started = "".join(_reading(job))
    feeder = _feed(kafka_broker.address, topic, chunks[1:12])
    printed = started + _kill_when_read(job, 3000)
    feeder.join()
    assert job.returncode == -signal.SIGKILL, printed
    before = _group_instances(store)
    job = _start(arguments("second", "never"))
    started = "".join(_reading(job))
    feeder = _feed(kafka_broker.address, topic, chunks[12:])
    printed = started + _kill_when_read(job, 8000)
    feeder.join()
    assert job.returncode == -signal.SIGKILL, printed
    after = _group_instances(store)
    assert before and set(before) <= set(after), (len(before), len(after))
    assert all(after[group] == before[group] for group in before)
    again = _start(arguments("again", "end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    released = _by_id(consume_all(kafka_broker.address, verdicts))
    assert released and all(len(values) == 1 for values in released.values())
    assert sorted(json.dumps(json.loads(line), sort_keys=True) for line in _lines(tmp_path / "again", "verdicts")) == \
        sorted(next(iter(values)) for values in released.values())


def test_a_store_that_cannot_be_opened_fails_the_start_in_one_line(kafka_broker, tmp_path):
    topic = fresh_topic("no-store")
    produce(kafka_broker.address, topic, [b"{}"])
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    job = _start(["pipelines.kanon", "--input", f"kafka://{kafka_broker.address}/{topic}?stop=end", "--output",
                  str(tmp_path / "out"), "--state-store", f"sqlite:///{blocked}/state.sqlite"])
    printed, _ = job.communicate(timeout=120)
    assert job.returncode == 1, printed
    [error] = [line for line in printed.splitlines() if line.startswith("error:")]
    assert f"state store sqlite:///{blocked}/state.sqlite: cannot open" in error
    assert "Traceback" not in printed


def test_a_second_process_of_a_running_job_is_refused(kafka_broker, joins, tmp_path):
    topic, verdicts = fresh_topic("twice"), fresh_topic("twice-verdicts")
    store = tmp_path / "state.sqlite"
    produce(kafka_broker.address, topic, _messages(joins[:100]))
    first = _start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="never"))
    try:
        _reading(first)
        second = _start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "second", store,
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
    chunks = _chunks(_messages(joins))
    produce(kafka_broker.address, topic, chunks[0])
    arguments = _kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "first", store, stop="never")
    arguments[arguments.index(f"sqlite:///{store}")] = f"sqlite:///{store}?timeout=1"
    job = _start(arguments)
    started = "".join(_reading(job))
    feeder = _feed(kafka_broker.address, topic, chunks[1:])
    deadline = time.monotonic() + 60
    while _snapshots(store) == 0:
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
    again = _start(_kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / "again", store, stop="end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert _lines(tmp_path / "again", "verdicts") == reference_verdicts


def test_the_kanon_job_restarts_from_a_postgresql_store(kafka_broker, joins, reference_verdicts, tmp_path,
                                                        postgres_url):
    """The same kill between snapshots, with the job's state in PostgreSQL (a real server, ``tests.support.
    postgres``): the restart restores it and releases an uninterrupted run's verdicts."""
    topic, verdicts = fresh_topic("pg-joins"), fresh_topic("pg-verdicts")
    chunks = _chunks(_messages(joins))
    produce(kafka_broker.address, topic, chunks[0])

    def arguments(output: str, stop: str) -> list[str]:
        listed = _kanon_arguments(kafka_broker.address, topic, verdicts, tmp_path / output, tmp_path / "unused",
                                  stop=stop)
        listed[listed.index("--state-store") + 1] = postgres_url
        return listed

    job = _start(arguments("first", "never"))
    started = "".join(_reading(job))
    feeder = _feed(kafka_broker.address, topic, chunks[1:])
    printed = started + _kill_when_read(job, 5000)
    feeder.join()
    assert job.returncode == -signal.SIGKILL, printed
    again = _start(arguments("again", "end"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert "state: job kanon-crash restored" in rest
    assert _lines(tmp_path / "again", "verdicts") == reference_verdicts


@pytest.mark.parametrize("fault", ["end", "after:end"], ids=["in the middle of the end's snapshot",
                                                             "just after the end's snapshot"])
def test_the_ara_client_killed_at_its_end_and_restarted_sends_the_batch_reports(kafka_broker, tmp_path, fault):
    """The summary-report client (ARA) over a backlog, killed in the middle of its end's snapshot (the restart
    starts again from nothing stored) or just after it (the restart reads nothing new and sends its release log
    again): its report files are the batch job's, and each report id on the topic carries one report."""
    from pipelines import summary_client
    from synthetic.ara import generate_ara
    from tests.support.kafka import produce as produce_values

    data = tmp_path / "ara"
    generate_ara(data, devices=20, days=6, impressions_per_day=4, seed=2, fmt="jsonl", bad_fraction=0.0,
                 progress=False)
    assert summary_client.main(["ara", "--sources", str(data / "sources-*"), "--triggers", str(data / "triggers-*"),
                                "--output", str(tmp_path / "batch"), "--seed", "7"]) == 0
    topics, reports = (fresh_topic("ara-sources"), fresh_topic("ara-triggers")), fresh_topic("ara-reports")
    for topic, prefix in zip(topics, ("sources", "triggers"), strict=True):
        lines = [line.encode() for path in sorted(data.glob(f"{prefix}-*")) for line in path.read_text().splitlines()]
        produce_values(kafka_broker.address, topic, lines)

    def arguments(output: str) -> list[str]:
        return ["pipelines.summary_client", "ara", "--sources", f"kafka://{kafka_broker.address}/{topics[0]}?stop=end",
                "--triggers", f"kafka://{kafka_broker.address}/{topics[1]}?stop=end", "--output",
                str(tmp_path / output), "--seed", "7", "--allowed-lateness-seconds", "3600", "--output-topic",
                f"kafka://{kafka_broker.address}/{reports}", "--state-store", f"sqlite:///{tmp_path}/state.sqlite",
                "--job-id", "ara-crash"]

    job = _start(arguments("first"), fault)
    printed, _ = job.communicate(timeout=300)
    assert job.returncode == -signal.SIGKILL, printed
    again = _start(arguments("again"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest

    def report_records(output: Path) -> list:
        return sorted((r["shared_info"], r["payload"]) for path in output.glob("reports-*.avro")
                      for r in read_records(str(path)))

    expected = report_records(tmp_path / "batch")
    assert report_records(tmp_path / "again") == expected != []
    ids = defaultdict(set)
    for message in consume_all(kafka_broker.address, reports):
        ids[dict(message.headers())["id"].decode()].add(message.value())
    assert len(ids) == len(expected) and all(len(values) == 1 for values in ids.values())
