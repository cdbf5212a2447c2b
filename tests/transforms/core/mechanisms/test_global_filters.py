"""Big Bird's filter set (``transforms.core.mechanisms.global_filters``), the parts the Attribution API's options use:
a per-site charge to a querier other than the conversion site (pdslib's ``filters_to_consume``), a filter's own
capacity (pdslib's ``set_capacity`` and release filter), exhausting a filter and forgetting sites (``api.bs`` "clear
browsing history"). Deterministic: no false-failure probability to state."""
from __future__ import annotations

import pytest

from transforms.core.mechanisms.global_filters import (
    CONVERSION_QUOTA,
    GLOBAL,
    IMPRESSION_QUOTA,
    SITE,
    FilterCapacities,
    FilterId,
    FilterSet,
    epoch_charges,
)


def test_the_per_site_charge_goes_to_the_querier_and_the_quota_to_the_conversion_site():
    assert epoch_charges(3, "shoes.example", ["blog.example"], 1, 2, querier_site="adtech.example") == {
        FilterId(SITE, 3, "adtech.example"): 1, FilterId(GLOBAL, 3): 2, FilterId(CONVERSION_QUOTA, 3, "shoes.example"): 2,
        FilterId(IMPRESSION_QUOTA, 3, "blog.example"): 2}


def test_a_filters_own_capacity_replaces_its_kinds_and_a_lifted_limit_still_records():
    """The global filter unlocked to 3 of 10 refuses a fourth unit; the quota lifted (None) accepts beyond its kind's
    capacity and records it, so it refuses again, overdrawn, once back at its kind's capacity."""
    filters = FilterSet(FilterCapacities(10, 10, 2))
    global_0, quota = FilterId(GLOBAL, 0), FilterId(IMPRESSION_QUOTA, 0, "blog.example")
    filters.limits[global_0] = 3
    filters.limits[quota] = None
    assert filters.try_consume({global_0: 3, quota: 3})
    assert filters.out_of_budget({global_0: 1, quota: 1}) == [global_0]
    assert filters.remaining(quota) is None and filters.consumed[quota] == 3
    del filters.limits[quota]
    assert filters.remaining(quota) == -1 and filters.out_of_budget({quota: 0}) == [quota]


def test_exhausting_a_filter_leaves_it_nothing_and_forgetting_sites_keeps_the_global_filter():
    filters = FilterSet(FilterCapacities(5, 10, 4, None))
    filters.try_consume(epoch_charges(0, "shop.example", ["shop.example", "blog.example"], 1, 2))
    filters.exhaust(FilterId(SITE, 0, "shop.example"))
    assert filters.remaining(FilterId(SITE, 0, "shop.example")) == 0
    with pytest.raises(ValueError, match="no limit"):
        filters.exhaust(FilterId(CONVERSION_QUOTA, 0, "shop.example"))  # the kind has no filter
    filters.forget(["shop.example"])
    assert dict(filters.items()) == {FilterId(GLOBAL, 0): 2, FilterId(IMPRESSION_QUOTA, 0, "blog.example"): 2}
