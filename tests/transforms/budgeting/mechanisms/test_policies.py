"""Budgeting policies (``transforms/budgeting/mechanisms/policies.py``; Cookie Monster paper Sec. 3.2, Code
Listing 1, Thm. 4, Sec. 8.1).

Every expected consumption below is computed by hand (or from exact rationals, independently of the module)
in budget units of 10^-12 epsilon.
"""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.measurement_events import at, conversion, impression, request
from tests.support.sources import ConstantSource
from transforms.budgeting.mechanisms.device import DeviceState, MeasurementConfig, replay, sort_events
from transforms.budgeting.mechanisms.policies import (
    POLICIES,
    AraLike,
    AttributionApi,
    BigBird,
    CookieMonster,
    IpaLike,
    ReportOutcome,
    individual_loss_units,
    make_policy,
    scaled_loss_units,
)
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.core.mechanisms.global_filters import (
    CONVERSION_QUOTA,
    GLOBAL,
    IMPRESSION_QUOTA,
    SITE,
    FilterCapacities,
    FilterId,
    FilterSet,
)

UNIT = 10**12  # budget units per epsilon
NIKE = "nike.com"


def ceil_sqrt_of_rational(value: Fraction) -> int:
    """ceil(sqrt(value)) for a rational value > 0: the least r with r^2 >= ceil(value) (r^2 is an integer)."""
    n = -(-value.numerator // value.denominator)
    return math.isqrt(n - 1) + 1


# --------------------------------------------------------------------------- Sec. 3.2, the Nike example


def nike_example(prefill_e1: bool):
    """Ann's device (Fig. 3): I1 (campaign a1) in e1, I2 (a2) in e2, nothing in e3, the $70 conversion in e4."""
    config = MeasurementConfig(policy="cookie_monster", capacity_epsilon=Fraction(1))
    capacity = config.capacity_units
    state = DeviceState(config.new_filters({(NIKE, 1): capacity} if prefill_e1 else None))
    nike_request = request(
        first_epoch=1, last_epoch=4, campaign_ids=("a1", "a2"), logic="last_n", last_n=2, dimension=2,
        requested_epsilon=0.5, report_global_sensitivity=70.0, query_global_sensitivity=100.0,
        query_key="shoes",
    )
    events = sort_events([
        impression(at(1, 2), "I1", campaign_id="a1"),
        impression(at(2, 3), "I2", campaign_id="a2"),
        conversion(at(4, 1), "C1", 70.0, nike_request),
    ])
    reports = list(replay("ann", events, state, config, CookieMonster(), ConstantSource()))
    return reports, state


def test_nike_example_of_section_3_2():
    reports, state = nike_example(prefill_e1=True)
    (report,) = reports
    # e1 is out of budget: halted, its consumption unchanged (still exactly the capacity), I1 dropped.
    # e2 pays eps * report sensitivity / query sensitivity = 0.5 * 70 / 100 = 0.35 epsilon.
    # e3 (no impression) and e4 (only the conversion, public to Nike) pay 0.
    assert state.filters.consumed == {(NIKE, 1): UNIT, (NIKE, 2): 35 * 10**10, (NIKE, 3): 0, (NIKE, 4): 0}
    # The whole $70 goes to I2, in the bucket of its campaign a2; the a1 entry is the null one.
    assert report.histogram == (0.0, 70.0)
    assert (report.querier_site, report.query_key, report.device_id, report.conversion_id) == (NIKE, "shoes", "ann", "C1")
    assert (report.first_epoch, report.last_epoch) == (1, 4)
    assert report.requested_epsilon == 0.5 and report.query_global_sensitivity == 100.0
    assert report.conversion_time_micros == at(4, 1)


def test_nike_example_with_budget_left_in_e1_credits_both_impressions():
    """The counterfactual: with e1 not exhausted, both epochs pay 0.35 and the last two impressions split $70."""
    (report,), state = nike_example(prefill_e1=False)
    assert state.filters.consumed == {(NIKE, 1): 35 * 10**10, (NIKE, 2): 35 * 10**10, (NIKE, 3): 0, (NIKE, 4): 0}
    assert report.histogram == (35.0, 35.0)


# --------------------------------------------------------------------------- Thm. 4, the three cases


def test_case_1_no_relevant_events_costs_nothing():
    for single in (True, False):
        assert individual_loss_units((), request(), 70.0, single_epoch=single) == 0


def test_case_3_multi_epoch_costs_the_report_sensitivity_whatever_the_value():
    wanted = request(requested_epsilon=0.5, report_global_sensitivity=70.0, query_global_sensitivity=100.0)
    events = (impression(1, "i"),)
    for value in (0.0, 1.0, 70.0, 1e6):
        assert individual_loss_units(events, wanted, value, single_epoch=False) == 35 * 10**10


def test_case_2_single_epoch_l1_is_the_norm_of_the_epoch_attribution():
    # $30 over I1 (a1) and I2 (a2) equally: A(F_e) = (15, 15), ||.||_1 = 30; loss = 0.5 * 30 / 100 = 0.15.
    wanted = request(campaign_ids=("a1", "a2"), dimension=2, logic="equal_credit", requested_epsilon=0.5,
                     report_global_sensitivity=70.0, query_global_sensitivity=100.0)
    events = (impression(1, "I1", campaign_id="a1"), impression(2, "I2", campaign_id="a2"))
    assert individual_loss_units(events, wanted, 30.0, single_epoch=True) == 15 * 10**10
    # Above the report sensitivity the attribution is clipped to 70: loss 0.35, as in case 3.
    assert individual_loss_units(events, wanted, 500.0, single_epoch=True) == 35 * 10**10


def test_case_2_single_epoch_l2_uses_an_exact_square_root_rounded_up():
    # $70 over two campaigns: A(F_e) = (35, 35), ||.||_2 = 35 sqrt 2; loss = 1 * 35 sqrt 2 / 100 epsilon,
    # i.e. ceil(0.35e12 sqrt 2) = ceil(sqrt(2 * (35e10)^2)) units.
    wanted = request(campaign_ids=("a1", "a2"), dimension=2, logic="last_n", last_n=2, requested_epsilon=1.0,
                     report_global_sensitivity=70.0, query_global_sensitivity=100.0, norm="L2")
    events = (impression(1, "I1", campaign_id="a1"), impression(2, "I2", campaign_id="a2"))
    expected = math.isqrt(2 * (35 * 10**10) ** 2 - 1) + 1
    assert expected == 494_974_746_831  # 0.35e12 * sqrt 2 = 494,974,746,830.58...
    assert individual_loss_units(events, wanted, 70.0, single_epoch=True) == expected
    # Not a perfect square either: $90 equally over I1 (a1), I2 and I3 (a2) gives (30, 60), norm 30 sqrt 5.
    wanted = wanted._replace(logic="equal_credit")
    events = (impression(1, "I1", campaign_id="a1"), impression(2, "I2", campaign_id="a2"),
              impression(3, "I3", campaign_id="a2"))
    loss = individual_loss_units(events, wanted, 90.0, single_epoch=True)
    assert loss == ceil_sqrt_of_rational(Fraction(UNIT, 100) ** 2 * (30**2 + 60**2)) == 670_820_393_250
    # A perfect square is not rounded up: $70 over 3 a1 and 4 a2 impressions gives (30, 40), norm exactly 50.
    events = tuple(impression(k, f"i{k}", campaign_id="a1" if k < 3 else "a2") for k in range(7))
    assert individual_loss_units(events, wanted, 70.0, single_epoch=True) == 5 * 10**11


@settings(max_examples=200, deadline=None)
@given(
    value=st.floats(min_value=0, max_value=1e4),
    campaigns=st.lists(st.sampled_from(("a1", "a2", "a3")), min_size=1, max_size=6),
    logic=st.sampled_from(("last_touch", "first_touch", "equal_credit", "last_n")),
    epsilon=st.sampled_from((0.01, 0.1, 0.25, 1 / 3, 1.0, 2.5)),
    report_sensitivity=st.floats(min_value=1.0, max_value=100.0),
    which=st.sampled_from(("L1", "L2")),
)
def test_case_2_equals_the_exact_formula(value, campaigns, logic, epsilon, report_sensitivity, which):
    """loss = ceil(eps * ||A(F_e)||_p / query sensitivity) units, from the histogram's exact rational entries, and
    never above the case-3 loss."""
    from transforms.budgeting.mechanisms.attribution import attribution_histogram

    wanted = request(campaign_ids=("a1", "a2", "a3"), dimension=3, logic=logic, last_n=2, requested_epsilon=epsilon,
                     report_global_sensitivity=report_sensitivity, query_global_sensitivity=100.0, norm=which)
    events = tuple(impression(k, f"i{k}", campaign_id=c) for k, c in enumerate(campaigns))
    histogram = attribution_histogram(events, wanted, value)
    factor = Fraction(str(epsilon)) * UNIT / 100
    if which == "L1":
        expected = math.ceil(factor * sum(Fraction(v) for v in histogram))
    else:
        square = factor**2 * sum(Fraction(v) ** 2 for v in histogram)
        expected = 0 if square == 0 else ceil_sqrt_of_rational(square)
    # capped by case 3 (the report sensitivity read as its decimal), which also bounds the individual sensitivity
    expected = min(expected, math.ceil(factor * Fraction(str(report_sensitivity))))
    loss = individual_loss_units(events, wanted, value, single_epoch=True)
    assert loss == expected
    # Never more than eps times the report sensitivity (the clipping bound), read as the exact binary double the
    # clipping uses; case 3 reads it as a decimal, see test_case_2_never_costs_more_than_case_3.
    assert loss <= math.ceil(factor * Fraction(report_sensitivity))


def test_case_2_never_costs_more_than_case_3():
    """Thm. 4: case 2's ||A(F) - A(empty)|| is at most the report sensitivity, so its loss is at most case 3's."""
    wanted = request(requested_epsilon=0.01, report_global_sensitivity=1.00001, query_global_sensitivity=100.0)
    events = (impression(1, "i"),)
    assert Fraction(1.00001) > Fraction("1.00001")  # the double is above the decimal it prints as
    single = individual_loss_units(events, wanted, 2.0, single_epoch=True)  # clipped to the double 1.00001
    multi = individual_loss_units(events, wanted, 2.0, single_epoch=False)
    assert multi == 100_001_000  # 0.01 * 1.00001 / 100 epsilon, exactly, read as decimals
    assert single <= multi


def test_scaled_loss_units_rounds_up_and_full_epsilon():
    assert scaled_loss_units(0.1, 1.0, 3.0) == 33_333_333_334  # 10^11 / 3 rounded up
    assert scaled_loss_units(0.7, 100.0, 100.0) == 7 * 10**11  # the full requested epsilon
    assert scaled_loss_units(1.0, 70.0, 100.0) == 7 * 10**11


# --------------------------------------------------------------------------- the policies on hand-built devices


WINDOW = range(1, 5)  # epochs 1..4
MULTI = request(requested_epsilon=0.5, report_global_sensitivity=70.0, query_global_sensitivity=100.0,
                campaign_ids=("a1", "a2"), dimension=2, logic="last_touch")
RELEVANT = {2: [impression(at(2), "I2", campaign_id="a2")], 3: [impression(at(3), "I3", campaign_id="a1")]}
FULL = 5 * 10**11  # eps = 0.5


def test_cookie_monster_pays_zero_on_empty_epochs_and_report_over_query_on_the_others():
    table = FilterTable(UNIT)
    outcome = CookieMonster().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0)
    assert table.consumed == {(NIKE, 1): 0, (NIKE, 2): 35 * 10**10, (NIKE, 3): 35 * 10**10, (NIKE, 4): 0}
    assert outcome == ReportOutcome((50.0, 0.0), 70 * 10**10, 0)  # last touch: I3 of campaign a1


