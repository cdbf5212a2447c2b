"""The whole measurement job as one in-memory loop: the reference the Beam paths are checked against.

``simulate`` does, without Beam, what ``transforms/budgeting/measurement.py`` does with
it: replay every device that has a conversion in event order (Appendix A
Alg. 1 GenerateReport under the chosen policy), cut each query's reports into
batches of B in report order, run the queries in batch order (IPA-like
through its central budget) and list the per device-epoch consumption. The
tests compare both Beam paths with it and the throughput benchmark uses it as
its plain-Python reference.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from schemas.rows import Conversion, DeviceEpochBudget, Impression, IncompleteBatch, QueryResult
from transforms.budgeting.mechanisms.device import (
    DeviceState,
    MeasurementConfig,
    ReportRecord,
    budget_rows,
    replay,
    sort_events,
    with_central,
)
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.budgeting.mechanisms.queries import BatchCutter, CentralBudget, QueryBatch, report_order, run_queries
from transforms.core.mechanisms.noise import RandomSource


class Simulation(NamedTuple):
    reports: list[ReportRecord]
    batches: list[QueryBatch]  # the full batches, unnoised (SENSITIVE: the evaluation compares them with the truth)
    results: list[QueryResult]
    incomplete: list[IncompleteBatch]
    budgets: list[DeviceEpochBudget]


def devices_in_order(events: Iterable[Impression | Conversion]) -> dict[str, list]:
    """The events of every device with a conversion, in replay order, by device id (sorted): what the replay
    needs, computed once when several runs share the data."""
    by_device: dict[str, list] = {}
    for event in events:
        by_device.setdefault(event.device_id, []).append(event)
    return {
        device_id: sort_events(by_device[device_id])
        for device_id in sorted(by_device)
        if any(type(event) is Conversion for event in by_device[device_id])
    }


def cut_batches(reports: Iterable[ReportRecord], batch_size: int) -> tuple[list[QueryBatch], list[IncompleteBatch]]:
    """Every (querier, query key)'s reports, in report order, cut into full batches of B; the leftovers."""
    cutters: dict[tuple, BatchCutter] = {}
    batches = []
    for report in sorted(reports, key=report_order):
        key = (report.querier_site, report.query_key)
        cutter = cutters.setdefault(key, BatchCutter(*key, batch_size))
        batches += cutter.add([report])
    return batches, [incomplete for cutter in cutters.values() if (incomplete := cutter.incomplete()) is not None]


def simulate(
    events: Iterable[Impression | Conversion] | dict[str, list],
    config: MeasurementConfig,
    source: RandomSource,
    batch_size: int,
) -> Simulation:
    """Reports, batches, query results, incomplete batches and device-epoch budgets for ``events`` (or for the
    ``devices_in_order`` of them)."""
    devices = events if isinstance(events, dict) else devices_in_order(events)
    policy = make_policy(config.policy)
    reports: list[ReportRecord] = []
    budgets: list[DeviceEpochBudget] = []
    for device_id, device_events in devices.items():
        state = DeviceState(config.new_filters())
        reports += replay(device_id, device_events, state, config, policy, source)
        budgets += budget_rows(device_id, state.filters.consumed, config)
    batches, incomplete = cut_batches(reports, batch_size)
    central = CentralBudget(config.capacity_units) if config.policy == "ipa_like" else None
    results = list(run_queries(batches, central, source, config.bias))
    if central is not None:
        budgets = [with_central(row, central.filters.consumed) for row in budgets]
    return Simulation(reports, batches, results, incomplete, budgets)
