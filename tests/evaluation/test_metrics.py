"""The evaluation metrics against hand computations (Cookie Monster paper Sec. 8 definitions, README "Evaluation")."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest

from evaluation.data import Population
from evaluation.metrics import budget_metrics, query_outcomes, span_of, truth_of
from evaluation.run_record import record_of
from schemas.rows import DeviceEpochBudget, QueryResult
from schemas.time_units import MICROS_PER_DAY
from transforms.budgeting.mechanisms.device import ReportRecord
from transforms.budgeting.mechanisms.queries import EXECUTED, REJECTED, QueryBatch
from transforms.budgeting.mechanisms.simulation import Simulation
from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON
from transforms.core.mechanisms.noise import DEFAULT_GRANULARITY, laplace_scale_for
from transforms.core.mechanisms.time_steps import EpochClock

CLOCK = EpochClock(7 * MICROS_PER_DAY)
Q = "nike.example"


def population() -> Population:
    """Devices a, b converted; c only saw an impression; data in epochs 0..3."""
    return Population(any_event={Q: 3}, converted={Q: 2}, first_micros=0,
                      last_micros=4 * 7 * MICROS_PER_DAY - 1)


def row(device: str, epoch: int, consumed: float) -> DeviceEpochBudget:
    return DeviceEpochBudget(Q, device, epoch, consumed, 1.0)


def report(device: str, time_micros: int, charged: float, dropped: int = 0) -> ReportRecord:
    return ReportRecord(Q, "k", time_micros, device, f"c-{device}-{time_micros}", "id", (1.0,), 0.5, 5.0, 0, 1,
                        round(charged * UNITS_PER_EPSILON), dropped)


def batch(index: int, completed: tuple, sums: tuple, epochs: tuple = (0, 1), epsilon: float = 0.5) -> QueryBatch:
    return QueryBatch(Q, "k", index, completed, 2, sums, epsilon, 5.0, epochs)


def result(index: int, status: str = EXECUTED) -> QueryResult:
    return QueryResult(Q, "k", index, 2, (0.0,), 0.5, 1.0, status)


def test_on_device_budget_averages_over_the_three_populations():
    rows = [row("a", 0, 0.5), row("a", 1, 0.25), row("b", 1, 1.0)]
    reports = [report("a", 1, 0.5), report("b", 2, 1.0), report("a", 3, 0.25), report("b", 4, 0.0)]
    simulation = Simulation(reports, [batch(0, (2, "b", ""), (2.0,)), batch(1, (4, "b", ""), (2.0,))],
                            [result(0), result(1)], [], rows)
    metrics = budget_metrics(record_of(simulation, "cookie_monster"), population(), CLOCK, "cookie_monster",
                             batch_size=2)
    assert metrics.span_epochs == 4
    assert metrics.average_requested == pytest.approx(1.75 / 3)
    assert metrics.average_converted == pytest.approx(1.75 / (2 * 4))
    assert metrics.average_all == pytest.approx(1.75 / (3 * 4))
    assert metrics.maximum == 1.0
    assert sorted(metrics.device_averages) == pytest.approx([0.0, 0.75 / 4, 1.0 / 4])
    # Fig. 5a: batch 0 holds the first two reports (1.5 charged), batch 1 the next two (0.25 more)
    assert metrics.cumulative_average_all == pytest.approx([1.5 / 12, 1.75 / 12])


def test_ipa_like_charges_its_central_budget_to_every_device():
    # central filters: epoch 0 paid 0.5 (batch 0), epoch 1 paid 0.5 + 0.5 (batches 0 and 1); batch 2 rejected
    rows = [row("a", 0, 0.5), row("b", 0, 0.5), row("a", 1, 1.0)]
    batches = [batch(0, (2, "b", ""), (2.0,)), batch(1, (4, "b", ""), (2.0,), epochs=(1,)),
               batch(2, (6, "b", ""), (2.0,), epochs=(0, 1))]
    simulation = Simulation([], batches, [result(0), result(1), result(2, REJECTED)], [], rows)
    metrics = budget_metrics(record_of(simulation, "ipa_like"), population(), CLOCK, "ipa_like", batch_size=2)
    assert metrics.average_all == pytest.approx(1.5 * 3 / (3 * 4))  # 1.5 over the span, for each of 3 devices
    assert metrics.average_converted == pytest.approx(1.5 * 2 / (2 * 4))
    assert metrics.maximum == 1.0
    assert list(metrics.device_averages) == pytest.approx([1.5 / 4] * 3)
    assert metrics.cumulative_average_all == pytest.approx([1.0 * 3 / 12, 1.5 * 3 / 12, 1.5 * 3 / 12])


def test_span_reaches_back_to_requested_epochs_before_the_data():
    simulation = Simulation([], [], [], [], [row("a", -2, 0.1)])
    assert span_of(record_of(simulation, "cookie_monster"), population(), CLOCK) == range(-2, 4)


def test_rmsre_analytic_and_empirical():
    truth = {(Q, "k", 0): (100.0,), (Q, "k", 1): (0.0,), (Q, "k", 2): (50.0,)}
    biased = [batch(0, (2, "b", ""), (80.0,)), batch(1, (4, "b", ""), (0.0,)), batch(2, (6, "b", ""), (50.0,))]
    simulation = Simulation([], biased, [result(0), result(1), result(2, REJECTED)], [], [])
    outcomes = query_outcomes(record_of(simulation, "cookie_monster"), truth, noise_factor=0.5, repetitions=20_000, seed=3)
    scale = float(laplace_scale_for(Fraction(5), Fraction(1, 2), DEFAULT_GRANULARITY)) * 0.5
    first, zero, rejected = outcomes
    assert first.noise_scale == scale
    assert first.rmsre == pytest.approx(math.sqrt(20.0**2 + 2 * scale**2) / 100.0)
    # 20,000 draws, b = 5: (20 + X)^2 has mean 450 and variance 92,500 (E X^2 = 2 b^2, E X^4 = 24 b^4), so the
    # sample mean has standard deviation 2.15. A root off by 1.5 % needs the mean off by 3 % (13.5), 6.3
    # standard deviations: false-failure probability below 1e-9 (normal approximation, n = 20,000).
    assert first.rmsre_empirical == pytest.approx(first.rmsre, rel=0.015)
    assert zero.rmsre is None and zero.executed  # Q(D) = 0: no relative error
    assert rejected.rmsre is None and not rejected.executed
    assert [o.submitted for o in outcomes] == [0, 1, 2]


def test_counting_coordinate_is_not_part_of_the_value():
    simulation = Simulation([], [batch(0, (2, "b", ""), (3.0, 80.0))], [result(0)], [], [])
    (outcome,) = query_outcomes(record_of(simulation, "cookie_monster"), {(Q, "k", 0): (100.0,)}, counting_coordinate=True)
    assert outcome.biased_value == (80.0,)


def test_truth_is_the_unbudgeted_batch_sums():
    simulation = Simulation([], [batch(0, (2, "b", ""), (7.0,))], [], [], [])
    assert truth_of(record_of(simulation, "ipa_like")) == {(Q, "k", 0): (7.0,)}
