"""Per-device Beam plumbing that the on-device pipelines share (budgeting, summary-report clients, event-level
reports): device shards for the batch path, and buffered state with event-time flush timers for streaming.

Batch: each file's rows are folded per device shard (CRC-32 of the device id) into deflated pickled chunks, so
Beam moves one element per shard and file instead of one per event; a shard's devices are then replayed whole.

Streaming:
Each stateful stage buffers (timestamp, item) pairs and has one flush timer, set a millisecond after its
earliest buffered item (runners keep timers to the millisecond). When it fires, every item before the
timer's time has arrived (upstream stages hold the watermark while they have pending timers), so those items
are handled, in the batch path's order, and each output is stamped with the flush time of the item that
produced it: the same time whichever callback produced it, so downstream order never depends on it. A
timer at the end of the global window handles what is left and emits end-of-input outputs; runners may
fire it before earlier flush timers, which then find nothing left to do.

Each stage keeps everything of a key in one ReadModifyWrite record, read and written once per element and
per timer: Beam's SDK state cache measures every value it stores by walking the loaded modules (about a
millisecond a write here), so the number of state writes, not their size, sets the speed.
"""
from __future__ import annotations

import json
import pickle
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow, TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue
from google.protobuf.message import Message

from schemas.codecs import row_to_dict
from schemas.proto import state_pb2
from schemas.row_messages import ROW_TYPES, message_of, row_of
from schemas.rows import DeadLetter
from schemas.time_units import MICROS_PER_MILLI
from transforms.core.io import DEAD_LETTERS
from transforms.core.state import StateCodec

DEFAULT_SHARDS = 64


def device_shard(device_id: str, shards: int) -> int:
    """A device's shard: CRC-32 of its id (stable across processes, unlike ``hash``)."""
    return zlib.crc32(device_id.encode("utf-8")) % shards


def pack(value) -> bytes:
    """Pickled and deflated (level 1): the sequential ids compress about four to one, so the runner's copies of
    the shuffled chunks take a quarter of the memory, for about 0.3 microseconds an event."""
    return zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1)


def unpack_chunk(payload: bytes):
    return pickle.loads(zlib.decompress(payload))


class RowShards:
    """Folds one file's rows (conversions here, the summary clients' events) into per-shard pickled lists of
    plain tuples tagged ``kind`` (a ``RowFold``)."""

    flush_rows = 200_000

    def __init__(self, shards: int, kind: int) -> None:
        self._shards = shards
        self._kind = kind
        self._rows: dict[int, list] = {}
        self.pending = 0

    def add(self, row) -> None:
        self._rows.setdefault(device_shard(row.device_id, self._shards), []).append(tuple(row))
        self.pending += 1

    def drain(self) -> Iterator[tuple[int, tuple[int, bytes]]]:
        for shard, rows in self._rows.items():
            yield shard, (self._kind, pack(rows))
        self._rows, self.pending = {}, 0


