"""Beam wiring of ARA event-level reports (Ghazi et al. Sec. 2.2, Alg. 4 with Alg. 8's randomized response).

The client (``transforms/event_level/mechanisms/client.py``) does the work, per device, through
``transforms/event_level/mechanisms/devices.py`` (rows to configurations, s* for many sources at once, a device's
replay) and, in batch, ``transforms/event_level/frames.py`` (which sources a replay needs); this module
only moves each device's events to it, with the summary clients' sharding, packing and buffering helpers
(``transforms/summary_reports/clients.py``, ``transforms/budgeting/measurement.py``):

Batch (``EventLevelReportsBatch``):
    source files ─ ReadEvents: Avro files as columns (``_SourceFrameReader``: ``schemas/frames.py``, each
          distinct configuration checked once at the job's epsilon; a refused one is a dead letter with the
          ``ConfigurationError`` reason), other files record by record; folded per file into device shards
          (``SourceFrameShards``) ─► (shard, (_SOURCES, Arrow IPC bytes of a source frame))
    trigger files ─ ReadEvents, folded into the same device shards ─► (shard, (_TRIGGERS, deflated rows))
          ─ GroupByKey ─► _ReplayShardsFn: ``frames.replay_frame`` (the s* of every source of the shard
          chosen at once, then the sources a trigger may reach and the randomized ones replayed with their
          devices' triggers, in time order, one call per device) ─► EventLevelReport rows
Streaming (``EventLevelReportsStreaming``):
    rows ─ grouped per device within each bundle ─► _DeviceFn (state: buffered events, the device's client;
          one event-time timer, at the earliest of the next buffered event and the next window end) ─►
          EventLevelReport rows; at the end of the input, the devices that hold no state (a bounded read of a
          topic, whose watermark waits for its end) go through ``frames.replay_frame`` in one call, as in batch

The streaming stage replays what arrived only once the watermark has passed it (plus the allowed lateness),
in the batch order, and passes a window (sending its reports) once the watermark has passed its end, so arrival
order never changes a report, and both paths send the same reports for the same input and seed: with a seeded
source a source's s* is a function of (seed, device, source id, source time). An event behind what its device
has already replayed is a dead letter ``late``. A device forgets its sources once they expire. A device whose
new events are truthful sources only holds them back unreplayed until its next trigger (``_DeviceFn.hold_until``);
each source's s* is drawn once, in the firing it arrives in.
"""
from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import cast

import apache_beam as beam
import polars as pl
from apache_beam.metrics import Metrics

from schemas.codecs import EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER, avro_record
from schemas.frames import (
    EVENT_LEVEL_SOURCE_COLUMNS,
    POSITION,
    frame_bytes,
    frame_of_bytes,
    read_frame,
    source_rows,
    sources_frame,
    split_event_level_sources,
)
from schemas.limits import MAX_EXPIRY_SECONDS
from schemas.rows import DeadLetter, EventLevelSource, EventLevelTrigger
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.device_shards import DEFAULT_SHARDS, RowShards, device_shard, unpack_chunk
from transforms.core.device_state import DeviceRecord
from transforms.core.device_stream import DeviceShardFn, replay_devices
from transforms.core.durable.step import DurableStep
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, FrameRead, ReadEvents, flatten_reads, row_json_line
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.frames import refuse_sources, replay_frame
from transforms.event_level.mechanisms.devices import EventLevelDevice, SourceCheck, choose_randomized, event_order
from transforms.event_level.mechanisms.outputs import Output
from transforms.event_level.state import device_record_codec_for

METRICS_NAMESPACE = "pmbeam.event_level"
REPORTS = "reports"
_SOURCES, _TRIGGERS = 0, 1


