"""The evaluation metrics of Cookie Monster paper Sec. 8, computed from one simulated run (SENSITIVE: evaluation only).

Budget consumption (Fig. 4, 5a, 6a): a device-epoch is a (querier, device,
epoch) triple; its consumption is what the querier's filter on that device
and epoch paid (for IPA-like, the querier's central filter of that epoch,
which stands for every device). Averages are taken over

* ``requested``: the device-epochs some report's window covered (Fig. 4);
* ``converted``: every device that converted for the querier, times every
  epoch of the evaluation span;
* ``all``: every device with any event for the querier (an impression of an
  advertiser it queries for, or a conversion), times every epoch of the span;

where the span runs from the first to the last epoch holding data or
requested by a report. Unrequested device-epochs count as 0. The maximum is
over all device-epochs. The per-device average (Fig. 6a) is a device's mean
over the span, for every (querier, device) pair of ``all``.

Query error (Fig. 5b-c, 6b-c): a query's true value Q(D) is the batch sum
without any budget (IPA-like's unbudgeted sums for the same batch: batches are
cut in the same report order under every policy), its biased value the sum
of the reports the policy produced, and its noise the Laplace scale b the
query used. RMSRE = sqrt(E[||M(D) - Q(D)||^2]) / ||Q(D)||: analytically
sqrt(||Q~(D) - Q(D)||^2 + 2 m b^2) / ||Q(D)|| (the Laplace variance is 2 b^2
per coordinate), and empirically over repetitions of the noise (discrete
Laplace on the release grid, seeded). Queries with Q(D) = 0 have no relative
error and are counted apart; IPA-like's rejected queries have none either.
``noise_factor`` multiplies b: an experiment run on data ``s`` times smaller
than the paper's, with the paper's epsilon, passes ``s`` so that the noise
relative to a batch sum is that of a full-size batch.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from evaluation.data import Population
from evaluation.run_record import RunRecord, exact_float_sum
from transforms.budgeting.mechanisms.queries import EXECUTED, QueryBatch, batch_order
from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON, units_float
from transforms.core.mechanisms.noise import DEFAULT_GRANULARITY, DiscreteLaplace, SeededSource, laplace_scale_for
from transforms.core.mechanisms.time_steps import EpochClock


@dataclass(frozen=True)
class QueryOutcome:
    """One submitted query: its truth, what the policy's reports summed to, its noise, and its error."""

    querier_site: str
    query_key: str
    batch_index: int
    submitted: int  # position in submission (batch) order
    executed: bool
    true_value: tuple
    biased_value: tuple
    noise_scale: float  # the b used for the error (the query's Laplace scale times the noise factor)
    rmsre: float | None  # analytic; None when rejected or Q(D) = 0
    rmsre_empirical: float | None


@dataclass
class BudgetMetrics:
    average_requested: float
    average_converted: float
    average_all: float
    maximum: float
    span_epochs: int
    device_averages: np.ndarray  # the per-device average of every (querier, device) pair of ``all``
    cumulative_average_all: list[float] = field(default_factory=list)  # after each submitted query


def span_of(record: RunRecord, population: Population, clock: EpochClock) -> range:
    """The evaluation span: from the first to the last epoch holding data or requested by a report."""
    epochs = list(record.budgets.epochs or ())
    if population.first_micros is not None:
        epochs += [clock.epoch_of(population.first_micros), clock.epoch_of(population.last_micros)]
    return range(min(epochs), max(epochs) + 1) if epochs else range(0)


def budget_metrics(record: RunRecord, population: Population, clock: EpochClock, policy: str,
                   batch_size: int) -> BudgetMetrics:
    """The budget metrics of the module docstring. Sums are exact: consumption is added in integer budget
    units and turned into epsilon once (correctly rounded), so the order the runs visit devices in is moot."""
    span = span_of(record, population, clock)
    n_epochs = len(span)
    budgets = record.budgets
    all_pairs = sum(population.any_event.values())
    converted_pairs = sum(population.converted.values())
    averages: list[np.ndarray] = []
    if budgets.central_units is not None:
        central = {key: units_float(budgets.central_units.get(key, 0)) for key in budgets.touched}
        counts: Counter = Counter()
        for key, rows in budgets.touched.items():
            counts[central[key]] += rows
        requested = exact_float_sum(counts) / budgets.rows if budgets.rows else 0.0
        maximum = max(central.values(), default=0.0)
        per_querier = {q: exact_float_sum(Counter(c for (querier, _), c in central.items() if querier == q))
                       for q in population.any_event}
        total_all = _weighted_sum(per_querier, population.any_event)
        total_converted = _weighted_sum(per_querier, population.converted)
        for q, devices in population.any_event.items():
            averages.append(np.full(devices, per_querier[q] / max(n_epochs, 1)))
    else:
        requested = exact_float_sum({units_float(u): c for u, c in budgets.units_counts.items()}) / budgets.rows \
            if budgets.rows else 0.0
        maximum = units_float(max(budgets.units_counts)) if budgets.units_counts else 0.0
        totals: Counter = Counter()
        for units in budgets.pair_units.values():
            values, repeats = np.unique(units, return_counts=True)
            for value, repeat in zip(values.tolist(), repeats.tolist(), strict=True):
                totals[units_float(value)] += repeat
        # every device that consumed for a querier converted for it (only its conversions' reports charge it)
        total_all = total_converted = exact_float_sum(totals)
        for q, devices in population.any_event.items():
            consumed = budgets.pair_units.get(q, np.zeros(0, dtype=np.int64)) / UNITS_PER_EPSILON
            averages.append(np.concatenate([consumed, np.zeros(devices - consumed.size)]) / max(n_epochs, 1))
    metrics = BudgetMetrics(
        average_requested=requested,
        average_converted=total_converted / (converted_pairs * n_epochs) if converted_pairs and n_epochs else 0.0,
        average_all=total_all / (all_pairs * n_epochs) if all_pairs and n_epochs else 0.0,
        maximum=maximum,
        span_epochs=n_epochs,
        device_averages=np.concatenate(averages) if averages else np.zeros(0),
    )
    metrics.cumulative_average_all = _cumulative(record, population, policy, all_pairs * n_epochs)
    return metrics


