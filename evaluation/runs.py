"""One evaluation run point: a policy (and epoch length, bias detection) on a loaded dataset, with its metrics.

The run is the in-memory reference of the measurement job
(``transforms.budgeting.mechanisms.simulation.simulate``), which the tests hold equal
to the Beam batch and streaming paths, computed column-wise
(``evaluation.columnar``, held equal to the reference by the tests) whenever
it can be; running it in process lets a sweep share one loaded dataset across
dozens of points. Seeded randomness only
(simulation mode): report ids and the released noise come from the run's
seed, the empirical RMSRE's repetitions from their own seeded stream.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from evaluation import columnar
from evaluation.data import Dataset
from evaluation.metrics import BudgetMetrics, QueryOutcome, budget_metrics, quantile_or_none, query_outcomes, truth_of
from evaluation.run_record import RunRecord, record_of
from schemas.time_units import MICROS_PER_DAY
from transforms.budgeting.mechanisms.bias import BiasDetection
from transforms.budgeting.mechanisms.device import MeasurementConfig
from transforms.budgeting.mechanisms.simulation import simulate
from transforms.core.mechanisms.noise import SeededSource
from transforms.core.mechanisms.time_steps import EpochClock

POLICY_ORDER = ("ipa_like", "ara_like", "cookie_monster")


@dataclass(frozen=True)
class RunSpec:
    """What varies between run points: the policy, the epoch length, bias detection, and the swept
    parameters to report with the point (``knob1``, ``augment``, ...)."""

    policy: str
    epoch_days: int = 7
    bias: BiasDetection | None = None
    params: tuple = ()  # ((name, value), ...): hashable, in column order


@dataclass
class RunResult:
    spec: RunSpec
    record: RunRecord
    budget: BudgetMetrics
    queries: list[QueryOutcome]
    seconds: float

    def row(self) -> dict:
        """The point as ``results.json`` lists it."""
        executed = [q for q in self.queries if q.executed]
        rmsre = [q.rmsre for q in executed if q.rmsre is not None]
        empirical = [q.rmsre_empirical for q in executed if q.rmsre_empirical is not None]
        return {
            "policy": self.spec.policy,
            **dict(self.spec.params),
            "epoch_days": self.spec.epoch_days,
            "avg_budget_requested": self.budget.average_requested,
            "avg_budget_converted": self.budget.average_converted,
            "avg_budget_all": self.budget.average_all,
            "max_budget": self.budget.maximum,
            "queries_total": len(self.queries),
            "queries_executed": len(executed),
            "queries_zero_truth": sum(1 for q in executed if q.rmsre is None),
            "rmsre_median": quantile_or_none(rmsre, 0.5),
            "rmsre_max": max(rmsre) if rmsre else None,
            "rmsre_mean": float(np.mean(rmsre)) if rmsre else None,
            "rmsre_std": float(np.std(rmsre)) if rmsre else None,
            "rmsre_min": min(rmsre) if rmsre else None,
            "rmsre_empirical_median": quantile_or_none(empirical, 0.5),
            "rmsre_empirical_max": max(empirical) if empirical else None,
            "reports": self.record.reports,
            "reports_paying": self.record.reports_paying,
            "reports_with_dropped_epochs": self.record.reports_with_dropped_epochs,
            "dropped_epochs": self.record.dropped_epochs,
            "span_epochs": self.budget.span_epochs,
            "seconds": round(self.seconds, 2),
        }


def epoch_origin(dataset: Dataset) -> int:
    """Epochs start at midnight UTC of the data's first day, so epoch boundaries do not depend on the date."""
    first = dataset.population.first_micros or 0
    return first - first % MICROS_PER_DAY


class Runner:
    """Runs points on one dataset, caching the unbudgeted truth per epoch length."""

    def __init__(self, dataset: Dataset, batch_size: int, *, seed: int = 0, noise_factor: float = 1.0,
                 repetitions: int = 0, capacity: Fraction = Fraction(1), reference: bool = False) -> None:
        self.dataset, self.batch_size, self.seed = dataset, batch_size, seed
        self.noise_factor, self.repetitions, self.capacity = noise_factor, repetitions, capacity
        self.reference = reference
        self._truth: dict[int, dict] = {}
        self._table: columnar.ConversionTable | None = None
        self._histograms: dict = {}  # the column-wise replay's unbudgeted histograms, per epoch clock

    def config(self, spec: RunSpec) -> MeasurementConfig:
        clock = EpochClock(spec.epoch_days * MICROS_PER_DAY, epoch_origin(self.dataset))
        return MeasurementConfig(policy=spec.policy, clock=clock, capacity_epsilon=self.capacity, bias=spec.bias)

    def simulate(self, spec: RunSpec) -> RunRecord:
        """The run's record: by the column-wise replay, or by the reference when it cannot (bias detection) or
        when the runner was asked to (``reference=True``, for the tests that hold the two equal)."""
        config, source = self.config(spec), SeededSource(self.seed)
        if self.reference or not columnar.supports(config):
            simulation = simulate(self.dataset.devices, config, source, self.batch_size)
            return record_of(simulation, spec.policy)
        if self._table is None:
            self._table = columnar.conversion_table(self.dataset)
        return columnar.simulate_columnar(self._table, config, source, self.batch_size, self._histograms)

    def truth(self, epoch_days: int) -> dict:
        if epoch_days not in self._truth:
            self._truth[epoch_days] = truth_of(self.simulate(RunSpec("ipa_like", epoch_days)))
        return self._truth[epoch_days]

    def run(self, spec: RunSpec) -> RunResult:
        began = time.monotonic()
        record = self.simulate(spec)
        if spec.policy == "ipa_like" and spec.bias is None:
            self._truth.setdefault(spec.epoch_days, truth_of(record))
        config = self.config(spec)
        budget = budget_metrics(record, self.dataset.population, config.clock, spec.policy, self.batch_size)
        queries = query_outcomes(
            record, self.truth(spec.epoch_days), noise_factor=self.noise_factor, repetitions=self.repetitions,
            seed=self.seed, counting_coordinate=spec.bias is not None,
        )
        return RunResult(spec, record, budget, queries, time.monotonic() - began)
