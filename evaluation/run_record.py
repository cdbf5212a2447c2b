"""What one simulated run point produced, in the aggregated form the metrics read (SENSITIVE: evaluation only).

A ``RunRecord`` keeps the query side as the reference has it (the full
batches, their results, the incomplete batches) and the device side only as
the Cookie Monster paper Sec. 8.2 metrics need it: how many device-epochs
(querier, device, epoch) the reports asked about, how many of them consumed
each amount, each (querier, device)'s total, and, for IPA-like, the central
filters. At the paper's scale a run has tens of millions of reports and
device-epochs: the record holds counts and arrays, never an object per report.

``record_of`` turns the reference's ``Simulation`` (a list per report and per
device-epoch) into a record; the column-wise replay (``evaluation.columnar``)
builds the same record directly, and the tests hold the two equal.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from schemas.rows import IncompleteBatch, QueryResult
from transforms.budgeting.mechanisms.queries import QueryBatch, batch_order, report_order
from transforms.budgeting.mechanisms.simulation import Simulation
from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON, units_float


@dataclass(frozen=True)
class DeviceBudgets:
    """The device-epochs some report's window covered, aggregated (consumption in exact budget units).

    ``central_units`` is IPA-like's: what each (querier, epoch) filter paid
    off device, which every device-epoch of that (querier, epoch) stands for;
    on-device policies have None."""

    rows: int  # device-epochs requested
    epochs: tuple[int, int] | None  # the first and the last epoch among them
    units_counts: dict[int, int]  # consumed units (nonzero) -> device-epochs that consumed exactly that
    pair_units: dict[str, np.ndarray]  # querier -> the total units of each of its devices that consumed any
    touched: dict[tuple[str, int], int]  # (querier, epoch) -> device-epochs requested
    central_units: dict[tuple[str, int], int] | None = None  # the nonzero ones


@dataclass(frozen=True)
class RunRecord:
    """One run point: the full batches (unnoised: SENSITIVE), their results, the incomplete batches, what each
    batch's reports charged on device, report counts, and the device budgets."""

    batches: list[QueryBatch]  # in batch order (``queries.batch_order``)
    results: list[QueryResult]
    incomplete: list[IncompleteBatch]
    batch_charged_units: dict[tuple[str, str, int], int]  # (querier, key, index) -> units its reports charged
    reports: int
    reports_paying: int
    reports_with_dropped_epochs: int
    dropped_epochs: int
    first_requested_epsilon: float  # of the first report generated (the microbenchmark's one epsilon), 0 if none
    budgets: DeviceBudgets


def exact_float_sum(counts: dict[float, int]) -> float:
    """The correctly rounded sum of ``value`` repeated ``count`` times for each item: what ``math.fsum`` of the
    values would return, from their counts."""
    return float(sum((Fraction(value) * count for value, count in counts.items()), Fraction(0)))


def units_of(epsilon: float) -> int:
    """The budget units a ``units_float`` came from (exact below 2**51 units)."""
    units = round(epsilon * UNITS_PER_EPSILON)
    assert units_float(units) == epsilon, epsilon
    return units


def _device_budgets(simulation: Simulation, central: bool) -> DeviceBudgets:
    rows = simulation.budgets
    touched: Counter = Counter((row.querier_site, row.epoch) for row in rows)
    if central:
        central_units = {(row.querier_site, row.epoch): units for row in rows
                         if (units := units_of(row.consumed_epsilon))}
        return DeviceBudgets(len(rows), _epoch_range(rows), {}, {}, dict(touched), central_units)
    units_counts: Counter = Counter()
    pairs: dict[tuple[str, str], int] = {}
    for row in rows:
        units = units_of(row.consumed_epsilon)
        if units:
            units_counts[units] += 1
            key = (row.querier_site, row.device_id)
            pairs[key] = pairs.get(key, 0) + units
    pair_units: dict[str, list] = {}
    for (querier, _), units in pairs.items():
        pair_units.setdefault(querier, []).append(units)
    return DeviceBudgets(len(rows), _epoch_range(rows), dict(units_counts),
                         {q: np.array(units, dtype=np.int64) for q, units in pair_units.items()}, dict(touched))


def _epoch_range(rows) -> tuple[int, int] | None:
    return (min(row.epoch for row in rows), max(row.epoch for row in rows)) if rows else None


def record_of(simulation: Simulation, policy: str) -> RunRecord:
    """The record of a reference run (``simulation.simulate``) of ``policy``."""
    reports = simulation.reports
    charges: dict[tuple, list] = {}
    for report in sorted(reports, key=report_order):
        charges.setdefault((report.querier_site, report.query_key), []).append(report.charged_units)
    batch_charged = {}
    for batch in simulation.batches:
        first = batch.batch_index * batch.report_count  # full batches: consecutive chunks of B in report order
        batch_charged[(batch.querier_site, batch.query_key, batch.batch_index)] = sum(
            charges.get((batch.querier_site, batch.query_key), [])[first:first + batch.report_count])
    return RunRecord(
        batches=sorted(simulation.batches, key=batch_order),
        results=list(simulation.results),
        incomplete=list(simulation.incomplete),
        batch_charged_units=batch_charged,
        reports=len(reports),
        reports_paying=sum(1 for r in reports if r.charged_units),
        reports_with_dropped_epochs=sum(1 for r in reports if r.dropped_epochs),
        dropped_epochs=sum(r.dropped_epochs for r in reports),
        first_requested_epsilon=reports[0].requested_epsilon if reports else 0.0,
        budgets=_device_budgets(simulation, central=policy == "ipa_like"),
    )
