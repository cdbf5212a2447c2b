"""The Attribution API backend's budgets and credit (W3C Attribution API; Big Bird, Tholoniat et al.): every check
of an epoch before any deduction (a conversion refused by one filter changes no filter: pdslib's rollback
scenario), the global budget and the impression-site quotas refusing once spent (where backend.ts stops checking
the global budget after its first deduction), Big Bird's conversion-site quota as an option, one quota deduction
per impression site however many of its impressions match, clearing a site's budgets, and fair credit allocation
summing to the value.
Deterministic: no false-failure probability to state."""
from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from tests.transforms.attribution_api.browser import Browser
from transforms.attribution_api.mechanisms.credit import fairly_allocate_credit
from transforms.attribution_api.sites import registrable_domain
from transforms.core.mechanisms.global_filters import CONVERSION_QUOTA, GLOBAL, IMPRESSION_QUOTA, SITE


def test_a_conversion_refused_by_the_impression_sites_quota_changes_no_budget():
    """Quota 1.5 units below the per-site budget's: the third conversion on publisher.example's impressions is
    refused by the quota alone, and neither the per-site budget nor the global budget moves."""
    browser = Browser(per_site=10_000_000, global_budget=10_000_000, quota=2_500_000)
    browser.at(1).save("publisher.example", histogramIndex=1)
    for second, site in ((2, "shop-1.example"), (3, "shop-2.example")):
        assert browser.at(second).convert(site) == [0, 4, 0]  # value deduction 2 * 4 / (2 * 4 / 1) = 1 epsilon each
    before = browser.budgets()
    assert browser.at(4).convert("shop-3.example") == [0, 0, 0]
    assert browser.budgets() == before
    assert browser.left(IMPRESSION_QUOTA) == {(0, "publisher.example"): 500_000}


def test_the_global_budget_refuses_once_spent_across_sites():
    """The global budget of an epoch is shared by every conversion site (Big Bird's per-epoch budget): with room
    for three value deductions, the fourth site's conversion is refused, however fresh its own budget."""
    browser = Browser(per_site=10_000_000, global_budget=3_000_000, quota=10_000_000)
    browser.at(1).save("publisher.example")
    histograms = [browser.at(second).convert(f"shop-{second}.example") for second in range(2, 6)]
    assert histograms == [[4, 0, 0]] * 3 + [[0, 0, 0]]
    assert browser.left(GLOBAL) == {(0, ""): 0}


def test_several_impressions_of_one_site_deduct_its_quota_once():
    browser = Browser()
    for second in (1, 2, 3):
        browser.at(second).save("publisher.example", histogramIndex=second - 1)
    assert browser.at(4).convert("shop.example", credit=[1, 1, 2]) == [2, 1, 1]
    assert browser.left(IMPRESSION_QUOTA) == {(0, "publisher.example"): 3_000_000}


def test_a_single_epoch_conversion_deducts_its_l1_norm_from_the_site_and_twice_the_value_from_the_global_budget():
    browser = Browser()
    browser.at(1).save("publisher.example", histogramIndex=7 % 5)
    browser.at(2)
    # the impression matches but its index lies outside the histogram: l1 norm 0, nothing from the site's budget,
    # the value's sensitivity (2 * 2 / (2 * 4 / 1) = 0.5 epsilon) from the global budget and the quota all the same
    assert browser.convert("shop.example", histogramSize=2, value=2) == [0, 0]
    assert browser.left(SITE) == {(0, "shop.example"): 1_000_000} and browser.left(GLOBAL) == {(0, ""): 7_500_000}
    assert browser.convert("shop.example", value=2) == [0, 0, 2]
    assert browser.left(SITE) == {(0, "shop.example"): 750_000}  # l1 norm 2 / (2 * 4 / 1) = 0.25 epsilon
    assert browser.left(GLOBAL) == {(0, ""): 7_000_000}
    assert browser.left(IMPRESSION_QUOTA) == {(0, "publisher.example"): 3_000_000}


