"""Builders of impressions, attribution requests and conversions for the on-device measurement tests."""
from __future__ import annotations

from schemas.rows import AttributionRequest, Conversion, Impression
from schemas.time_units import MICROS_PER_DAY

DAY = MICROS_PER_DAY
WEEK = 7 * DAY  # the default epoch length
ADVERTISER = "nike.com"
QUERIER = "nike.com"


def at(epoch: int, day: int = 0, micros: int = 0) -> int:
    """A time ``day`` days and ``micros`` microseconds into ``epoch`` of the default 7-day clock."""
    return epoch * WEEK + day * DAY + micros


def impression(
    time: int,
    impression_id: str,
    campaign_id: str = "",
    product_id: str = "shoe",
    advertiser_site: str = ADVERTISER,
    filter_keys: tuple = (),
    device_id: str = "ann",
    publisher_site: str = "nytimes.com",
    intermediary_site: str = "",
    conversion_callers: tuple = (),
) -> Impression:
    return Impression(device_id, time, impression_id, publisher_site, advertiser_site, campaign_id, product_id,
                      tuple(filter_keys), intermediary_site, conversion_callers)


def request(**changes) -> AttributionRequest:
    """A valid request (selection by product "shoe", last touch, m = 1, L1, epsilon 1, sensitivities 100) with
    fields replaced."""
    values = dict(
        window_days=None,
        first_epoch=None,
        last_epoch=None,
        campaign_ids=(),
        product_id="shoe",
        filter_keys=(),
        logic="last_touch",
        last_n=1,
        dimension=1,
        requested_epsilon=1.0,
        report_global_sensitivity=100.0,
        query_global_sensitivity=100.0,
        norm="L1",
        query_key="product=shoe",
    )
    values.update(changes)
    return AttributionRequest(**values)


def conversion(
    time: int,
    conversion_id: str,
    value: float,
    attribution_request: AttributionRequest | None = None,
    device_id: str = "ann",
    advertiser_site: str = ADVERTISER,
    querier_site: str = QUERIER,
    product_id: str = "shoe",
) -> Conversion:
    return Conversion(device_id, time, conversion_id, advertiser_site, querier_site, value, product_id,
                      request() if attribution_request is None else attribution_request)