class _SourceFrameReader:
    """The columnar shortcut for Avro files of sources (a ``FrameReader``): ``schemas.frames`` decodes and
    judges the file, ``frames.refuse_sources`` applies ``SourceCheck`` once per configuration."""

    def __init__(self, epsilon: float | None) -> None:
        self._epsilon = epsilon

    def read(self, handle, path: str) -> FrameRead | None:
        frame = read_frame(handle, EVENT_LEVEL_SOURCE_COLUMNS)
        if frame is None:
            return None
        split = split_event_level_sources(frame)  # (accepted rows' frame with POSITION, other records)
        kept, reasons = refuse_sources(split.rows, self._epsilon)
        dead = []
        if kept.height < split.rows.height:
            refused = split.rows.filter(reasons.is_not_null())
            dead = [DeadLetter(raw=row_json_line(row), reason=reason, source=f"{path}#{position}")
                    for position, reason, row in zip(refused[POSITION].to_list(), reasons.drop_nulls().to_list(),
                                                     source_rows(refused), strict=True)]
        others = [(position, avro_record(EVENT_LEVEL_SOURCE, record, path, position)) for position, record in split.others]
        latest = cast(int, kept["event_time_micros"].max()) if kept.height else -1  # of a non-empty Int64 column
        return FrameRead(kept.drop(POSITION), kept.height, latest, dead, others)


class SourceFrameShards:
    """Folds one file's sources into per-shard source frames (``schemas.frames.SOURCE_FRAME_COLUMNS``), as
    Arrow IPC bytes tagged ``_SOURCES`` (a ``RowFold`` with ``add_frame``): rows of the codec readers and frames
    of ``_SourceFrameReader`` alike. Shards are ``measurement.device_shard``'s, as the triggers'."""

    flush_rows = 200_000

    def __init__(self, shards: int) -> None:
        self._shards = shards
        self._rows: list[EventLevelSource] = []
        self._frames: list[pl.DataFrame] = []
        self.pending = 0

    def add(self, row: EventLevelSource) -> None:
        self._rows.append(row)
        self.pending += 1

    def add_frame(self, frame: pl.DataFrame) -> None:
        self._frames.append(frame)
        self.pending += frame.height

    def drain(self) -> Iterator[tuple[int, tuple[int, bytes]]]:
        frames = self._frames + ([sources_frame(self._rows)] if self._rows else [])
        self._rows, self._frames, self.pending = [], [], 0
        if not frames:
            return
        frame = pl.concat(frames)
        devices = frame["device_id"].unique().to_list()
        shard_of = dict(zip(devices, (device_shard(device, self._shards) for device in devices), strict=True))
        shards = frame["device_id"].replace_strict(shard_of, return_dtype=pl.Int64).alias("_shard")
        for (shard,), part in frame.with_columns(shards).partition_by("_shard", as_dict=True).items():
            yield shard, (_SOURCES, frame_bytes(part.drop("_shard")))


class _ReplayShardsFn(beam.DoFn):
    """Batch: a shard's sources (frames) and triggers (rows) replayed with ``frames.replay_frame``: the s*
    of every source at once, then every device with a source that may report replays its whole history in one
    call."""

    def __init__(self, epsilon: float | None, source: RandomSource) -> None:
        self._epsilon, self._source = epsilon, source

    def setup(self) -> None:
        self._sources = Metrics.counter(METRICS_NAMESPACE, "sources")
        self._randomized = Metrics.counter(METRICS_NAMESPACE, "randomized_sources")
        self._reports = Metrics.counter(METRICS_NAMESPACE, "reports")

    def process(self, element):
        _, chunks = element  # (shard, [(kind, Arrow IPC bytes of sources | deflated pickle of trigger rows)])
        frames: list[pl.DataFrame] = []
        triggers: list[EventLevelTrigger] = []
        for kind, payload in chunks:
            if kind == _SOURCES:
                frames.append(frame_of_bytes(payload))
            else:
                triggers.extend(EventLevelTrigger._make(packed) for packed in unpack_chunk(payload))
        stats = {"sources": 0, "randomized_sources": 0}
        reports = 0
        if frames:  # otherwise triggers only: nothing to report
            for report in replay_frame(pl.concat(frames), triggers, self._epsilon, self._source, stats):
                reports += 1
                yield report
        self._sources.inc(stats["sources"])
        self._randomized.inc(stats["randomized_sources"])
        self._reports.inc(reports)


