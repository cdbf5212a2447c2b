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
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from evaluation.data import Population
from transforms.budgeting.mechanisms.queries import EXECUTED, QueryBatch, batch_order, report_order
from transforms.budgeting.mechanisms.simulation import Simulation
from transforms.core.mechanisms.budget_units import units_float
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


def span_of(simulation: Simulation, population: Population, clock: EpochClock) -> range:
    """The evaluation span: from the first to the last epoch holding data or requested by a report."""
    epochs = [row.epoch for row in simulation.budgets]
    if population.first_micros is not None:
        epochs += [clock.epoch_of(population.first_micros), clock.epoch_of(population.last_micros)]
    return range(min(epochs), max(epochs) + 1) if epochs else range(0)


def _central(budgets) -> dict:
    """IPA-like: the central consumption of each (querier, epoch) (every requested row carries it)."""
    return {(row.querier_site, row.epoch): row.consumed_epsilon for row in budgets}


def budget_metrics(simulation: Simulation, population: Population, clock: EpochClock, policy: str,
                   batch_size: int) -> BudgetMetrics:
    """The budget metrics of the module docstring."""
    span = span_of(simulation, population, clock)
    n_epochs = len(span)
    rows = simulation.budgets
    requested = math.fsum(row.consumed_epsilon for row in rows) / len(rows) if rows else 0.0
    maximum = max((row.consumed_epsilon for row in rows), default=0.0)
    all_pairs = sum(len(devices) for devices in population.any_event.values())
    converted_pairs = sum(len(devices) for devices in population.converted.values())
    averages: list[np.ndarray] = []
    if policy == "ipa_like":
        central = _central(rows)
        per_querier = {q: math.fsum(c for (querier, _), c in central.items() if querier == q) for q in population.any_event}
        total_all = math.fsum(per_querier[q] * len(d) for q, d in population.any_event.items())
        total_converted = math.fsum(per_querier.get(q, 0.0) * len(d) for q, d in population.converted.items())
        for q, devices in population.any_event.items():
            averages.append(np.full(len(devices), per_querier[q] / max(n_epochs, 1)))
    else:
        per_device: dict[tuple, float] = {}
        for row in rows:
            key = (row.querier_site, row.device_id)
            per_device[key] = per_device.get(key, 0.0) + row.consumed_epsilon
        total_all = math.fsum(per_device.values())
        total_converted = math.fsum(
            consumed for (q, device), consumed in per_device.items() if device in population.converted.get(q, ())
        )
        for q, devices in population.any_event.items():
            averages.append(np.array([per_device.get((q, d), 0.0) for d in devices]) / max(n_epochs, 1))
    metrics = BudgetMetrics(
        average_requested=requested,
        average_converted=total_converted / (converted_pairs * n_epochs) if converted_pairs and n_epochs else 0.0,
        average_all=total_all / (all_pairs * n_epochs) if all_pairs and n_epochs else 0.0,
        maximum=maximum,
        span_epochs=n_epochs,
        device_averages=np.concatenate(averages) if averages else np.zeros(0),
    )
    metrics.cumulative_average_all = _cumulative(simulation, population, policy, batch_size, all_pairs * n_epochs)
    return metrics


def _cumulative(simulation: Simulation, population: Population, policy: str, batch_size: int, cells: int) -> list:
    """The average over ``all`` device-epochs after each submitted query (Fig. 5a): on device, the charges of
    the reports of the batches submitted so far; for IPA-like, the central charges of the executed ones."""
    if not cells:
        return []
    ordered = sorted(simulation.batches, key=batch_order)
    executed = {(r.querier_site, r.query_key, r.batch_index) for r in simulation.results if r.status == EXECUTED}
    spent, curve = 0.0, []
    if policy == "ipa_like":
        for batch in ordered:
            if (batch.querier_site, batch.query_key, batch.batch_index) in executed:
                spent += batch.epsilon * len(batch.epochs) * len(population.any_event.get(batch.querier_site, ()))
            curve.append(spent / cells)
        return curve
    charges: dict[tuple, list] = {}
    for report in sorted(simulation.reports, key=report_order):
        charges.setdefault((report.querier_site, report.query_key), []).append(report.charged_units)
    for batch in ordered:
        first = batch.batch_index * batch_size  # batches are consecutive chunks of B in report order
        spent += units_float(sum(charges[(batch.querier_site, batch.query_key)][first:first + batch_size]))
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


def query_outcomes(simulation: Simulation, truth: dict, *, noise_factor: float = 1.0, repetitions: int = 0,
                   seed: int = 0, counting_coordinate: bool = False) -> list[QueryOutcome]:
    """Every full batch of the run in submission order with its truth (``truth``: (querier, key, index) ->
    unbudgeted sums), biased value (without the bias-detection coordinate when ``counting_coordinate``) and
    error (``repetitions`` noise draws for the empirical RMSRE; 0: analytic only)."""
    executed = {(r.querier_site, r.query_key, r.batch_index) for r in simulation.results if r.status == EXECUTED}
    source = SeededSource(seed)
    outcomes = []
    for position, batch in enumerate(sorted(simulation.batches, key=batch_order)):
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


def truth_of(simulation: Simulation) -> dict:
    """(querier, key, index) -> batch sums, from an unbudgeted (IPA-like) run."""
    return {(b.querier_site, b.query_key, b.batch_index): b.sums for b in simulation.batches}


def quantile_or_none(values: list[float], q: float) -> float | None:
    return float(np.quantile(values, q)) if values else None