# The end-of-input timers: the last whole millisecond of the global window (runners keep timers to the
# millisecond; a test stream advances its watermark here before infinity so their outputs are observed).
END_OF_INPUT = Timestamp(micros=GlobalWindow().max_timestamp().micros // MICROS_PER_MILLI * MICROS_PER_MILLI)


def after_milli(micros: int) -> int:
    """The first millisecond boundary strictly after ``micros``."""
    return (micros // MICROS_PER_MILLI + 1) * MICROS_PER_MILLI


def stamped(item, micros: int) -> TimestampedValue:
    return TimestampedValue(item, Timestamp(micros=micros))


T = TypeVar("T")  # a buffered item


class Pending(Generic[T]):
    """A key's buffered (time, item) pairs and the time its flush timer is set for (None: not set)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, T]] = []
        self.target: int | None = None

    def add(self, time_micros: int, item: T, flush, delay_micros: int = 0) -> None:
        """Buffer ``item``; move the flush timer earlier if the item is due before it."""
        self.items.append((time_micros, item))
        due = after_milli(time_micros) + delay_micros
        if self.target is None or due < self.target:
            self.target = due
            flush.set(Timestamp(micros=due))

    def take(self, until_micros: int | None) -> list[tuple[int, T]]:
        """Remove and return the pairs before ``until_micros`` (all when None)."""
        if until_micros is None:
            due, self.items = self.items, []
        else:
            due = [entry for entry in self.items if entry[0] < until_micros]
            self.items = [entry for entry in self.items if entry[0] >= until_micros]
        return due

    def rearm(self, flush, delay_micros: int = 0) -> None:
        """After a flush: the timer for the earliest item still buffered, if any."""
        self.target = None
        if self.items:
            self.target = after_milli(min(time for time, _ in self.items)) + delay_micros
            flush.set(Timestamp(micros=self.target))


class DeviceRecord(Pending[Any]):  # the items are a device's event rows, of several types
    """A device's Beam state: its buffered events, how far it has replayed (``cut``, never moving back) and the
    state of the replay (``state``: the device's filters, client or event-level device)."""

    def __init__(self, state) -> None:
        super().__init__()
        self.cut = 0
        self.state = state

    def advance(self, until_micros: int) -> list:
        """Move the cut to ``until_micros`` (never back) and take the buffered events before it, in no set order.
        Events before the cut are dead-lettered on arrival (``buffer_device_events``), so none is left behind."""
        self.cut = max(until_micros, self.cut)
        return [event for _, event in self.take(self.cut)]


def buffer_device_events(device_id: str, events: Iterable, record: DeviceRecord, flush, lateness_micros: int) -> Iterator:
    """Buffer a bundle's events of one device in its record (arming the flush timer); an event behind the
    record's cut (already replayed past) is a ``late`` dead letter."""
    for event in events:
        if event.event_time_micros < record.cut:
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTERS, DeadLetter(raw=json.dumps(row_to_dict(event)), reason="late", source=f"device {device_id}")
            )
        else:
            record.add(event.event_time_micros, event, flush, lateness_micros)


RecordT = TypeVar("RecordT", bound=DeviceRecord)  # a subclass's device record


class DeviceReplayFn(beam.DoFn, Generic[RecordT]):
    """Streaming: one device's replay over state, the scheme the summary-report and event-level clients share.

    A bundle's events of a device (``DeviceEventsPerBundleFn``) are buffered in its ``DeviceRecord``, kept as the
    bytes of its explicit record (``DeviceRecordState``, through the subclass's ``codec``); the flush timer, once
    the watermark passed them plus the allowed lateness, hands the record to ``flush`` (the subclass's replay,
    which also re-arms the timer). Subclasses give ``codec``, ``new_record`` and ``flush``."""

    RECORD = ReadModifyWriteStateSpec("record", BytesCoder())
    codec: StateCodec  # set by the subclass's setup()
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)

    def __init__(self, lateness_micros: int) -> None:
        self._lateness = lateness_micros

    def new_record(self) -> RecordT:
        """The record of a device that has seen nothing."""
        raise NotImplementedError

    def flush(self, device_id: str, record: RecordT, fired_micros: int, timer) -> Iterator:
        """Replay what the watermark has passed, yield the outputs, and re-arm ``timer``."""
        raise NotImplementedError

    def process(self, element, state=beam.DoFn.StateParam(RECORD), flush=beam.DoFn.TimerParam(FLUSH)):
        device_id, events = element  # a bundle's events of the device
        record = self.codec.read(state, self.new_record)
        yield from buffer_device_events(device_id, events, record, flush, self._lateness)
        self.codec.write(state, record)

    @on_timer(FLUSH)
    def on_flush(self, key=beam.DoFn.KeyParam, fired=beam.DoFn.TimestampParam, state=beam.DoFn.StateParam(RECORD),
                 flush=beam.DoFn.TimerParam(FLUSH)):
        record = self.codec.read(state, self.new_record)
        yield from self.flush(key, record, fired.micros, flush)
        self.codec.write(state, record)


class DeviceEventsPerBundleFn(beam.DoFn):
    """Streaming, before any state: a bundle's events grouped per device, emitted at the end of the bundle as
    ``(device_id, events)`` timestamped with the device's earliest event. The stateful DoFn then reads and writes
    a device's state once per bundle rather than once per event: each state write costs about a millisecond in
    the SDK's state cache (it walks every loaded module), which otherwise sets the speed."""

    def start_bundle(self) -> None:
        self._devices: dict[str, list] = {}

    def process(self, row):
        self._devices.setdefault(row.device_id, []).append(row)

    def finish_bundle(self):
        for device_id, events in self._devices.items():
            earliest = min(event.event_time_micros for event in events)
            yield WindowedValue((device_id, tuple(events)), Timestamp(micros=earliest), (GlobalWindow(),))


def replay_devices(rows, replay: DeviceReplayFn, main: str) -> beam.pvalue.DoOutputsTuple:
    """The streaming device replay: rows grouped per device and bundle, then ``replay`` over each device's state;
    its outputs are ``main`` and ``dead_letters`` (``late`` events)."""
    return (
        rows
        | "PerDevice" >> beam.ParDo(DeviceEventsPerBundleFn()).with_output_types(tuple[str, Any])  # (device, events)
        | "Devices" >> beam.ParDo(replay).with_outputs(DEAD_LETTERS, main=main)
    )


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


def device_record_codec(
    replay_field: str,
    replay_to: Callable[[Any, R], None],
    replay_from: Callable[[R], Any],
    record_type: type[DeviceRecord] = DeviceRecord,
) -> StateCodec[state_pb2.DeviceRecordState]:
    """The codec of a ``record_type`` whose replay state is written by ``replay_to`` into the ``replay_field`` of
    ``DeviceRecordState`` and read back by ``replay_from``."""

    def to_message(record: DeviceRecord, message: state_pb2.DeviceRecordState) -> None:
        message.cut = record.cut
        if record.target is not None:
            message.timer_target = record.target
        buffer_to_messages(record.items, message.buffered)
        replay_to(record.state, getattr(message, replay_field))

    def from_message(message: state_pb2.DeviceRecordState) -> DeviceRecord:
        record = record_type(replay_from(getattr(message, replay_field)))
        record.cut = message.cut
        record.target = message.timer_target if message.HasField("timer_target") else None
        record.items = buffer_of_messages(message.buffered)
        return record

    return StateCodec(state_pb2.DeviceRecordState, to_message, from_message)
