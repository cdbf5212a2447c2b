"""Beam wiring of on-device budgeting and the querier's queries (Cookie Monster paper Appendix A Alg. 1, Sec. 8.1).

The mechanisms (``transforms/budgeting/mechanisms/device.py``, ``queries.py``) do the
work; this module only moves events to them:

Batch (the fast path):
    files ─ ReadEvents, folded per file into device shards ─► (shard, (kind, deflated pickled columns or rows))
          ─ GroupByKey ─► ReplayShards: every device with a conversion replays its whole history in one
          call ─► ReportRecord ─ GroupByKey (querier, query key) ─► batches of B in conversion-time order
          ─ GroupByKey (one key) ─► RunQueries in batch order (IPA-like: central budget) ─► QueryResult
Streaming:
    rows (or a topic's EventBatches) ─ per shard, hour and bundle ─► DeviceFn, one stateful stage (state per
    shard: buffered events, each device's impressions and filters, and beside them the batches being filled
    and the IPA-like central filters; one event-time timer) ─► ReportRecord, QueryResult

The stage buffers what arrives and handles it only once the watermark has
passed it, in the same order the batch path uses (events by ``event_order``,
reports by ``report_order``, batches by ``batch_order``), so
arrival order never changes a result and both paths agree for the same input
and seed. Events later than the allowed lateness are dead-lettered as
``late``. Budget rows (SENSITIVE, evaluation only) are emitted per
(querier, device, epoch): in streaming once no future conversion can reach
the epoch, and at the end of the input.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from schemas.codecs import CONVERSION, IMPRESSION
from schemas.rows import Conversion, Impression
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
from transforms.budgeting.mechanisms.queries import (
    REJECTED,
    BatchCutter,
    CentralBudget,
    batch_order,
    report_order,
    run_queries,
)
from transforms.budgeting.state import QueriesRecord, device_codec, queries_codec
from transforms.core import metrics
from transforms.core.device_shards import DEFAULT_SHARDS, RowShards, device_shard, pack, unpack_chunk
from transforms.core.device_state import DeviceRecord
from transforms.core.device_stream import DeviceShardFn, replay_devices
from transforms.core.durable.step import DurableStep
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, ReadEvents, flatten_reads
from transforms.core.mechanisms.noise import RandomSource

METRICS_NAMESPACE = "pmbeam.measurement"
REPORTS, BUDGETS, RESULTS, INCOMPLETE = "reports", "budgets", "results", "incomplete"
CENTRAL = "central"
_IMPRESSION, _CONVERSION = 0, 1


class ImpressionShards:
    """Folds one file's impressions into per-shard columns, pickled (a ``RowFold``).

    Beam pays per element and per encoded object. Here a shard's impressions
    travel as one bytes element of four columns: device ids, times,
    impression ids, and a code into the table of the (publisher, advertiser,
    campaign, product, filter keys, intermediary, conversion callers)
    combinations, which repeat. Pickling
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
        device, time, impression = row[:3]
        shard = self._shard_of.get(device)
        if shard is None:
            shard = self._shard_of[device] = device_shard(device, self._shards)
            if shard not in self._columns:
                self._columns[shard] = ([], [], [], [])
        devices, times, impressions, codes = self._columns[shard]
        rest = row[3:]  # the attributes, a plain tuple
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
            state = DeviceState(self._config.new_filters())
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


# Streaming: the device replay of ``transforms.core.device_stream``.


