"""The durable state stores (``transforms.core.durable``), SQLite and PostgreSQL alike (the PostgreSQL tests run a
real server, ``tests.support.postgres``): a snapshot is written whole or not at all, keyed rows are upserted and
deleted, the release log keeps its order, a job is claimed by one process at a time, a drained job or another
pipeline's id is refused, and the source's dead letters are kept up to where a job resumes; every value is sealed
(nothing readable in the file, nothing opens under another key or in another place), a job continued under another
key is refused, and the files are private. Deterministic: no false-failure probability to state."""
from __future__ import annotations

import multiprocessing
import stat

import pytest

from schemas.proto import state_pb2
from tests.support.keys import make_key_file, run_key
from transforms.core.durable.positions import source_position
from transforms.core.durable.step import DurableStep, decode_releases, encode_releases
from transforms.core.durable.store import JobRefused, StepWrite, StoreUnavailable
from transforms.core.durable.stores import open_store

KEY_ID = "0123456789abcdef"  # the noise key id a job is claimed under


@pytest.fixture(params=["sqlite", "postgresql"])
def store_uri(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/state.sqlite"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store(store_uri):
    """The store at ``store_uri``, opened under the run's key and closed after the test."""
    opened = open_store(store_uri, run_key())
    yield opened
    opened.close()


@pytest.fixture
def claimed(store):
    """Job ``job`` claimed in ``store`` as a k-anonymity job."""
    return store.claim("job", "kanon", KEY_ID)


def _snapshot(final_through: int) -> state_pb2.StepSnapshot:
    shard = state_pb2.KAnonShardState(version=3, final_through=final_through)
    return state_pb2.StepSnapshot(version=3, shard=shard.SerializeToString())


@pytest.mark.usefixtures("claimed")
def test_snapshots_upsert_and_delete_keys_and_append_to_the_release_log(store):
    first = store.save("job", "verdicts", StepWrite(_snapshot(1), {"k/a": b"1", "k/b": b"2"}, frozenset(),
                                                    (b"r1", b"r2")))
    second = store.save("job", "verdicts", StepWrite(_snapshot(2), {"k/b": b"3", "p/x": b"4"}, frozenset({"k/a"}),
                                                     (b"r3",)))
    assert (first, second) == (0, 2)
    assert store.save("job", "verdicts", StepWrite(_snapshot(2))) is None  # nothing released
    loaded = store.load("job", "verdicts")
    assert state_pb2.KAnonShardState.FromString(loaded.snapshot.shard).final_through == 2
    assert loaded.keys == {"k/b": b"3", "p/x": b"4"}
    assert loaded.releases == [(0, b"r1"), (1, b"r2"), (2, b"r3")]
    assert store.load("job", "other").snapshot is None
    assert set(store.snapshots("job")) == {"verdicts"}


@pytest.mark.usefixtures("claimed")
def test_a_snapshot_that_fails_half_way_leaves_the_previous_one_whole(store):
    store.save("job", "verdicts", StepWrite(_snapshot(1), {"k/a": b"1"}, frozenset(), (b"r1",)))
    broken = StepWrite(_snapshot(2), {"k/a": b"2", "k/b": object()}, frozenset(), (b"r2",))  # type: ignore[dict-item]
    with pytest.raises(StoreUnavailable, match="cannot write the state of job/verdicts"):
        store.save("job", "verdicts", broken)
    loaded = store.load("job", "verdicts")
    assert state_pb2.KAnonShardState.FromString(loaded.snapshot.shard).final_through == 1
    assert loaded.keys == {"k/a": b"1"} and loaded.releases == [(0, b"r1")]


@pytest.mark.usefixtures("claimed")
def test_a_snapshot_drops_the_release_log_entries_acknowledged_with_it(store):
    """The entries every sink has written go in the snapshot's own transaction; later entries stay."""
    store.save("job", "verdicts", StepWrite(_snapshot(1), releases=(b"r0", b"r1", b"r2")))
    store.save("job", "verdicts", StepWrite(_snapshot(2), releases=(b"r3",), acknowledged_through=1))
    assert store.load("job", "verdicts").releases == [(2, b"r2"), (3, b"r3")]
    store.save("job", "verdicts", StepWrite(_snapshot(3), acknowledged_through=3))
    assert store.load("job", "verdicts").releases == []


def _claim_elsewhere(uri: str, answer) -> None:
    store = open_store(uri, run_key())
    try:
        store.claim("job", "kanon", KEY_ID)
        answer.put("claimed")
    except JobRefused as error:
        answer.put(str(error))
    finally:
        store.close()


def test_one_process_claims_a_job_at_a_time(store_uri):
    store = open_store(store_uri, run_key())
    answer: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()
    try:
        claim = store.claim("job", "kanon", KEY_ID)
        other = multiprocessing.get_context("spawn").Process(target=_claim_elsewhere, args=(store_uri, answer))
        other.start()
        other.join(60)
        assert "is running in another process" in answer.get(timeout=5)
        claim.release()
        other = multiprocessing.get_context("spawn").Process(target=_claim_elsewhere, args=(store_uri, answer))
        other.start()
        other.join(60)
        assert answer.get(timeout=5) == "claimed"
    finally:
        store.close()


def test_a_drained_job_and_another_pipelines_id_are_refused(store):
    store.claim("job", "kanon", KEY_ID).release()
    with pytest.raises(JobRefused, match="is a kanon job, not measurement"):
        store.claim("job", "measurement", KEY_ID)
    store.mark_drained("job")
    with pytest.raises(JobRefused, match="was drained"):
        store.claim("job", "kanon", KEY_ID)


def test_the_sources_dead_letters_are_kept_up_to_where_the_job_resumes(store):
    store.log_dead_letters("job", "joins", [(0, 3, b"a"), (0, 9, b"b"), (1, 2, b"c")])
    assert store.resumed_dead_letters("job", "joins", {0: 5}) == [b"a"]  # 0@9 is read again, 1 from its start
    assert store.resumed_dead_letters("job", "joins", {0: 20, 1: 20}) == [b"a"]  # the others were forgotten


def test_a_store_that_cannot_be_opened_says_so_in_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreUnavailable, match="cannot open"):
        open_store(f"sqlite:///{blocker}/state.sqlite", run_key())
    with pytest.raises(StoreUnavailable, match="sqlite:///relative/path"):
        open_store("sqlite:/x", run_key())