def _weighted_sum(per_querier: dict[str, float], devices: dict[str, int]) -> float:
    """fsum over queriers of per_querier[q] * devices[q] (each product rounded, as the reference does)."""
    return math.fsum(per_querier.get(q, 0.0) * count for q, count in devices.items())


def _cumulative(record: RunRecord, population: Population, policy: str, cells: int) -> list:
    """The average over ``all`` device-epochs after each submitted query (Fig. 5a): on device, the charges of
    the reports of the batches submitted so far; for IPA-like, the central charges of the executed ones."""
    if not cells:
        return []
    executed = {(r.querier_site, r.query_key, r.batch_index) for r in record.results if r.status == EXECUTED}
    spent, curve = 0.0, []
    for batch in sorted(record.batches, key=batch_order):
        key = (batch.querier_site, batch.query_key, batch.batch_index)
        if policy == "ipa_like":
            if key in executed:
                spent += batch.epsilon * len(batch.epochs) * population.any_event.get(batch.querier_site, 0)
        else:
            spent += units_float(record.batch_charged_units[key])
        curve.append(spent / cells)
    return curve


def _empirical_rmsre(true: np.ndarray, biased: np.ndarray, scale: float, repetitions: int,
                     source: SeededSource) -> float:
    """sqrt(mean over repetitions of ||biased + noise - true||^2) / ||true||, noise on the 2^-20 release grid."""
    step = float(DEFAULT_GRANULARITY)
    grid = DiscreteLaplace(Fraction(scale) / DEFAULT_GRANULARITY)
    noise = grid.sample_array(source, repetitions * true.size).reshape(repetitions, true.size) * step
    errors = ((biased + noise - true) ** 2).sum(axis=1)
    return float(math.sqrt(errors.mean()) / np.linalg.norm(true))


def query_outcomes(record: RunRecord, truth: dict, *, noise_factor: float = 1.0, repetitions: int = 0,
                   seed: int = 0, counting_coordinate: bool = False) -> list[QueryOutcome]:
    """Every full batch of the run in submission order with its truth (``truth``: (querier, key, index) ->
    unbudgeted sums), biased value (without the bias-detection coordinate when ``counting_coordinate``) and
    error (``repetitions`` noise draws for the empirical RMSRE; 0: analytic only)."""
    executed = {(r.querier_site, r.query_key, r.batch_index) for r in record.results if r.status == EXECUTED}
    source = SeededSource(seed)
    outcomes = []
    for position, batch in enumerate(sorted(record.batches, key=batch_order)):
        key = (batch.querier_site, batch.query_key, batch.batch_index)
        true = np.array(truth[key], dtype=float)
        biased = np.array(batch.sums[1:] if counting_coordinate else batch.sums, dtype=float)
        scale = float(_scale(batch)) * noise_factor
        rmsre = empirical = None
        norm = float(np.linalg.norm(true))
        if key in executed and norm > 0:
            rmsre = math.sqrt(float(((biased - true) ** 2).sum()) + 2 * true.size * scale**2) / norm
            if repetitions:
                empirical = _empirical_rmsre(true, biased, scale, repetitions, source)
        outcomes.append(QueryOutcome(*key, position, key in executed, tuple(true), tuple(biased), scale, rmsre, empirical))
    return outcomes


def _scale(batch: QueryBatch) -> Fraction:
    return laplace_scale_for(Fraction(batch.sensitivity), Fraction(batch.epsilon))


def truth_of(record: RunRecord) -> dict:
    """(querier, key, index) -> batch sums, from an unbudgeted (IPA-like) run."""
    return {(b.querier_site, b.query_key, b.batch_index): b.sums for b in record.batches}


def quantile_or_none(values: list[float], q: float) -> float | None:
    return float(np.quantile(values, q)) if values else None
