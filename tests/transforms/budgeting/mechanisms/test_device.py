"""One device's logic (``transforms/budgeting/mechanisms/device.py``): request resolution, replay order, report ids."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest

from tests.support.measurement_events import DAY, WEEK, at, conversion, impression, request
from tests.support.sources import ConstantSource
from transforms.budgeting.mechanisms.accuracy import AccuracyTarget
from transforms.budgeting.mechanisms.device import (
    DEFAULT_MAX_WINDOW_DAYS,
    DEFAULT_WINDOW_DAYS,
    DeviceState,
    MeasurementConfig,
    ReportRecord,
    event_order,
    replay,
    resolve_request,
    sort_events,
)
from transforms.budgeting.mechanisms.policies import CookieMonster, IpaLike, make_policy
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.core.mechanisms.noise import SecureSource, SeededSource
from transforms.core.mechanisms.time_steps import EpochClock

UNIT = 10**12
CONFIG = MeasurementConfig()


# --------------------------------------------------------------------------- MeasurementConfig


def test_config_defaults_of_section_8_1():
    assert (DEFAULT_WINDOW_DAYS, DEFAULT_MAX_WINDOW_DAYS) == (30, 90)
    assert CONFIG.policy == "cookie_monster" and CONFIG.clock == EpochClock()
    assert CONFIG.capacity_epsilon == 1 and CONFIG.capacity_units == UNIT
    assert CONFIG.accuracy is None
    assert CONFIG.max_window_micros == 90 * DAY


def test_config_capacity_rounds_down():
    assert MeasurementConfig(capacity_epsilon=Fraction(1, 3)).capacity_units == 333_333_333_333


@pytest.mark.parametrize(
    "changes, error",
    [
        ({"policy": "pam"}, "unknown budgeting policy"),
        ({"capacity_epsilon": Fraction(0)}, "must be > 0"),
        ({"capacity_epsilon": Fraction(-1)}, "must be > 0"),
        ({"default_window_days": 0}, "default attribution window"),
        ({"default_window_days": 91}, "default attribution window"),
        ({"default_window_days": 10, "max_window_days": 5}, "default attribution window"),
    ],
)
def test_config_validation(changes, error):
    with pytest.raises(ValueError, match=error):
        MeasurementConfig(**changes)


def test_oldest_reachable_epoch_is_the_epoch_of_t_minus_the_longest_window():
    # 90 days = 12 weeks + 6 days: from 20 W, t - 90 d = 7 W + 1 d.
    assert CONFIG.oldest_reachable_epoch(at(20)) == 7
    assert CONFIG.oldest_reachable_epoch(at(20, 6)) == 8  # 8 W
    config = MeasurementConfig(clock=EpochClock(length_micros=DAY), default_window_days=3, max_window_days=3)
    assert config.oldest_reachable_epoch(10 * DAY + 1) == 7
    assert config.oldest_reachable_epoch(10 * DAY) == 7
    assert config.oldest_reachable_epoch(10 * DAY - 1) == 6


# --------------------------------------------------------------------------- resolve_request


def test_defaults_give_the_config_window():
    converted = conversion(at(10, 3), "c", 5.0)  # window_days None: the 30-day default
    resolved_request, epochs = resolve_request(converted, CONFIG)
    assert resolved_request == converted.attribution_request  # nothing to change
    assert epochs == range(6, 11)  # t - 30 days = 27 days before epoch 10, i.e. in epoch 6
    config = MeasurementConfig(default_window_days=7)
    assert resolve_request(converted, config)[1] == range(9, 11)


def test_explicit_window_days():
    converted = conversion(at(10, 3), "c", 5.0, request(window_days=1))
    assert resolve_request(converted, CONFIG)[1] == range(10, 11)
    converted = conversion(at(10, 3), "c", 5.0, request(window_days=90))
    assert resolve_request(converted, CONFIG)[1] == range(-3, 11)  # t - 90 d = 10 W + 3 d - 13 W + 1 d = -3 W + 4 d


def test_explicit_epochs_are_used_as_given():
    converted = conversion(at(10, 3), "c", 5.0, request(first_epoch=4, last_epoch=7, window_days=1))
    assert resolve_request(converted, CONFIG)[1] == range(4, 8)


def test_window_too_long():
    assert resolve_request(conversion(at(20), "c", 1.0, request(window_days=91)), CONFIG) == "window_too_long"
    # Explicit epochs may reach back to the epoch of t - 90 days (7 W + 1 d from 20 W: epoch 7), not further.
    explicit = request(first_epoch=6, last_epoch=20)
    assert resolve_request(conversion(at(20), "c", 1.0, explicit), CONFIG) == "window_too_long"
    explicit = request(first_epoch=6, last_epoch=6)  # even a short window, if it lies too far back
    assert resolve_request(conversion(at(20), "c", 1.0, explicit), CONFIG) == "window_too_long"
    explicit = request(first_epoch=7, last_epoch=20)
    assert resolve_request(conversion(at(20), "c", 1.0, explicit), CONFIG)[1] == range(7, 21)
    assert resolve_request(conversion(at(20, 6), "c", 1.0, explicit), CONFIG) == "window_too_long"  # 8 W now
    config = MeasurementConfig(default_window_days=30, max_window_days=30)
    assert resolve_request(conversion(at(20), "c", 1.0, request(window_days=31)), config) == "window_too_long"


def test_window_in_future():
    converted = conversion(at(10, 6), "c", 1.0, request(first_epoch=9, last_epoch=11))
    assert resolve_request(converted, CONFIG) == "window_in_future"
    converted = conversion(at(10, 6), "c", 1.0, request(first_epoch=9, last_epoch=10))
    assert resolve_request(converted, CONFIG)[1] == range(9, 11)


def test_missing_epsilon_without_an_accuracy_target():
    converted = conversion(at(10), "c", 1.0, request(requested_epsilon=None))
    assert resolve_request(converted, CONFIG) == "missing_field:requested_epsilon"


def test_accuracy_target_sets_and_overrides_epsilon():
    target = AccuracyTarget(alpha=0.05, beta=0.01, batch_size=2000)
    config = MeasurementConfig(accuracy=target)
    expected = target.epsilon(100.0)
    assert math.isclose(expected, 100 * math.log(100) / (0.05 * 2000 * 100), rel_tol=1e-15)
    for epsilon in (None, 0.7):
        converted = conversion(at(10), "c", 1.0, request(requested_epsilon=epsilon, query_global_sensitivity=100.0))
        resolved_request, _ = resolve_request(converted, config)
        assert resolved_request.requested_epsilon == expected
        assert resolved_request._replace(requested_epsilon=epsilon) == converted.attribution_request


# --------------------------------------------------------------------------- replay


def test_event_order_impressions_first_at_equal_times():
    same_time = at(3, 2)
    c = conversion(same_time, "a-conversion", 1.0)
    i = impression(same_time, "z-impression")
    assert event_order(i) < event_order(c)
    assert sort_events([c, i]) == [i, c]
    assert sort_events([impression(5, "b"), impression(5, "a"), impression(4, "c")]) == [
        impression(4, "c"), impression(5, "a"), impression(5, "b")]


def run(events, policy="cookie_monster", state=None, source=None, config=CONFIG, device="ann"):
    state = DeviceState(config.new_filters()) if state is None else state
    source = ConstantSource() if source is None else source
    return list(replay(device, sort_events(events), state, config, make_policy(policy), source)), state


def test_an_impression_at_the_conversion_time_counts():
    t = at(10, 3)
    reports, _ = run([conversion(t, "c", 30.0), impression(t, "i")])
    assert [r.histogram for r in reports] == [(30.0,)]


def test_impressions_after_the_conversion_are_not_attributed():
    t = at(10, 3)
    reports, state = run([conversion(t, "c", 30.0), impression(t + 1, "late"), impression(at(11), "later")])
    assert [r.histogram for r in reports] == [(0.0,)]
    assert not any(state.filters.consumed.values())  # no relevant event: nothing paid
    assert [i.impression_id for i in state.impressions[10]] == ["late"]  # kept for later conversions


def test_impressions_already_in_state_after_the_conversion_are_not_attributed():
    """The streaming path may hold impressions later than a conversion it replays: they are filtered by time."""
    t = at(10, 3)
    state = DeviceState(FilterTable(UNIT), impressions={10: [impression(t + 5, "from-the-future")]})
    reports, state = run([conversion(t, "c", 30.0)], state=state)
    assert [r.histogram for r in reports] == [(0.0,)]
    assert state.filters.consumed == {("nike.com", epoch): 0 for epoch in range(6, 11)}


def test_irrelevant_impressions_and_other_queriers_filters():
    t = at(10, 3)
    events = [
        impression(at(9), "other-advertiser", advertiser_site="adidas.com"),
        impression(at(9, 1), "other-product", product_id="sock"),
        impression(at(8), "relevant"),
        conversion(t, "c1", 30.0),
        conversion(t + 1, "c2", 40.0, querier_site="meta.com"),
    ]
    reports, state = run(events)
    assert [(r.querier_site, r.histogram) for r in reports] == [("nike.com", (30.0,)), ("meta.com", (40.0,))]
    # default window: epochs 6..10; only epoch 8 has a relevant impression; case 3 cost eps * 100 / 100 = 1
    expected = {(q, e): 0 for q in ("nike.com", "meta.com") for e in range(6, 11)}
    expected[("nike.com", 8)] = expected[("meta.com", 8)] = UNIT
    assert state.filters.consumed == expected


def test_a_later_conversion_finds_an_exhausted_epoch():
    events = [impression(at(8), "i"), conversion(at(10), "c1", 30.0), conversion(at(10, 1), "c2", 30.0)]
    reports, state = run(events)
    assert [r.histogram for r in reports] == [(30.0,), (0.0,)]  # c1 spent all of epoch 8's budget
    assert state.filters.consumed[("nike.com", 8)] == UNIT


def test_unservable_conversions_give_no_report():
    events = [
        impression(at(8), "i"),
        conversion(at(10), "too-long", 1.0, request(window_days=365)),
        conversion(at(10), "future", 1.0, request(first_epoch=9, last_epoch=12)),
        conversion(at(10), "no-epsilon", 1.0, request(requested_epsilon=None)),
        conversion(at(10, 1), "fine", 1.0),
    ]
    reports, _ = run(events)
    assert [r.conversion_id for r in reports] == ["fine"]


def test_report_record_fields():
    wanted = request(dimension=2, query_key="q", requested_epsilon=0.25, query_global_sensitivity=50.0,
                     report_global_sensitivity=40.0)
    (report,), _ = run([impression(at(9), "i"), conversion(at(10, 2), "c", 45.0, wanted)], policy="ipa_like")
    assert report == ReportRecord(
        querier_site="nike.com", query_key="q", conversion_time_micros=at(10, 2), device_id="ann", conversion_id="c",
        report_id=report.report_id, histogram=(40.0, 0.0), requested_epsilon=0.25, query_global_sensitivity=50.0,
        first_epoch=6, last_epoch=10,
    )


def test_replay_in_pieces_equals_replay_at_once():
    """The streaming path replays final events in several calls over the same state: same reports, same budgets."""
    events = sort_events([impression(at(7), "a"), impression(at(8), "b"), conversion(at(9), "c1", 60.0),
                          impression(at(9, 1), "d"), conversion(at(10), "c2", 60.0), conversion(at(10, 1), "c3", 9.0)])
    whole, whole_state = run(events)
    state = DeviceState(FilterTable(UNIT))
    pieces = []
    for part in (events[:2], events[2:4], events[4:]):
        pieces += list(replay("ann", part, state, CONFIG, CookieMonster(), ConstantSource()))
    assert pieces == whole and state.filters.consumed == whole_state.filters.consumed


def test_forget_before_drops_old_epochs_only():
    state = DeviceState(FilterTable(UNIT), impressions={3: [impression(at(3), "a")], 5: [impression(at(5), "b")]})
    state.forget_before(5)
    assert list(state.impressions) == [5]
    state.forget_before(0)
    assert list(state.impressions) == [5]


# --------------------------------------------------------------------------- report identifiers


def report_ids(source, device="ann", conversions=("c1", "c2")):
    events = [conversion(at(10, k), c, 1.0) for k, c in enumerate(conversions)]
    reports, _ = run(events, policy="ipa_like", source=source, device=device)
    return [r.report_id for r in reports]


def test_seeded_report_ids_are_a_function_of_seed_device_and_conversion():
    first = report_ids(SeededSource(7))
    assert first == report_ids(SeededSource(7))  # deterministic
    assert all(len(token) == 32 and int(token, 16) >= 0 for token in first)
    assert first[0] != first[1]  # per conversion
    assert report_ids(SeededSource(7), conversions=("c2",)) == first[1:]  # not per position in the stream
    assert report_ids(SeededSource(8)) != first and not set(report_ids(SeededSource(8))) & set(first)  # per seed
    assert not set(report_ids(SeededSource(7), device="bob")) & set(first)  # per device
    assert first[0] == SeededSource(7).keyed_token(("report", "ann", "c1"))


def test_secure_report_ids_are_fresh():
    first, second = report_ids(SecureSource()), report_ids(SecureSource())
    assert len(set(first + second)) == 4
    assert all(len(token) == 32 for token in first + second)


def test_ipa_like_device_state_only_touches():
    (report,), state = run([impression(at(9), "i"), conversion(at(10), "c", 30.0)], policy="ipa_like")
    assert report.histogram == (30.0,)
    assert state.filters.consumed == {("nike.com", e): 0 for e in range(5, 11)}  # t - 30 d = 5 W + 5 d: epoch 5
    assert isinstance(make_policy("ipa_like"), IpaLike)


def test_a_one_day_epoch_clock():
    config = MeasurementConfig(clock=EpochClock(length_micros=DAY), default_window_days=2, max_window_days=2)
    events = [impression(3 * DAY, "old"), impression(5 * DAY, "new"), conversion(6 * DAY + 1, "c", 10.0)]
    (report,), state = run(events, config=config)
    assert (report.first_epoch, report.last_epoch) == (4, 6)
    assert report.histogram == (10.0,)
    assert state.filters.consumed == {("nike.com", 4): 0, ("nike.com", 5): UNIT, ("nike.com", 6): 0}
    assert WEEK == 7 * DAY