def test_cookie_monster_drops_only_the_epochs_that_cannot_pay():
    table = FilterTable(UNIT, {(NIKE, 3): UNIT - 35 * 10**10 + 1})  # one unit short for epoch 3
    outcome = CookieMonster().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0)
    assert table.consumed == {(NIKE, 1): 0, (NIKE, 2): 35 * 10**10, (NIKE, 3): UNIT - 35 * 10**10 + 1, (NIKE, 4): 0}
    assert outcome == ReportOutcome((0.0, 50.0), 35 * 10**10, 1)  # I3 dropped: last touch falls back on I2 (a2)


def test_cookie_monster_single_epoch_window_pays_the_individual_sensitivity():
    table = FilterTable(UNIT)
    outcome = CookieMonster().generate_report(table, NIKE, range(3, 4), RELEVANT, MULTI, 20.0)
    assert table.consumed == {(NIKE, 3): 10**11}  # 0.5 * 20 / 100
    assert outcome == ReportOutcome((20.0, 0.0), 10**11, 0)


def test_ara_like_pays_full_epsilon_on_every_epoch_of_the_window():
    table = FilterTable(UNIT)
    outcome = AraLike().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0)
    assert table.consumed == {(NIKE, e): FULL for e in WINDOW}  # empty epochs 1 and 4 included
    assert outcome == ReportOutcome((50.0, 0.0), 4 * FULL, 0)


