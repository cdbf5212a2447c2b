"""Beam wiring of on-device budgeting and the querier's queries (Cookie Monster paper Appendix A Alg. 1, Sec. 8.1).

The mechanisms (``transforms/budgeting/mechanisms/device.py``, ``queries.py``) do the
work; this module only moves events to them:

Batch (the fast path):
    files ─ ReadEvents, folded per file into device shards ─► (shard, (kind, deflated pickled columns or rows))
          ─ GroupByKey ─► ReplayShards: every device with a conversion replays its whole history in one
          call ─► ReportRecord ─ GroupByKey (querier, query key) ─► batches of B in conversion-time order
          ─ GroupByKey (one key) ─► RunQueries in batch order (IPA-like: central budget) ─► QueryResult
Streaming:
    rows, timestamped at event time ─ keyed by device ─► DeviceFn (state: buffered events, impressions,
    filters; event-time timers) ─► ReportRecord ─ keyed (querier, query key) ─► BatchFn (state: the open
    batch) ─► QueryBatch ─ keyed by querier ─► QueryFn (state: central budget) ─► QueryResult

Each stateful stage buffers what arrives and handles it only once the
watermark has passed it, in the same order the batch path uses (events by
``event_order``, reports by ``report_order``, batches by ``batch_order``), so
arrival order never changes a result and both paths agree for the same input
and seed. Events later than the allowed lateness are dead-lettered as
``late``. Budget rows (SENSITIVE, evaluation only) are emitted per
(querier, device, epoch): in streaming once no future conversion can reach
the epoch, and at the end of the input.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow, TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from schemas.codecs import CONVERSION, IMPRESSION
from schemas.rows import Conversion, DeadLetter, DeviceEpochBudget, Impression
from transforms.budgeting.mechanisms.device import (
    DeviceState,
    MeasurementConfig,
    ReportRecord,
    budget_rows,
    event_order,
    replay,
    resolve_request,
    sort_events,
    with_central,
)
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.budgeting.mechanisms.queries import BatchCutter, CentralBudget, batch_order, report_order, run_queries
from transforms.budgeting.state import QUERIER_CODEC, BatchRecord, QuerierRecord, batch_codec, device_codec
from transforms.core.device_state import (
    DEFAULT_SHARDS,
    END_OF_INPUT,
    DeviceRecord,
    RowShards,
    after_milli,
    device_shard,
    pack,
    stamped,
    unpack_chunk,
)
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, ReadEvents, flatten_reads
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.state import StateCodec

METRICS_NAMESPACE = "pmbeam.measurement"
REPORTS, BUDGETS, RESULTS, INCOMPLETE = "reports", "budgets", "results", "incomplete"
CENTRAL = "central"
_IMPRESSION, _CONVERSION = 0, 1


class ImpressionShards:
    """Folds one file's impressions into per-shard columns, pickled (a ``RowFold``).

    Beam pays per element and per encoded object. Here a shard's impressions
    travel as one bytes element of four columns: device ids, times,
    impression ids, and a code into the table of the (publisher, advertiser,
    campaign, product, filter keys) combinations, which repeat. Pickling
    columns of strings and ints is several times faster than pickling rows.
    """

    flush_rows = 200_000  # about 30 MB of columns before they are pickled

    def __init__(self, shards: int) -> None:
        self._shards = shards
        self._columns: dict[int, tuple[list, list, list, list]] = {}
        self._codes: dict[tuple, int] = {}
        self._shard_of: dict[str, int] = {}
        self.pending = 0

    def add(self, row: Impression) -> None:
        device, time, impression, publisher, advertiser, campaign, product, keys = row
        shard = self._shard_of.get(device)
        if shard is None:
            shard = self._shard_of[device] = device_shard(device, self._shards)
            if shard not in self._columns:
                self._columns[shard] = ([], [], [], [])
        devices, times, impressions, codes = self._columns[shard]
        rest = (publisher, advertiser, campaign, product, keys)
        code = self._codes.get(rest)
        if code is None:
            code = self._codes[rest] = len(self._codes)
        devices.append(device)
        times.append(time)
        impressions.append(impression)
        codes.append(code)
        self.pending += 1

    def drain(self) -> Iterator[tuple[int, tuple[int, bytes]]]:
        table = list(self._codes)
        for shard, columns in self._columns.items():
            yield shard, (_IMPRESSION, pack((*columns, table)))
        self._columns, self._codes, self._shard_of, self.pending = {}, {}, {}, 0


def _unpack(chunks: Iterable[tuple[int, bytes]]) -> dict[str, list]:
    """A shard's chunks as rows per device, for the devices that have a conversion (no other device is read
    by anything, so its impressions are not even turned into rows)."""
    conversions: dict[str, list] = {}
    impressions = []
    for kind, payload in chunks:
        if kind == _CONVERSION:
            for packed in unpack_chunk(payload):
                conversions.setdefault(packed[0], []).append(Conversion._make(packed))
        else:
            impressions.append(payload)
    for payload in impressions:
        devices, times, ids, codes, table = unpack_chunk(payload)
        for index, device in enumerate(devices):
            events = conversions.get(device)
            if events is not None:
                events.append(Impression(device, times[index], ids[index], *table[codes[index]]))
    return conversions


class ConversionCheck:
    """Job-level validation of a conversion (``resolve_request``): the dead-letter reason, or None."""

    def __init__(self, config: MeasurementConfig) -> None:
        self._config = config

    def __call__(self, conversion: Conversion) -> str | None:
        resolved = resolve_request(conversion, self._config)
        return resolved if isinstance(resolved, str) else None


class _ReplayShardsFn(beam.DoFn):
    """Batch: every device of a shard that has a conversion replays its whole history in one call."""

    def __init__(self, config: MeasurementConfig, source: RandomSource, emit_budgets: bool) -> None:
        self._config, self._source, self._emit_budgets = config, source, emit_budgets

    def setup(self) -> None:
        self._policy = make_policy(self._config.policy)
        self._replayed = Metrics.counter(METRICS_NAMESPACE, "devices_with_conversions")
        self._reports = Metrics.counter(METRICS_NAMESPACE, "reports")

    def process(self, element):
        _, chunks = element  # (shard, [(kind, deflated pickle)])
        devices = _unpack(chunks)  # only devices with a conversion: nothing reads the others, nothing is paid
        reports = 0
        for device_id in sorted(devices):
            events = devices[device_id]
            events.sort(key=event_order)
            state = DeviceState(self._config.capacity_units)
            for report in replay(device_id, events, state, self._config, self._policy, self._source):
                reports += 1
                yield report
            if self._emit_budgets:
                for row in budget_rows(device_id, state.filters.consumed, self._config):
                    yield beam.pvalue.TaggedOutput(BUDGETS, row)
        self._replayed.inc(len(devices))
        self._reports.inc(reports)


def _cut_batches(element, batch_size: int):
    """Batch: the reports of one (querier, query key) in report order, cut into batches of B."""
    (querier, query_key), reports = element
    cutter = BatchCutter(querier, query_key, batch_size)
    yield from cutter.add(sorted(reports, key=report_order))
    if cutter.incomplete():
        yield beam.pvalue.TaggedOutput(INCOMPLETE, cutter.incomplete())


class _RunQueriesFn(beam.DoFn):
    """Batch: every batch of the job in batch order through one central budget (IPA-like) or none."""

    def __init__(self, config: MeasurementConfig, source: RandomSource) -> None:
        self._config, self._source = config, source

    def process(self, element):
        _, batches = element
        central = CentralBudget(self._config.capacity_units) if self._config.policy == "ipa_like" else None
        yield from run_queries(batches, central, self._source, self._config.bias)
        if central is not None:
            for key, units in central.filters.items():
                yield beam.pvalue.TaggedOutput(CENTRAL, (key, units))


class MeasureBatch(beam.PTransform):
    """Batch path: impressions and conversions files in; outputs ``reports`` (AttributionReport),
    ``results`` (QueryResult), ``incomplete`` (IncompleteBatch), ``budgets``
    (DeviceEpochBudget, SENSITIVE; empty unless ``emit_budgets``) and ``dead_letters``."""

    def __init__(
        self,
        impressions: str,
        conversions: str,
        config: MeasurementConfig,
        source: RandomSource,
        batch_size: int,
        input_format: str | None = None,
        emit_budgets: bool = False,
        shards: int = DEFAULT_SHARDS,
    ) -> None:
        super().__init__()
        self._impressions, self._conversions, self._format = impressions, conversions, input_format
        self._config, self._source, self._batch_size = config, source, batch_size
        self._emit_budgets, self._shards = emit_budgets, shards

    def expand(self, pbegin):
        config, source = self._config, self._source
        # (shard, (kind, deflated pickle)), one per shard per file and drain
        impressions = pbegin | "ReadImpressions" >> ReadEvents(
            self._impressions, IMPRESSION, self._format, fold=functools.partial(ImpressionShards, self._shards)
        )
        conversions = pbegin | "ReadConversions" >> ReadEvents(
            self._conversions, CONVERSION, self._format,
            fold=functools.partial(RowShards, self._shards, _CONVERSION), check=ConversionCheck(config),
        )
        events, dead_letters, input_files = flatten_reads([impressions, conversions])
        # ReportRecord; budgets: DeviceEpochBudget
        replayed = (
            events
            | "GroupShards" >> beam.GroupByKey()  # (shard, [(kind, deflated pickle)])
            | "ReplayDevices" >> beam.ParDo(_ReplayShardsFn(config, source, self._emit_budgets)).with_outputs(
                BUDGETS, main=REPORTS
            )
        )
        # QueryBatch; incomplete: IncompleteBatch
        cut = (
            replayed[REPORTS]
            | "KeyByQuery" >> beam.Map(lambda report: ((report.querier_site, report.query_key), report))
            | "GroupByQuery" >> beam.GroupByKey()
            | "CutBatches" >> beam.FlatMap(_cut_batches, self._batch_size).with_outputs(INCOMPLETE, main="batches")
        )
        # QueryResult; central: ((querier, epoch), units) for IPA-like
        queried = (
            cut["batches"]
            | "OneQueue" >> beam.Map(lambda batch: (None, batch))
            | "GatherBatches" >> beam.GroupByKey()
            | "RunQueries" >> beam.ParDo(_RunQueriesFn(config, source)).with_outputs(CENTRAL, main=RESULTS)
        )
        budgets = replayed[BUDGETS]
        if config.policy == "ipa_like":
            budgets = budgets | "CentralBudgets" >> beam.Map(with_central, central_consumed=beam.pvalue.AsDict(queried[CENTRAL]))
        return {
            REPORTS: replayed[REPORTS] | "PublicReports" >> beam.Map(ReportRecord.public),
            RESULTS: queried[RESULTS],
            INCOMPLETE: cut[INCOMPLETE],
            BUDGETS: budgets,
            DEAD_LETTERS: dead_letters,
            INPUT_FILES: input_files,
        }


# Streaming: the stateful stages follow the scheme of ``transforms.core.device_state``.


class _DeviceFn(beam.DoFn):
    """Streaming: one device's on-device logic over state; events are replayed once the watermark passed them
    (plus the allowed lateness). An epoch's filters are dropped, and their budget rows emitted, once no later
    conversion can reach it (``MeasurementConfig.oldest_reachable_epoch``), on the EXPIRE timer."""

    RECORD = ReadModifyWriteStateSpec("record", BytesCoder())  # a DeviceRecordState (transforms.budgeting.state)
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)
    EXPIRE = TimerSpec("expire", TimeDomain.WATERMARK)

    def __init__(self, config: MeasurementConfig, source: RandomSource, emit_budgets: bool, lateness_micros: int) -> None:
        self._config, self._source = config, source
        self._emit_budgets, self._lateness = emit_budgets, lateness_micros

    def setup(self) -> None:
        self._policy = make_policy(self._config.policy)
        self._codec = device_codec(self._config.capacity_units)

    def _new_record(self) -> DeviceRecord:
        return DeviceRecord(DeviceState(self._config.capacity_units))

    def process(self, element, state=beam.DoFn.StateParam(RECORD), flush=beam.DoFn.TimerParam(FLUSH)):
        _, event = element  # (device_id, Impression | Conversion)
        record = self._codec.read(state, self._new_record)
        if event.event_time_micros < record.cut:
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTERS, DeadLetter(raw=repr(tuple(event)), reason="late", source=f"device {event.device_id}")
            )
            return
        record.add(event.event_time_micros, event, flush, self._lateness)
        self._codec.write(state, record)

    def _advance(self, key: str, record: DeviceRecord, flush, expire, until: int):
        """Replay the buffered events before ``until``, expire the epochs no conversion from then on can reach,
        and set the timers for what is left."""
        events = sort_events(record.advance(until))
        device = record.state
        for report in replay(key, events, device, self._config, self._policy, self._source):
            yield stamped(report, after_milli(report.conversion_time_micros) + self._lateness)
        oldest = self._config.oldest_reachable_epoch(until)
        expired = [filter_key for filter_key in device.filters.consumed if filter_key[1] < oldest]
        if self._emit_budgets:
            for row in budget_rows(key, device.filters.consumed, self._config, expired):
                yield beam.pvalue.TaggedOutput(BUDGETS, row)
        for filter_key in expired:
            del device.filters.consumed[filter_key]
        device.forget_before(oldest)
        kept = [epoch for _, epoch in device.filters.consumed] + list(device.impressions)
        if kept:
            # the first time at which min(kept) is out of every window: the start of the next epoch plus the window
            unreachable = self._config.clock.epoch_start_micros(min(kept) + 1) + self._config.max_window_micros
            expire.set(Timestamp(micros=after_milli(unreachable - 1) + self._lateness))
        record.rearm(flush, self._lateness)

    @on_timer(FLUSH)
    @on_timer(EXPIRE)
    def on_timer_fired(
        self,
        key=beam.DoFn.KeyParam,
        fired=beam.DoFn.TimestampParam,
        state=beam.DoFn.StateParam(RECORD),
        flush=beam.DoFn.TimerParam(FLUSH),
        expire=beam.DoFn.TimerParam(EXPIRE),
    ):
        """Both timers do the same: replay what the watermark has passed, expire what no conversion can reach."""
        record = self._codec.read(state, self._new_record)
        yield from self._advance(key, record, flush, expire, fired.micros - self._lateness)
        self._codec.write(state, record)


class _ReportsPerBundleFn(beam.DoFn):
    """Streaming, before the batch cutter's state: a bundle's reports grouped per (querier, query key) with the
    time each was stamped, so that ``_BatchFn`` reads and writes a key's buffered reports once per bundle rather
    than once per report (which made the stage quadratic in the reports buffered)."""

    def start_bundle(self) -> None:
        self._keys: dict[str, list] = {}

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        key, report = element
        self._keys.setdefault(key, []).append((timestamp.micros, report))

    def finish_bundle(self):
        for key, reports in self._keys.items():
            yield WindowedValue((key, tuple(reports)), Timestamp(micros=min(stamp for stamp, _ in reports)),
                                (GlobalWindow(),))


class _BatchFn(beam.DoFn):
    """Streaming: the reports of one (querier, query key) cut into batches of B in report order. The key is
    the JSON text of [querier, query key]: a tuple key's coder is not deterministic enough for timers."""

    RECORD = ReadModifyWriteStateSpec("record", BytesCoder())  # a BatchCutterState (transforms.budgeting.state)
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)
    END = TimerSpec("end", TimeDomain.WATERMARK)

    def __init__(self, batch_size: int) -> None:
        self._batch_size = batch_size

    @staticmethod
    def _querier_and_query_key(key: str) -> tuple[str, str]:
        querier_site, query_key = json.loads(key)
        return querier_site, query_key

    def _codec(self, key: str) -> StateCodec:
        return batch_codec(*self._querier_and_query_key(key), self._batch_size)

    def _record(self, key: str, state) -> BatchRecord:
        return self._codec(key).read(
            state, lambda: BatchRecord(BatchCutter(*self._querier_and_query_key(key), self._batch_size)))

    def process(
        self,
        element,
        key=beam.DoFn.KeyParam,
        timestamp=beam.DoFn.TimestampParam,
        state=beam.DoFn.StateParam(RECORD),
        flush=beam.DoFn.TimerParam(FLUSH),
        end=beam.DoFn.TimerParam(END),
    ):
        record = self._record(key, state)  # element: (key, ((stamp, ReportRecord), ...)) of one bundle
        end.set(END_OF_INPUT)
        for stamp, report in element[1]:
            record.add(stamp, report, flush)
        self._codec(key).write(state, record)

    def _advance(self, record: BatchRecord, until: int | None):
        for time, report in sorted(record.take(until), key=lambda entry: report_order(entry[1])):
            for batch in record.cutter.add([report]):
                yield stamped(batch, after_milli(time))

    @on_timer(FLUSH)
    def on_flush(
        self,
        key=beam.DoFn.KeyParam,
        fired=beam.DoFn.TimestampParam,
        state=beam.DoFn.StateParam(RECORD),
        flush=beam.DoFn.TimerParam(FLUSH),
    ):
        record = self._record(key, state)
        yield from self._advance(record, fired.micros)
        record.rearm(flush)
        self._codec(key).write(state, record)

    @on_timer(END)
    def on_end(self, key=beam.DoFn.KeyParam, state=beam.DoFn.StateParam(RECORD)):
        record = self._record(key, state)
        yield from self._advance(record, None)
        self._codec(key).write(state, record)
        incomplete = record.cutter.incomplete()
        if incomplete:
            yield beam.pvalue.TaggedOutput(INCOMPLETE, incomplete)