def test_a_request_one_filter_refuses_rolls_back_every_filter():
    """pdslib's ``test_budget_rollback_on_depletion`` (per-querier 1, global 20, trigger quota 2, source quota 5):
    a conversion site with 0.5 left asks for 0.7; it is refused, and no filter, its own included, changes."""
    browser = Browser(per_site=1_000_000, global_budget=20_000_000, quota=5_000_000,
                      conversion_site_quota_per_epoch=2_000_000)
    browser.at(1).save("publisher.example")
    assert browser.at(2).convert("shop.example", value=1, maxValue=1) == [1, 0, 0]  # l1 1 / (2 / 1): 0.5 of the site's
    before = browser.budgets()
    assert browser.left(SITE) == {(0, "shop.example"): 500_000}
    assert browser.left(CONVERSION_QUOTA) == {(0, "shop.example"): 1_000_000}
    assert browser.at(3).convert("shop.example", value=1, maxValue=1, epsilon=1.4) == [0, 0, 0]  # needs 0.7
    assert browser.budgets() == before


def test_big_birds_conversion_site_quota_caps_one_sites_share_of_the_global_budget():
    """With the conversion-site quota (Big Bird; pdslib's TriggerQuota) at 2 of a global 20, one conversion site
    spends at most 2 of the epoch's global budget whatever its own budget; another site is not held back. Without
    it (None: the specification), the same site goes on."""
    for conversion_quota, answered in ((2_000_000, 2), (None, 4)):
        browser = Browser(per_site=20_000_000, global_budget=20_000_000, quota=20_000_000,
                          conversion_site_quota_per_epoch=conversion_quota)
        browser.at(1).save("publisher.example")
        # value deduction 2 * 4 / (2 * 4 / 1) = 1 epsilon each
        histograms = [browser.at(second).convert("greedy.example") for second in range(2, 6)]
        assert sum(1 for histogram in histograms if histogram == [4, 0, 0]) == answered
        assert browser.at(6).convert("other.example") == [4, 0, 0]


def test_clearing_a_sites_visits_forgets_its_budgets_and_quotas_but_not_the_global_budget():
    """``api.bs`` "clear browsing history": without forgetting visits, the site's per-site budgets in reach are
    zeroed; forgetting one site's visits drops its impressions, budgets and quotas and keeps the global budget
    spent; forgetting everything drops every filter."""
    browser = Browser(conversion_site_quota_per_epoch=4_000_000)
    browser.at(1).save("shop.example")  # a site may be both: its impression quota and its conversion quota
    assert browser.at(2).convert("shop.example") == [4, 0, 0]
    browser.at(3).backend.clear_state(["shop.example"], forget_visits=False)
    assert browser.left(SITE) == {(epoch, "shop.example"): 0 for epoch in range(-4, 1)}  # the 30 days in reach
    browser.at(4).backend.clear_state(["shop.example"], forget_visits=True)
    assert browser.budgets() == {(GLOBAL, 0, ""): 7_000_000} and browser.backend.impressions == []
    browser.at(5).backend.clear_state([], forget_visits=True)
    assert browser.budgets() == {}


@pytest.mark.parametrize("credit", [(1, 1, 1), (3, 1), (1, 2, 3, 4), (Fraction(1, 3), Fraction(1, 7))])
def test_fair_allocation_sums_to_the_value_and_each_share_is_within_one_of_its_part(credit):
    credit = [Fraction(item) for item in credit]
    for value, r in itertools.product((1, 5, 7, 100), (Fraction(0), Fraction(1, 3), Fraction(1, 2), Fraction(1))):
        shares = fairly_allocate_credit(credit, value, lambda r=r: r)
        exact = [value * item / sum(credit) for item in credit]
        assert sum(shares) == value and all(abs(share - part) < 1 for share, part in zip(shares, exact, strict=True))


def test_sites_are_registrable_domains():
    assert registrable_domain("a.b.example") == "b.example" and registrable_domain("x.github.io") == "x.github.io"
    assert registrable_domain("127.0.0.1") is None and registrable_domain("co.uk") is None
