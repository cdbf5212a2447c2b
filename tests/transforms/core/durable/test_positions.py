"""Where a step's state stands in its topics (``transforms.core.durable.positions``): elements fold in their
numbered order whatever order they arrive in, a copy changes nothing, and a restart keeps the offsets and counts
but not what waited beyond a gap. Deterministic: no false-failure probability to state."""
from __future__ import annotations

from schemas.proto import state_pb2
from transforms.core.durable.positions import fold_positions, restarted, resume_places, source_position


def _position(sequence: int, places: dict, name: str = "joins") -> state_pb2.SourcePosition:
    return state_pb2.SourcePosition.FromString(source_position(name, sequence, places))


def test_elements_fold_in_order_and_the_last_one_says_where_each_partition_stands():
    positions = state_pb2.InputPositions()
    fold_positions(positions, [_position(0, {0: (10, 10, 1), 1: (4, 4, 0)}), _position(1, {0: (25, 25, 2)})])
    assert resume_places(positions) == {"joins": {0: (25, 25, 2), 1: (4, 4, 0)}}
    assert positions.inputs[0].next_sequence == 2 and not positions.inputs[0].ahead


def test_an_element_beyond_a_gap_waits_until_the_gap_closes():
    positions = state_pb2.InputPositions()
    fold_positions(positions, [_position(0, {0: (10, 10, 0)}), _position(2, {0: (30, 30, 0)})])
    assert resume_places(positions) == {"joins": {0: (10, 10, 0)}}  # element 1 has not come: 2's records count later
    fold_positions(positions, [_position(1, {0: (20, 20, 0)})])
    assert resume_places(positions) == {"joins": {0: (30, 30, 0)}}
    assert positions.inputs[0].next_sequence == 3 and not positions.inputs[0].ahead


def test_a_copy_of_an_element_changes_nothing_and_inputs_are_kept_apart():
    positions = state_pb2.InputPositions()
    first = _position(0, {0: (10, 10, 0)})
    fold_positions(positions, [first, _position(0, {0: (5, 5, 0)}, "conversions"), first])
    assert resume_places(positions) == {"joins": {0: (10, 10, 0)}, "conversions": {0: (5, 5, 0)}}
    fold_positions(positions, [_position(2, {0: (40, 40, 0)}), _position(2, {0: (40, 40, 0)})])
    assert len(positions.inputs[0].ahead) == 1


def test_a_restart_keeps_the_offsets_and_counts_and_numbers_elements_from_zero_again():
    positions = state_pb2.InputPositions()
    fold_positions(positions, [_position(0, {0: (10, 10, 3)}), _position(5, {0: (90, 90, 3)})])
    fresh = restarted(positions)
    assert resume_places(fresh) == {"joins": {0: (10, 10, 3)}}
    assert fresh.inputs[0].next_sequence == 0 and not fresh.inputs[0].ahead
    fold_positions(fresh, [_position(0, {0: (12, 12, 3)})])
    assert resume_places(fresh) == {"joins": {0: (12, 12, 3)}}
