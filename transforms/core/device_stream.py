"""The streaming device replays that the on-device pipelines share (budgeting, summary-report clients, event-level
reports): ``DeviceShardFn``.

Devices are kept by shard, as the k-anonymity job keeps interest groups: a bundle's events are buffered per shard
and hour as they came, an event-time timer per shard fires once the watermark passed them plus the allowed
lateness, and each device with events before the cut is replayed, in the batch path's order, from its record. The
timer follows the sources' watermarks when a topic source sends them, so a firing takes every event a poll made
final.

Each stateful step keeps what it holds in few records, read and written once per element and per timer: Beam's
SDK state cache measures every value it stores by walking the loaded modules (about a millisecond a write here),
so the number of state writes, not their size, sets the speed; a shard's decoded devices are kept in the process
between firings and only the devices a firing replayed are encoded again.
"""
from __future__ import annotations

import json
import pickle
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from operator import attrgetter
from typing import Any

import apache_beam as beam
from apache_beam.coders import BytesCoder, VarIntCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from schemas.codecs import row_to_dict
from schemas.proto import state_pb2
from schemas.record_ids import row_id
from schemas.row_messages import ROW_TYPES
from schemas.rows import DeadLetter
from schemas.time_units import MICROS_PER_HOUR, MICROS_PER_MILLI
from transforms.core import metrics
from transforms.core.device_shards import device_shard
from transforms.core.device_state import DeviceRecord
from transforms.core.durable.acknowledgement import stamped
from transforms.core.durable.positions import fold_positions
from transforms.core.durable.step import DurableStep, StepStore, StreamEnded, shard_bytes
from transforms.core.inspected import InspectedOnceDoFn
from transforms.core.io import DEAD_LETTERS, END_OF_INPUT_MICROS, EventBatch, PackedEvents
from transforms.core.shard_elements import per_shard_elements
from transforms.core.state import STATE_VERSION, ArenaBound, StateCodec
from transforms.core.state_cache import ProcessStateCache