def test_ara_like_is_all_or_nothing():
    table = FilterTable(UNIT, {(NIKE, 4): FULL + 1})  # the empty epoch 4 cannot pay 0.5 more
    outcome = AraLike().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0)
    assert outcome == ReportOutcome((0.0, 0.0), 0, 4)
    assert table.consumed == {(NIKE, 1): 0, (NIKE, 2): 0, (NIKE, 3): 0, (NIKE, 4): FULL + 1}
    # exactly at the boundary it pays
    table = FilterTable(UNIT, {(NIKE, 4): FULL})
    assert AraLike().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0).histogram == (50.0, 0.0)
    assert table.consumed[(NIKE, 4)] == UNIT


def test_ipa_like_consumes_nothing_on_device_but_touches_the_window():
    table = FilterTable(UNIT, {(NIKE, 2): UNIT})  # even an exhausted device filter is ignored
    outcome = IpaLike().generate_report(table, NIKE, WINDOW, RELEVANT, MULTI, 50.0)
    assert table.consumed == {(NIKE, 1): 0, (NIKE, 2): UNIT, (NIKE, 3): 0, (NIKE, 4): 0}
    assert outcome == ReportOutcome((50.0, 0.0), 0, 0)


# --------------------------------------------------------------------------- the Attribution API's budgets (Big Bird)

