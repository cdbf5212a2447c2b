"""The streaming budgeting job's per-key state as explicit records (``transforms.core.state``): per device its
impressions, privacy filters and occupied epochs (``BudgetDeviceState`` in a ``DeviceRecordState``); beside the
devices, per (querier, query key) the batch being filled and, IPA-like, the central filters
(``MeasurementQueriesState``).

Privacy: the filters' consumption is what must survive a restart (Cookie Monster paper Appendix B): a device-epoch filter
(or, IPA-like, a querier's central filter) back at full capacity would accept queries it already paid for.
"""
from __future__ import annotations

from collections.abc import Iterable

from schemas.proto import state_pb2
from schemas.row_messages import message_of, row_of
from schemas.rows import DeviceEpochBudget, Impression
from transforms.budgeting.mechanisms.device import DeviceState, MeasurementConfig, ReportRecord
from transforms.budgeting.mechanisms.queries import BatchCutter
from transforms.core.device_state import device_record_codec
from transforms.core.mechanisms.global_filters import FilterId, FilterSet
from transforms.core.state import StateCodec

_ATTRIBUTES = Impression._fields[3:]  # what ImpressionAttributes holds, in the row's order


def _filters_to(consumed: dict, target) -> None:
    for (querier_site, epoch), units in consumed.items():
        target.add(querier_site=querier_site, epoch=epoch, consumed_units=units)


def _filters_from(charges) -> dict:
    return {(charge.querier_site, charge.epoch): charge.consumed_units for charge in charges}


def _device_to(device: DeviceState, message: state_pb2.BudgetDeviceState) -> None:
    """Columns transposed in C (``zip(*rows)``): this runs for every device a streaming firing replayed."""
    impressions = device.impressions
    if impressions:
        rows = [impression for group in impressions.values() for impression in group]
        device_ids, times, ids, *attributes = zip(*rows, strict=True)
        message.device_id = device_ids[0]
        columns = message.impression_columns
        columns.epochs.extend([epoch for epoch, group in impressions.items() for _ in group])
        columns.event_time_micros.extend(times)
        columns.impression_ids.extend(ids)
        codes: dict[tuple, int] = {}
        columns.attributes.extend([codes.setdefault(shared, len(codes)) for shared in zip(*attributes, strict=True)])
        for shared in codes:
            message.attributes.add(**dict(zip(_ATTRIBUTES, shared, strict=True)))
    consumed = device.filters.consumed  # (querier site, epoch) -> units, or FilterId (kind, epoch, site) -> units
    if consumed:
        filters = message.filter_columns
        if isinstance(device.filters, FilterSet):
            kinds, epochs, sites = zip(*consumed, strict=True)
            filters.kinds.extend(kinds)
        else:
            sites, epochs = zip(*consumed, strict=True)
        filters.querier_sites.extend(sites)
        filters.epochs.extend(epochs)
        filters.consumed_units.extend(consumed.values())
    if device.occupied:
        message.occupied_epochs.extend(sorted(device.occupied))


def _device_from(message: state_pb2.BudgetDeviceState, config: MeasurementConfig) -> DeviceState:
    impressions = {entry.epoch: [row_of(Impression, row) for row in entry.impressions] for entry in message.impressions}
    attributes = [(entry.publisher_site, entry.advertiser_site, entry.campaign_id, entry.product_id,
                   tuple(entry.filter_keys), entry.intermediary_site, tuple(entry.conversion_callers))
                  for entry in message.attributes]
    device_id, columns = message.device_id, message.impression_columns
    for epoch, time, impression_id, code in zip(columns.epochs, columns.event_time_micros, columns.impression_ids,
                                                columns.attributes, strict=True):
        impressions.setdefault(epoch, []).append(Impression(device_id, time, impression_id, *attributes[code]))
    consumed = _filters_from(message.filters)
    filters = message.filter_columns
    keys: Iterable = zip(filters.querier_sites, filters.epochs, strict=True)
    if filters.kinds:
        keys = map(FilterId, filters.kinds, filters.epochs, filters.querier_sites)
    consumed.update(zip(keys, filters.consumed_units, strict=True))
    device = DeviceState(config.new_filters(consumed), impressions)
    device.occupied = set(message.occupied_epochs)
    return device


def device_codec(config: MeasurementConfig) -> StateCodec:
    """The codec of a device's record (``DeviceRecordState``) whose state is its ``DeviceState`` (filters as
    ``config.new_filters`` makes them)."""
    return device_record_codec("budget_device", _device_to, lambda message: _device_from(message, config))


class QueriesRecord:
    """The querier side of the streaming job: a ``BatchCutter`` per (querier, query key), IPA-like central filters
    ((querier, epoch) -> units) and the IPA-like device rows held for the end of the input."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.cutters: dict[tuple[str, str], BatchCutter] = {}
        self.central: dict = {}
        self.rows: list[DeviceEpochBudget] = []

    def cutter(self, querier_site: str, query_key: str) -> BatchCutter:
        cutter = self.cutters.get((querier_site, query_key))
        if cutter is None:
            cutter = self.cutters[(querier_site, query_key)] = BatchCutter(querier_site, query_key, self.batch_size)
        return cutter


def queries_codec(batch_size: int) -> StateCodec:
    """The codec of the ``QueriesRecord`` (``MeasurementQueriesState``) of batches of ``batch_size``."""

    def to_message(record: QueriesRecord, message: state_pb2.MeasurementQueriesState) -> None:
        for (querier_site, query_key), cutter in sorted(record.cutters.items()):
            entry = message.cutters.add(querier_site=querier_site, query_key=query_key, next_index=cutter.next_index)
            for report in cutter.pending:
                message_of(report, entry.pending.add())
        _filters_to(record.central, message.central)
        for row in record.rows:
            message_of(row, message.rows.add())

    def from_message(message: state_pb2.MeasurementQueriesState) -> QueriesRecord:
        record = QueriesRecord(batch_size)
        for entry in message.cutters:
            pending = [row_of(ReportRecord, report) for report in entry.pending]
            record.cutters[(entry.querier_site, entry.query_key)] = BatchCutter(
                entry.querier_site, entry.query_key, batch_size, entry.next_index, pending)
        record.central = _filters_from(message.central)
        record.rows = [row_of(DeviceEpochBudget, row) for row in message.rows]
        return record

    return StateCodec(state_pb2.MeasurementQueriesState, to_message, from_message)
