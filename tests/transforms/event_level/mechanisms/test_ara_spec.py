"""The event-level client's specification mode (``transforms.event_level.mechanisms.ara_spec``): its randomized
response, its refusals, and the rules Chrome's interop suite checks end to end, on hand-built registrations.

The statistical test fails falsely with probability about 2e-9 (a binomial count of n = 4,000 outside 6 standard
deviations of its mean, by the normal approximation)."""
from __future__ import annotations

import math

import pytest

from schemas.registrations import (
    EVENT,
    NAVIGATION,
    AttributionScopes,
    EventTriggerData,
    SourceRegistration,
    TriggerRegistration,
)
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.ara_attribution import DESTINATION_LIMIT, SourceRemoval
from transforms.core.mechanisms.noise import SecureSource, SeededSource
from transforms.event_level.mechanisms.ara_spec import SpecEventLevel, window_index
from transforms.event_level.mechanisms.config import ConfigurationError
from transforms.event_level.mechanisms.information_gain import randomized_trigger_rate

DAY = 86_400
SHOP = "https://shop.example"


def source(time_s: float = 0, *, event_id: int = 1, epsilon: float = 14.0, max_reports: int = 3,
           ends: tuple[int, ...] = (2 * DAY, 7 * DAY, 30 * DAY), start: int = 0) -> SourceRegistration:
    return SourceRegistration(
        time_micros=int(time_s * MICROS_PER_SECOND), source_site="https://news.example",
        source_origin="https://news.example", reporting_origin="https://adtech.example",
        reporting_site="https://adtech.example", source_type=NAVIGATION, source_event_id=event_id,
        destination_sites=(SHOP,), expiry_seconds=30 * DAY, event_report_window_start_seconds=start,
        event_report_window_ends=ends, max_event_level_reports=max_reports, trigger_data=tuple(range(8)),
        event_level_epsilon=epsilon)


def trigger(time_s: float, data: int = 1, priority: int = 0, dedup: int | None = None) -> TriggerRegistration:
    return TriggerRegistration(
        time_micros=int(time_s * MICROS_PER_SECOND), destination_site=SHOP, reporting_origin="https://adtech.example",
        reporting_site="https://adtech.example",
        event_trigger_data=(EventTriggerData(data, priority, dedup),))


def test_randomized_response_draws_at_the_rate_the_reports_carry():
    """4,000 navigation sources at eps = 7: each takes a random output with probability k / (k - 1 + e^7),
    k = 2,925; the count of randomized sources lies within 6 standard deviations of its mean."""
    client = SpecEventLevel(random_source=SeededSource(11))
    n, epsilon = 4_000, 7.0
    states = [client.register_source(source(i, event_id=i, epsilon=epsilon), None) for i in range(n)]
    rate = randomized_trigger_rate(2_925, epsilon)
    assert {state.rate for state in states} == {rate}
    randomized = sum(state.fake is not None for state in states)
    assert abs(randomized - n * rate) <= 6 * math.sqrt(n * rate * (1 - rate))
    fakes = [report for state in states if state.fake for report in state.fake]
    assert fakes and all(0 <= report.trigger_data < 8 and report.trigger_priority == 0 for report in fakes)
    assert all(report.source_debug_key is None and report.trigger_debug_key is None for report in fakes)


def test_a_randomized_source_is_never_attributed_and_sends_its_fake_reports():
    client = SpecEventLevel()
    src = source()
    state = client.register_source(src, [(5, 1)])
    client.attribute(src, state, trigger(10), None)
    assert client.outcomes == {"falsely_attributed_source": 1}
    [report] = client.release(2**62)
    assert (report.trigger_data, report.report_time_micros) == (5, 7 * DAY * MICROS_PER_SECOND)
    silent = client.register_source(src, [])
    client.attribute(src, silent, trigger(11), None)
    assert client.outcomes["never_attributed_source"] == 1 and not client.release(2**62)


def test_the_secure_source_draws_too():
    client = SpecEventLevel(random_source=SecureSource())
    states = [client.register_source(source(i, event_id=i, epsilon=0.0), None) for i in range(50)]
    # at eps = 0 the truthful probability (e^eps - 1) / (e^eps + k - 1) is 0: every source takes a random output
    assert all(state.fake is not None for state in states)


