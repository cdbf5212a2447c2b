"""Per-key state as explicit versioned records (``transforms.core.state``, ``schemas/proto/state.proto``): every
kind of state that a streaming stage checkpoints restores exactly (the rest of the replay gives the same outputs
from the restored state as from the original), the records committed from earlier versions still decode, and a
newer version is refused. Deterministic checks on seeded data: no false-failure probability to state."""
from __future__ import annotations

import pytest

from schemas.proto import state_pb2
from tests.support.state_samples import FIXTURES, SAMPLES, write_fixtures
from transforms.core.state import STATE_VERSION, ArenaBound, StateVersionError, serialized_afresh


@pytest.mark.parametrize("name", SAMPLES)
def test_a_restored_state_continues_exactly_as_the_original(name):
    sample = SAMPLES[name]
    original = sample.before()
    data = sample.codec.encode(original)
    restored = sample.codec.decode(data)
    assert sample.codec.encode(restored) == data
    outputs = sample.after(original)
    assert outputs, "the sample must have a second half to replay"
    assert sample.after(restored) == outputs


@pytest.mark.parametrize("name", SAMPLES)
def test_a_state_encoded_again_after_its_replay_went_on_encodes_as_one_never_encoded(name):
    """A codec that keeps the encodings of a state's parts (``EncodedRows``) encodes what changed since, not the
    bytes of before: the same replay on a record never encoded gives the same bytes."""
    sample = SAMPLES[name]
    encoded_before, never_encoded = sample.before(), sample.before()
    first = sample.codec.encode(encoded_before)
    assert sample.after(encoded_before) == sample.after(never_encoded)
    again = sample.codec.encode(encoded_before)
    assert again == sample.codec.encode(never_encoded)
    assert again != first, "the sample's second half must change its state"


@pytest.mark.parametrize("name", SAMPLES)
def test_the_current_code_writes_what_the_committed_fixture_holds(name):
    """The current layout's fixture (``python -m tests.support.state_samples`` writes it) is what the code writes
    today: a change of layout must come with a new version and new fixtures."""
    sample = SAMPLES[name]
    committed = (FIXTURES / f"v{STATE_VERSION}" / f"{name}.binpb").read_bytes()
    assert sample.codec.encode(sample.before()) == committed


def test_every_committed_version_decodes_and_continues():
    """Records written by every earlier version of the job decode with this one and replay the same."""
    versions = sorted(FIXTURES.glob("v*"))
    assert versions and all(int(path.name[1:]) <= STATE_VERSION for path in versions)
    for directory in versions:
        for name, sample in SAMPLES.items():
            path = directory / f"{name}.binpb"
            if not path.exists():  # a kind of state that a later version added
                continue
            restored = sample.codec.decode(path.read_bytes())
            assert sample.after(restored) == sample.after(sample.before()), (directory.name, name)


def test_a_newer_version_is_refused_with_a_clear_error():
    sample = SAMPLES["kanon_group"]
    message = state_pb2.KAnonGroupState.FromString(sample.codec.encode(sample.before()))
    message.version = STATE_VERSION + 1
    with pytest.raises(StateVersionError, match="newer job"):
        sample.codec.decode(message.SerializeToString())


def test_the_noises_and_budgets_already_drawn_and_spent_are_in_the_records():
    """What must never be redrawn or reset is in the record itself (docs/operations.md, "Privacy-relevant state")."""
    kanon = state_pb2.KAnonGroupState.FromString(SAMPLES["kanon_group"].codec.encode(SAMPLES["kanon_group"].before()))
    assert kanon.instance.HasField("threshold_noise") and kanon.instance.has_step_noises
    ara = state_pb2.DeviceRecordState.FromString(SAMPLES["ara_device"].codec.encode(SAMPLES["ara_device"].before()))
    assert any(entry.budget.contributions for entry in ara.ara_device.sources)
    event_level = state_pb2.DeviceRecordState.FromString(
        SAMPLES["event_level_device"].codec.encode(SAMPLES["event_level_device"].before()))
    assert any(entry.randomized for entry in event_level.event_level_device.client_sources)
    budget = state_pb2.DeviceRecordState.FromString(SAMPLES["budget_device"].codec.encode(SAMPLES["budget_device"].before()))
    assert any(budget.budget_device.filter_columns.consumed_units)
    assert budget.buffered and budget.cut
    queries = state_pb2.MeasurementQueriesState.FromString(
        SAMPLES["measurement_queries"].codec.encode(SAMPLES["measurement_queries"].before()))
    assert any(charge.consumed_units for charge in queries.central) and queries.cutters[0].pending


def test_fixtures_are_written_where_the_tests_read_them(tmp_path):
    written = write_fixtures(tmp_path)
    assert sorted(path.name for path in written) == sorted(f"{name}.binpb" for name in SAMPLES)


def test_a_record_serialized_afresh_is_an_equal_copy_in_a_new_arena():
    record = state_pb2.KAnonShardState(version=STATE_VERSION, final_through=7)
    for step in range(1000):  # a kept record whose entries are replaced at every firing
        record.groups[f"g{step % 10}"] = bytes([step % 256]) * 100
    data, copy = serialized_afresh(record)
    assert copy is not record and copy == record and data == record.SerializeToString()
    copy.groups["g0"] = b"changed"  # the copy is the step's record from now on: the old one is untouched
    assert record.groups["g0"] != b"changed"


def test_an_arena_bound_copies_a_kept_record_once_a_records_worth_was_set_on_it():
    """``ArenaBound``: the record is kept as it is until what was set on it since its last copy exceeds the copy's
    size (and the 1 MiB floor), then parsed afresh, equal, and counted from zero again."""
    record = state_pb2.KAnonShardState(version=STATE_VERSION)
    for n in range(30):
        record.groups[f"g{n}"] = bytes(100_000)  # a 3 MB record
    bound = ArenaBound()
    assert bound.afresh(record, ArenaBound.MIN_BYTES) is record  # at the floor: kept
    first = bound.afresh(record, 1)  # over the floor, before any copy was measured: copied
    assert first is not record and first == record
    size = first.ByteSize()
    assert bound.afresh(first, size - ArenaBound.MIN_BYTES) is first  # under the copy's own size: kept
    assert bound.afresh(first, ArenaBound.MIN_BYTES) is first  # now exactly its size: kept
    second = bound.afresh(first, 1)
    assert second is not first and second == record
