"""Per-key state as explicit, versioned records (``schemas/proto/state.proto``), not pickled Python objects.

What a runner checkpoints for a streaming job must be readable by the next version of the job (an update in
place, a restart after a crash): a pickle is opaque and breaks with any change of a class. Each kind of state
has a ``StateCodec``: a pair of functions between the Python object the DoFn works on and its protobuf record,
which carries ``STATE_VERSION``. Decoding accepts every version up to the current one (fields are only added to
the records, and the functions fill what an older writer left out) and refuses a newer one with a clear error.
The DoFns keep the encoded bytes in their state (``BytesCoder``): Beam's state cache sizes bytes for free.

``device_state.device_record_codec`` is the codec of a ``DeviceRecord`` (its cut, and the events a record of an
older layout buffered) around a subject's codec of its replay state.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

from google.protobuf.message import Message

STATE_VERSION = 5  # the layout of schemas/proto/state.proto this code writes (its version history is there)


class StateVersionError(ValueError):
    """State written by a newer version of the job than this one."""


M = TypeVar("M", bound=Message)  # the record of one kind of state


class _Versioned(Protocol):
    version: int


@dataclass(frozen=True)
class StateCodec(Generic[M]):
    """One kind of per-key state: ``to_message(value)`` fills a fresh ``message_type`` record, ``from_message``
    rebuilds the value from a record of any version up to ``STATE_VERSION``. ``appended(value)``, when given,
    is the serialization of the record's fields numbered after any that ``to_message`` sets, put together from
    bytes kept from earlier encodes (``schemas.row_messages.length_delimited``), for a state encoded again and
    again while most of it stays the same."""

    message_type: type[M]
    to_message: Callable[[Any, M], None]
    from_message: Callable[[M], Any]
    appended: Callable[[Any], bytes] | None = None

    def encode(self, value: Any) -> bytes:
        message = self.message_type(version=STATE_VERSION)
        self.to_message(value, message)
        if self.appended is None:
            return message.SerializeToString()
        return message.SerializeToString() + self.appended(value)

    def decode(self, data: bytes) -> Any:
        message = self.message_type.FromString(data)
        # every record of state.proto has the version as its field 1; a bound cannot say "a Message with a field"
        version = cast(_Versioned, message).version
        if version > STATE_VERSION:
            raise StateVersionError(
                f"{self.message_type.DESCRIPTOR.name} state of version {version} was written by a newer job "
                f"(this one reads versions up to {STATE_VERSION}): run the newer version, or start from empty state"
            )
        return self.from_message(message)

    def read(self, state, new: Callable[[], Any]) -> Any:
        """The value a ``BytesCoder`` state holds, or ``new()`` when it holds nothing."""
        raw = state.read()
        return new() if raw is None else self.decode(raw)

    def write(self, state, value: Any) -> None:
        state.write(self.encode(value))


def serialized_afresh(record: M) -> tuple[bytes, M]:
    """A record kept and changed across firings, serialized for the step's state, and a copy of it parsed from
    those bytes, which the step keeps in its place.

    upb, protobuf's C runtime, allocates every value set on a message in the message's arena and frees none of
    them before the message itself: a shard's record whose map entries are replaced at every firing for the life
    of a job grows without bound while its serialization stays the same size (measured: 200,000 replacements of
    100 entries of 500 bytes left 101 MB behind a 49 KB message; the streaming k-anonymity job grew 50 MB a
    minute at 15,000 joins/s, benchmarks/streaming_soak.py). The copy starts a new arena."""
    data = record.SerializeToString()
    return data, type(record).FromString(data)


class ArenaBound:
    """Keeps upb's arena under a record that stays in this process across firings and is changed in place, without
    serializing it at every firing: ``afresh(record, set_bytes)``, after a firing that set about ``set_bytes`` on
    it, returns the record parsed afresh (``serialized_afresh``) once what was set since its last copy exceeds the
    copy's own size (and ``MIN_BYTES``). The arena then stays within about twice the record, and the serialization
    is paid once per record's worth of changes instead of once per firing: a durable local job's stateful step,
    whose state is kept in its store and in this process (``transforms.core.durable.step``), would otherwise
    serialize a shard of 20,000 devices (50 MB) every second."""

    MIN_BYTES = 1 << 20

    def __init__(self) -> None:
        self._size = 0  # the record's size at its last copy
        self._set = 0  # bytes set on it since
        self._cleared = False  # whether a durable step has cleared the copy its restore left in Beam state

    def kept(self, record: M, shard_state, written: int | None) -> M:
        """The record a step keeps after a firing, and its Beam state: a durable step (``written``: the bytes its
        snapshot set on the record) keeps it here and in the store only, clearing (at its first firing) the copy a
        restore left in Beam state; any other writes it to Beam state and keeps a copy in a new arena
        (``serialized_afresh``)."""
        if written is not None:
            if not self._cleared:
                shard_state.clear()
                self._cleared = True
            return self.afresh(record, written)
        data, copy = serialized_afresh(record)
        shard_state.write(data)
        return copy

    def afresh(self, record: M, set_bytes: int) -> M:
        self._set += set_bytes
        if self._set <= max(self._size, self.MIN_BYTES):
            return record
        data, record = serialized_afresh(record)
        self._size, self._set = len(data), 0
        return record