CASE_3 = 35 * 10**10  # MULTI's report global bound: 0.5 * 70 / 100
ADIDAS = "adidas.com"


def api_filters(global_: int | None = 4 * UNIT, impression_quota: int | None = 2 * UNIT,
                conversion_quota: int | None = None, consumed: dict | None = None) -> FilterSet:
    return FilterSet(FilterCapacities(UNIT, global_, impression_quota, conversion_quota), consumed)


def test_attribution_api_pays_every_filter_of_an_epoch_with_relevant_impressions():
    """Per-site: Thm. 4's individual loss (case 3 here, several epochs); global and the impression site's quota: the
    report's global bound (``api.bs``: the value deduction); epochs without relevant impressions pay nothing."""
    filters = api_filters()
    outcome = AttributionApi().generate_report(filters, NIKE, WINDOW, RELEVANT, MULTI, 50.0)
    assert outcome == ReportOutcome((50.0, 0.0), 2 * CASE_3, 0)
    expected = {FilterId(SITE, e, NIKE): 0 for e in WINDOW}
    for epoch in (2, 3):
        expected |= {FilterId(SITE, epoch, NIKE): CASE_3, FilterId(GLOBAL, epoch): CASE_3,
                     FilterId(IMPRESSION_QUOTA, epoch, "nytimes.com"): CASE_3}
    assert filters.consumed == expected


def test_attribution_api_single_epoch_pays_the_individual_loss_per_site_and_the_bound_globally():
    filters = api_filters()
    outcome = AttributionApi().generate_report(filters, NIKE, range(3, 4), RELEVANT, MULTI, 20.0)
    assert outcome == ReportOutcome((20.0, 0.0), 10**11, 0)  # 0.5 * 20 / 100
    assert filters.consumed[FilterId(SITE, 3, NIKE)] == 10**11
    assert filters.consumed[FilterId(GLOBAL, 3)] == CASE_3


