"""Beam wiring of the summary-report clients: ARA-SR-Client (Ghazi et al. Alg. 2) and PAA-SR-Client (Alg. 3).

The clients (``transforms/summary_reports/mechanisms/ara_client.py``, ``paa_client.py``) do the work, per device; this module only
moves each device's events to them, as the on-device measurement job does (``transforms/budgeting/measurement.py``,
whose sharding, packing and buffering helpers it reuses):

Batch (``SummaryReportsBatch``):
    files ─ ReadEvents, folded per file into device shards ─► (shard, (kind, deflated pickled rows))
          ─ GroupByKey ─► _ReplayShardsFn: every device with a report event (an ARA trigger, a PAA event)
          replays its whole history in time order in one call ─► ClientReport ─► AggregatableReport records
Streaming (``SummaryReportsStreaming``):
    rows ─ grouped per device within each bundle, at the earliest event time ─► _ClientFn (state: buffered
    events and the client's state; an event-time timer) ─► ClientReport ─► AggregatableReport records

The streaming stage buffers what arrives and replays it only once the watermark has passed it (plus the
allowed lateness), in the client's order, so arrival order never changes a report, and both paths send the
same reports for the same input and seed (report ids and delays are drawn per (device, event)). An event
behind what its device has already replayed is a dead letter ``late``. On the local DirectRunner the streaming
recipe runs at about 500 events/s: a device's timer fires once per distinct millisecond of its events when the
watermark jumps over them (as it does for files), and each firing commits the device's state, which the SDK's
state cache measures by walking every loaded module (about a millisecond). Use it for correctness checks and
real streaming runners, and the batch path for throughput. Each device keeps its client state
for the life of a streaming job (ARA: its sources, dropped once expired; PAA: its shared storage, which never
expires, and the budgets of the current window).
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from schemas.codecs import EventSpec
from transforms.core import metrics
from transforms.core.device_shards import DEFAULT_SHARDS, RowShards, unpack_chunk
from transforms.core.device_state import DeviceRecord
from transforms.core.device_stream import DeviceShardFn, replay_devices
from transforms.core.durable.step import DurableStep
from transforms.core.inspected import InspectedOnceDoFn
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, ReadEvents, flatten_reads
from transforms.core.mechanisms.noise import RandomSource
from transforms.summary_reports.mechanisms.contributions import ClientReport, SummaryClient
from transforms.summary_reports.report_records import report_record_of
from transforms.summary_reports.state import client_record_codec

METRICS_NAMESPACE = "pmbeam.summary_clients"
REPORTS = "reports"


class ClientInput(NamedTuple):
    """One kind of a client's input: files of ``spec`` events, and whether each of them yields a report (an ARA
    trigger, a PAA event: devices with none of those are never replayed in batch, since they send nothing)."""

    pattern: str
    spec: EventSpec
    reports: bool


def device_rows(chunks: Iterable[tuple[int, bytes]], inputs: Sequence[ClientInput]) -> dict[str, list]:
    """A shard's chunks as rows per device, for the devices that have a report event (the other devices'
    rows are not even built)."""
    devices: dict[str, list] = {}
    others = []
    for kind, payload in chunks:
        if inputs[kind].reports:
            make = inputs[kind].spec.row_type._make
            for packed in unpack_chunk(payload):
                devices.setdefault(packed[0], []).append(make(packed))
        else:
            others.append((kind, payload))
    for kind, payload in others:
        make = inputs[kind].spec.row_type._make
        for packed in unpack_chunk(payload):
            events = devices.get(packed[0])
            if events is not None:
                events.append(make(packed))
    return devices


def _count_refusals(client: SummaryClient) -> None:
    """What the client's budgets refused since the last count, as the operator's metric."""
    metrics.budget_refused("contributions", client.refused)
    client.refused = 0


class _ReplayShardsFn(beam.DoFn):
    """Batch: every device of a shard that has a report event replays its whole history in one call."""

    def __init__(self, client: SummaryClient, inputs: Sequence[ClientInput], source: RandomSource) -> None:
        self._client, self._inputs, self._source = client, tuple(inputs), source

    def setup(self) -> None:
        self._replayed = Metrics.counter(METRICS_NAMESPACE, "devices_replayed")

    def process(self, element):
        _, chunks = element  # (shard, [(kind, deflated pickle)])
        devices = device_rows(chunks, self._inputs)
        client = self._client
        for device_id in sorted(devices):
            events = devices[device_id]
            events.sort(key=client.order)
            yield from client.replay(device_id, events, client.new_state(), self._source)
        self._replayed.inc(len(devices))
        _count_refusals(client)


class _ToRecordFn(InspectedOnceDoFn):
    """A ClientReport as its AggregatableReport Avro record (clear text, or encrypted to ``public_key``),
    counting reports and null reports."""

    def __init__(self, public_key: tuple[str, bytes] | None) -> None:
        self._public_key = public_key

    def setup(self) -> None:
        self._reports = Metrics.counter(METRICS_NAMESPACE, "reports")
        self._null = Metrics.counter(METRICS_NAMESPACE, "null_reports")

    def process(self, report: ClientReport):
        self._reports.inc()
        if not report.contributions:
            self._null.inc()
        yield report_record_of(report, self._public_key)


class SummaryReportsBatch(beam.PTransform):
    """Batch path: the files of ``inputs`` in; outputs ``reports`` (AggregatableReport records) and
    ``dead_letters`` (what the readers refused)."""

    def __init__(
        self,
        client: SummaryClient,
        inputs: Sequence[ClientInput],
        source: RandomSource,
        public_key: tuple[str, bytes] | None = None,
        input_format: str | None = None,
        shards: int = DEFAULT_SHARDS,
    ) -> None:
        super().__init__()
        self._client, self._inputs, self._source = client, tuple(inputs), source
        self._public_key, self._format, self._shards = public_key, input_format, shards

    def expand(self, pbegin):
        read = [
            pbegin | f"Read_{item.spec.name}" >> ReadEvents(
                item.pattern, item.spec, self._format, fold=functools.partial(RowShards, self._shards, kind)
            )
            for kind, item in enumerate(self._inputs)
        ]
        events, dead_letters, input_files = flatten_reads(read)
        reports = (
            events
            | "GroupShards" >> beam.GroupByKey()  # (shard, [(kind, deflated pickle)])
            | "ReplayDevices" >> beam.ParDo(_ReplayShardsFn(self._client, self._inputs, self._source))
        )
        return {
            REPORTS: reports | "ToRecords" >> beam.ParDo(_ToRecordFn(self._public_key)),
            DEAD_LETTERS: dead_letters,
            INPUT_FILES: input_files,
        }


class _ClientFn(DeviceShardFn):
    """Streaming: the clients of a shard's devices over state (``DeviceShardFn``); events are replayed, in the
    client's order, once the watermark passed them (plus the allowed lateness)."""

    def __init__(self, client: SummaryClient, source: RandomSource, lateness_micros: int) -> None:
        super().__init__(lateness_micros)
        self._client, self._source = client, source

    def setup(self) -> None:
        self.codec = client_record_codec(self._client)

    def new_record(self) -> DeviceRecord:
        return DeviceRecord(self._client.new_state())

    def replay(self, device_id: str, record: DeviceRecord, events: list, fired_micros: int) -> Iterator:
        client = self._client
        yield from client.replay(device_id, sorted(events, key=client.order), record.state, self._source)  # at the firing's time
        client.forget_before(record.state, record.cut)
        _count_refusals(client)


class SummaryReportsStreaming(beam.PTransform):
    """Streaming path over a PCollection of the client's (already validated) rows; outputs ``reports``
    (AggregatableReport records) and ``dead_letters`` (``late`` events only: parse dead letters come from the
    reader). With ``durable``, the device step's state is also kept in the job's durable store."""

    def __init__(
        self,
        client: SummaryClient,
        source: RandomSource,
        public_key: tuple[str, bytes] | None = None,
        allowed_lateness_micros: int = 0,
        durable: DurableStep | None = None,
    ) -> None:
        super().__init__()
        self._client, self._source = client, source
        self._public_key, self._lateness, self._durable = public_key, allowed_lateness_micros, durable

    def expand(self, rows):
        replayed = replay_devices(rows, _ClientFn(self._client, self._source, self._lateness), main=REPORTS,
                                  durable=self._durable)
        return {
            REPORTS: replayed[REPORTS] | "ToRecords" >> beam.ParDo(_ToRecordFn(self._public_key)),
            DEAD_LETTERS: replayed[DEAD_LETTERS],
        }
