"""Bias detection, Cookie Monster paper Appendix D: the counting coordinate, its Thm. 17 cost, and the Thm. 15/16 bound."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest

from tests.support.measurement_events import at, conversion, impression, request
from transforms.budgeting.mechanisms.bias import BiasDetection, bias_weight, max_l1
from transforms.budgeting.mechanisms.device import EVERY_EPOCH, MeasurementConfig
from transforms.budgeting.mechanisms.policies import AraLike, CookieMonster, IpaLike, ReportOutcome
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.budgeting.mechanisms.queries import QueryBatch, execute, make_batch
from transforms.budgeting.mechanisms.simulation import simulate
from transforms.core.mechanisms.noise import DEFAULT_GRANULARITY, SeededSource, laplace_scale_for

UNIT = 10**12
NIKE = "nike.com"
WINDOW = range(1, 5)
MULTI = request(requested_epsilon=0.5, report_global_sensitivity=70.0, query_global_sensitivity=100.0,
                campaign_ids=("a1", "a2"), dimension=2, logic="last_touch")
RELEVANT = {2: [impression(at(2), "I2", campaign_id="a2")], 3: [impression(at(3), "I3", campaign_id="a1")]}
KAPPA = BiasDetection(Fraction(10))  # extra loss 0.5 * 10 / 100 = 0.05 eps per occupied epoch
EXTRA = 5 * 10**10
CASE_3 = 35 * 10**10  # 0.5 * 70 / 100


def test_options_are_validated():
    for bad, message in (({"kappa": 0}, "kappa must be > 0"), ({"kappa": 1, "count": "days"}, "bias count"),
                         ({"kappa": 1, "beta": 1.0}, "beta must be in")):
        with pytest.raises(ValueError, match=message):
            BiasDetection(**bad)
    with pytest.raises(ValueError, match="on-device policy"):
        MeasurementConfig(policy="ipa_like", bias=KAPPA)
    with pytest.raises(ValueError, match="drops no data"):
        IpaLike().generate_report(FilterTable(UNIT), NIKE, WINDOW, RELEVANT, MULTI, 50.0, (), KAPPA)


def test_coordinate_counts_epochs_or_reports():
    assert BiasDetection(Fraction(3, 2)).coordinate(4) == 6.0  # Thm. 15
    reports = BiasDetection(Fraction(3, 2), count="reports")  # Thm. 16
    assert (reports.coordinate(0), reports.coordinate(1), reports.coordinate(4)) == (0.0, 1.5, 1.5)


def test_thm17_extra_loss_is_epsilon_kappa_over_query_sensitivity_rounded_up():
    assert KAPPA.extra_loss_units(MULTI) == EXTRA
    third = BiasDetection(Fraction(1, 3))
    assert third.extra_loss_units(request(requested_epsilon=1.0, query_global_sensitivity=1.0)) == math.ceil(UNIT / 3)


def test_cookie_monster_counts_empty_epochs_without_heartbeats():
    table = FilterTable(UNIT)
    outcome = CookieMonster().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0, {2, 3}, KAPPA)
    # epochs 1 and 4 hold no data: free, and counted as empty; 2 and 3 pay case 3 plus kappa's share
    assert table.consumed == {(NIKE, 1): 0, (NIKE, 2): CASE_3 + EXTRA, (NIKE, 3): CASE_3 + EXTRA, (NIKE, 4): 0}
    assert outcome == ReportOutcome((20.0, 50.0, 0.0), 2 * (CASE_3 + EXTRA), 0)


def test_cookie_monster_with_heartbeats_counts_exactly_the_out_of_budget_epochs():
    table = FilterTable(UNIT, {(NIKE, 3): UNIT - CASE_3})  # epoch 3 can pay the report but not kappa's share too
    outcome = CookieMonster().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0, EVERY_EPOCH, KAPPA)
    assert table.consumed == {(NIKE, 1): EXTRA, (NIKE, 2): CASE_3 + EXTRA, (NIKE, 3): UNIT - CASE_3, (NIKE, 4): EXTRA}
    assert outcome == ReportOutcome((10.0, 0.0, 50.0), CASE_3 + 3 * EXTRA, 1)  # I3 lost: last touch is I2 (a2)


def test_ara_like_counts_the_whole_window_when_it_cannot_pay():
    full = 5 * 10**11 + EXTRA
    table = FilterTable(UNIT)
    outcome = AraLike().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0, {2, 3}, KAPPA)
    assert outcome == ReportOutcome((20.0, 50.0, 0.0), 4 * full, 0) and table.consumed[(NIKE, 1)] == full
    table = FilterTable(UNIT, {(NIKE, 4): UNIT - full + 1})
    outcome = AraLike().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0, EVERY_EPOCH, KAPPA)
    assert outcome == ReportOutcome((40.0, 0.0, 0.0), 0, 4)


def test_thm18_weights():
    assert max_l1(MULTI) == 70.0
    assert max_l1(MULTI._replace(norm="L2", dimension=4)) == 140.0
    assert bias_weight(MULTI, 4) == 140.0  # m = 2, k = 4: removing an epoch can move the credit
    assert bias_weight(MULTI, 1) == 70.0  # k = 1
    assert bias_weight(request(report_global_sensitivity=5.0), 5) == 5.0  # m = 1


def _batch(coordinate_sum: float, weight: float) -> QueryBatch:
    return QueryBatch(NIKE, "k", 0, (0, "d", "c"), 100, (coordinate_sum, 400.0), 1.0, 5.0, (1, 2), weight)


def test_execute_releases_the_count_and_the_bound():
    bias = BiasDetection(Fraction(2), beta=0.05)
    result = execute(_batch(6.0, 5.0), SeededSource(1), bias=bias)
    scale = float(laplace_scale_for(Fraction(5), Fraction(1), DEFAULT_GRANULARITY))
    assert len(result.noisy_value) == 1 and result.noise_scale == scale
    estimate = result.empty_count_estimate
    assert abs(estimate - 3.0) < 60 * scale  # a draw beyond 60 scales has probability e^-60
    assert result.bias_bound == pytest.approx(max(0.0, (2 * estimate + scale * math.log(20)) / 2 * 5.0))
    assert execute(_batch(6.0, 5.0), SeededSource(1)).empty_count_estimate is None


def test_batch_weight_is_the_largest_of_its_reports():
    reports = simulate_reports()
    batch = make_batch(NIKE, "product=shoe", 0, reports)
    assert batch.bias_weight == max(r.bias_weight for r in reports) == 100.0


def simulate_reports():
    """Two devices, each with one relevant impression and two conversions of value 100 (m = 1)."""
    config = MeasurementConfig(bias=BiasDetection(Fraction(1)))
    events = []
    for device in ("ann", "bob"):
        events.append(impression(at(1), f"{device}-i", device_id=device))
        events += [conversion(at(2, day), f"{device}-c{day}", 100.0, request(requested_epsilon=0.5), device_id=device)
                   for day in (1, 2)]
    return simulate(events, config, SeededSource(3), 10).reports


def test_replay_counts_empty_epochs_and_exhaustion_end_to_end():
    reports = simulate_reports()
    # 30-day windows from days 1 and 2 of epoch 2 cover epochs -3..2 and -2..2; data in 1 and 2 only
    by_id = {r.conversion_id: r for r in reports}
    first, second = by_id["ann-c1"], by_id["ann-c2"]
    assert (first.first_epoch, first.last_epoch, second.first_epoch) == (-3, 2, -2)
    assert first.histogram == (4.0, 100.0) and first.dropped_epochs == 0
    # the first report spent eps 0.5 + 0.005 on epoch 1: the second cannot pay there and loses the impression
    assert second.histogram == (4.0, 0.0) and second.dropped_epochs == 1
    assert first.bias_weight == 100.0


def test_bound_coverage_through_execute():
    """The bound fails only when the count's noise X < -b ln(1/beta); for the discrete Laplace on the grid g·Z
    with q = e^{-g/b}, P = q^K / (1 + q) with K = floor(b ln(1/beta) / g) + 1, close to beta / 2.

    4,000 independent results with beta = 0.2 (p ~ 0.1): the failure count is Binomial(4000, p). The band
    [mean - 5.5 sd, mean + 5.5 sd] misses with probability below 1e-6 (two-sided normal tail 3.8e-8; the
    binomial's skew at this size moves it by far less than that margin). A true bias that equals the bound's
    assumption (every empty epoch moves the sum by the full weight) makes the bound as tight as it can be."""
    bias = BiasDetection(Fraction(1), beta=0.2)
    true_count, weight = 7, 5.0
    true_bias = true_count * weight
    scale = laplace_scale_for(Fraction(5), Fraction(1), DEFAULT_GRANULARITY)
    q = math.exp(-float(DEFAULT_GRANULARITY / scale))
    k = math.floor(float(scale) * math.log(1 / bias.beta) / float(DEFAULT_GRANULARITY)) + 1
    p = q**k / (1 + q)
    n = 4000
    source = SeededSource(2024)
    failures = 0
    for index in range(n):
        batch = _batch(float(true_count), weight)._replace(batch_index=index)
        failures += execute(batch, source, bias=bias).bias_bound < true_bias
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    assert abs(p - bias.beta / 2) < 0.001
    assert mean - 5.5 * sd <= failures <= mean + 5.5 * sd
