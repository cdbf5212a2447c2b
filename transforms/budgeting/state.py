"""The streaming budgeting job's per-key state as explicit records (``transforms.core.state``): per device its
impressions, privacy filters, occupied epochs and, with batched scheduling, its schedule (``BudgetDeviceState`` in a
``DeviceRecordState``); beside the
devices, per (querier, query key) the batch being filled and, IPA-like, the central filters
(``MeasurementQueriesState``).

Privacy: the filters' consumption is what must survive a restart (Cookie Monster paper Appendix B): a device-epoch filter
(or, IPA-like, a querier's central filter) back at full capacity would accept queries it already paid for.
"""
from __future__ import annotations

from collections.abc import Iterable

from schemas.proto import state_pb2
from schemas.row_messages import EncodedRows, message_of, row_of
from schemas.rows import Conversion, DeviceEpochBudget, Impression
from transforms.budgeting.mechanisms.device import (
    DeviceState,
    MeasurementConfig,
    ReportRecord,
    scheduled_terms,
    servable_request,
)
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.budgeting.mechanisms.queries import BatchCutter
from transforms.core.device_state import device_record_codec, filled
from transforms.core.mechanisms.batch_scheduling import BatchSchedule, Released, ScheduledRequest
from transforms.core.mechanisms.global_filters import FilterId, FilterSet
from transforms.core.state import StateCodec

_ATTRIBUTES = Impression._fields[3:]  # what ImpressionAttributes holds, in the row's order


def _filters_to(consumed: dict, target) -> None:
    for (querier_site, epoch), units in consumed.items():
        target.add(querier_site=querier_site, epoch=epoch, consumed_units=units)


def _filters_from(charges) -> dict:
    return {(charge.querier_site, charge.epoch): charge.consumed_units for charge in charges}


def _device_to(device: DeviceState, message: state_pb2.BudgetDeviceState, encoded: EncodedRows) -> None:
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
    _columns_to(device.filters.consumed, isinstance(device.filters, FilterSet), message.filter_columns)
    if device.occupied:
        message.occupied_epochs.extend(sorted(device.occupied))
    if device.schedule is not None:
        _schedule_to(device.schedule, message.schedule, encoded)


def _columns_to(consumed: dict, kinds: bool, columns: state_pb2.FilterColumns) -> None:
    """Consumption as columns: (querier site, epoch) -> units, or, with ``kinds``, FilterId (kind, epoch, site) ->
    units."""
    if not consumed:
        return
    if kinds:
        kind_column, epochs, sites = zip(*consumed, strict=True)
        columns.kinds.extend(kind_column)
    else:
        sites, epochs = zip(*consumed, strict=True)
    columns.querier_sites.extend(sites)
    columns.epochs.extend(epochs)
    columns.consumed_units.extend(consumed.values())


def _columns_from(columns: state_pb2.FilterColumns) -> dict:
    keys: Iterable = zip(columns.querier_sites, columns.epochs, strict=True)
    if columns.kinds:
        keys = map(FilterId, columns.kinds, columns.epochs, columns.querier_sites)
    return dict(zip(keys, columns.consumed_units, strict=True))


def _schedule_to(schedule: BatchSchedule, message: state_pb2.BatchScheduleState, encoded: EncodedRows) -> None:
    message.interval, message.next_id = schedule.interval, schedule.next_id
    for waiting, requests in ((True, schedule.waiting), (False, schedule.pending)):
        for request in requests:
            entry = message.requests.add(request_id=request.request_id, remaining_attempts=request.remaining_attempts,
                                         waiting=waiting)
            encoded.into(request.payload, entry.conversion)
    for interval, held in sorted(schedule.delayed.items()):
        for released in held:
            encoded.into(released.result, message.held.add(interval=interval, request_id=released.request_id).report)
    for epoch, releases in schedule.released.items():
        message.epochs.add(epoch=epoch, releases=releases, impression_sites=sorted(schedule.sites_per_epoch[epoch]))
    _columns_to(schedule.public.consumed, True, message.public_filters)


def _schedule_from(message: state_pb2.BatchScheduleState, filters: FilterSet,
                   config: MeasurementConfig) -> BatchSchedule:
    """The schedule over the device's ``filters``; each request's charges, sites and size follow from its
    conversion and the job's options (``scheduled_terms``)."""
    if config.scheduling is None:
        raise ValueError("the state holds conversions of Big Bird's batched scheduling, and this job schedules "
                         "none: restart it with the options that wrote the state (--scheduling-interval-hours)")
    policy = make_policy(config.policy)
    schedule: BatchSchedule = BatchSchedule(filters, config.scheduling.releases, interval=message.interval,
                                            next_id=message.next_id)
    for entry in message.requests:
        conversion = row_of(Conversion, entry.conversion)
        charges, impression_sites, units = scheduled_terms(conversion, *servable_request(conversion, config), policy)
        request = ScheduledRequest(entry.request_id, entry.remaining_attempts, conversion, charges, impression_sites,
                                   units)
        (schedule.waiting if entry.waiting else schedule.pending).append(request)
    for held in message.held:
        schedule.delayed.setdefault(held.interval, []).append(
            Released(held.request_id, row_of(ReportRecord, held.report)))
    for epoch in message.epochs:
        schedule.released[epoch.epoch] = epoch.releases
        schedule.sites_per_epoch[epoch.epoch] = set(epoch.impression_sites)
    schedule.public.consumed.update(_columns_from(message.public_filters))
    return schedule


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
    consumed.update(_columns_from(message.filter_columns))
    device = DeviceState(config.new_filters(consumed), impressions)
    device.occupied = set(message.occupied_epochs)
    if message.HasField("schedule"):
        assert isinstance(device.filters, FilterSet)
        device.schedule = _schedule_from(message.schedule, device.filters, config)
    return device


def device_codec(config: MeasurementConfig) -> StateCodec:
    """The codec of a device's record (``DeviceRecordState``) whose state is its ``DeviceState`` (filters as
    ``config.new_filters`` makes them)."""
    return device_record_codec("budget_device", filled(state_pb2.BudgetDeviceState, _device_to),
                               lambda message: _device_from(message, config))


class QueriesRecord:
    """The querier side of the streaming job: a ``BatchCutter`` per (querier, query key), IPA-like central filters
    ((querier, epoch) -> units) and the IPA-like device rows held for the end of the input; ``encoded``: the
    encodings of the reports waiting in the cutters, kept from one firing's encode to the next (a report waits
    for its batch over many firings)."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.cutters: dict[tuple[str, str], BatchCutter] = {}
        self.central: dict = {}
        self.rows: list[DeviceEpochBudget] = []
        self.encoded = EncodedRows()

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
                record.encoded.into(report, entry.pending.add())
        record.encoded.encoded()
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