def test_a_step_restores_its_shard_with_its_keys_and_writes_only_what_changed(tmp_path):
    step = DurableStep(f"sqlite:///{tmp_path}/state.sqlite", "job", "verdicts", run_key()).open()
    shard = state_pb2.KAnonShardState(version=3, final_through=7)
    shard.groups["g1"] = b"one"
    shard.groups["g2"] = b"two"
    shard.positions.inputs.add(input="joins").partitions.add(partition=0, next_offset=5, read=5)
    assert step.save(shard, "groups", {"g1", "g2"}, [b"pending-1", b"pending-2"], ["verdict"], 1_000).at is None
    del shard.groups["g1"]
    step.save(shard, "groups", {"g1"}, [b"pending-2"], [], 2_000)
    restored = step.restore(state_pb2.KAnonShardState, "groups", 3_000)
    assert restored is not None
    assert dict(restored.shard.groups) == {"g2": b"two"} and restored.shard.final_through == 7
    assert restored.pending == [b"pending-2"] and restored.releases == ["verdict"]
    assert restored.shard.positions.inputs[0].partitions[0].next_offset == 5


def test_released_outputs_round_trip_with_their_tags():
    import apache_beam as beam

    tagged = beam.pvalue.TaggedOutput("dead_letters", ("raw", "late", "kanon"))
    first, back = decode_releases(encode_releases(["x", tagged]))
    assert first == "x" and (back.tag, back.value) == ("dead_letters", ("raw", "late", "kanon"))
    assert source_position("joins", 0, {}) == state_pb2.SourcePosition(input="joins").SerializeToString()


