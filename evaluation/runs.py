"""One evaluation run point: a policy (and epoch length, bias detection) on a loaded dataset, with its metrics.

The run is the in-memory reference of the measurement job
(``transforms.budgeting.mechanisms.simulation.simulate``), which the tests hold equal
to the Beam batch and streaming paths; running it in process lets a sweep
share one loaded dataset across dozens of points. Seeded randomness only
(simulation mode): report ids and the released noise come from the run's
seed, the empirical RMSRE's repetitions from their own seeded stream.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from evaluation.data import Dataset
from evaluation.metrics import BudgetMetrics, QueryOutcome, budget_metrics, quantile_or_none, query_outcomes, truth_of
from schemas.time_units import MICROS_PER_DAY
from transforms.budgeting.mechanisms.bias import BiasDetection
from transforms.budgeting.mechanisms.device import MeasurementConfig
from transforms.budgeting.mechanisms.simulation import Simulation, simulate
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
    simulation: Simulation
    budget: BudgetMetrics
    queries: list[QueryOutcome]
    seconds: float
    reports_with_dropped_epochs: int = 0
    dropped_epochs: int = 0

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
            "reports": len(self.simulation.reports),
            "reports_paying": sum(1 for r in self.simulation.reports if r.charged_units),
            "reports_with_dropped_epochs": self.reports_with_dropped_epochs,
            "dropped_epochs": self.dropped_epochs,
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
                 repetitions: int = 0, capacity: Fraction = Fraction(1)) -> None:
        self.dataset, self.batch_size, self.seed = dataset, batch_size, seed
        self.noise_factor, self.repetitions, self.capacity = noise_factor, repetitions, capacity
        self._truth: dict[int, dict] = {}

    def config(self, spec: RunSpec) -> MeasurementConfig:
        clock = EpochClock(spec.epoch_days * MICROS_PER_DAY, epoch_origin(self.dataset))
        return MeasurementConfig(policy=spec.policy, clock=clock, capacity_epsilon=self.capacity, bias=spec.bias)

    def simulate(self, spec: RunSpec) -> Simulation:
        return simulate(self.dataset.devices, self.config(spec), SeededSource(self.seed), self.batch_size)

    def truth(self, epoch_days: int) -> dict:
        if epoch_days not in self._truth:
            self._truth[epoch_days] = truth_of(self.simulate(RunSpec("ipa_like", epoch_days)))
        return self._truth[epoch_days]

    def run(self, spec: RunSpec) -> RunResult:
        began = time.monotonic()
        simulation = self.simulate(spec)
        if spec.policy == "ipa_like" and spec.bias is None:
            self._truth.setdefault(spec.epoch_days, truth_of(simulation))
        config = self.config(spec)
        budget = budget_metrics(simulation, self.dataset.population, config.clock, spec.policy, self.batch_size)
        queries = query_outcomes(
            simulation, self.truth(spec.epoch_days), noise_factor=self.noise_factor, repetitions=self.repetitions,
            seed=self.seed, counting_coordinate=spec.bias is not None,
        )
        return RunResult(
            spec, simulation, budget, queries, time.monotonic() - began,
            reports_with_dropped_epochs=sum(1 for r in simulation.reports if r.dropped_epochs),
            dropped_epochs=sum(r.dropped_epochs for r in simulation.reports),
        )
