"""The streaming budgeting job's per-key state as explicit records (``transforms.core.state``): per device its
impressions, privacy filters and occupied epochs (``BudgetDeviceState`` in a ``DeviceRecordState``); per
(querier, query key) the batch being filled (``BatchCutterState``); per querier its batches waiting for the
watermark and, IPA-like, its central filters (``QuerierState``).

Privacy: the filters' consumption is what must survive a restart (Cookie Monster paper Appendix B): a device-epoch filter
(or, IPA-like, a querier's central filter) back at full capacity would accept queries it already paid for.
"""
from __future__ import annotations

from schemas.proto import state_pb2
from schemas.row_messages import message_of, row_of
from schemas.rows import DeviceEpochBudget, Impression
from transforms.budgeting.mechanisms.device import DeviceState, ReportRecord
from transforms.budgeting.mechanisms.queries import BatchCutter, QueryBatch
from transforms.core.device_state import Pending, device_record_codec
from transforms.core.state import StateCodec


def _filters_to(consumed: dict, target) -> None:
    for (querier_site, epoch), units in consumed.items():
        target.add(querier_site=querier_site, epoch=epoch, consumed_units=units)


def _filters_from(charges) -> dict:
    return {(charge.querier_site, charge.epoch): charge.consumed_units for charge in charges}


def _device_to(device: DeviceState, message: state_pb2.BudgetDeviceState) -> None:
    for epoch, impressions in device.impressions.items():
        entry = message.impressions.add(epoch=epoch)
        for impression in impressions:
            message_of(impression, entry.impressions.add())
    _filters_to(device.filters.consumed, message.filters)
    message.occupied_epochs.extend(sorted(device.occupied))


def _device_from(message: state_pb2.BudgetDeviceState, capacity_units: int) -> DeviceState:
    impressions = {entry.epoch: [row_of(Impression, row) for row in entry.impressions] for entry in message.impressions}
    device = DeviceState(capacity_units, impressions, _filters_from(message.filters))
    device.occupied = set(message.occupied_epochs)
    return device


def device_codec(capacity_units: int) -> StateCodec:
    """The codec of a device's record (``DeviceRecordState``) whose state is its ``DeviceState``."""
    return device_record_codec("budget_device", _device_to, lambda message: _device_from(message, capacity_units))


class BatchRecord(Pending[ReportRecord]):
    """One (querier, query key)'s Beam state: its buffered reports and the batch being filled."""

    def __init__(self, cutter: BatchCutter) -> None:
        super().__init__()
        self.cutter = cutter


def _batch_to(record: BatchRecord, message: state_pb2.BatchCutterState) -> None:
    if record.target is not None:
        message.timer_target = record.target
    for time_micros, report in record.items:
        message_of(report, message.buffered.add(time_micros=time_micros).report)
    message.next_index = record.cutter.next_index
    for report in record.cutter.pending:
        message_of(report, message.pending.add())


def batch_codec(querier_site: str, query_key: str, batch_size: int) -> StateCodec:
    """The codec of the ``BatchRecord`` of (``querier_site``, ``query_key``), batches of ``batch_size``."""

    def from_message(message: state_pb2.BatchCutterState) -> BatchRecord:
        pending = [row_of(ReportRecord, report) for report in message.pending]
        record = BatchRecord(BatchCutter(querier_site, query_key, batch_size, message.next_index, pending))
        record.target = message.timer_target if message.HasField("timer_target") else None
        record.items = [(entry.time_micros, row_of(ReportRecord, entry.report)) for entry in message.buffered]
        return record

    return StateCodec(state_pb2.BatchCutterState, _batch_to, from_message)


class QuerierRecord(Pending[QueryBatch]):
    """One querier's Beam state: buffered batches, its central filters (IPA-like) and the IPA-like device budget
    rows waiting for the end of the input."""

    def __init__(self) -> None:
        super().__init__()
        self.central: dict = {}
        self.rows: list[DeviceEpochBudget] = []


def _batch_message(batch: QueryBatch, message: state_pb2.QueryBatchState) -> None:
    time_micros, device_id, conversion_id = batch.completed
    message.MergeFrom(state_pb2.QueryBatchState(
        querier_site=batch.querier_site, query_key=batch.query_key, batch_index=batch.batch_index,
        completed_time_micros=time_micros, completed_device_id=device_id, completed_conversion_id=conversion_id,
        report_count=batch.report_count, sums=batch.sums, epsilon=batch.epsilon, sensitivity=batch.sensitivity,
        epochs=batch.epochs, bias_weight=batch.bias_weight,
    ))


def _batch_of(message: state_pb2.QueryBatchState) -> QueryBatch:
    return QueryBatch(
        message.querier_site, message.query_key, message.batch_index,
        (message.completed_time_micros, message.completed_device_id, message.completed_conversion_id),
        message.report_count, tuple(message.sums), message.epsilon, message.sensitivity, tuple(message.epochs),
        message.bias_weight,
    )


def _querier_to(record: QuerierRecord, message: state_pb2.QuerierState) -> None:
    if record.target is not None:
        message.timer_target = record.target
    for time_micros, batch in record.items:
        _batch_message(batch, message.buffered.add(time_micros=time_micros).batch)
    _filters_to(record.central, message.central)
    for row in record.rows:
        message_of(row, message.rows.add())


def _querier_from(message: state_pb2.QuerierState) -> QuerierRecord:
    record = QuerierRecord()
    record.target = message.timer_target if message.HasField("timer_target") else None
    record.items = [(entry.time_micros, _batch_of(entry.batch)) for entry in message.buffered]
    record.central = _filters_from(message.central)
    record.rows = [row_of(DeviceEpochBudget, row) for row in message.rows]
    return record


QUERIER_CODEC = StateCodec(state_pb2.QuerierState, _querier_to, _querier_from)
