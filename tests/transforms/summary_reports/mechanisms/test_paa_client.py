"""PAA-SR-Client (Ghazi et al. Alg. 3) with the reach-counting shared-storage function, on hand-built devices."""
from __future__ import annotations

import hashlib

import pytest

from schemas.rows import API_PROTECTED_AUDIENCE
from tests.support.summary_events import ORIGIN, paa_event
from tests.support.summary_events import refusals as client_refusals
from transforms.core.mechanisms.noise import SeededSource
from transforms.summary_reports.mechanisms.contributions import ContributionLimits
from transforms.summary_reports.mechanisms.paa_client import (
    DEFAULT_REACH_VALUE,
    PaaSummaryClient,
    ReachCounting,
    campaign_bucket,
    window_of,
)

HALF = DEFAULT_REACH_VALUE  # L1 / 2


def run(events, pi=ReachCounting(), limits: ContributionLimits = ContributionLimits()):
    client = PaaSummaryClient(pi, limits)
    return list(client.replay("dev", sorted(events, key=client.order), client.new_state(), SeededSource(1)))


def refusals(events, pi=ReachCounting(), limits: ContributionLimits = ContributionLimits()) -> list[bool]:
    """Whether each report was made null by its window's budget."""
    return client_refusals(PaaSummaryClient(pi, limits), events)


def values(events, **kwargs) -> list[int]:
    """The value each event reported (0 for a null report); reach reports hold one contribution."""
    out = []
    for report in run(events, **kwargs):
        assert len(report.contributions) <= 1
        out.append(report.contributions[0][1] if report.contributions else 0)
    return out


def test_the_papers_example():
    """Seed 000 Sec. 2.1.3 (Fig. 2): shoes and pants are reported; the jacket exhausts the window's L1 (but is
    remembered); in the next window a shirt is reported, and shoes again send a null report (seen before)."""
    events = [paa_event("dev", 0, "shoes", "shoes"), paa_event("dev", 1, "pants", "pants"),
              paa_event("dev", 2, "jacket", "jacket"), paa_event("dev", 10, "shirt", "shirt"),
              paa_event("dev", 11, "shoes-again", "shoes"), paa_event("dev", 12, "jacket-again", "jacket")]
    assert values(events) == [HALF, HALF, 0, HALF, 0, 0]


def test_reach_value_only_the_first_time_per_campaign():
    sightings = ((0, "p"), (30, "p"), (60, "q"), (90, "p"))
    events = [paa_event("dev", minute, f"e{minute}", campaign) for minute, campaign in sightings]
    assert values(events) == [HALF, 0, HALF, 0]
    (report,) = run(events[:1])
    assert report.contributions == ((campaign_bucket("p"), HALF),)


def test_windows_roll_over_at_ten_minute_boundaries():
    """T0 is a multiple of 10 minutes: minutes 9.99 and 10 are in different windows, so L1 is fresh at 10."""
    events = [paa_event("dev", 0, "a", "a"), paa_event("dev", 5, "b", "b"), paa_event("dev", 9.99, "c", "c"),
              paa_event("dev", 10, "d", "d"), paa_event("dev", 19.99, "e", "e"), paa_event("dev", 20, "f", "f")]
    assert window_of(events[2].event_time_micros) + 1 == window_of(events[3].event_time_micros)
    assert values(events) == [HALF, HALF, 0, HALF, HALF, HALF]


def test_l0_per_window():
    """L0 = 2 with small values: two reports per window, the third is null; the next window starts at 0."""
    events = [paa_event("dev", minute, f"e{minute}", f"c{minute}") for minute in (0, 1, 2, 3, 10, 11)]
    assert values(events, pi=ReachCounting(100), limits=ContributionLimits(l0=2)) == [100, 100, 0, 0, 100, 100]
    refused = refusals(events, pi=ReachCounting(100), limits=ContributionLimits(l0=2))
    assert refused == [False, False, True, True, False, False]  # the nulls over budget: counted as refusals


def test_budgets_and_storage_are_per_reporting_origin():
    other = "https://other-adtech.test"
    events = [paa_event("dev", 0, "a", "p"), paa_event("dev", 1, "b", "q"), paa_event("dev", 2, "c", "r", origin=other),
              paa_event("dev", 3, "d", "p", origin=other), paa_event("dev", 4, "e", "s")]
    # ORIGIN spends its window on p and q (s is null); the other ad-tech has its own budget and its own storage
    assert values(events) == [HALF, HALF, HALF, HALF, 0]
    assert [r.reporting_origin for r in run(events)] == [ORIGIN, ORIGIN, other, other, ORIGIN]


def test_a_report_carries_the_events_api_and_no_destination():
    (report,) = run([paa_event("dev", 0, "a", "p", api=API_PROTECTED_AUDIENCE)])
    assert report.api == API_PROTECTED_AUDIENCE and report.attribution_destination is None


def test_campaign_bucket_is_the_sha256_prefix():
    assert campaign_bucket("campaign-0-1") == int.from_bytes(hashlib.sha256(b"campaign-0-1").digest()[:16], "big")
    assert campaign_bucket("a") != campaign_bucket("b") and campaign_bucket("a") < 2**128


def test_reach_value_must_be_positive():
    with pytest.raises(ValueError):
        ReachCounting(0)


def test_forget_before_drops_past_windows_but_keeps_the_storage():
    client = PaaSummaryClient()
    state = client.new_state()
    events = [paa_event("dev", 0, "a", "p"), paa_event("dev", 10, "b", "q")]
    list(client.replay("dev", events, state, SeededSource(1)))
    client.forget_before(state, events[1].event_time_micros)
    assert [window for _, window in state.budgets] == [window_of(events[1].event_time_micros)]
    assert state.storage[ORIGIN] == frozenset({"p", "q"})
