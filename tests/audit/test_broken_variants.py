"""Every deliberately broken variant of ``broken.py`` is caught: its audited epsilon lower bound is above the
claim the real mechanism makes, at confidence 1 - 1e-6.

False failures. A test fails falsely when the audit of a broken variant, at these sample sizes, stays at or
below the claim. ``python -m tests.audit.power`` repeats every test's audit 40 times and prints the mean and
standard deviation of the bound. What it printed when the sizes were chosen (40 runs each; bound mean, sd,
and how many sd the claim lies below the mean):

    tlap                   claim 0.75  mean 1.439  sd 0.008   90.9 sd
    above_threshold        claim 1.5   mean 1.893  sd 0.069    5.7 sd
    stream                 claim 3     mean 4.075  sd 0.132    8.2 sd
    noisy_sum              claim 1     mean 1.924  sd 0.012   78.9 sd
    key_discovery          claim 1     mean 8.075  sd 0.091   78.0 sd
    ara                    claim 1     mean 1.552  sd 0.013   44.0 sd
    paa                    claim 1     mean 1.369  sd 0.019   19.4 sd
    randomized_response    claim 1     mean 1.243  sd 0.006   43.7 sd
    filter[cookie_monster] claim 1     mean 1.333  sd 0.057    5.8 sd
    filter[ara_like]       claim 1     mean 1.339  sd 0.052    6.5 sd
    filter[ipa_like]       claim 1     mean 1.331  sd 0.060    5.5 sd
    attribution_api[global] claim 1.5  mean 1.797  sd 0.031    9.6 sd
    attribution_api[quota]  claim 1    mean 1.609  sd 0.028   21.8 sd
    attribution_reporting[named]  claim 1  mean 1.930  sd 0.011  86.5 sd
    attribution_reporting[scopes] claim 1  mean 1.932  sd 0.009  100.7 sd

Every claim lies more than 5.5 standard deviations below the mean, so under a normal approximation of the
bound's spread each test fails falsely with probability below 2e-8.
"""
from __future__ import annotations

from fractions import Fraction

import pytest

from audit.auditor import run_audit
from audit.case import AuditCase
from audit.cases.aggregation import make_key_discovery_case, make_noisy_sum_case
from audit.cases.attribution_api import make_attribution_case
from audit.cases.attribution_reporting import make_named_budget_case, make_scopes_case
from audit.cases.budgeting import make_filter_case
from audit.cases.event_level import make_randomized_response_case
from audit.cases.kanon import DRAW, K, make_instance_case, make_stream_case, make_tlap_case
from audit.cases.summary_clients import make_ara_case, make_paa_case
from tests.audit import broken
from transforms.kanon.mechanisms import batch_replay
from transforms.kanon.mechanisms.above_threshold import AboveThreshold
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L1
from transforms.summary_reports.mechanisms.contributions import ContributionLimits

CONFIDENCE = 1 - 1e-6
TWICE_L1 = ContributionLimits(l1=2 * DEFAULT_L1)


def _caught(case: AuditCase, samples: int) -> None:
    """The audit of ``case`` with ``samples`` per side bounds epsilon above the claim."""
    result = run_audit(case, samples, CONFIDENCE)
    assert result.bound.lower > case.claimed_epsilon, result.to_json()
    assert not result.consistent


def test_tlap_at_twice_the_epsilon() -> None:
    _caught(make_tlap_case(DRAW, broken.double_epsilon_tlap(DRAW)), 100_000)


def test_above_threshold_redrawing_its_threshold_noise() -> None:
    noise = DRAW.noise()
    at = broken.ThresholdRedrawingAboveThreshold(k=K, window_steps=8, threshold_noise=noise, step_noise=noise)
    _caught(make_instance_case(at), 40_000)


def test_the_stream_counting_joins_instead_of_distinct_users(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_replay, "window_counts", broken.join_counts)
    noise = DRAW.noise()
    _caught(make_stream_case(AboveThreshold(k=K, window_steps=8, threshold_noise=noise, step_noise=noise)), 8_000)


def test_noisy_sums_at_half_the_discrete_laplace_scale() -> None:
    _caught(make_noisy_sum_case(Fraction(1), broken.HalfScaleAggregationParams), 100_000)


def test_key_discovery_without_the_tail_term_of_its_threshold() -> None:
    _caught(make_key_discovery_case(Fraction(1), Fraction(1, 10**5), broken.NoTailKeyDiscoveryParams), 100_000)


@pytest.mark.parametrize("make_case", [make_ara_case, make_paa_case], ids=["ara", "paa"])
def test_a_client_checking_its_contributions_against_twice_l1(make_case) -> None:
    _caught(make_case(Fraction(1), TWICE_L1), 100_000)


def test_randomized_response_counting_one_state_too_few() -> None:
    _caught(make_randomized_response_case("event", Fraction(1), broken.respond_with_one_state_too_few), 200_000)


@pytest.mark.parametrize("policy", ["cookie_monster", "ara_like", "ipa_like"])
def test_a_filter_that_lets_the_last_charge_overdraw(policy: str) -> None:
    _caught(make_filter_case(policy, Fraction(9, 10), 2, broken.OverdrawingFilterTable), 4_000)


def test_an_attribution_api_backend_deducting_the_global_budget_unchecked() -> None:
    _caught(make_attribution_case("global", Fraction(1), broken.UncheckedGlobalBudgetBackend), 50_000)


def test_an_attribution_api_impression_site_quota_that_lets_the_last_charge_overdraw() -> None:
    _caught(make_attribution_case("impression_site_quota", Fraction(9, 10), broken.OverdrawingQuotaBackend), 50_000)


def test_an_attribution_reporting_client_charging_a_named_budget_in_place_of_l1() -> None:
    _caught(make_named_budget_case(Fraction(1), broken.NamedBudgetOnlyAggregatable), 100_000)


def test_an_attribution_reporting_storage_attributing_a_trigger_to_every_source_its_scopes_match() -> None:
    _caught(make_scopes_case(Fraction(1), broken.EveryScopeAttributingStorage), 200_000)
