"""The audit's statistics: exact Clopper-Pearson intervals, the epsilon bounds they give, and the event search."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from audit.bounds import EpsilonBound, clopper_pearson, epsilon_lower_bounds
from audit.events import OutputEvent, select_event


@pytest.mark.parametrize(("hits", "trials"), [(0, 10), (3, 10), (10, 10), (17, 1000), (500_000, 1_000_000)])
def test_the_interval_ends_are_where_the_binomial_tails_equal_alpha_over_two(hits: int, trials: int) -> None:
    lo, hi = clopper_pearson(hits, trials, 0.99)
    if hits > 0:  # P[X >= k | p = lo] = alpha / 2
        assert binom.sf(hits - 1, trials, float(lo)) == pytest.approx(0.005, rel=1e-6)
    else:
        assert lo == 0
    if hits < trials:  # P[X <= k | p = hi] = alpha / 2
        assert binom.cdf(hits, trials, float(hi)) == pytest.approx(0.005, rel=1e-6)
    else:
        assert hi == 1


def test_closed_forms_at_zero_and_all_hits() -> None:
    n, alpha = 1000, 1e-3
    lo, hi = clopper_pearson([0, n], n, 1 - alpha)
    assert hi[0] == pytest.approx(1 - (alpha / 2) ** (1 / n), rel=1e-9)
    assert lo[1] == pytest.approx((alpha / 2) ** (1 / n), rel=1e-9)


def test_bad_counts_and_confidences_are_refused() -> None:
    with pytest.raises(ValueError, match="between 0"):
        clopper_pearson(11, 10, 0.9)
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson(1, 10, 1.0)


def test_the_bound_is_the_log_ratio_of_the_far_interval_ends_minus_delta() -> None:
    bound = EpsilonBound.of(600, 1000, 200, 1000, delta=0.01, confidence=0.95)
    (lo_in, hi_in), (lo_out, hi_out) = clopper_pearson(600, 1000, 0.95), clopper_pearson(200, 1000, 0.95)
    assert bound.lower == pytest.approx(math.log((lo_in - 0.01) / hi_out))
    assert bound.estimate == pytest.approx(math.log((0.6 - 0.01) / 0.2))
    assert bound.upper == pytest.approx(math.log((hi_in - 0.01) / lo_out))
    assert bound.lower < bound.estimate < bound.upper


def test_an_event_within_delta_is_no_evidence_and_one_side_empty_is_a_finite_bound() -> None:
    assert EpsilonBound.of(5, 1000, 0, 1000, delta=0.1, confidence=0.99).lower == 0.0
    finite = EpsilonBound.of(1000, 1000, 0, 1000, delta=0.0, confidence=0.99)
    assert 0 < finite.lower < math.inf and finite.upper == math.inf
    assert finite.to_json()["upper"] == "inf"
    assert np.isneginf(epsilon_lower_bounds([0], [0], 10, 10, 0.0, 0.9)[0])


def test_the_search_finds_the_separating_threshold_and_its_direction() -> None:
    rng = np.random.default_rng(3)
    on_d, on_d_prime = rng.normal(1.0, 1.0, 20_000), rng.normal(0.0, 1.0, 20_000)
    event = select_event(on_d, on_d_prime, delta=0.0, confidence=0.99)
    assert event.relation == ">=" and event.given == "D" and event.threshold > 1
    flipped = select_event(on_d_prime, on_d, delta=0.0, confidence=0.99)
    assert flipped.relation in (">=", "<=") and flipped.given in ("D", "D'")
    assert (flipped.relation, flipped.given) != ("<=", "D")  # the high values are rarer on D here


def test_few_values_bring_the_single_values_as_events() -> None:
    on_d = np.array([0, 1, 2] * 300 + [1] * 600, dtype=float)  # 1 is the value D favours
    on_d_prime = np.array([0, 1, 2] * 500, dtype=float)
    event = select_event(on_d, on_d_prime, delta=0.0, confidence=0.99)
    assert event == OutputEvent("==", 1.0, "D")
    assert event.hits(on_d) == 900 and event.describe() == "S == 1, given D"