def test_a_job_continued_under_another_noise_or_state_key_is_refused(store_uri, tmp_path):
    store = open_store(store_uri, run_key())
    try:
        claim = store.claim("job", "kanon", KEY_ID)
        nonce = claim.noise_nonce
        claim.release()
        with pytest.raises(JobRefused, match=f"started under noise key {KEY_ID}, this run has fedcba9876543210"):
            store.claim("job", "kanon", "fedcba9876543210")
        again = store.claim("job", "kanon", KEY_ID)
        assert again.noise_nonce == nonce and len(nonce) == 16  # the job's noise is derived as before
        again.release()
    finally:
        store.close()
    other = open_store(store_uri, make_key_file(str(tmp_path / "other.key")))
    try:
        with pytest.raises(JobRefused, match="started under state key"):
            other.claim("job", "kanon", KEY_ID)
    finally:
        other.close()


def test_values_are_sealed_and_open_only_under_their_key_in_their_place(tmp_path):
    """Nothing a step writes is readable in the file (keys, values, releases, dead letters, positions); the rows
    open under the key they were sealed with, not another, and a value moved to another row does not open."""
    path = tmp_path / "state.sqlite"
    store = open_store(f"sqlite:///{path}", run_key())
    try:
        store.claim("job", "kanon", KEY_ID).release()
        store.save("job", "verdicts", StepWrite(_snapshot(123456789), {"k/user-4f1c2a": b"threshold-noise-0.8125"},
                                                frozenset(), (b"released-verdict",)))
        store.log_dead_letters("job", "joins", [(0, 7, b"raw-record-with-user-9a8b")])
    finally:
        store.close()
    at_rest = b"".join(p.read_bytes() for p in tmp_path.glob("state.sqlite*") if not p.name.endswith(".lock"))
    for clear in (b"user-4f1c2a", b"threshold-noise", b"released-verdict", b"raw-record", b"k/"):
        assert clear not in at_rest, clear
    reopened = open_store(f"sqlite:///{path}", run_key())
    try:
        assert reopened.load("job", "verdicts").keys == {"k/user-4f1c2a": b"threshold-noise-0.8125"}
        assert reopened.resumed_dead_letters("job", "joins", {0: 8}) == [b"raw-record-with-user-9a8b"]
    finally:
        reopened.close()
    stranger = open_store(f"sqlite:///{path}", make_key_file(str(tmp_path / "stranger.key")))
    try:
        with pytest.raises(StoreUnavailable, match="does not open with state key"):
            stranger.load("job", "verdicts")
    finally:
        stranger.close()
    import sqlite3

    with sqlite3.connect(path) as connection:  # a value copied under another step's name
        connection.execute("UPDATE steps SET step = 'devices'")
    moved = open_store(f"sqlite:///{path}", run_key())
    try:
        with pytest.raises(StoreUnavailable, match="does not open"):
            moved.load("job", "devices")
    finally:
        moved.close()


def test_the_store_its_log_and_its_locks_are_private(tmp_path):
    path = tmp_path / "made-here" / "state.sqlite"
    store = open_store(f"sqlite:///{path}", run_key())
    try:
        store.claim("job", "kanon", KEY_ID).release()
        store.save("job", "verdicts", StepWrite(_snapshot(1), {"k/a": b"1"}))
        files = list(path.parent.iterdir())
        assert {p.name for p in files} >= {"state.sqlite", "state.sqlite-wal"} and any(p.suffix == ".lock" for p in files)
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), {p.name: oct(p.stat().st_mode) for p in files}
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        store.close()


def test_a_store_an_earlier_version_wrote_in_the_clear_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE jobs (job_id TEXT PRIMARY KEY, pipeline TEXT NOT NULL, status TEXT NOT NULL)")
        connection.execute("INSERT INTO jobs VALUES ('job', 'kanon', 'running')")
    with pytest.raises(StoreUnavailable, match="earlier version, which kept the jobs' state in the clear"):
        open_store(f"sqlite:///{path}", run_key())
