"""A device's record in the streaming device replays (``transforms.core.device_stream``) and its explicit codec
(``DeviceRecordState``, around each subject's codec of its replay state)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf.message import Message

from schemas.proto import state_pb2
from schemas.row_messages import ROW_TYPES, EncodedRows, length_delimited, message_of, row_of
from transforms.core.state import StateCodec


class DeviceRecord:
    """A device's record in its shard's state: the state of its replay (``state``: the device's filters, client
    or event-level device), how far it has replayed (``cut``) and events not yet replayed (``items``: only in
    a record restored from an older layout, which buffered events per device); the encodings of the rows its
    state holds (``rows``), for its codec."""

    def __init__(self, state) -> None:
        self.items: list[tuple[int, Any]] = []
        self.cut = 0
        self.state = state
        self.rows = EncodedRows()

    def advance(self, until_micros: int, arriving: list) -> list:
        """Move the cut to ``until_micros`` (never back) and take the events now before it, in no set order:
        ``arriving`` (all before it) and the buffered ones before it."""
        self.cut = max(until_micros, self.cut)
        if not self.items:
            return arriving
        due = [event for time, event in self.items if time < self.cut]
        self.items = [(time, event) for time, event in self.items if time >= self.cut]
        return arriving + due


# --------------------------------------------------------------------------------------------------------------
# Buffered events: each row in the BufferedEvent field of its type.

_EVENT_FIELDS = {
    field.message_type.name: field.name for field in state_pb2.BufferedEvent.DESCRIPTOR.oneofs_by_name["event"].fields
}


def buffer_to_messages(items: list, target) -> None:
    """(time, event row) pairs into the repeated ``BufferedEvent`` field ``target``."""
    for time_micros, row in items:
        buffered = target.add(time_micros=time_micros)
        message_of(row, getattr(buffered, _EVENT_FIELDS[type(row).__name__]))


def buffer_of_messages(messages) -> list:
    """The (time, event row) pairs of repeated ``BufferedEvent`` records."""
    items = []
    for buffered in messages:
        name = buffered.WhichOneof("event")
        event = getattr(buffered, name)
        items.append((buffered.time_micros, row_of(ROW_TYPES[event.DESCRIPTOR.name], event)))
    return items


R = TypeVar("R", bound=Message)  # the record of a subject's replay state, a field of DeviceRecordState


def filled(message_type: type[R], fill: Callable[[Any, R, EncodedRows], None]) -> Callable[[Any, EncodedRows], bytes]:
    """A replay state's serialization by ``fill(state, message, rows)``: filling a fresh ``message_type``."""

    def serialized(state: Any, rows: EncodedRows) -> bytes:
        message = message_type()
        fill(state, message, rows)
        return message.SerializeToString()

    return serialized


def device_record_codec(
    replay_field: str,
    replay_bytes: Callable[[Any, EncodedRows], bytes],
    replay_from: Callable[[Any], Any],
    record_type: type[DeviceRecord] = DeviceRecord,
) -> StateCodec[state_pb2.DeviceRecordState]:
    """The codec of a ``record_type`` whose replay state is serialized by ``replay_bytes`` (its rows through the
    record's ``EncodedRows``; ``filled`` makes one of a function that fills the message) as the ``replay_field``
    of ``DeviceRecordState``, and read back by ``replay_from`` from that field's message. The replay state is
    the record's last field (the ``replay`` oneof), so it is appended to the serialization of the others."""
    number = state_pb2.DeviceRecordState.DESCRIPTOR.fields_by_name[replay_field].number

    def to_message(record: DeviceRecord, message: state_pb2.DeviceRecordState) -> None:
        message.cut = record.cut
        buffer_to_messages(record.items, message.buffered)

    def appended(record: DeviceRecord) -> bytes:
        replay = length_delimited(number, replay_bytes(record.state, record.rows))
        record.rows.encoded()
        return replay

    def from_message(message: state_pb2.DeviceRecordState) -> DeviceRecord:
        record = record_type(replay_from(getattr(message, replay_field)))
        record.cut = message.cut
        record.items = buffer_of_messages(message.buffered)
        return record

    return StateCodec(state_pb2.DeviceRecordState, to_message, from_message, appended)
