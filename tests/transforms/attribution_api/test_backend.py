"""The Attribution API backend's budgets and credit (W3C Attribution API; Big Bird, Tholoniat et al.): every check
of an epoch before any deduction (a conversion refused by one filter changes no filter: pdslib's rollback
scenario), the global budget and the impression-site quotas refusing once spent (where backend.ts stops checking
the global budget after its first deduction), Big Bird's conversion-site quota as an option, one quota deduction
per impression site however many of its impressions match, and fair credit allocation summing to the value.
Deterministic: no false-failure probability to state."""
from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from transforms.attribution_api.mechanisms.backend import ApiLimits, Backend, Delegate
from transforms.attribution_api.mechanisms.credit import fairly_allocate_credit
from transforms.attribution_api.sites import registrable_domain

SERVICE = "https://agg-service.example"


def _backend(per_site: int = 1_000_000, global_budget: int = 8_000_000, quota: int = 4_000_000,
             conversion_quota: int | None = None) -> tuple[Backend, dict]:
    clock = {"now": Fraction(0)}
    limits = ApiLimits({SERVICE: "dap-18-histogram"}, 7, per_site, global_budget, quota, 3, 3, 3, 3, 10, 10, 30, 5,
                       conversion_quota)
    delegate = Delegate(lambda: clock["now"], lambda: Fraction(1, 2), lambda: Fraction(1, 2), registrable_domain)
    return Backend(limits, delegate), clock


def _at(clock: dict, seconds: int) -> None:
    clock["now"] = Fraction(seconds)


def _convert(backend: Backend, site: str, **options) -> list[int]:
    return backend.measure_conversion(site, None, {"aggregationService": SERVICE, "histogramSize": 3, "value": 4,
                                                   "maxValue": 4, "epsilon": 1, "lookbackDays": 1, **options})


def test_a_conversion_refused_by_the_impression_sites_quota_changes_no_budget():
    """Quota 1.5 units below the per-site budget's: the third conversion on publisher.example's impressions is
    refused by the quota alone, and neither the per-site budget nor the global budget moves."""
    backend, clock = _backend(per_site=10_000_000, global_budget=10_000_000, quota=2_500_000)
    _at(clock, 1)
    backend.save_impression("publisher.example", None, {"histogramIndex": 1})
    for second, site in ((2, "shop-1.example"), (3, "shop-2.example")):
        _at(clock, second)
        assert _convert(backend, site) == [0, 4, 0]  # value deduction 2 * 4 / (2 * 4 / 1) = 1 epsilon each
    before = (dict(backend.privacy_budgets), dict(backend.global_budgets), dict(backend.impression_site_quotas))
    _at(clock, 4)
    assert _convert(backend, "shop-3.example") == [0, 0, 0]
    assert (dict(backend.privacy_budgets), dict(backend.global_budgets), dict(backend.impression_site_quotas)) == before
    assert backend.impression_site_quotas == {(0, "publisher.example"): 500_000}


def test_the_global_budget_refuses_once_spent_across_sites():
    """The global budget of an epoch is shared by every conversion site (Big Bird's per-epoch budget): with room
    for three value deductions, the fourth site's conversion is refused, however fresh its own budget."""
    backend, clock = _backend(per_site=10_000_000, global_budget=3_000_000, quota=10_000_000)
    _at(clock, 1)
    backend.save_impression("publisher.example", None, {"histogramIndex": 0})
    histograms = []
    for second in range(2, 6):
        _at(clock, second)
        histograms.append(_convert(backend, f"shop-{second}.example"))
    assert histograms == [[4, 0, 0]] * 3 + [[0, 0, 0]]
    assert backend.global_budgets == {0: 0}


def test_several_impressions_of_one_site_deduct_its_quota_once():
    backend, clock = _backend()
    for second in (1, 2, 3):
        _at(clock, second)
        backend.save_impression("publisher.example", None, {"histogramIndex": second - 1})
    _at(clock, 4)
    assert _convert(backend, "shop.example", credit=[1, 1, 2]) == [2, 1, 1]
    assert backend.impression_site_quotas == {(0, "publisher.example"): 3_000_000}


def test_a_single_epoch_conversion_deducts_its_l1_norm_from_the_site_and_twice_the_value_from_the_global_budget():
    backend, clock = _backend()
    _at(clock, 1)
    backend.save_impression("publisher.example", None, {"histogramIndex": 7 % 5})
    _at(clock, 2)
    # the impression matches but its index lies outside the histogram: l1 norm 0, nothing from the site's budget,
    # the value's sensitivity (2 * 2 / (2 * 4 / 1) = 0.5 epsilon) from the global budget and the quota all the same
    assert _convert(backend, "shop.example", histogramSize=2, value=2) == [0, 0]
    assert backend.privacy_budgets == {(0, "shop.example"): 1_000_000} and backend.global_budgets == {0: 7_500_000}
    assert _convert(backend, "shop.example", value=2) == [0, 0, 2]
    assert backend.privacy_budgets == {(0, "shop.example"): 750_000}  # l1 norm 2 / (2 * 4 / 1) = 0.25 epsilon
    assert backend.global_budgets == {0: 7_000_000} and backend.impression_site_quotas == {(0, "publisher.example"): 3_000_000}


def _budgets(backend: Backend) -> tuple[dict, ...]:
    return (dict(backend.privacy_budgets), dict(backend.global_budgets), dict(backend.impression_site_quotas),
            dict(backend.conversion_site_quotas))


def test_a_request_one_filter_refuses_rolls_back_every_filter():
    """pdslib's ``test_budget_rollback_on_depletion`` (per-querier 1, global 20, trigger quota 2, source quota 5):
    a conversion site with 0.5 left asks for 0.7; it is refused, and no filter, its own included, changes."""
    backend, clock = _backend(per_site=1_000_000, global_budget=20_000_000, quota=5_000_000, conversion_quota=2_000_000)
    _at(clock, 1)
    backend.save_impression("publisher.example", None, {"histogramIndex": 0})
    _at(clock, 2)
    assert _convert(backend, "shop.example", value=1, maxValue=1) == [1, 0, 0]  # l1 1 / (2 / 1): 0.5 of the site's
    before = _budgets(backend)
    assert before[0] == {(0, "shop.example"): 500_000} and before[3] == {(0, "shop.example"): 1_000_000}
    _at(clock, 3)
    assert _convert(backend, "shop.example", value=1, maxValue=1, epsilon=1.4) == [0, 0, 0]  # needs 0.7
    assert _budgets(backend) == before


def test_big_birds_conversion_site_quota_caps_one_sites_share_of_the_global_budget():
    """With the conversion-site quota (Big Bird; pdslib's TriggerQuota) at 2 of a global 20, one conversion site
    spends at most 2 of the epoch's global budget whatever its own budget; another site is not held back. Without
    it (None: the specification), the same site goes on."""
    for conversion_quota, answered in ((2_000_000, 2), (None, 4)):
        backend, clock = _backend(per_site=20_000_000, global_budget=20_000_000, quota=20_000_000,
                                  conversion_quota=conversion_quota)
        _at(clock, 1)
        backend.save_impression("publisher.example", None, {"histogramIndex": 0})
        histograms = []
        for second in range(2, 6):  # value deduction 2 * 4 / (2 * 4 / 1) = 1 epsilon each
            _at(clock, second)
            histograms.append(_convert(backend, "greedy.example"))
        assert sum(1 for histogram in histograms if histogram == [4, 0, 0]) == answered
        _at(clock, 6)
        assert _convert(backend, "other.example") == [4, 0, 0]


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
