"""The durable state stores (``transforms.core.durable``), SQLite and PostgreSQL alike (the PostgreSQL tests run a
real server, ``tests.support.postgres``): a snapshot is written whole or not at all, keyed rows are upserted and
deleted, the release log keeps its order, a job is claimed by one process at a time, a drained job or another
pipeline's id is refused, and the source's dead letters are kept up to where a job resumes. Deterministic: no
false-failure probability to state."""
from __future__ import annotations

import multiprocessing

import pytest

from schemas.proto import state_pb2
from tests.support.keys import run_key
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


def _snapshot(final_through: int) -> state_pb2.StepSnapshot:
    shard = state_pb2.KAnonShardState(version=3, final_through=final_through)
    return state_pb2.StepSnapshot(version=3, shard=shard.SerializeToString())


def test_snapshots_upsert_and_delete_keys_and_append_to_the_release_log(store_uri):
    store = open_store(store_uri, run_key())
    try:
        store.claim("job", "kanon", KEY_ID)
        store.save("job", "verdicts", StepWrite(_snapshot(1), {"k/a": b"1", "k/b": b"2"}, frozenset(), (b"r1", b"r2")))
        store.save("job", "verdicts", StepWrite(_snapshot(2), {"k/b": b"3", "p/x": b"4"}, frozenset({"k/a"}), (b"r3",)))
        loaded = store.load("job", "verdicts")
        assert state_pb2.KAnonShardState.FromString(loaded.snapshot.shard).final_through == 2
        assert loaded.keys == {"k/b": b"3", "p/x": b"4"}
        assert loaded.releases == [b"r1", b"r2", b"r3"]
        assert store.load("job", "other").snapshot is None
        assert set(store.snapshots("job")) == {"verdicts"}
    finally:
        store.close()


def test_a_snapshot_that_fails_half_way_leaves_the_previous_one_whole(store_uri):
    store = open_store(store_uri, run_key())
    try:
        store.claim("job", "kanon", KEY_ID)
        store.save("job", "verdicts", StepWrite(_snapshot(1), {"k/a": b"1"}, frozenset(), (b"r1",)))
        broken = StepWrite(_snapshot(2), {"k/a": b"2", "k/b": object()}, frozenset(), (b"r2",))  # type: ignore[dict-item]
        with pytest.raises(StoreUnavailable, match="cannot write the state of job/verdicts"):
            store.save("job", "verdicts", broken)
        loaded = store.load("job", "verdicts")
        assert state_pb2.KAnonShardState.FromString(loaded.snapshot.shard).final_through == 1
        assert loaded.keys == {"k/a": b"1"} and loaded.releases == [b"r1"]
    finally:
        store.close()


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


def test_a_drained_job_and_another_pipelines_id_are_refused(store_uri):
    store = open_store(store_uri, run_key())
    try:
        store.claim("job", "kanon", KEY_ID).release()
        with pytest.raises(JobRefused, match="is a kanon job, not measurement"):
            store.claim("job", "measurement", KEY_ID)
        store.mark_drained("job")
        with pytest.raises(JobRefused, match="was drained"):
            store.claim("job", "kanon", KEY_ID)
    finally:
        store.close()


def test_the_sources_dead_letters_are_kept_up_to_where_the_job_resumes(store_uri):
    store = open_store(store_uri, run_key())
    try:
        store.log_dead_letters("job", "joins", [(0, 3, b"a"), (0, 9, b"b"), (1, 2, b"c")])
        assert store.resumed_dead_letters("job", "joins", {0: 5}) == [b"a"]  # 0@9 is read again, 1 from its start
        assert store.resumed_dead_letters("job", "joins", {0: 20, 1: 20}) == [b"a"]  # the others were forgotten
    finally:
        store.close()


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
    step.save(shard, "groups", {"g1", "g2"}, [b"pending-1", b"pending-2"], ["verdict"])
    del shard.groups["g1"]
    step.save(shard, "groups", {"g1"}, [b"pending-2"], [])
    restored = step.restore(state_pb2.KAnonShardState, "groups")
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
