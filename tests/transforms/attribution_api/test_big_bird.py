"""Big Bird's options on the Attribution API backend (Tholoniat et al., "Beyond Per-Querier Budgets", Sec. 4), each
off by default: the per-user-action cap on quota activations (w3c/attribution PR #309's user action context), and
pdslib's scenarios reproduced as facts: passive privacy loss (``test_account_for_passive_privacy_loss``) and one
deduction for several intermediaries (``cross_report.rs``). Deterministic: no false-failure probability to state."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from tests.transforms.attribution_api.browser import Browser, conversion_options
from transforms.attribution_api.mechanisms.backend import Backend, Delegate
from transforms.attribution_api.mechanisms.cross_report import measure_shared_conversion
from transforms.attribution_api.sites import registrable_domain
from transforms.core.mechanisms.global_filters import CONVERSION_QUOTA, GLOBAL, IMPRESSION_QUOTA, SITE, FilterId

DAY = 86_400


def test_the_impression_site_cap_admits_so_many_new_sites_per_user_action():
    """PR #309's impression site count cap at 2: within one user action a third impression site saves nothing,
    a site already admitted saves again; the next user action admits it."""
    browser = Browser(impression_site_count_cap=2)
    browser.user_action = 1
    for second, site in enumerate(("a.example", "b.example", "c.example", "a.example"), start=1):
        browser.at(second).save(site)
    browser.user_action = 2
    browser.at(5).save("c.example")
    assert [impression.impression_site for impression in browser.backend.impressions] == [
        "a.example", "b.example", "a.example", "c.example"]


@pytest.mark.parametrize(("cap", "answered"), [(2, 2), (None, 5)])
def test_the_conversion_site_cap_bounds_what_sybil_sites_draw_in_one_user_action(cap, answered):
    """Five Sybil conversion sites call the API within one user action (a redirect chain): with the conversion site
    count cap at 2, only two draw from the epoch's global budget, and the sites past the cap leave no filter behind
    (refused like an out-of-budget epoch); an admitted site converts again in the same action, and the next action
    admits another. Without the cap (None: the specification) all five draw."""
    browser = Browser(per_site=10_000_000, global_budget=10_000_000, quota=10_000_000, conversion_site_count_cap=cap)
    browser.at(1).save("publisher.example")
    browser.user_action = 1
    histograms = [browser.at(2 + index).convert(f"sybil-{index}.example") for index in range(5)]
    assert sum(histogram == [4, 0, 0] for histogram in histograms) == answered
    assert browser.left(GLOBAL) == {(0, ""): 10_000_000 - answered * 1_000_000}  # 1 epsilon a conversion
    assert len(browser.left(SITE)) == answered
    assert browser.at(10).convert("sybil-0.example") == [4, 0, 0]
    browser.user_action = 2
    assert browser.at(11).convert("sybil-4.example") == [4, 0, 0]


def test_a_site_its_budget_refuses_activates_nothing():
    """Quotas are charged if and only if the privacy budget is (Big Bird's Alg. 2): with the cap at 1, a site whose
    per-site budget is spent is refused without taking the user action's one activation, which another site gets."""
    browser = Browser(conversion_site_count_cap=1)
    browser.at(1).save("publisher.example")
    browser.at(2).backend.clear_state(["poor.example"], forget_visits=False)  # its budgets zeroed
    browser.user_action = 1
    assert browser.at(3).convert("poor.example") == [0, 0, 0]
    assert browser.at(4).convert("rich.example") == [4, 0, 0]
    assert browser.at(5).convert("third.example") == [0, 0, 0]


def test_a_cap_needs_the_browsers_user_action():
    limits = dataclasses.replace(Browser().backend.limits, conversion_site_count_cap=1)
    delegate = Delegate(lambda: Fraction(0), lambda: Fraction(0), lambda: Fraction(0), registrable_domain)
    with pytest.raises(ValueError, match="user action"):
        Backend(limits, delegate)


def test_passive_privacy_loss_is_charged_to_every_filter_of_its_epochs_all_or_nothing():
    """pdslib's ``test_account_for_passive_privacy_loss`` with its mock capacities (per-querier 1, global 20, trigger
    quota 1.5, source quota 4) and URIs (querier adtech, trigger shoes, no source charged): 0.2 then 0.3 over epochs
    1 to 3 leave 0.5, 19.5 and 1.0; 2.0 over epochs 2 and 3 is refused by the per-querier filter of epoch 2 and
    charges nothing; 0.5 over epoch 3 alone spends its per-querier filter and leaves epochs 1 and 2 as they were."""
    browser = Browser(per_site=1_000_000, global_budget=20_000_000, quota=4_000_000,
                      conversion_site_quota_per_epoch=1_500_000)
    backend = browser.backend

    def passive(epochs: list[int], units: int) -> list[FilterId]:
        return backend.account_passive_loss(epochs, units, "adtech.example", "shoes.example")

    def left(epoch: int) -> tuple[int | None, ...]:
        return (backend.filters.remaining(FilterId(SITE, epoch, "adtech.example")),
                backend.filters.remaining(FilterId(GLOBAL, epoch)),
                backend.filters.remaining(FilterId(CONVERSION_QUOTA, epoch, "shoes.example")))

    assert passive([1, 2, 3], 200_000) == [] and passive([1, 2, 3], 300_000) == []
    assert [left(epoch) for epoch in (1, 2, 3)] == [(500_000, 19_500_000, 1_000_000)] * 3
    before = browser.budgets()
    assert FilterId(SITE, 2, "adtech.example") in passive([2, 3], 2_000_000)
    assert browser.budgets() == before
    assert passive([3], 500_000) == []
    assert [left(epoch) for epoch in (1, 2, 3)] == [(500_000, 19_500_000, 1_000_000)] * 2 + [(0, 19_000_000, 500_000)]
    assert browser.left(IMPRESSION_QUOTA) == {}  # pdslib charges no source quota for passive loss


def _shared_options() -> dict[str, object]:
    """pdslib's request: value 100 of 200 at epsilon 1 (noise scale 400), 3 buckets, a lookback over epochs."""
    return conversion_options(value=100, maxValue=200, epsilon=1, histogramSize=3, lookbackDays=14)


def test_several_intermediaries_share_one_deduction_of_the_global_budget_and_quotas():
    """pdslib's ``test_cross_report_optimization`` (mock capacities: per-querier 1, global 20, trigger quota 1.5,
    source quota 4): blog's impressions in bucket 1 then, later, bucket 2, converted on shoes and reported to r1
    (bucket 1), r2 (bucket 2) and r3 (bucket 2 again). Last touch puts the value in bucket 2: r1 gets nothing, r2
    gets 100, r3 a null report; the global budget, shoes' quota and blog's quota pay 2 x 100 / 400 = 0.5 once, and
    each beneficiary that got a report pays 0.5 from its own budget (r3 nothing)."""
    browser = Browser(per_site=1_000_000, global_budget=20_000_000, quota=4_000_000,
                      conversion_site_quota_per_epoch=1_500_000)
    callers = ["r1.example", "r2.example", "r3.example"]
    for second, bucket in ((100, 1), (200, 2)):
        browser.at(second).save("blog.example", histogramIndex=bucket, conversionSites=["shoes.example"],
                                conversionCallers=callers)
    browser.at(5 * DAY)  # the epoch starts 3.5 days before: the impressions lie in epoch -1
    shared = measure_shared_conversion(browser.backend, "shoes.example", callers, _shared_options())
    assert [shared.report(caller, [bucket]) for caller, bucket in zip(callers, (1, 2, 2), strict=True)] == [
        [0, 0, 0], [0, 0, 100], [0, 0, 0]]
    assert browser.left(GLOBAL) == {(-1, ""): 19_500_000}
    assert browser.left(CONVERSION_QUOTA) == {(-1, "shoes.example"): 1_000_000}
    assert browser.left(IMPRESSION_QUOTA) == {(-1, "blog.example"): 3_500_000}
    assert browser.left(SITE) == {(-1, "r1.example"): 500_000, (-1, "r2.example"): 500_000}


def test_an_epoch_a_beneficiarys_budget_refuses_drops_out_without_moving_the_value():
    """pdslib's ``test_cross_epoch_last_touch``: impressions in bucket 1 in epochs -1 and 0, the querier's budget of
    epoch 0 spent: last touch credits epoch 0's impression, whose epoch drops out of the querier's report, which is
    empty (the value does not move to epoch -1's impression), while epoch -1 charges its budget."""
    browser = Browser(per_site=1_000_000, global_budget=20_000_000, quota=4_000_000,
                      conversion_site_quota_per_epoch=1_500_000)
    for day in (5, 9):
        browser.at(day * DAY).save("blog.example", histogramIndex=1)
    browser.backend.filters.exhaust(FilterId(SITE, 0, "adtech.example"))
    browser.at(10 * DAY)  # epoch 0 starts at 6.5 days: day 5 lies in epoch -1, day 9 in epoch 0
    shared = measure_shared_conversion(browser.backend, "shoes.example", ["adtech.example"], _shared_options())
    assert shared.report("adtech.example", range(3)) == [0, 0, 0]
    assert browser.left(SITE) == {(-1, "adtech.example"): 500_000, (0, "adtech.example"): 0}
    assert browser.left(GLOBAL) == {(-1, ""): 19_500_000, (0, ""): 19_500_000}