class _QueryFn(beam.DoFn):
    """Streaming: one querier's batches run in batch order; IPA-like through the querier's central budget.
    IPA-like device budget rows wait here for the end of the input, when the central consumption is final."""

    RECORD = ReadModifyWriteStateSpec("record", BytesCoder())  # a QuerierState (transforms.budgeting.state)
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)
    END = TimerSpec("end", TimeDomain.WATERMARK)

    def __init__(self, config: MeasurementConfig, source: RandomSource) -> None:
        self._config, self._source = config, source

    def process(
        self,
        element,
        timestamp=beam.DoFn.TimestampParam,
        state=beam.DoFn.StateParam(RECORD),
        flush=beam.DoFn.TimerParam(FLUSH),
        end=beam.DoFn.TimerParam(END),
    ):
        _, item = element
        record = QUERIER_CODEC.read(state, QuerierRecord)
        end.set(END_OF_INPUT)
        if type(item) is DeviceEpochBudget:
            record.rows.append(item)
        else:
            record.add(timestamp.micros, item, flush)
        QUERIER_CODEC.write(state, record)

    def _advance(self, record: QuerierRecord, until: int | None):
        central = CentralBudget(self._config.capacity_units, record.central) if self._config.policy == "ipa_like" else None
        due = sorted(record.take(until), key=lambda entry: batch_order(entry[1]))
        results = run_queries([batch for _, batch in due], central, self._source, self._config.bias)
        for (time, _), result in zip(due, results, strict=True):  # one result per batch, in the same order
            yield stamped(result, after_milli(time))

    @on_timer(FLUSH)
    def on_flush(self, fired=beam.DoFn.TimestampParam, state=beam.DoFn.StateParam(RECORD), flush=beam.DoFn.TimerParam(FLUSH)):
        record = QUERIER_CODEC.read(state, QuerierRecord)
        yield from self._advance(record, fired.micros)
        record.rearm(flush)
        QUERIER_CODEC.write(state, record)

    @on_timer(END)
    def on_end(self, state=beam.DoFn.StateParam(RECORD)):
        record = QUERIER_CODEC.read(state, QuerierRecord)
        yield from self._advance(record, None)
        QUERIER_CODEC.write(state, record)
        for row in record.rows:
            yield beam.pvalue.TaggedOutput(BUDGETS, with_central(row, record.central))


