"""A durable step's shard record in Beam state (``transforms.core.durable.step.shard_bytes``): a durable step keeps
its record in this process and in the store, so Beam state holds one only between a restore and the first firing;
a shard written before whose record this process does not hold is refused, never read as empty."""
from __future__ import annotations

import pytest

from transforms.core.durable.step import StateNotHere, shard_bytes


class _Value:
    """A value state (``ReadModifyWriteStateSpec``) as ``shard_bytes`` reads it."""

    def __init__(self, value=None) -> None:
        self.value = value

    def read(self):
        return self.value


def test_a_restored_record_is_read_from_beam_state():
    assert shard_bytes(_Value(b"restored"), _Value(), durable=True) == b"restored"
    assert shard_bytes(_Value(b"restored"), _Value(b"token"), durable=True) == b"restored"


def test_a_shard_never_written_reads_as_nothing():
    assert shard_bytes(_Value(), _Value(), durable=True) is None
    assert shard_bytes(_Value(), _Value(), durable=False) is None


def test_a_durable_shard_written_elsewhere_is_refused_not_read_empty():
    with pytest.raises(StateNotHere, match="store only"):
        shard_bytes(_Value(), _Value(b"token"), durable=True)
    assert shard_bytes(_Value(), _Value(b"token"), durable=False) is None  # not durable: Beam state is the state