def test_the_global_budget_binds_across_sites_and_a_refused_epoch_changes_no_filter():
    """Two conversion sites, each well within its own budget of 1: the global budget of 0.5 lets only the first
    pay for epoch 3 (Big Bird's global device-epoch guarantee); the second's refused epoch charges nothing at all
    (pdslib's two-phase commit), while its epoch 2 still pays."""
    filters = api_filters(global_=CASE_3 + CASE_3 // 2, consumed={FilterId(GLOBAL, 2): 0})
    AttributionApi().generate_report(filters, NIKE, range(3, 4), RELEVANT, MULTI, 70.0)
    before = dict(filters.consumed)
    outcome = AttributionApi().generate_report(filters, ADIDAS, WINDOW, RELEVANT, MULTI, 50.0)
    assert outcome == ReportOutcome((0.0, 50.0), CASE_3, 1)  # epoch 3 (I3, a1) dropped: last touch falls on I2
    assert filters.consumed[FilterId(SITE, 3, ADIDAS)] == 0
    assert filters.consumed[FilterId(GLOBAL, 3)] == before[FilterId(GLOBAL, 3)] == CASE_3
    assert filters.consumed[FilterId(IMPRESSION_QUOTA, 3, "nytimes.com")] == CASE_3
    assert filters.consumed[FilterId(GLOBAL, 2)] == CASE_3


def test_an_impression_sites_quota_binds_before_the_global_budget():
    filters = api_filters(impression_quota=CASE_3)
    AttributionApi().generate_report(filters, NIKE, range(3, 4), RELEVANT, MULTI, 70.0)
    outcome = AttributionApi().generate_report(filters, ADIDAS, range(3, 4), RELEVANT, MULTI, 70.0)
    assert outcome == ReportOutcome((0.0, 0.0), 0, 1)
    assert filters.consumed[FilterId(GLOBAL, 3)] == CASE_3  # one site's impressions fed one report
    other = {3: [impression(at(3), "I4", campaign_id="a1", publisher_site="lemonde.fr")]}
    assert AttributionApi().generate_report(filters, ADIDAS, range(3, 4), other, MULTI, 70.0).histogram == (70.0, 0.0)


def test_big_bird_conversion_site_quota_caps_one_querier_of_the_global_budget():
    filters = api_filters(conversion_quota=CASE_3)
    assert BigBird().generate_report(filters, NIKE, range(2, 3), RELEVANT, MULTI, 70.0).histogram == (0.0, 70.0)
    assert BigBird().generate_report(filters, NIKE, range(2, 3), RELEVANT, MULTI, 70.0).histogram == (0.0, 0.0)
    assert filters.consumed[FilterId(CONVERSION_QUOTA, 2, NIKE)] == CASE_3
    assert filters.consumed[FilterId(SITE, 2, NIKE)] == CASE_3  # the per-site budget had room: the quota refused
    assert BigBird().generate_report(filters, ADIDAS, range(2, 3), RELEVANT, MULTI, 70.0).histogram == (0.0, 70.0)


def test_big_birds_per_user_action_caps_bound_what_sybil_sites_acting_on_one_user_action_get():
    """One user action (the device's events at one time) makes 5 publishers save impressions and 5 conversion
    sites measure: with both caps at 2, only the first 2 publishers' impressions are saved and only 2 conversion
    sites draw from the epoch's quotas; a later action starts afresh."""
    config = MeasurementConfig(policy="big_bird", impression_site_cap=2, conversion_site_cap=2)
    sites = [f"sybil-{k}.example" for k in range(5)]
    wanted = request(first_epoch=3, last_epoch=3, requested_epsilon=0.1, product_id="shoe")
    events = [impression(at(3, 1), f"i{k}", advertiser_site=site, publisher_site=site) for k, site in enumerate(sites)]
    events += [conversion(at(3, 2), f"c{k}", 10.0, wanted, advertiser_site=site, querier_site=site)
               for k, site in enumerate(sites)]
    events += [impression(at(3, 3), "later", advertiser_site=sites[4], publisher_site=sites[4]),
               conversion(at(3, 4), "c-later", 10.0, wanted, advertiser_site=sites[4], querier_site=sites[4])]
    state = DeviceState(config.new_filters())
    reports = list(replay("ann", sort_events(events), state, config, make_policy("big_bird"), ConstantSource()))
    assert [len(impressions) for impressions in state.impressions.values()] == [3]  # i0, i1 and the later one
    paid = [report.conversion_id for report in reports if report.charged_units]
    assert paid == ["c0", "c1", "c-later"]  # c2..c4's impressions were not saved; sybil-4's later one was
    assert [report.dropped_epochs for report in reports] == [0, 0, 0, 0, 0, 0]  # c2..c4 had nothing to pay for
    uncapped = MeasurementConfig(policy="big_bird")
    state = DeviceState(uncapped.new_filters())
    reports = list(replay("ann", sort_events(events), state, uncapped, make_policy("big_bird"), ConstantSource()))
    assert [report.conversion_id for report in reports if report.charged_units] == [*(f"c{k}" for k in range(5)),
                                                                                   "c-later"]


def test_the_conversion_site_cap_refuses_a_third_site_in_one_user_action():
    """Impressions from one publisher for 3 advertisers; their 3 conversions in one user action, the cap at 2:
    the third conversion site's epoch is refused like an out-of-budget one (no filter changes)."""
    config = MeasurementConfig(policy="attribution_api", conversion_site_cap=2)
    sites = ["a.example", "b.example", "c.example"]
    wanted = request(first_epoch=3, last_epoch=3, requested_epsilon=0.1, product_id="shoe")
    events = [impression(at(3, 1), f"i{k}", advertiser_site=site) for k, site in enumerate(sites)]
    events += [conversion(at(3, 2), f"c{k}", 10.0, wanted, advertiser_site=site, querier_site=site)
               for k, site in enumerate(sites)]
    state = DeviceState(config.new_filters())
    reports = list(replay("ann", sort_events(events), state, config, make_policy("attribution_api"), ConstantSource()))
    assert [report.dropped_epochs for report in reports] == [0, 0, 1]
    assert [report.histogram for report in reports] == [(10.0,), (10.0,), (0.0,)]
    assert FilterId(SITE, 3, "c.example") not in state.filters.consumed or not state.filters.consumed[
        FilterId(SITE, 3, "c.example")]


def test_the_api_policies_need_their_filter_set_and_refuse_bias_detection():
    config = MeasurementConfig(policy="big_bird", global_epsilon=Fraction(2), conversion_quota_epsilon=Fraction(1, 2))
    filters = config.new_filters()
    assert isinstance(filters, FilterSet)
    assert filters.capacities == FilterCapacities(UNIT, 2 * UNIT, None, UNIT // 2)
    assert isinstance(MeasurementConfig().new_filters(), FilterTable)
    with pytest.raises(ValueError, match="global_epsilon applies to the Attribution API's policies"):
        MeasurementConfig(policy="cookie_monster", global_epsilon=Fraction(1))
    with pytest.raises(ValueError, match="bias detection"):
        AttributionApi().generate_report(filters, NIKE, WINDOW, RELEVANT, MULTI, 50.0, bias=object())


def test_policy_registry():
    assert set(POLICIES) == {"cookie_monster", "ara_like", "ipa_like", "attribution_api", "big_bird"}
    for name, policy in POLICIES.items():
        assert make_policy(name) is policy and policy.name == name
    assert isinstance(make_policy("cookie_monster"), CookieMonster)
    with pytest.raises(ValueError, match="unknown budgeting policy 'pam'"):
        make_policy("pam")


# --------------------------------------------------------------------------- properties over any history

EPOCHS = st.integers(min_value=0, max_value=5)
IMPRESSIONS = st.lists(
    st.tuples(EPOCHS, st.integers(min_value=0, max_value=6), st.sampled_from(("a1", "a2", "zz"))), max_size=8
)
REQUESTS = st.builds(
    lambda first, span, logic, epsilon, report, which, dimension: request(
        first_epoch=first, last_epoch=first + span, campaign_ids=("a1", "a2"), logic=logic, last_n=2,
        dimension=dimension, requested_epsilon=epsilon, report_global_sensitivity=report,
        query_global_sensitivity=100.0, norm=which,
    ),
    first=EPOCHS, span=st.integers(min_value=0, max_value=3),
    logic=st.sampled_from(("last_touch", "first_touch", "equal_credit", "last_n")),
    epsilon=st.sampled_from((0.1, 0.3, 0.5, 1.0)),
    report=st.sampled_from((10.0, 70.0, 100.0)),
    which=st.sampled_from(("L1", "L2")),
    dimension=st.integers(min_value=2, max_value=4),
)
CONVERSIONS = st.lists(
    st.tuples(st.integers(min_value=0, max_value=6), st.integers(min_value=0, max_value=6), st.floats(0, 200),
              REQUESTS, st.sampled_from((NIKE, "adidas.com"))),
    max_size=8,
)


def capacity_of(config: MeasurementConfig, key) -> int:
    """The capacity of the filter ``key`` names (a (querier, epoch) filter's is eps_G)."""
    if type(key) is FilterId:
        capacity = config.filter_capacities.of(key.kind)
        assert capacity is not None  # a kind without filter records nothing
        return capacity
    return config.capacity_units


def tight(policy: str, capacity: Fraction) -> MeasurementConfig:
    """The policy at ``capacity``; the API's with a global budget and quotas that bind."""
    if not POLICIES[policy].global_filters:
        return MeasurementConfig(policy=policy, capacity_epsilon=capacity)
    return MeasurementConfig(policy=policy, capacity_epsilon=capacity, global_epsilon=capacity * 3 / 2,
                             impression_quota_epsilon=capacity, conversion_quota_epsilon=capacity / 2)


@settings(max_examples=200, deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    capacity=st.sampled_from((Fraction(1), Fraction(1, 2), Fraction(3, 2))),
    impressions=IMPRESSIONS,
    conversions=CONVERSIONS,
)
def test_no_device_filter_ever_exceeds_its_capacity(policy, capacity, impressions, conversions):
    config = tight(policy, capacity)
    state = DeviceState(config.new_filters())
    events = [impression(at(e, d), f"i{k}", campaign_id=c) for k, (e, d, c) in enumerate(impressions)]
    for k, (e, d, value, wanted, querier) in enumerate(conversions):
        wanted = wanted._replace(last_epoch=min(wanted.last_epoch, e), first_epoch=min(wanted.first_epoch, e))
        events.append(conversion(at(e, d), f"c{k}", value, wanted, querier_site=querier))
    dimensions = {event.conversion_id: event.attribution_request.dimension for event in events[len(impressions):]}
    previous: dict = {}
    for report in replay("ann", sort_events(events), state, config, make_policy(policy), ConstantSource()):
        assert len(report.histogram) == dimensions[report.conversion_id]
        consumed = state.filters.consumed
        assert all(0 <= units <= capacity_of(config, key) for key, units in consumed.items())
        assert all(consumed[key] >= units for key, units in previous.items())  # filters only fill up
        if policy == "ipa_like":
            assert not any(consumed.values())
        previous = dict(consumed)


@settings(max_examples=200, deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    impressions=IMPRESSIONS,
    wanted=REQUESTS,
    value=st.floats(0, 200),
)
def test_report_shape_does_not_depend_on_the_budget(policy, impressions, wanted, value):
    relevant: dict = {}
    for k, (e, d, c) in enumerate(sorted(impressions)):
        if c != "zz":
            relevant.setdefault(e, []).append(impression(at(e, d), f"i{k}", campaign_id=c))
    epochs = range(wanted.first_epoch, wanted.last_epoch + 1)
    if POLICIES[policy].global_filters:
        fresh, exhausted = api_filters(), api_filters(consumed={FilterId(SITE, e, NIKE): UNIT for e in epochs})
    else:
        fresh, exhausted = FilterTable(UNIT), FilterTable(UNIT, {(NIKE, e): UNIT for e in epochs})
    with_budget = make_policy(policy).generate_report(fresh, NIKE, epochs, relevant, wanted, value).histogram
    without = make_policy(policy).generate_report(exhausted, NIKE, epochs, relevant, wanted, value).histogram
    assert len(with_budget) == len(without) == wanted.dimension
    assert all(type(v) is float for v in with_budget + without)
    if policy == "ipa_like":
        assert without == with_budget
    else:  # out of budget everywhere: the null report, never a missing one
        assert without == (0.0,) * wanted.dimension
    assert all(units == UNIT for key, units in exhausted.consumed.items() if type(key) is not FilterId or key.kind == SITE)
