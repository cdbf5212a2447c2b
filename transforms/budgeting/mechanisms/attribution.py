"""Attribution functions: a conversion's value credited to relevant impressions, as a fixed-shape histogram.

Seed 003 Sec. 3.3 and Code Listing 1:

* Step 1, ``is_relevant``: ``select_relevant_events``: impressions for the
  conversion's advertiser site, of one of the requested campaigns (or, with
  no campaign listed, of the requested product), carrying every requested
  filter key, and matching the W3C Attribution API's callers and sites when
  the events carry them.
* Step 4, ``attribution_histogram``: ``compute_attribution``: the logic picks
  the credited impressions and splits the value among them; each credit goes
  to the histogram bucket of its impression (the index of its campaign in the
  request's campaign list; bucket 0 when selecting by product); the result
  is clipped to the report global sensitivity in the requested norm and has
  exactly ``dimension`` (m) entries, the unused ones null (0), whatever was
  found (Sec. 3.2: "it also includes a null value since Nike asked for two
  attributions").

Logics: ``last_touch`` (the latest impression gets the value), ``first_touch``
(the earliest), ``equal_credit`` (every relevant impression gets value / n),
``last_n`` (the n latest share the value equally). Impressions are ordered by
(event time, impression id). Beam-free.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from schemas.rows import ATTRIBUTION_LOGICS as LOGICS
from schemas.rows import NORMS, AttributionRequest, Impression


def is_relevant(impression: Impression, advertiser_site: str, request: AttributionRequest, caller: str = "") -> bool:
    """Step 1 of Code Listing 1 for one impression (whatever its time; ``select_relevant`` is the rule)."""
    return bool(select_relevant((impression,), advertiser_site, request, impression.event_time_micros, caller))


def select_relevant(
    impressions: Sequence[Impression], advertiser_site: str, request: AttributionRequest, until_micros: int,
    caller: str = "",
) -> list[Impression]:
    """Step 1 of Code Listing 1: the impressions at or before ``until_micros`` for ``advertiser_site``, of one of
    the request's campaigns (or, with none listed, of its product), carrying every requested filter key. One list
    comprehension per case: this runs for every epoch of every conversion's window.

    With the W3C Attribution API's fields (``api.bs``, "common matching logic"): an impression that names
    conversion callers matches only a conversion whose ``caller`` (its querier) is one of them; a request that
    names impression sites or callers matches only impressions saved on those sites or by those callers (the
    intermediary, else the publisher)."""
    keys = request.filter_keys
    if request.campaign_ids:
        campaigns = request.campaign_ids
        found = [
            i for i in impressions
            if i.event_time_micros <= until_micros and i.advertiser_site == advertiser_site and i.campaign_id in campaigns
        ]
    else:
        product = request.product_id
        found = [
            i for i in impressions
            if i.event_time_micros <= until_micros and i.advertiser_site == advertiser_site and i.product_id == product
        ]
    if keys:
        found = [i for i in found if all(key in i.filter_keys for key in keys)]
    if found and (request.impression_sites or request.impression_callers or any(i.conversion_callers for i in found)):
        sites, callers = request.impression_sites, request.impression_callers
        found = [i for i in found
                 if (not i.conversion_callers or caller in i.conversion_callers)
                 and (not sites or i.publisher_site in sites)
                 and (not callers or (i.intermediary_site or i.publisher_site) in callers)]
    return found


def credited(impressions: Sequence[Impression], logic: str, last_n: int) -> Sequence[Impression]:
    """The impressions (in time order) that share the conversion's value under ``logic``."""
    if not impressions:
        return ()
    if logic == "last_touch":
        return impressions[-1:]
    if logic == "first_touch":
        return impressions[:1]
    if logic == "equal_credit":
        return impressions
    if logic == "last_n":
        if last_n < 1:
            raise ValueError(f"last_n needs n >= 1, got {last_n}")
        return impressions[-last_n:]
    raise ValueError(f"unknown attribution logic {logic!r}; expected one of {', '.join(LOGICS)}")


def bucket_of(impression: Impression, request: AttributionRequest) -> int:
    """The histogram bucket credited for ``impression``: its campaign's position in the request, else 0."""
    return request.campaign_ids.index(impression.campaign_id) if request.campaign_ids else 0


def norm(histogram: Sequence[float], which: str) -> float:
    """The L1 or L2 norm (correctly rounded sums)."""
    if which == "L1":
        return math.fsum(abs(value) for value in histogram)
    if which == "L2":
        return math.hypot(*histogram)  # no overflow for huge entries, unlike sqrt of a sum of squares
    raise ValueError(f"unknown norm {which!r}; expected one of {', '.join(NORMS)}")


def exact_norm_at_most(histogram: Sequence[float], which: str, cap: float) -> bool:
    """Whether the exact (real-number) norm of the doubles in ``histogram`` is <= ``cap``.

    Decided in floating point when that is certain: ``fsum`` is correctly rounded and rounding is monotone, so
    an L1 sum that rounds below (above) the cap is below (above) it, and a sum of one nonzero entry is exact;
    ``hypot`` is within an ulp or so, so an L2 norm 1e-12 away from the cap is on that side. Only the close
    cases are settled with exact rationals."""
    if which == "L1":
        rounded = math.fsum(abs(value) for value in histogram)
        if rounded != cap:
            return rounded < cap
        if sum(1 for value in histogram if value) <= 1:
            return True
    else:
        rounded = math.hypot(*histogram)
        if abs(rounded - cap) > 1e-12 * cap:
            return rounded < cap
    if which == "L1":
        return sum(abs(Fraction(value)) for value in histogram) <= Fraction(cap)
    return sum(Fraction(value) ** 2 for value in histogram) <= Fraction(cap) ** 2


def clip(histogram: list[float], cap: float, which: str) -> list[float]:
    """``histogram`` scaled down so that its exact norm is at most ``cap`` (unchanged when it already is).

    The scaled doubles are checked exactly and nudged down by one ulp factor
    until they pass, so a clipped report never exceeds the report global
    sensitivity through rounding (the bound the privacy loss relies on).
    """
    if exact_norm_at_most(histogram, which, cap):
        return histogram
    factor = cap / norm(histogram, which)
    while True:
        scaled = [value * factor for value in histogram]
        if exact_norm_at_most(scaled, which, cap):
            return scaled
        factor = math.nextafter(factor, 0.0)


def attribution_histogram(impressions: Sequence[Impression], request: AttributionRequest, value: float) -> tuple:
    """Step 4 of Code Listing 1: the clipped, padded m-dimensional attribution of ``value`` to the relevant
    ``impressions`` (time ordered) that the budget let through."""
    histogram = [0.0] * request.dimension
    chosen = credited(impressions, request.logic, request.last_n)
    if chosen and value:
        share = value / len(chosen)
        for impression in chosen:
            histogram[bucket_of(impression, request)] += share
        histogram = clip(histogram, request.report_global_sensitivity, request.norm)
    return tuple(histogram)