# The end-of-input timers: the last whole millisecond of the global window (runners keep timers to the
# millisecond; a test stream advances its watermark here before infinity so their outputs are observed).
END_OF_INPUT = Timestamp(micros=GlobalWindow().max_timestamp().micros // MICROS_PER_MILLI * MICROS_PER_MILLI)


_NOTHING_TO_RESTORE, _RESTORED_FROM_SNAPSHOT = 1, 2  # a durable job's RESTORED state, once checked


def after_milli(micros: int) -> int:
    """The first millisecond boundary strictly after ``micros``."""
    return (micros // MICROS_PER_MILLI + 1) * MICROS_PER_MILLI


_EVENT_TIME = attrgetter("event_time_micros")

STREAMING_SHARDS = 1  # see DeviceShardFn: its outputs then follow the batch path's order by construction


def _row_layout(row_type: type) -> tuple[int, int]:
    """The positions of ``device_id`` and ``event_time_micros`` in a device event row type."""
    fields = row_type._fields  # type: ignore[attr-defined]
    return fields.index("device_id"), fields.index("event_time_micros")


_LAYOUTS = {name: _row_layout(row_type) for name, row_type in ROW_TYPES.items()
            if {"device_id", "event_time_micros"} <= set(row_type._fields)}


def _pending_record(rows: dict[str, list], span: tuple[int, int], held_at_cut: int = 0,
                    more_rows: Sequence[bytes] = ()) -> bytes:
    """A ``DevicePendingEvents`` of ``rows`` ({row type name: [tuple]}) and of ``more_rows`` (other records'
    ``rows`` as they are), whose event times span ``span``; ``held_at_cut``: events held back by the firing with
    that cut (``DeviceShardFn.hold_until``)."""
    record = state_pb2.DevicePendingEvents(version=STATE_VERSION, earliest_micros=span[0], latest_micros=span[1],
                                           rows=pickle.dumps(rows, protocol=5) if rows else b"",
                                           held_at_cut=held_at_cut, more_rows=more_rows)
    return record.SerializeToString()


def _held_record(events: list, held_at_cut: int, whole: Sequence[state_pb2.DevicePendingEvents] = ()) -> bytes:
    """The pending record of held ``events`` (rows of their row types; most often of one type, the budgeting
    devices' impressions, turned into tuples in one call) and of the held events among the ``whole`` pending
    records' (their rows kept as they are, with the events of devices that did not hold among them)."""
    grouped: dict[str, list] = {}
    if events:
        kinds = {type(event) for event in events}
        if len(kinds) == 1:
            grouped = {kinds.pop().__name__: list(map(tuple, events))}
        else:
            grouped = {kind.__name__: [tuple(event) for event in events if type(event) is kind] for kind in kinds}
    times = [*map(_EVENT_TIME, events), *(time for record in whole
                                          for time in (record.earliest_micros, record.latest_micros))]
    return _pending_record(grouped, (min(times), max(times)), held_at_cut,
                           [part for record in whole for part in (record.rows, *record.more_rows)])


def _rows_of(record: state_pb2.DevicePendingEvents) -> list:
    """A pending record's events, as rows of their row types."""
    return [row for part in ((record.rows,) if record.rows else ()) + tuple(record.more_rows)
            for name, rows in pickle.loads(part).items() for row in map(ROW_TYPES[name]._make, rows)]


def _split_rows(rows: list, cut: int) -> tuple[list, dict[str, list], tuple[int, int]]:
    """A pending record's events (``rows``, as ``_rows_of`` gives them) before ``cut``, and the others (as a
    record's rows, and their span)."""
    before: list = []
    after: dict[str, list] = {}
    times: list[int] = []
    for row in rows:
        time = row.event_time_micros
        if time < cut:
            before.append(row)
        else:
            after.setdefault(type(row).__name__, []).append(tuple(row))
            times.append(time)
    return before, after, (min(times, default=0), max(times, default=0))


class _DecodedRecords:
    """The events of the pending records a device step added, decoded as they arrive, for the firing that takes
    them. From a backlog, a topic source decodes for seconds while the runner waits for it, and the firing at the
    end then replays everything at once, the source waiting in turn: decoding the events on arrival moves that work
    (12 % of such a firing, measured with py-spy) out of the firing, into time the runner would spend waiting
    (benchmarks/README.md, session 11). Keyed by the record's bytes, of which the rows are a function: whatever
    reads a record back, from Beam state or from the store, its rows are the same. At most ``limit`` events are
    held; a record that does not fit, or that this process did not add, is decoded by its firing."""

    def __init__(self, limit: int) -> None:
        self._rows: dict[bytes, list] = {}
        self._held = 0
        self._limit = limit

    def add(self, data: bytes, record: state_pb2.DevicePendingEvents) -> None:
        if self._held < self._limit and data not in self._rows:
            rows = self._rows[data] = _rows_of(record)
            self._held += len(rows)

    def take(self, data: bytes, record: state_pb2.DevicePendingEvents) -> list:
        """The record's rows (``data``: its bytes), decoded now unless they were on arrival."""
        rows = self._rows.pop(data, None)
        if rows is None:
            return _rows_of(record)
        self._held -= len(rows)
        return rows


# events a device step holds decoded (_DecodedRecords): a backlog of the throughput benchmark's summary client
# (305,000 ARA sources and triggers) fits, at about 1 KB a decoded source
_DECODED_EVENTS = 500_000
# per device step (its id: the same in every copy the runner makes), in this process
_DECODED: defaultdict[str, _DecodedRecords] = defaultdict(partial(_DecodedRecords, _DECODED_EVENTS))


class _PendingRecords:
    """Device event rows per (shard, hour) as they came, with their span: the ``DevicePendingEvents`` records of a
    bundle (``DeviceEventsPerBundleFn``) or of a topic source's poll (``pack_events``)."""

    def __init__(self, shards: int) -> None:
        self._shards = shards
        self._records: dict[tuple[int, int], tuple[dict[str, list], list[int]]] = {}  # -> (rows, [earliest, latest])

    def add(self, name: str, rows: Iterable[tuple]) -> None:
        """Rows (plain tuples) of the row type ``name``."""
        device_at, time_at = _LAYOUTS[name]
        shards, records = self._shards, self._records
        for row in rows:
            time = row[time_at]
            shard = 0 if shards == 1 else device_shard(row[device_at], shards)
            key = (shard, time // MICROS_PER_HOUR)
            record = records.get(key)
            if record is None:
                record = records[key] = ({}, [time, time])
            record[0].setdefault(name, []).append(row)
            span = record[1]
            if time < span[0]:
                span[0] = time
            elif time > span[1]:
                span[1] = time

    def records(self) -> list[tuple[int, int, bytes]]:
        """``(shard, earliest event time, DevicePendingEvents bytes)`` per (shard, hour)."""
        return [(shard, earliest, _pending_record(rows, (earliest, latest)))
                for (shard, _), (rows, (earliest, latest)) in self._records.items()]


def pack_events(row_type: type, rows: list) -> list[tuple[int, int, bytes]]:
    """A topic source's poll of device event rows (plain tuples of ``row_type``) as the records
    ``DeviceEventsPerBundleFn`` makes of them, for ``PackedEvents``: made in the source's process
    (``TopicInput.pack``), which spares the job's process grouping, pickling and unpickling every event once."""
    pending = _PendingRecords(STREAMING_SHARDS)
    pending.add(row_type.__name__, rows)
    return pending.records()


class DeviceEventsPerBundleFn(InspectedOnceDoFn):
    """Streaming, before any state: a bundle's device events per (shard, hour), as ``DevicePendingEvents`` records.

    Takes event rows, ``EventBatch``es of them (a streaming source's poll, with its watermark and, for a durable
    job, its position) or ``PackedEvents`` (the same, already packed as these records by the source). Emits, at
    the end of the bundle, one element per shard: ``(shard, (DevicePendingEvents bytes, ...))``, the shard's
    records and, when batches carried them, a record without events of the sources' watermarks (so that the
    shard's timer can take every event the sources have made final at once) and of the batches' positions. One
    element, so that the stateful step takes a bundle's events and their positions in one call, with no firing in
    between; timestamped with the earliest of its events and batches."""

    def __init__(self, shards: int) -> None:
        self._shards = shards

    def start_bundle(self) -> None:
        self._pending = _PendingRecords(self._shards)
        self._packed: list[tuple[int, int, bytes]] = []
        self._watermarks: dict[str, int] = {}
        self._positions: list[state_pb2.SourcePosition] = []  # a durable job's: where its batches leave the topics
        self._batches_at: int | None = None  # the earliest timestamp of the bundle's batches

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        kind = type(element)
        if kind is EventBatch or kind is PackedEvents:
            name = element.row_type.__name__ if element.row_type is not None else ""
            self._batches_at = timestamp.micros if self._batches_at is None else min(self._batches_at, timestamp.micros)
            if element.position is not None:
                self._positions.append(state_pb2.SourcePosition.FromString(element.position))
            if element.watermark_micros is not None:
                self._watermarks[name] = max(self._watermarks.get(name, element.watermark_micros),
                                             element.watermark_micros)
            if kind is PackedEvents:
                if self._shards != STREAMING_SHARDS:  # pack_events keys its records by STREAMING_SHARDS shards
                    raise ValueError(f"packed events are made for {STREAMING_SHARDS} shard(s), not {self._shards}")
                self._packed += element.records
            elif element.rows:
                self._pending.add(name, element.rows)
        else:
            self._pending.add(kind.__name__, (tuple(element),))

    def finish_bundle(self):
        hint = None
        if self._watermarks or self._positions:
            hint = state_pb2.DevicePendingEvents(version=STATE_VERSION, source_watermarks=self._watermarks,
                                                 positions=self._positions).SerializeToString()
        yield from per_shard_elements([*self._pending.records(), *self._packed], hint, self._shards, self._batches_at)


class _ShardCache:
    """A shard's devices as live ``DeviceRecord``s (kept in ``_SHARD_CACHE``); ``wake`` is when each device must be
    replayed without events (time -> device ids; ``wake_of``: device id -> time); ``side`` is the subclass's state
    beside the devices; ``held`` the events each device holds back unreplayed (``DeviceShardFn.hold_until``),
    ``held_until`` the cut at which it replays them at the latest (its wake is no later), and ``holding`` the
    pending records that keep them (record -> the devices still holding events of it)."""

    def __init__(self, record: state_pb2.DeviceShardState, devices: dict[str, DeviceRecord], side: Any) -> None:
        self.record = record
        self.devices = devices
        self.side = side
        self.wake: dict[int, set[str]] = {}
        self.wake_of: dict[str, int] = {}
        self.held: dict[str, list] = {}
        self.held_until: dict[str, int] = {}
        self.holding: dict[bytes, set[str]] = {}
        self.arena = ArenaBound()  # a durable step's record, kept here across firings


# Held events are kept in one pending record per firing that holds some, and folded into one record when there
# are more than this: a firing reads every pending record, and a device holds its events for up to its own horizon
# (``hold_until``), many firings of a live job. Each fold writes every held event again, so not too often: at 8,
# the measurement soak folded at nearly every firing, a tenth of the job's time (benchmarks/README.md, session 15).
_HELD_RECORDS = 32


# Decoded shards in this process: a firing decodes nothing when the shard's state was last written here, and
# encodes only the devices it replayed.
_SHARD_CACHE: ProcessStateCache[_ShardCache] = ProcessStateCache()


class DeviceShardFn(InspectedOnceDoFn):
    """Streaming: the devices of a shard replayed over state, the scheme the budgeting, summary-report and
    event-level jobs share; subclasses give ``codec``, ``new_record``, ``replay`` and ``wake_micros``, and may keep
    state of their own beside the devices (``side_codec``, ``new_side``, ``after_replays``).

    Each bundle's events of the shard (``DeviceEventsPerBundleFn``) are buffered as they came. A firing at F
    cuts at F minus the allowed lateness: each device with events before the cut, or whose ``wake_micros`` is
    that early, is handed to ``replay`` with those events, and its own cut moves there; an event behind its
    device's cut is a ``late`` dead letter. A device whose state is back to a new device's is dropped, and the
    shard keeps the latest cut of those (``retired_cut``) as the cut of every device it does not hold.

    Two event-time timers. FLUSH is set for the earliest buffered event or wake time, or, when the sources'
    watermarks (carried by a topic source's batches) have already passed it, for the slowest of them: Beam
    fires it once the pipeline's watermark gets there, which it will, since every source has sent that
    watermark. CATCH_UP is set for the latest buffered event (with none, for the latest wake time), so that a
    watermark that jumps over many of them (a replay, the end of a bounded input) is taken in one firing, not
    one per distinct time: set for a wake weeks ahead (a window's end, a held deadline), it would be beyond
    every jump before it. What a device replays depends only on the events before its cut, never on when the
    cut moved, so firing times change when outputs appear, not what they are. With no work left, FLUSH waits
    for the end of the input, where ``after_replays`` is told that nothing more will come.

    A subclass may let a device hold its events back (``hold_until``) when replaying them now would emit
    nothing and replaying them later, with what comes next, gives what replaying them now would have: the
    budgeting device's impressions until its next conversion. The device then takes the firing's cut without a
    replay, so its record is neither replayed, encoded nor written (a device the shard did not hold, new or
    dropped, is written as a new device's record with the cut it had, so that its held events are read back); the
    held events stay in pending records of their own (``held_at_cut``) until a replay takes them: the device's
    next event that may not wait, its wake, the time ``hold_until`` gave, or the end of the input.

    Outputs carry the firing's time. A firing replays exactly the events between the previous cut and its own,
    in order, so a subclass that folds every device's outputs further (the budgeting job's batches and queries,
    in ``after_replays``) keeps the batch path's order; which is why the local runner keeps one shard
    (``STREAMING_SHARDS``).
    """

    PENDING = BagStateSpec("pending", BytesCoder())  # DevicePendingEvents records
    SHARD = ReadModifyWriteStateSpec("shard", BytesCoder())  # a DeviceShardState record
    TOKEN = ReadModifyWriteStateSpec("token", BytesCoder())  # changes with every write of SHARD
    NEEDED = ReadModifyWriteStateSpec("needed", VarIntCoder())  # the earliest firing time that has work
    HINT = ReadModifyWriteStateSpec("hint", BytesCoder())  # a DevicePendingEvents with only source_watermarks
    TIMER_AT = ReadModifyWriteStateSpec("timer_at", VarIntCoder())  # FLUSH's time
    CATCH_AT = ReadModifyWriteStateSpec("catch_at", VarIntCoder())  # CATCH_UP's time
    RESTORED = ReadModifyWriteStateSpec("restored", VarIntCoder())  # a durable job's: whether it restored a snapshot
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)
    CATCH_UP = TimerSpec("catch_up", TimeDomain.WATERMARK)
    # Whether a device due only for its wake time is replayed at the end of the input: a subclass whose wake then
    # emits nothing (nothing comes after it) says False and spares the end a replay of every device it holds.
    wakes_at_end = True
    # Whether the end's replay of the devices that hold no state goes through ``replay_new`` in one call.
    replays_new_at_end = False
    codec: StateCodec  # set by the subclass's setup()
    side_codec: StateCodec | None = None  # set by a subclass that keeps state beside its devices
    durable: DurableStep | None = None  # a durable job's place in its store (``replay_devices`` sets it)
    _store: StepStore | None = None

    def __init__(self, lateness_micros: int) -> None:
        self._lateness = lateness_micros
        self._id = uuid.uuid4().hex

    def start_bundle(self) -> None:
        if self.durable is not None and self._store is None:
            self._store = self.durable.open()

    def new_record(self) -> DeviceRecord:
        """The record of a device that has seen nothing."""
        raise NotImplementedError

    def replay(self, device_id: str, record: DeviceRecord, events: list, fired_micros: int) -> Iterator:
        """Replay ``events`` (the device's events before the firing's cut, which ``record.cut`` now is; in no set
        order) over ``record``; yield the outputs."""
        raise NotImplementedError

    def replay_new(self, devices: dict[str, list], fired_micros: int) -> Iterator:
        """With ``replays_new_at_end``: the end's replay of the devices that hold no state (device id -> its events,
        in no set order; late ones and a restored job's copies taken out), all in one call, in place of
        ``before_replays`` and ``replay`` for each. Nothing is replayed after the end and their state is dropped
        unencoded, so only their outputs matter: a subclass whose batch path replays whole histories for less
        (the event-level job's) replays them as its batch path does. Yield the outputs, device by device."""
        raise NotImplementedError

    def wake_micros(self, record: DeviceRecord) -> int | None:
        """The cut at which the device must be replayed even without events (an epoch to expire, a window to
        close), or None."""
        return None

    def hold_until(self, record: DeviceRecord, events: list, held_before: bool = False) -> int | None:
        """The cut before which a device may hold ``events`` (in no set order) back unreplayed, or None to replay
        them now, with those it already holds (it then holds all of them until the earlier of the two times).
        Only a device with no wake due is asked (one the shard does not hold with a new device's record), for the
        events before this firing's cut; and,
        for a shard read back from its state, about the events each device held (``held_before``: events this
        method let wait before, whose time is asked again). A subclass says a time only for events whose replay
        now would emit nothing and whose replay later, with what comes next, gives what a replay now would have.
        By default None: never."""
        return None

    def trim_held(self, record: DeviceRecord, events: list, earliest_micros: int, cut: int) -> tuple[list, int] | None:
        """At a holding device's deadline (the time ``hold_until`` gave), reached by the firing at ``cut`` with no wake
        of the device's own due: the held ``events`` a later replay may still need (every event of the device still
        to be replayed, this firing's included, is at or after ``earliest_micros``), and a cut after ``cut`` before
        which they may wait from then on, instead of a replay of all of them now; or None to replay them. A
        subclass leaves out only events that a replay would drop without a trace. By default None."""
        return None

    def releasing_held(self, events: list) -> None:
        """Called with the events a device held (``hold_until``) just before ``replay`` takes them with its
        arriving ones, in the same firing: for a subclass whose decision to let them wait rested on something it
        drew as they arrived (the event-level job's s*). By default nothing."""

    def before_replays(self, due: dict[str, list]) -> None:
        """Called once a firing, before any device is replayed, with the events before the cut of every device
        that has some (device id -> events; late events and copies of a restored job's included): work that
        costs less done for many devices at once. By default nothing."""

    def new_side(self) -> Any:
        """The state beside the devices of a shard that has seen nothing (with ``side_codec``)."""
        return None

    def after_replays(self, side: Any, outputs: list, fired_micros: int, at_end: bool) -> Iterator:
        """What a firing emits once its devices are replayed (``outputs``: theirs, in device order, then
        ``replay_new``'s at the end); ``at_end``: the firing at the end of the input, after which nothing comes. By
        default the outputs themselves."""
        yield from outputs

    def _shard(self, key: int, shard_state, token_state) -> _ShardCache:
        def load() -> _ShardCache:
            record = state_pb2.DeviceShardState(version=STATE_VERSION)
            raw = shard_bytes(shard_state, token_state, self._store is not None)
            if raw is not None:
                record.ParseFromString(raw)
            devices = {device_id: self.codec.decode(data) for device_id, data in record.devices.items()}
            side = None
            if self.side_codec is not None:
                side = self.side_codec.decode(record.side) if record.side else self.new_side()
            shard = _ShardCache(record, devices, side)
            for device_id, device in devices.items():
                self._schedule(shard, device_id, device)
            return shard

        return _SHARD_CACHE.get(self._id, key, token_state, load)

    def _restore(self, key: int, pending, shard_state, token_state, needed_state, now_micros: int) -> list | None:
        """A durable job's first element (at ``now_micros``): the shard's last snapshot into Beam state, with the
        first firing time its buffered events and devices need; returns the release log, which the run emits again
        (None without a snapshot)."""
        assert self._store is not None
        restored = self._store.restore(state_pb2.DeviceShardState, "devices", now_micros)
        if restored is None:
            return None
        shard_state.write(restored.shard.SerializeToString())
        dues = []
        for data in restored.pending:
            pending.add(data)
            events = state_pb2.DevicePendingEvents.FromString(data)
            if events.rows:
                dues.append(self._event_due(events.earliest_micros))
        shard = self._shard(key, shard_state, token_state)
        if shard.wake:
            dues.append(self._wake_due(min(shard.wake)))
        if dues:
            needed_state.write(min(dues))
        return restored.releases

    def _schedule(self, shard: _ShardCache, device_id: str, record: DeviceRecord) -> None:
        wakes = [self.wake_micros(record)]
        if record.items:  # events a record of the older layout buffered: due once the cut is past them
            wakes.append(min(time for time, _ in record.items) + 1)
        wake = min((time for time in wakes if time is not None), default=None)
        self._unschedule(shard, device_id)
        if wake is not None:
            shard.wake.setdefault(wake, set()).add(device_id)
            shard.wake_of[device_id] = wake

    @staticmethod
    def _unschedule(shard: _ShardCache, device_id: str) -> None:
        """Take back a device's wake (a replay scheduled it again, or it was dropped), so that no wake it no longer
        needs replays it later."""
        wake = shard.wake_of.pop(device_id, None)
        if wake is not None:
            devices = shard.wake[wake]
            devices.discard(device_id)
            if not devices:
                del shard.wake[wake]

    def _event_due(self, time_micros: int) -> int:
        """The firing time whose cut takes an event at ``time_micros``."""
        return after_milli(time_micros) + self._lateness

    def _wake_due(self, wake_micros: int) -> int:
        """The firing time whose cut reaches ``wake_micros``."""
        return after_milli(wake_micros - 1) + self._lateness

    @staticmethod
    def _hints(hint_state) -> state_pb2.DevicePendingEvents:
        """The sources' watermarks the shard has been sent (a record holding only ``source_watermarks``)."""
        raw = hint_state.read()
        if raw is None:
            return state_pb2.DevicePendingEvents(version=STATE_VERSION)
        return state_pb2.DevicePendingEvents.FromString(raw)

    def _arm(self, timer, timer_at, needed: int | None, hints: state_pb2.DevicePendingEvents) -> int:
        """Set FLUSH for ``needed`` (the end of the input when nothing is), or for the slowest source's watermark
        when that is later; returns its time."""
        when = END_OF_INPUT.micros if needed is None else needed
        if hints.source_watermarks:
            when = max(when, min(hints.source_watermarks.values()) // MICROS_PER_MILLI * MICROS_PER_MILLI)
        when = min(when, END_OF_INPUT.micros)
        if timer_at.read() != when:
            timer.set(Timestamp(micros=when))
            timer_at.write(when)
        return when

    @staticmethod
    def _catch_up(catch_up, catch_at, latest: int | None, flush_at: int, *, only_later: bool = False) -> None:
        """Set CATCH_UP for ``latest`` when that is after FLUSH and not already set there (``only_later``: nor
        later). Once FLUSH waits for the end of the input (every source has sent its end), clear it: the end's
        firing takes all that is left, where a firing of its own would replay every device due to wake."""
        if flush_at >= END_OF_INPUT.micros:
            if catch_at.read() is not None:
                catch_up.clear()
                catch_at.clear()
            return
        if latest is None or latest <= flush_at:
            return
        latest = min(latest, END_OF_INPUT.micros)
        current = catch_at.read()
        if current != latest and not (only_later and current is not None and current > latest):
            catch_up.set(Timestamp(micros=latest))
            catch_at.write(latest)

    def _hold(self, shard: _ShardCache, device_id: str, device: DeviceRecord, arriving: list, cut: int) -> bool:
        """Whether a device, not woken, holds its ``arriving`` events back from the firing at ``cut`` (with
        those it already holds, until the earlier of the two times ``hold_until`` gave): it then takes the cut,
        unreplayed, and keeps them in ``shard.held``."""
        until = self.hold_until(device, arriving) if arriving else shard.held_until[device_id]
        if until is not None and device_id in shard.held_until:
            until = min(until, shard.held_until[device_id])
        if until is None or until <= cut:
            return False
        device.cut = cut
        shard.held.setdefault(device_id, []).extend(arriving)
        self._hold_until(shard, device_id, until)
        return True

    @staticmethod
    def _hold_until(shard: _ShardCache, device_id: str, until: int) -> None:
        """A holding device's deadline: its wake is then no later (a replay schedules its own wake again)."""
        shard.held_until[device_id] = until
        if shard.wake_of.get(device_id, until + 1) > until:
            DeviceShardFn._unschedule(shard, device_id)
            shard.wake.setdefault(until, set()).add(device_id)
            shard.wake_of[device_id] = until

    def _trimmed(self, shard: _ShardCache, device_id: str, device: DeviceRecord, arriving: list,
                 cut: int) -> list | None:
        """A device woken at its held deadline, with no wake of its own due, goes on unreplayed when ``trim_held``
        keeps some of its events, or when it keeps none and events arrive (held or replayed then as any device's):
        the events it goes on holding, until the cut ``trim_held`` gave, which the firing records again (its older
        records keep them no longer, and are dropped once no device holds events of them). None: it is replayed,
        which drops its held events (and the device, once nothing is left)."""
        if shard.held_until[device_id] > cut:  # woken for its own wake
            return None
        own = self.wake_micros(device)
        if own is not None and own <= cut:
            return None
        trimmed = self.trim_held(device, shard.held[device_id], min(map(_EVENT_TIME, arriving), default=cut), cut)
        if trimmed is None or not (trimmed[0] or arriving):
            return None
        kept, until = trimmed
        self._release_held(shard, device_id)
        self._schedule(shard, device_id, device)  # its own wake, then the new deadline if that is earlier
        if kept:
            shard.held[device_id] = kept
            self._hold_until(shard, device_id, until)
        return kept

    @staticmethod
    def _release_held(shard: _ShardCache, device_id: str) -> list:
        """The events a device held, now to be replayed: its records keep them no longer."""
        for data in list(shard.holding):
            holders = shard.holding[data]
            holders.discard(device_id)
            if not holders:
                del shard.holding[data]
        del shard.held_until[device_id]
        return shard.held.pop(device_id)

    def _hold_again(self, shard: _ShardCache, records: list) -> None:
        """Held events' records (``(bytes, DevicePendingEvents)``) of a shard read back from its state, where each
        device has the cut of its last replay: its events not behind that cut are still held (a replay takes all of
        them), and it takes the latest cut it held them at; its time to replay them is asked again. An event in two
        records (a device trimmed at its deadline, ``_trimmed``, is recorded again) is held once."""
        cuts: dict[str, int] = {}
        for data, events in records:
            holders = set()
            for event in _rows_of(events):
                device = shard.devices.get(event.device_id)
                if device is not None and event.event_time_micros >= device.cut:
                    shard.held.setdefault(event.device_id, []).append(event)
                    holders.add(event.device_id)
                    cuts[event.device_id] = max(cuts.get(event.device_id, 0), events.held_at_cut)
            if holders:
                shard.holding[data] = holders
        for device_id, held_at in cuts.items():
            shard.held[device_id] = list({(type(event), row_id(event)): event for event in shard.held[device_id]}.values())
            device = shard.devices[device_id]
            device.cut = max(device.cut, held_at)
            until = self.hold_until(device, shard.held[device_id], held_before=True)
            self._hold_until(shard, device_id, 0 if until is None else until)  # None: replayed by this firing

    @staticmethod
    def _retire(shard: _ShardCache, device_id: str) -> None:
        """Drop a device; the shard's ``retired_cut``, the cut of every device it does not hold, takes its cut."""
        device = shard.devices.pop(device_id)
        DeviceShardFn._unschedule(shard, device_id)
        shard.record.devices.pop(device_id, None)
        shard.record.retired_cut = max(shard.record.retired_cut, device.cut)

    def _admitted(self, arriving: list, device_cut: int, restored_before: bool, released: list,
                  held: list | None = None) -> list:
        """A device's ``arriving`` events without those behind its cut (a ``late`` dead letter each, into
        ``released``) and, in a job restored from a snapshot, without a second copy of one or of one it ``held``."""
        if arriving and min(map(_EVENT_TIME, arriving)) < device_cut:  # the device has replayed past some
            released += map(self._late, [event for event in arriving if event.event_time_micros < device_cut])
            arriving = [event for event in arriving if event.event_time_micros >= device_cut]
        if restored_before and (len(arriving) > 1 or held and arriving):  # a restored job may be sent a copy of
            # what it holds
            arriving = self._first_copies(arriving, released, {(type(event), row_id(event)) for event in held or ()})
        return arriving

    @staticmethod
    def _first_copies(events: list, released: list, seen: set) -> list:
        """``events`` without a second copy of a record (by its own id), nor a copy of one ``seen`` (identities):
        a ``duplicate`` dead letter for it."""
        first = []
        for event in events:
            identity = (type(event), row_id(event))
            if identity in seen:
                released.append(beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(
                    raw=json.dumps(row_to_dict(event)), reason="duplicate", source=f"device {event.device_id}")))
            else:
                seen.add(identity)
                first.append(event)
        return first

    @staticmethod
    def _late(event) -> beam.pvalue.TaggedOutput:
        return beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(
            raw=json.dumps(row_to_dict(event)), reason="late", source=f"device {event.device_id}"))

    def process(
        self,
        element,
        key=beam.DoFn.KeyParam,
        pending=beam.DoFn.StateParam(PENDING),
        shard_state=beam.DoFn.StateParam(SHARD),
        token_state=beam.DoFn.StateParam(TOKEN),
        needed_state=beam.DoFn.StateParam(NEEDED),
        hint_state=beam.DoFn.StateParam(HINT),
        timer_at=beam.DoFn.StateParam(TIMER_AT),
        catch_at=beam.DoFn.StateParam(CATCH_AT),
        restored=beam.DoFn.StateParam(RESTORED),
        timer=beam.DoFn.TimerParam(FLUSH),
        catch_up=beam.DoFn.TimerParam(CATCH_UP),
        timestamp=beam.DoFn.TimestampParam,
    ):
        if self._store is not None and restored.read() is None:
            releases = self._restore(key, pending, shard_state, token_state, needed_state, timestamp.micros)
            restored.write(_RESTORED_FROM_SNAPSHOT if releases is not None else _NOTHING_TO_RESTORE)
            yield from releases or ()
        _, records = element  # (shard, (DevicePendingEvents bytes, ...)): a bundle's events per hour, and hints
        hints = self._hints(hint_state)
        needed = needed_read = needed_state.read()
        latest = None
        newer: dict[str, int] = {}
        for data in records:
            events = state_pb2.DevicePendingEvents.FromString(data)
            for name, micros in events.source_watermarks.items():
                if micros > max(hints.source_watermarks.get(name, -1), newer.get(name, -1)):
                    newer[name] = micros
            if events.rows:
                pending.add(data)
                _DECODED[self._id].add(data, events)
                due = self._event_due(events.latest_micros)
                latest = due if latest is None else max(latest, due)
                needed = min(needed, self._event_due(events.earliest_micros)) if needed is not None else \
                    self._event_due(events.earliest_micros)
            elif events.positions:  # kept for the next snapshot: where the inputs stand
                pending.add(state_pb2.DevicePendingEvents(version=STATE_VERSION, positions=events.positions)
                            .SerializeToString())
        if newer:
            hints.source_watermarks.update(newer)
            hint_state.write(hints.SerializeToString())
        if needed != needed_read:
            needed_state.write(needed)
        flush_at = self._arm(timer, timer_at, needed, hints)
        self._catch_up(catch_up, catch_at, latest, flush_at, only_later=True)

    @on_timer(FLUSH)
    @on_timer(CATCH_UP)
    def on_timer_fired(
        self,
        key=beam.DoFn.KeyParam,
        fire_time=beam.DoFn.TimestampParam,
        pending=beam.DoFn.StateParam(PENDING),
        shard_state=beam.DoFn.StateParam(SHARD),
        token_state=beam.DoFn.StateParam(TOKEN),
        needed_state=beam.DoFn.StateParam(NEEDED),
        hint_state=beam.DoFn.StateParam(HINT),
        timer_at=beam.DoFn.StateParam(TIMER_AT),
        catch_at=beam.DoFn.StateParam(CATCH_AT),
        restored=beam.DoFn.StateParam(RESTORED),
        timer=beam.DoFn.TimerParam(FLUSH),
        catch_up=beam.DoFn.TimerParam(CATCH_UP),
    ):
        """Both timers do the same at their time. Every time a timer is set for is a whole millisecond; a firing
        for a time its timer was since moved from (set again while the firing was on its way) leaves the new
        setting in place."""
        fired = fire_time.micros
        for set_at in (timer_at, catch_at):
            if set_at.read() == fired:
                set_at.clear()
        yield from self._fire(key, fired, pending, shard_state, token_state, needed_state, hint_state, timer_at,
                              catch_at, restored, timer, catch_up)

    def _fire(self, key, fired, pending, shard_state, token_state, needed_state, hint_state, timer_at, catch_at,
              restored, timer, catch_up) -> Iterator:
        """A firing at ``fired``: replay every device with events before the cut or a wake time at it."""
        started = time.perf_counter()
        shard = self._shard(key, shard_state, token_state)
        record = shard.record
        cut = fired - self._lateness
        due: dict[str, list] = {}  # device -> its events before the cut
        waiting, first_waiting, last_waiting = [], None, None
        unknown_held = []  # held events' records this process does not hold: a shard read back from its state
        whole: list = []  # (record, its rows) of the pending records wholly before the cut
        split: list = []  # the events before the cut of the records it splits
        for data in pending.read():
            if data in shard.holding:  # kept below while some device still holds events of it
                continue
            events = state_pb2.DevicePendingEvents.FromString(data)
            if events.positions:  # a durable job's: where the inputs stand (a record without events)
                fold_positions(record.positions, events.positions)
                continue
            if events.held_at_cut:
                unknown_held.append((data, events))
                continue
            span = (events.earliest_micros, events.latest_micros)
            if span[0] >= cut:
                waiting.append(data)
            else:
                rows = _DECODED[self._id].take(data, events)
                rest: dict[str, list] = {}
                if span[1] < cut:
                    before = rows
                    whole.append((events, rows))
                else:
                    before, rest, span = _split_rows(rows, cut)
                    split += before
                for event in before:
                    due.setdefault(event.device_id, []).append(event)
                if not rest:
                    continue
                waiting.append(_pending_record(rest, span))
            first_waiting = span[0] if first_waiting is None else min(first_waiting, span[0])
            last_waiting = span[1] if last_waiting is None else max(last_waiting, span[1])
        if unknown_held:
            self._hold_again(shard, unknown_held)
        at_end = fired >= END_OF_INPUT.micros
        outputs: list = []
        released: list = []  # what the firing emits, written to a durable job's store before it is
        # a job restored from a snapshot reads again from its offsets, and its source no longer knows the ids of
        # what it read before them: an at-least-once producer's copy of one of those may arrive once more
        restored_before = restored.read() == _RESTORED_FROM_SNAPSHOT
        retired_cut = record.retired_cut  # as the firing starts: devices dropped by it are past this firing's events
        new: dict[str, list] = {}  # the end's devices that hold no state, for ``replay_new``
        if at_end and self.replays_new_at_end:
            for device_id in [device_id for device_id in due if device_id not in shard.devices]:
                new[device_id] = self._admitted(due.pop(device_id), retired_cut, restored_before, released)
        woken: set[str] = set()
        if self.wakes_at_end or not at_end:
            for wake in [wake for wake in shard.wake if wake <= cut]:
                woken |= shard.wake.pop(wake)
            for device_id in woken:
                del shard.wake_of[device_id]
        if at_end:  # every held event is replayed now
            woken.update(shard.held)
        touched = set(due) | woken
        fresh = self.new_record()  # what a device dropped now would be: nothing but this firing's cut
        fresh.cut = cut
        fresh_bytes = self.codec.encode(fresh)
        unseen_bytes = None  # a device the shard does not hold, as it stands before this firing (encoded once)
        self.before_replays(due)
        replayed: list[str] = []
        stored_unseen: list[str] = []  # devices the shard did not hold that hold their events: written unreplayed
        held_now: list = []  # the events devices hold back from this firing
        held_again: list = []  # the events devices trimmed at their held deadline go on holding (``_trimmed``)
        held_whole = True  # whether every due event of the devices that hold is held (none late nor a copy)
        for device_id in sorted(touched):
            device = shard.devices.get(device_id)
            seen = device is not None
            if device is None:  # a device never seen, or dropped with nothing but its cut
                device = shard.devices[device_id] = self.new_record()
                device.cut = retired_cut
            held = shard.held.get(device_id, [])
            arriving = self._admitted(due.get(device_id, []), device.cut, restored_before, released, held)
            waking, kept = device_id in woken, None
            if held and waking and not at_end:
                kept = self._trimmed(shard, device_id, device, arriving, cut)
                if kept is not None:
                    waking, held = False, kept
            if not at_end and not waking and (arriving or held) and \
                    self._hold(shard, device_id, device, arriving, cut):
                if kept:  # recorded again: a conversion among its arriving events would have replayed them instead
                    held_again += kept
                if not seen:  # stored with the cut it had, before which none of its held events is (read back)
                    if unseen_bytes is None:
                        unseen = self.new_record()
                        unseen.cut = retired_cut
                        unseen_bytes = self.codec.encode(unseen)
                    record.devices[device_id] = unseen_bytes
                    stored_unseen.append(device_id)
                held_now += arriving
                held_whole = held_whole and len(arriving) == len(due.get(device_id, ()))
                continue
            if held:  # the list ``_release_held`` takes out of the shard
                self._release_held(shard, device_id)
                self.releasing_held(held)
                arriving = held + arriving
            replayed.append(device_id)
            outputs += self.replay(device_id, device, device.advance(cut, arriving), fired)
            if at_end:  # dropped below, unencoded
                continue
            encoded = self.codec.encode(device)
            if device.cut == cut and encoded == fresh_bytes:  # nothing a new device would not have: drop it
                self._retire(shard, device_id)
            else:
                record.devices[device_id] = encoded
                self._schedule(shard, device_id, device)
        if new:
            outputs += self.replay_new(new, fired)
        if held_now or held_again:
            holders = {event.device_id for event in held_now} | {event.device_id for event in held_again}
            if held_whole:  # the records the firing took whole keep their rows; the split ones' held events alone
                held_record = _held_record([*(event for event in split if event.device_id in holders), *held_again],
                                           cut, [events for events, rows in whole
                                                 if any(row.device_id in holders for row in rows)])
            else:  # a late event or a copy among them would be held again when the shard is read back
                held_record = _held_record([*held_now, *held_again], cut)
            shard.holding[held_record] = holders
        if len(shard.holding) > _HELD_RECORDS:  # fold them into one: the cut it keeps is the oldest of its devices'
            shard.holding = {_held_record([event for events in shard.held.values() for event in events],
                                          min(shard.devices[device_id].cut for device_id in shard.held)):
                             set(shard.held)}
        waiting += shard.holding
        pending.clear()
        for data in waiting:
            pending.add(data)
        changed = {*replayed, *stored_unseen}
        if at_end:  # every device's state is final: the store marks the job drained and refuses a later run of its
            # id (docs/durability.md), so nothing reads a device back. None is encoded (a quarter of the end's firing
            # for the event-level job, benchmarks/README.md, session 12) and the end's snapshot holds none.
            changed = set(shard.devices)  # the replayed ones, and those without events or a wake at the end
            for device_id in changed:
                self._retire(shard, device_id)
            shard.wake.clear()
            shard.wake_of.clear()
        released += self.after_replays(shard.side, outputs, fired, at_end)
        if self.side_codec is not None:
            record.side = self.side_codec.encode(shard.side)
        written = None
        if self._store is not None:  # write-ahead: the state and what it releases, before anything is released
            if at_end and not _ended(self._hints(hint_state)):
                raise StreamEnded("the input stream ended without its end (the topic source failed): nothing more "
                                  "is released; the job resumes from its last snapshot when started again")
            saved = self._store.save(record, "devices", changed, waiting, released, fired, ended=at_end)
            written, released = saved.state_bytes, stamped(released, saved.at)
        shard.record = shard.arena.kept(record, shard_state, written)
        _SHARD_CACHE.written(self._id, key, token_state, shard)
        metrics.firing_done("devices", started, None if at_end else fired, len(replayed) + len(new))
        yield from released
        if at_end:  # nothing comes after the end of the input: no timer is set again
            needed_state.clear()
            return
        dues = [self._event_due(first_waiting)] if first_waiting is not None else []
        lasts = [self._event_due(last_waiting)] if last_waiting is not None else []
        if shard.wake:  # held deadlines among them
            dues.append(self._wake_due(min(shard.wake)))
            if not lasts:  # a wake or held deadline weeks ahead would put CATCH_UP beyond every jump before it
                lasts.append(self._wake_due(max(shard.wake)))
        needed = min(dues, default=None)
        if needed is None:
            needed_state.clear()
        else:
            needed_state.write(needed)
        flush_at = self._arm(timer, timer_at, needed, self._hints(hint_state))
        self._catch_up(catch_up, catch_at, max(lasts, default=None), flush_at)


def _ended(hints: state_pb2.DevicePendingEvents) -> bool:
    """Whether every source has sent the end of its input."""
    watermarks = hints.source_watermarks.values()
    return bool(watermarks) and min(watermarks) >= END_OF_INPUT_MICROS


def replay_devices(rows, replay: DeviceShardFn, main: str, *tags: str,
                   durable: DurableStep | None = None) -> beam.pvalue.DoOutputsTuple:
    """The streaming device replay: rows (or ``EventBatch``es of them) grouped per shard, hour and bundle, then
    ``replay`` over each shard's state; its outputs are ``main``, ``dead_letters`` (``late`` events) and ``tags``.
    With ``durable`` (a local job reading topics), the shard's state is also kept in the job's durable store."""
    replay.durable = durable
    return (
        rows
        # (shard, DevicePendingEvents bytes): a bundle's events per shard and hour
        | "PerShard" >> beam.ParDo(DeviceEventsPerBundleFn(STREAMING_SHARDS)).with_output_types(
            tuple[int, tuple[bytes, ...]])
        | "Devices" >> beam.ParDo(replay).with_outputs(DEAD_LETTERS, *tags, main=main)
    )
