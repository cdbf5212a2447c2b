"""The querier's side (``transforms/budgeting/mechanisms/queries.py``): accuracy target, batches, central budgets, execution."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest

from schemas.rows import IncompleteBatch, QueryResult
from transforms.budgeting.mechanisms.accuracy import AccuracyTarget
from transforms.budgeting.mechanisms.device import ReportRecord
from transforms.budgeting.mechanisms.queries import (
    DEFAULT_BATCH_SIZE,
    EXECUTED,
    REJECTED,
    BatchCutter,
    CentralBudget,
    QueryBatch,
    batch_order,
    execute,
    make_batch,
    rejected,
    report_order,
)
from transforms.core.mechanisms.noise import DEFAULT_GRANULARITY, SeededSource

UNIT = 10**12


def report(time: int, device: str = "d", conversion: str = "c", histogram=(1.0,), epsilon=0.5, sensitivity=100.0,
           first=1, last=2, querier="nike.com", key="product=shoe") -> ReportRecord:
    return ReportRecord(querier, key, time, device, conversion, f"r-{device}-{conversion}", tuple(histogram), epsilon,
                        sensitivity, first, last)


def batch(epochs=(1, 2), epsilon=0.5, index=0, sums=(10.0,), querier="nike.com", key="k", sensitivity=100.0):
    return QueryBatch(querier, key, index, (index, "d", "c"), 3, tuple(sums), epsilon, sensitivity, tuple(epochs))


# --------------------------------------------------------------------------- accuracy target


def test_accuracy_target_microbenchmark_value():
    """Sec. 8.1: eps = Delta ln(1/beta) / (alpha B c~) with Delta = c~ = 5, alpha = 5 %, beta = 1 %, B = 2000."""
    target = AccuracyTarget(alpha=0.05, beta=0.01, batch_size=2000)
    expected = 5 * math.log(100) / (0.05 * 2000 * 5)
    assert math.isclose(target.epsilon(5.0), expected, rel_tol=1e-14)
    assert math.isclose(expected, 0.04605170185988091, rel_tol=1e-14)  # ln(100) / 100
    # an explicit average value c~ below the cap raises epsilon in proportion
    assert math.isclose(AccuracyTarget(0.05, 0.01, 2000, expected_value=2.5).epsilon(5.0), 2 * expected, rel_tol=1e-14)
    assert DEFAULT_BATCH_SIZE == 2000


@pytest.mark.parametrize(
    "args, error",
    [((0.0, 0.01, 10), "alpha"), ((-1.0, 0.01, 10), "alpha"), ((0.05, 0.0, 10), "beta"), ((0.05, 1.0, 10), "beta"),
     ((0.05, 0.01, 0), "batch size"), ((0.05, 0.01, 10, 0.0), "expected conversion value"),
     ((0.05, 0.01, 10, -2.0), "expected conversion value")],
)
def test_accuracy_target_validation(args, error):
    with pytest.raises(ValueError, match=error):
        AccuracyTarget(*args)


# --------------------------------------------------------------------------- batches


def test_make_batch_sums_min_epsilon_max_sensitivity_and_epochs():
    reports = [
        report(1, conversion="a", histogram=(1.0, 2.0), epsilon=0.5, sensitivity=50.0, first=3, last=5),
        report(2, conversion="b", histogram=(0.1, 0.2, 7.0), epsilon=0.25, sensitivity=100.0, first=1, last=1),
        report(3, conversion="c", histogram=(0.2, 0.1), epsilon=1.0, sensitivity=70.0, first=4, last=8),
    ]
    made = make_batch("nike.com", "k", 4, reports)
    assert made == QueryBatch(
        querier_site="nike.com", query_key="k", batch_index=4, completed=(3, "d", "c"), report_count=3,
        sums=(math.fsum([1.0, 0.1, 0.2]), math.fsum([2.0, 0.2, 0.1]), 7.0), epsilon=0.25, sensitivity=100.0,
        epochs=(1, 3, 4, 5, 6, 7, 8),
    )
    assert made.sums[0] == 1.3  # correctly rounded, not 1.0 + 0.1 + 0.2 left to right


def test_batch_cutter_cuts_in_order_and_keeps_the_pending_tail():
    cutter = BatchCutter("nike.com", "k", 3)
    reports = [report(t, conversion=f"c{t}", histogram=(float(t),)) for t in range(8)]
    assert cutter.add(reports[:2]) == [] and cutter.pending == reports[:2]
    assert cutter.incomplete() == IncompleteBatch("nike.com", "k", 2)
    full = cutter.add(reports[2:7])
    assert [b.batch_index for b in full] == [0, 1]
    assert [b.sums for b in full] == [(0.0 + 1.0 + 2.0,), (3.0 + 4.0 + 5.0,)]
    assert [b.completed for b in full] == [report_order(reports[2]), report_order(reports[5])]
    assert all(b.report_count == 3 and (b.querier_site, b.query_key) == ("nike.com", "k") for b in full)
    assert cutter.pending == [reports[6]] and cutter.next_index == 2
    (last,) = cutter.add(reports[7:] + [report(9, conversion="c9")])
    assert last.batch_index == 2 and last.completed == (9, "d", "c9")
    assert cutter.pending == [] and cutter.incomplete() is None


def test_batch_cutter_resumes_from_saved_state():
    pending = [report(1, conversion="x")]
    cutter = BatchCutter("nike.com", "k", 2, next_index=5, pending=pending)
    (made,) = cutter.add([report(2, conversion="y")])
    assert made.batch_index == 5 and made.report_count == 2 and cutter.next_index == 6


def test_report_and_batch_order():
    assert report_order(report(5, device="b", conversion="a")) == (5, "b", "a")
    assert sorted([report(2, "a"), report(1, "z"), report(1, "b")], key=report_order) == [
        report(1, "b"), report(1, "z"), report(2, "a")]
    late, early = batch(index=1), batch(index=0)
    assert sorted([late, early], key=batch_order) == [early, late]


# --------------------------------------------------------------------------- central budget (IPA-like)


def test_central_budget_admits_until_an_epoch_would_overflow():
    budget = CentralBudget(UNIT)  # eps_G = 1 per (querier, epoch)
    assert budget.admit(batch(epochs=(1, 2), epsilon=0.5))
    assert budget.admit(batch(epochs=(2, 3), epsilon=0.5))  # epoch 2 reaches exactly 1
    assert budget.filters.consumed == {("nike.com", 1): UNIT // 2, ("nike.com", 2): UNIT, ("nike.com", 3): UNIT // 2}
    # epoch 2 is full: the whole batch is rejected and epoch 3 pays nothing either
    assert not budget.admit(batch(epochs=(2, 3), epsilon=0.25))
    assert budget.filters.consumed == {("nike.com", 1): UNIT // 2, ("nike.com", 2): UNIT, ("nike.com", 3): UNIT // 2}
    # other queriers and untouched epochs still run
    assert budget.admit(batch(epochs=(2, 3), epsilon=0.5, querier="adidas.com"))
    assert budget.admit(batch(epochs=(3, 4), epsilon=0.5))
    assert budget.filters.consumed[("nike.com", 3)] == UNIT and budget.filters.consumed[("nike.com", 4)] == UNIT // 2


def test_central_budget_rounds_the_charge_up():
    budget = CentralBudget(0, {})
    assert not budget.admit(batch(epochs=(1,), epsilon=1e-13))  # a tenth of a unit costs a whole unit...
    budget = CentralBudget(1)
    assert budget.admit(batch(epochs=(1,), epsilon=1e-13))  # ...which fits a capacity of one unit
    assert not budget.admit(batch(epochs=(1,), epsilon=1e-13))


# --------------------------------------------------------------------------- execution


def test_execute_is_reproducible_and_keyed():
    one, two = batch(index=0, sums=(10.0, 20.0)), batch(index=1, sums=(10.0, 20.0))
    alone = execute(two, SeededSource(11))
    source = SeededSource(11)
    first = execute(one, source)
    after_another = execute(two, source)
    assert after_another == alone  # the noise of a batch does not depend on other calls
    assert execute(one, SeededSource(11)) == first
    assert first.noisy_value != after_another.noisy_value  # another batch index, other noise
    assert execute(one, SeededSource(12)).noisy_value != first.noisy_value  # another seed, other noise
    assert execute(batch(index=0, key="k2", sums=(10.0, 20.0)), SeededSource(11)).noisy_value != first.noisy_value


def test_execute_result_fields():
    made = batch(epsilon=0.5, sensitivity=100.0, sums=(10.0, 20.0, 0.0))
    result = execute(made, SeededSource(3))
    scale = (Fraction(100) + DEFAULT_GRANULARITY) / Fraction(1, 2)
    assert result == QueryResult("nike.com", "k", 0, 3, result.noisy_value, 0.5, float(scale), EXECUTED)
    assert len(result.noisy_value) == 3
    assert all((Fraction(v) / DEFAULT_GRANULARITY).denominator == 1 for v in result.noisy_value)  # on the grid


def test_execute_with_a_coarse_grid():
    result = execute(batch(sums=(10.3,)), SeededSource(3), granularity=Fraction(1, 4))
    assert (Fraction(result.noisy_value[0]) * 4).denominator == 1
    assert result.noise_scale == float((Fraction(100) + Fraction(1, 4)) / Fraction(1, 2)) == 200.5


def test_rejected_result_has_no_value():
    made = batch(epsilon=0.25, sensitivity=10.0)
    assert rejected(made) == QueryResult("nike.com", "k", 0, 3, (), 0.25, float((10 + DEFAULT_GRANULARITY) * 4), REJECTED)
    assert (EXECUTED, REJECTED) == ("executed", "rejected")