class EventLevelReportsBatch(beam.PTransform):
    """Batch path: files of ``EventLevelSource`` and ``EventLevelTrigger`` events in; outputs ``reports``
    (``EventLevelReport`` rows) and ``dead_letters`` (what the readers refused, and sources whose configuration
    is refused at ``epsilon``). ``epsilon`` None: noise off (Alg. 4 alone, randomized trigger rate 0)."""

    def __init__(
        self,
        sources: str,
        triggers: str,
        epsilon: float | None,
        random_source: RandomSource,
        input_format: str | None = None,
        shards: int = DEFAULT_SHARDS,
    ) -> None:
        super().__init__()
        self._sources, self._triggers = sources, triggers
        self._epsilon, self._source, self._format, self._shards = epsilon, random_source, input_format, shards

    def expand(self, pbegin):
        read = [
            pbegin | "Read_event_level_source" >> ReadEvents(
                self._sources, EVENT_LEVEL_SOURCE, self._format, fold=functools.partial(SourceFrameShards, self._shards),
                check=SourceCheck(self._epsilon), frames=_SourceFrameReader(self._epsilon),
            ),
            pbegin | "Read_event_level_trigger" >> ReadEvents(
                self._triggers, EVENT_LEVEL_TRIGGER, self._format,
                fold=functools.partial(RowShards, self._shards, _TRIGGERS),
            ),
        ]
        events, dead_letters, input_files = flatten_reads(read)
        reports = (
            events
            | "GroupShards" >> beam.GroupByKey()  # (shard, [(kind, sources frame | trigger rows)])
            | "ReplayDevices" >> beam.ParDo(_ReplayShardsFn(self._epsilon, self._source))
        )
        return {REPORTS: reports, DEAD_LETTERS: dead_letters, INPUT_FILES: input_files}


class _DeviceFn(DeviceShardFn):
    """Streaming: the clients of a shard's devices over state (``DeviceShardFn``). Events are replayed in the batch
    order once the watermark passed them (plus the allowed lateness), and a window passes once the watermark
    passed its end."""

    replays_new_at_end = True

    def __init__(self, epsilon: float | None, source: RandomSource, lateness_micros: int) -> None:
        super().__init__(lateness_micros)
        self._epsilon, self._source = epsilon, source
        self._chosen: dict[int, tuple[EventLevelSource, Output | None]] = {}  # id(source row) -> (row, its s*)

    def setup(self) -> None:
        self.codec = device_record_codec_for(self._epsilon, self._source)
        self._sources = Metrics.counter(METRICS_NAMESPACE, "sources")
        self._randomized = Metrics.counter(METRICS_NAMESPACE, "randomized_sources")
        self._reports = Metrics.counter(METRICS_NAMESPACE, "reports")

    def new_record(self) -> DeviceRecord:
        return DeviceRecord(EventLevelDevice(self._epsilon, self._source))

    def wake_micros(self, record: DeviceRecord) -> int | None:
        """The next window end: it passes once every event before it is final."""
        return record.state.next_window_micros()

    def hold_until(self, record: DeviceRecord, events: list, held_before: bool = False) -> int | None:
        """Truthful sources wait for the device's next trigger, for at most the longest expiry (30 days) after the
        earliest: then none of them can take a trigger any more, and their replay only registers and forgets them.
        Registered now or with that trigger, in time order, they take the same triggers (Alg. 4), and a truthful
        source's windows are queued only at its first trigger, so it sends nothing before one. A randomized
        source (s* drawn as it arrived, by ``before_replays``) sends s*'s reports at its windows' ends whatever
        the triggers: it is replayed now. A held source is thus truthful, which ``releasing_held`` tells its
        replay: drawing its s* again there would raise its chance of being randomized."""
        if not events or any(type(event) is not EventLevelSource for event in events):
            return None
        if not held_before and any(choice is not None for choice in
                                   self._choices([(event.device_id, event) for event in events])):
            return None
        return min(event.event_time_micros for event in events) + MAX_EXPIRY_SECONDS * MICROS_PER_SECOND

    def releasing_held(self, events: list) -> None:
        """The held sources' s*, drawn as they arrived: truthful (``hold_until``)."""
        self._chosen.update((id(row), (row, None)) for row in events if type(row) is EventLevelSource)

    def before_replays(self, due: dict[str, list]) -> None:
        """Alg. 8's s* for every source of the firing at once: ``choose_randomized`` draws all the sources of a
        configuration with one vectorised call, where a call per device cost about 90 us (measured on the
        event-level soak, nearly one source a device per firing). Each source's s* is drawn once, at the firing
        that registers it, as before; with a seeded source it is the same function of the source's key."""
        self._chosen = {}
        self._choose([(device_id, event) for device_id, events in due.items() for event in events
                      if type(event) is EventLevelSource])

    def _choose(self, sources: list[tuple[str, EventLevelSource]]) -> None:
        chosen = choose_randomized(sources, self._epsilon, self._source)
        self._chosen.update((id(row), (row, choice)) for (_, row), choice in zip(sources, chosen, strict=True))

    def _choices(self, sources: list[tuple[str, EventLevelSource]]) -> list[Output | None]:
        """The s* ``before_replays`` drew for ``sources``; drawn now for those it did not see (events a record
        of an older layout buffered)."""
        unseen = [(device_id, row) for device_id, row in sources if self._chosen.get(id(row), (None,))[0] is not row]
        if unseen:
            self._choose(unseen)
        return [self._chosen[id(row)][1] for _, row in sources]

    def replay_new(self, devices: dict[str, list], fired_micros: int) -> Iterator:
        """The end's devices that hold no state replayed as the batch path replays them (``frames.replay_frame``:
        only the sources that may send a report go through a client, about 8,100 of the 300,000 of the throughput
        benchmark's backlog, and their s* are drawn per configuration at once). Each device's events are its whole
        history and it is replayed to the end of time, as in batch, so the reports are those ``replay`` would
        send."""
        sources: list[EventLevelSource] = []
        triggers: list = []
        for events in devices.values():
            for event in events:
                (sources if type(event) is EventLevelSource else triggers).append(event)
        if not sources:  # nothing to report: a trigger goes to a source only
            return
        stats = {"sources": 0, "randomized_sources": 0}
        reports = list(replay_frame(sources_frame(sources), triggers, self._epsilon, self._source, stats))
        yield from reports
        self._sources.inc(stats["sources"])
        self._randomized.inc(stats["randomized_sources"])
        self._reports.inc(len(reports))

    def replay(self, device_id: str, record: DeviceRecord, events: list, fired_micros: int) -> Iterator:
        events = sorted(events, key=event_order)
        sources = [(device_id, event) for event in events if type(event) is EventLevelSource]
        chosen = self._choices(sources)
        device = record.state
        reports = device.feed(events, chosen) + device.advance_to(record.cut)
        yield from reports  # at the firing's time
        device.forget_expired()
        self._sources.inc(len(sources))
        self._randomized.inc(sum(choice is not None for choice in chosen))
        self._reports.inc(len(reports))


