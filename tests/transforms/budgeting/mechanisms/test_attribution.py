"""Attribution functions (``transforms/budgeting/mechanisms/attribution.py``;
Cookie Monster paper Sec. 3.2, 3.3 Code Listing 1 Steps 1, 4)."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.rows import ATTRIBUTION_LOGICS, NORMS
from tests.support.measurement_events import impression, request
from transforms.budgeting.mechanisms.attribution import (
    attribution_histogram,
    bucket_of,
    clip,
    credited,
    exact_norm_at_most,
    is_relevant,
    norm,
)

# Four relevant impressions in time order, of campaigns c0, c1, c2, c1.
I1 = impression(10, "i1", campaign_id="c0")
I2 = impression(20, "i2", campaign_id="c1")
I3 = impression(30, "i3", campaign_id="c2")
I4 = impression(40, "i4", campaign_id="c1")
FOUR = (I1, I2, I3, I4)
CAMPAIGNS = ("c0", "c1", "c2")


def exact_l1(histogram) -> Fraction:
    return sum((abs(Fraction(v)) for v in histogram), Fraction(0))


def exact_l2_squared(histogram) -> Fraction:
    return sum((Fraction(v) ** 2 for v in histogram), Fraction(0))


# --------------------------------------------------------------------------- Step 1: relevance


def test_relevance_by_product_when_no_campaign_is_listed():
    wanted = request(product_id="shoe")
    assert is_relevant(impression(1, "i", product_id="shoe"), "nike.com", wanted)
    assert not is_relevant(impression(1, "i", product_id="sock"), "nike.com", wanted)


def test_relevance_by_campaign_ignores_the_product():
    wanted = request(campaign_ids=("a1", "a2"), product_id="shoe")
    assert is_relevant(impression(1, "i", campaign_id="a2", product_id="sock"), "nike.com", wanted)
    assert not is_relevant(impression(1, "i", campaign_id="a3", product_id="shoe"), "nike.com", wanted)


def test_relevance_needs_the_conversion_advertiser():
    wanted = request()
    assert not is_relevant(impression(1, "i", advertiser_site="adidas.com"), "nike.com", wanted)
    assert is_relevant(impression(1, "i", advertiser_site="adidas.com"), "adidas.com", wanted)


def test_relevance_needs_every_requested_filter_key():
    wanted = request(filter_keys=("mobile", "eu"))
    assert is_relevant(impression(1, "i", filter_keys=("eu", "mobile", "extra")), "nike.com", wanted)
    assert not is_relevant(impression(1, "i", filter_keys=("mobile",)), "nike.com", wanted)
    assert is_relevant(impression(1, "i", filter_keys=()), "nike.com", request(filter_keys=()))


def test_relevance_follows_the_attribution_apis_callers_and_sites():
    """``api.bs`` "common matching logic": an impression's conversionCallers name who may measure it; a request's
    impressionSites and impressionCallers (the intermediary, else the publisher) name what it may read."""
    saved_by_adtech = impression(1, "i", intermediary_site="adtech.example", conversion_callers=("nike.com",))
    assert is_relevant(saved_by_adtech, "nike.com", request(), caller="nike.com")
    assert not is_relevant(saved_by_adtech, "nike.com", request(), caller="reseller.example")
    assert is_relevant(impression(1, "i"), "nike.com", request(), caller="reseller.example")  # no callers: anyone
    assert is_relevant(saved_by_adtech, "nike.com", request(impression_sites=("nytimes.com",)), caller="nike.com")
    assert not is_relevant(saved_by_adtech, "nike.com", request(impression_sites=("lemonde.fr",)), caller="nike.com")
    assert is_relevant(saved_by_adtech, "nike.com", request(impression_callers=("adtech.example",)), caller="nike.com")
    assert not is_relevant(saved_by_adtech, "nike.com", request(impression_callers=("nytimes.com",)), caller="nike.com")
    assert is_relevant(impression(1, "i"), "nike.com", request(impression_callers=("nytimes.com",)))  # the publisher


# --------------------------------------------------------------------------- logics


def test_credited_by_hand():
    assert credited(FOUR, "last_touch", 1) == (I4,)
    assert credited(FOUR, "first_touch", 1) == (I1,)
    assert tuple(credited(FOUR, "equal_credit", 1)) == FOUR
    assert credited(FOUR, "last_n", 2) == (I3, I4)
    assert credited(FOUR, "last_n", 10) == FOUR
    for logic in ATTRIBUTION_LOGICS:
        assert tuple(credited((), logic, 3)) == ()


def test_unknown_logic_is_an_error():
    with pytest.raises(ValueError, match="unknown attribution logic 'linear'"):
        credited(FOUR, "linear", 1)


@pytest.mark.parametrize(
    "logic, last_n, expected",
    [
        ("last_touch", 1, (0.0, 60.0, 0.0)),  # I4, campaign c1
        ("first_touch", 1, (60.0, 0.0, 0.0)),  # I1, campaign c0
        ("equal_credit", 1, (15.0, 30.0, 15.0)),  # 60 / 4 each; c1 twice
        ("last_n", 2, (0.0, 30.0, 30.0)),  # I3 (c2) and I4 (c1)
        ("last_n", 3, (0.0, 40.0, 20.0)),  # I2, I3, I4: 20 each, c1 twice
    ],
)
def test_each_logic_by_hand_with_campaign_buckets(logic, last_n, expected):
    wanted = request(campaign_ids=CAMPAIGNS, dimension=3, logic=logic, last_n=last_n)
    assert attribution_histogram(FOUR, wanted, 60.0) == expected


def test_bucket_is_the_campaign_index_or_zero_by_product():
    assert bucket_of(I3, request(campaign_ids=CAMPAIGNS, dimension=3)) == 2
    assert bucket_of(I2, request(campaign_ids=("c1", "c0"), dimension=2)) == 0
    assert bucket_of(I3, request(campaign_ids=(), dimension=4)) == 0


def test_product_selection_credits_bucket_zero_and_pads():
    wanted = request(dimension=4, logic="equal_credit")
    assert attribution_histogram(FOUR, wanted, 60.0) == (60.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("logic", ATTRIBUTION_LOGICS)
@pytest.mark.parametrize("found", [(), (I1,), FOUR])
@pytest.mark.parametrize("dimension", [3, 5])
def test_shape_is_m_whatever_is_found(logic, found, dimension):
    """Sec. 3.2: the report has m entries, null-padded, even when nothing relevant was found."""
    wanted = request(campaign_ids=CAMPAIGNS, dimension=dimension, logic=logic, last_n=2)
    histogram = attribution_histogram(found, wanted, 60.0)
    assert type(histogram) is tuple and len(histogram) == dimension
    assert all(type(v) is float for v in histogram)
    if not found:
        assert histogram == (0.0,) * dimension
    else:
        assert math.fsum(histogram) == 60.0
        assert histogram[3:] == (0.0,) * (dimension - 3)


def test_zero_value_gives_the_null_report():
    assert attribution_histogram(FOUR, request(campaign_ids=CAMPAIGNS, dimension=3), 0.0) == (0.0, 0.0, 0.0)


def test_value_above_the_report_sensitivity_is_clipped():
    assert attribution_histogram((I1,), request(report_global_sensitivity=70.0), 100.0) == (70.0,)
    l2 = attribution_histogram(FOUR, request(campaign_ids=CAMPAIGNS, dimension=3, logic="last_n", last_n=2,
                                             report_global_sensitivity=30.0, norm="L2"), 60.0)
    # (0, 30, 30) has L2 norm 30 sqrt 2 > 30: scaled to (0, 15 sqrt 2, 15 sqrt 2), within one ulp or so.
    assert l2[0] == 0.0 and l2[1] == l2[2] and math.isclose(l2[1], 15 * math.sqrt(2), rel_tol=1e-15)
    assert exact_l2_squared(l2) <= 900


# --------------------------------------------------------------------------- norms and clipping


def test_norms_by_hand():
    assert norm([3.0, -4.0], "L1") == 7.0
    assert norm([3.0, -4.0], "L2") == 5.0
    assert norm([], "L1") == 0.0
    with pytest.raises(ValueError, match="unknown norm 'Linf'"):
        norm([1.0], "Linf")


def test_exact_norm_at_most_sees_what_floats_hide():
    # 0.1 + 0.2 as doubles sums to more than the double 0.3 exactly.
    assert not exact_norm_at_most([0.1, 0.2], "L1", 0.3)
    assert exact_norm_at_most([0.1, 0.2], "L1", 0.30000000000000004)
    assert exact_norm_at_most([3.0, 4.0], "L2", 5.0)
    assert not exact_norm_at_most([3.0, 4.0], "L2", math.nextafter(5.0, 0.0))


def test_clip_leaves_a_histogram_under_the_cap_alone():
    histogram = [1.0, 2.0]
    assert clip(histogram, 3.0, "L1") is histogram
    assert clip(histogram, math.sqrt(5.0) * 1.0000001, "L2") is histogram


def test_clip_by_hand():
    assert clip([30.0, 10.0], 20.0, "L1") == [15.0, 5.0]
    assert clip([30.0, 40.0], 10.0, "L2") == [6.0, 8.0]
    # 0.1 + 0.2 exceeds the double 0.3: clipping must bring the exact sum down to at most 0.3.
    clipped = clip([0.1, 0.2], 0.3, "L1")
    assert exact_l1(clipped) <= Fraction(0.3)


HISTOGRAMS = st.lists(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), min_size=1, max_size=12)
CAPS = st.floats(min_value=1e-3, max_value=1e6)


@settings(max_examples=200, deadline=None)
@given(histogram=HISTOGRAMS, cap=CAPS, which=st.sampled_from(NORMS))
def test_clipped_norm_never_exceeds_the_cap_exactly(histogram, cap, which):
    clipped = clip(list(histogram), cap, which)
    assert len(clipped) == len(histogram)
    if which == "L1":
        assert exact_l1(clipped) <= Fraction(cap)
    else:
        assert exact_l2_squared(clipped) <= Fraction(cap) ** 2
    if clipped != histogram:  # it was over the cap: scaled down in proportion, to (just under) the cap
        assert norm(clipped, which) >= cap * (1 - 1e-12)
        # (a subnormal entry may underflow to 0 when scaled, hence no "c == 0 iff h == 0")
        assert all(abs(c) <= abs(h) and (c == 0.0 or (c < 0) == (h < 0)) for c, h in zip(clipped, histogram, strict=True))


@settings(max_examples=200, deadline=None)
@given(
    value=st.floats(min_value=0, max_value=1e7),
    times=st.lists(st.integers(min_value=0, max_value=100), max_size=8),
    campaigns=st.lists(st.sampled_from(CAMPAIGNS), min_size=8, max_size=8),
    logic=st.sampled_from(ATTRIBUTION_LOGICS),
    last_n=st.integers(min_value=1, max_value=4),
    dimension=st.integers(min_value=3, max_value=6),
    cap=CAPS,
    which=st.sampled_from(NORMS),
)
def test_reports_have_shape_m_and_respect_the_report_sensitivity(value, times, campaigns, logic, last_n, dimension,
                                                                 cap, which):
    found = sorted((impression(t, f"i{k}", campaign_id=campaigns[k]) for k, t in enumerate(times)),
                   key=lambda i: (i.event_time_micros, i.impression_id))
    wanted = request(campaign_ids=CAMPAIGNS, dimension=dimension, logic=logic, last_n=last_n,
                     report_global_sensitivity=cap, norm=which)
    histogram = attribution_histogram(found, wanted, value)
    assert len(histogram) == dimension
    assert all(v >= 0 for v in histogram) and histogram[3:] == (0.0,) * (dimension - 3)
    if which == "L1":
        assert exact_l1(histogram) <= Fraction(cap)
    else:
        assert exact_l2_squared(histogram) <= Fraction(cap) ** 2
    if not found or value == 0:
        assert histogram == (0.0,) * dimension


def test_l2_clipping_of_huge_values_scales_to_the_cap():
    clipped = clip([1e200, 1e200], 70.0, "L2")
    assert math.isclose(norm(clipped, "L2"), 70.0, rel_tol=1e-12)