class _DeviceFn(DeviceShardFn):
    """Streaming: the on-device logic of a shard's devices over state (``DeviceShardFn``); events are replayed once
    the watermark passed them (plus the allowed lateness). An epoch's filters are dropped, and their budget rows
    emitted, once no later conversion can reach it (``MeasurementConfig.oldest_reachable_epoch``).

    Without batched scheduling, a device holds its impressions back until its next conversion (``hold_until``):
    on the device of Cookie Monster (Tholoniat et al., SOSP 2024, section 4) an impression is only stored, and the
    filters are charged when a conversion's report is computed from the impressions of its window. So a device that
    sees only impressions is neither replayed nor written, where a live job otherwise replays and writes nearly
    every device at every firing (benchmarks/README.md, session 15)."""

    def __init__(self, config: MeasurementConfig, source: RandomSource, batch_size: int, emit_budgets: bool,
                 lateness_micros: int) -> None:
        super().__init__(lateness_micros)
        self._config, self._source, self._batch_size = config, source, batch_size
        self._emit_budgets = emit_budgets
        # a wake expires epochs (at the end, it emits only their budget rows) or, with batched scheduling, runs the
        # device's scheduling intervals (at the end, it releases every report still held)
        self.wakes_at_end = emit_budgets or config.scheduling is not None
        self._holds = config.scheduling is None

    def setup(self) -> None:
        self._policy = make_policy(self._config.policy)
        self._ipa = self._config.policy == "ipa_like"
        self.codec = device_codec(self._config)
        self.side_codec = queries_codec(self._batch_size)

    def new_record(self) -> DeviceRecord:
        return DeviceRecord(DeviceState(self._config.new_filters()))

    def new_side(self) -> QueriesRecord:
        return QueriesRecord(self._batch_size)

    def after_replays(self, side: QueriesRecord, outputs: list, fired_micros: int, at_end: bool) -> Iterator:
        """The firing's reports (public: ``AttributionReport``) in report order, cut into batches of B per
        (querier, query key), and the full batches queried in batch order (IPA-like: through the central filters).
        A firing replays exactly the events since the previous cut, so firings in order keep the batch path's
        order. IPA-like device rows wait for the end of the input, when the central consumption is final."""
        reports = []
        for output in outputs:
            if type(output) is ReportRecord:
                reports.append(output)
            elif self._ipa and isinstance(output, beam.pvalue.TaggedOutput) and output.tag == BUDGETS:
                side.rows.append(output.value)
            else:
                yield output
        batches = []
        for report in sorted(reports, key=report_order):
            yield report.public()
            batches += side.cutter(report.querier_site, report.query_key).add([report])
        metrics.budget_refused("device_epoch", sum(report.dropped_epochs for report in reports))
        central = CentralBudget(self._config.capacity_units, side.central) if self._ipa else None
        for result in run_queries(sorted(batches, key=batch_order), central, self._source, self._config.bias):
            if result.status == REJECTED:
                metrics.budget_refused("query", 1)
            yield beam.pvalue.TaggedOutput(RESULTS, result)
        if central is not None:
            side.central = central.filters.consumed
        if at_end:
            for _, cutter in sorted(side.cutters.items()):
                incomplete = cutter.incomplete()
                if incomplete:
                    yield beam.pvalue.TaggedOutput(INCOMPLETE, incomplete)
            for row in side.rows:
                yield beam.pvalue.TaggedOutput(BUDGETS, with_central(row, side.central))
            side.rows = []

    def replay(self, device_id: str, record: DeviceRecord, events: list, fired_micros: int) -> Iterator:
        """Replay the events before the cut (and the scheduling intervals ended by then), expire the epochs no
        conversion from then on can reach."""
        device = record.state
        yield from replay(device_id, sort_events(events), device, self._config, self._policy, self._source,
                          until_micros=record.cut)
        oldest = device.oldest_needed_epoch(self._config, record.cut)
        expired = [filter_key for filter_key in device.filters.consumed if filter_key[1] < oldest]
        if self._emit_budgets:
            for row in budget_rows(device_id, device.filters.consumed, self._config, expired):
                yield beam.pvalue.TaggedOutput(BUDGETS, row)
        for filter_key in expired:
            del device.filters.consumed[filter_key]
        device.forget_before(oldest)

    def hold_until(self, record: DeviceRecord, events: list, held_before: bool = False) -> int | None:
        """Impressions wait for the device's next conversion, for at most the longest window after the earliest
        (then none of them can be attributed any more, and their replay only drops them). Replayed now or with the
        conversion, in time order, they are stored the same before it and attributed the same by it; its epochs'
        filters are charged by it alone. With batched scheduling nothing waits: a scheduled report's release
        follows the events' times."""
        if not self._holds or not events or any(type(event) is Conversion for event in events):
            return None
        return min(event.event_time_micros for event in events) + self._config.max_window_micros

    def trim_held(self, record: DeviceRecord, events: list, earliest_micros: int, cut: int) -> tuple[list, int] | None:
        """At the deadline of held impressions, those of the epochs a conversion at or after ``earliest_micros`` may
        still read (``oldest_reachable_epoch``) wait a longest window more: a replay would drop the others unread and
        store these, which a later replay stores the same (the device's stored epochs wait for its own wake, not
        due). With batched scheduling nothing waits (a shard read back from a run without it replays them)."""
        if not self._holds:
            return None
        oldest, epoch_of = self._config.oldest_reachable_epoch(earliest_micros), self._config.clock.epoch_of
        kept = [event for event in events if epoch_of(event.event_time_micros) >= oldest]
        return kept, cut + self._config.max_window_micros

    def wake_micros(self, record: DeviceRecord) -> int | None:
        """The first time at which the device's oldest epoch is out of every window (the start of the next epoch
        plus the window) or, with conversions scheduled, the end of the current scheduling interval. A device that
        holds impressions back (``hold_until``) forgets its epochs a longest window later, in steps of that window
        instead of one epoch at a time: it is then woken for them seldom, and keeps at most two windows of epochs."""
        device = record.state
        kept = [filter_key[1] for filter_key in device.filters.consumed] + list(device.impressions)
        schedule, scheduling = device.schedule, self._config.scheduling
        wakes = []
        if schedule is not None:
            assert scheduling is not None
            kept += schedule.released
            if schedule.outstanding:
                wakes.append(scheduling.interval_end_micros(schedule.interval))
        if kept:
            window = self._config.max_window_micros
            wakes.append(self._config.clock.epoch_start_micros(min(kept) + 1) + window + (window if self._holds else 0))
        return min(wakes, default=None)


class MeasureStreaming(beam.PTransform):
    """Streaming path over a PCollection of Impression and Conversion rows (already validated, including
    ``ConversionCheck``); the same outputs as ``MeasureBatch`` except ``dead_letters`` holds only ``late``
    events (parse dead letters come from the reader). With ``durable``, the device step's state is also kept
    in the job's durable store."""

    def __init__(
        self, config: MeasurementConfig, source: RandomSource, batch_size: int, emit_budgets: bool = False,
        allowed_lateness_micros: int = 0, durable: DurableStep | None = None,
    ) -> None:
        super().__init__()
        self._config, self._source, self._batch_size = config, source, batch_size
        self._emit_budgets, self._lateness, self._durable = emit_budgets, allowed_lateness_micros, durable

    def expand(self, rows):
        # ReportRecord; results: QueryResult; incomplete: IncompleteBatch; budgets: DeviceEpochBudget;
        # dead_letters: late events
        devices = replay_devices(
            rows, _DeviceFn(self._config, self._source, self._batch_size, self._emit_budgets, self._lateness),
            REPORTS, BUDGETS, RESULTS, INCOMPLETE, durable=self._durable,
        )
        return {
            REPORTS: devices[REPORTS],
            RESULTS: devices[RESULTS],
            INCOMPLETE: devices[INCOMPLETE],
            BUDGETS: devices[BUDGETS],
            DEAD_LETTERS: devices[DEAD_LETTERS],
        }