class EventLevelReportsStreaming(beam.PTransform):
    """Streaming path over a PCollection of ``EventLevelSource`` and ``EventLevelTrigger`` rows (already validated,
    including ``SourceCheck`` at ``epsilon``); outputs ``reports`` (``EventLevelReport`` rows) and ``dead_letters``
    (``late`` events only: parse and configuration dead letters come from the reader). With ``durable``, the
    device step's state is also kept in the job's durable store."""

    def __init__(self, epsilon: float | None, random_source: RandomSource, allowed_lateness_micros: int = 0,
                 durable: DurableStep | None = None) -> None:
        super().__init__()
        self._epsilon, self._source, self._lateness = epsilon, random_source, allowed_lateness_micros
        self._durable = durable

    def expand(self, rows):
        replayed = replay_devices(rows, _DeviceFn(self._epsilon, self._source, self._lateness), main=REPORTS,
                                  durable=self._durable)
        return {REPORTS: replayed[REPORTS], DEAD_LETTERS: replayed[DEAD_LETTERS]}


def read_streaming_rows(pbegin, sources: str, triggers: str, epsilon: float | None, input_format: str | None = None):
    """The streaming recipe's input from files: ``(rows, dead_letters, input_files)``; sources checked at
    ``epsilon`` (``SourceCheck``)."""
    read = [
        pbegin | f"Read_{spec.name}" >> ReadEvents(pattern, spec, input_format, check=check)
        for pattern, spec, check in ((sources, EVENT_LEVEL_SOURCE, SourceCheck(epsilon)),
                                     (triggers, EVENT_LEVEL_TRIGGER, None))
    ]
    return flatten_reads(read)