# _STAGE_BOUNDARY: a Reshuffle before each stateful stage after the first. The local portable runner fuses
# consecutive stateful DoFns into one stage and then hands one DoFn's timers the other's keys; the shuffle
# keeps them apart (on Dataflow and Flink it is one more keyed exchange, which those runners do anyway).


def _timestamped(row):
    return TimestampedValue((row.device_id, row), Timestamp(micros=row.event_time_micros))


class MeasureStreaming(beam.PTransform):
    """Streaming path over a PCollection of Impression and Conversion rows (already validated, including
    ``ConversionCheck``); the same outputs as ``MeasureBatch`` except ``dead_letters`` holds only ``late``
    events (parse dead letters come from the reader)."""

    def __init__(
        self, config: MeasurementConfig, source: RandomSource, batch_size: int, emit_budgets: bool = False,
        allowed_lateness_micros: int = 0,
    ) -> None:
        super().__init__()
        self._config, self._source, self._batch_size = config, source, batch_size
        self._emit_budgets, self._lateness = emit_budgets, allowed_lateness_micros

    def expand(self, rows):
        config, source = self._config, self._source
        ipa = config.policy == "ipa_like"
        # ReportRecord, timestamped when the device's timer fired; budgets: DeviceEpochBudget; dead_letters: late
        devices = (
            rows
            | "AtEventTime" >> beam.Map(_timestamped)  # (device_id, row)
            | "Devices" >> beam.ParDo(_DeviceFn(config, source, self._emit_budgets, self._lateness)).with_outputs(
                BUDGETS, DEAD_LETTERS, main=REPORTS
            )
        )
        batched = (
            devices[REPORTS]
            | "KeyByQuery" >> beam.Map(lambda report: (json.dumps([report.querier_site, report.query_key]), report))
            | "ShuffleReports" >> beam.Reshuffle()  # see _STAGE_BOUNDARY
            | "ReportsPerKey" >> beam.ParDo(_ReportsPerBundleFn()).with_output_types(tuple[str, Any])
            | "Batches" >> beam.ParDo(_BatchFn(self._batch_size)).with_outputs(INCOMPLETE, main="batches")
        )
        to_queries = [batched["batches"] | "KeyByQuerier" >> beam.Map(lambda batch: (batch.querier_site, batch))]
        if ipa:
            to_queries.append(devices[BUDGETS] | "BudgetsByQuerier" >> beam.Map(lambda row: (row.querier_site, row)))
        queried = (
            to_queries
            | "ToQueries" >> beam.Flatten()
            | "ShuffleBatches" >> beam.Reshuffle()  # see _STAGE_BOUNDARY
            | "Queries" >> beam.ParDo(_QueryFn(config, source)).with_outputs(BUDGETS, main=RESULTS)
        )
        return {
            REPORTS: devices[REPORTS] | "PublicReports" >> beam.Map(ReportRecord.public),
            RESULTS: queried[RESULTS],
            INCOMPLETE: batched[INCOMPLETE],
            BUDGETS: queried[BUDGETS] if ipa else devices[BUDGETS],
            DEAD_LETTERS: devices[DEAD_LETTERS],
        }