def test_priority_replaces_the_lowest_pending_report_due_at_the_same_time():
    client = SpecEventLevel()
    src = source(max_reports=2)
    state = client.register_source(src, None)
    for time_s, data, priority in [(1, 1, 1), (2, 2, 1), (3, 3, 1), (4, 4, 2), (2 * DAY + 1, 5, 9)]:
        client.attribute(src, state, trigger(time_s, data, priority), None)
    assert client.outcomes == {"success": 2, "priority_too_low": 1, "success_dropped_lower_priority": 1,
                               "excessive_reports": 1}
    assert sorted(report.trigger_data for report in client.release(2**62)) == [1, 4]


def test_deduplication_and_report_windows():
    client = SpecEventLevel()
    src = source(start=3_600, ends=(DAY, 2 * DAY))
    state = client.register_source(src, None)
    for time_s, dedup in [(10, None), (3_600, 7), (3_601, 7), (2 * DAY, None)]:
        client.attribute(src, state, trigger(time_s, dedup=dedup), None)
    assert client.outcomes == {"report_window_not_started": 1, "success": 1, "deduplicated": 1,
                               "report_window_passed": 1}
    assert window_index(src, (DAY + 5) * MICROS_PER_SECOND) == 1


def test_a_source_above_the_channel_capacity_is_refused():
    with pytest.raises(ConfigurationError) as refused:
        SpecEventLevel().register_source(source(max_reports=5), None)
    assert refused.value.reason == "information_gain_too_high"
    with pytest.raises(ConfigurationError) as refused:
        SpecEventLevel(max_trigger_states=10).register_source(source(max_reports=1), None)
    assert refused.value.reason == "too_many_states"


def test_attribution_scopes_privacy_checks():
    """Spec "process an attribution source" (the interop case ``source_registration_limits``): an event source has
    at most max_event_states trigger states, and log2(|O| + max_event_states * (limit - 1)) is within the scopes'
    channel capacity. The default navigation source has |O| = 2925 states."""
    client = SpecEventLevel()
    navigation = source()  # 8 trigger data, 3 windows, 3 reports: 2925 states, 11.51 bits
    scopes = AttributionScopes(limit=25, values=("a",), max_event_states=3)  # log2(2925 + 72) = 11.549 <= 11.55
    client.prepare_source(navigation._replace(attribution_scopes=scopes), None)
    with pytest.raises(ConfigurationError) as refused:  # log2(2925 + 75) = 11.551
        client.prepare_source(navigation._replace(attribution_scopes=scopes._replace(limit=26)), None)
    assert refused.value.reason == "scopes_channel_capacity_exceeded"
    event = source(max_reports=1, ends=(DAY,))._replace(source_type=EVENT, trigger_data=(0, 1))  # 3 states
    client.prepare_source(event._replace(attribution_scopes=AttributionScopes(1, ("a",), 3)), None)
    with pytest.raises(ConfigurationError) as refused:
        client.prepare_source(event._replace(attribution_scopes=AttributionScopes(1, ("a",), 2)), None)
    assert refused.value.reason == "max_event_states_exceeded"
    navigation_few = navigation._replace(attribution_scopes=AttributionScopes(1, ("a",), 2))  # navigation: no such check
    client.prepare_source(navigation_few, None)


def test_a_removed_source_drops_the_reports_triggered_from_then_on_fake_ones_dated_at_their_window():
    """Spec "delete sources for unexpired destination limit" (the interop case ``source_destination_limit_fifo``):
    a fake report's trigger time is its window's start."""
    client = SpecEventLevel()
    src = source(ends=(DAY // 2, DAY))
    state = client.register_source(src, [(1, 0), (2, 1)])
    assert [r.trigger_time_micros for r in state.fake] == [0, DAY // 2 * MICROS_PER_SECOND]
    client.remove_source(src, state, SourceRemoval(DESTINATION_LIMIT, 2_000_000))
    assert [r.trigger_data for r in client.release(2**62)] == [1]
