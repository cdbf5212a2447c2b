"""Big Bird's batched scheduling in the measurement job's device replay (``Scheduling``; Tholoniat et al., "batched
scheduling"): when a report comes, how the global budget's releases decide it, and a replay cut anywhere (and its
state written and read back there) giving what one replay of the whole history gives."""
from __future__ import annotations

import dataclasses
import random
from fractions import Fraction

import pytest

from schemas.time_units import MICROS_PER_DAY, MICROS_PER_HOUR
from tests.support.measurement_data import random_population
from tests.support.measurement_events import at, conversion, impression, request
from tests.support.sources import ConstantSource
from transforms.budgeting.mechanisms.device import DeviceState, MeasurementConfig, Scheduling, replay, sort_events
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.budgeting.state import device_codec
from transforms.core.device_state import DeviceRecord
from transforms.core.mechanisms.global_filters import GLOBAL, FilterId
from transforms.core.mechanisms.noise import SeededSource

DAY = MICROS_PER_DAY
CONVERSION_TIME = at(3, 2, 5 * MICROS_PER_HOUR)  # in the daily interval of day 23
INTERVAL = CONVERSION_TIME // DAY
WANTED = request(first_epoch=3, last_epoch=3, requested_epsilon=0.2)  # its global bound: 0.2
EVENTS = [impression(at(3, 1), "i1"), conversion(CONVERSION_TIME, "c1", 70.0, WANTED)]


def config(attempts: int = 1, releases: int = 1, global_epsilon: Fraction = Fraction(1)) -> MeasurementConfig:
    return MeasurementConfig(policy="big_bird", global_epsilon=global_epsilon,
                             scheduling=Scheduling(DAY, attempts=attempts, releases=releases))


def run(events: list, state: DeviceState, settings: MeasurementConfig, until: int | None) -> list:
    return list(replay("ann", events, state, settings, make_policy(settings.policy), ConstantSource(),
                       until_micros=until))


def test_a_report_comes_at_the_end_of_the_interval_in_which_its_attempts_run_out():
    settings = config(attempts=2)
    state = DeviceState(settings.new_filters())
    release = (INTERVAL + 2) * DAY  # registered in INTERVAL; its second attempt is INTERVAL + 1
    assert run(EVENTS, state, settings, until=release - 1) == []
    assert state.filters.consumed[FilterId(GLOBAL, 3)] == Fraction(2, 10) * 10**12  # allocated at its first batch
    reports = run([], state, settings, until=release)
    assert [(report.conversion_id, report.histogram, report.dropped_epochs) for report in reports] == [
        ("c1", (70.0,), 0)]
    immediate = dataclasses.replace(settings, scheduling=None)
    assert reports == run(EVENTS, DeviceState(immediate.new_filters()), immediate, until=None)


@pytest.mark.parametrize(("attempts", "histogram", "paid_at"), [(1, (0.0,), 0), (2, (70.0,), 1)])
def test_a_request_waits_for_the_global_budgets_next_release_while_it_has_attempts(attempts, histogram, paid_at):
    """A global budget of 0.3 released in 2 slices: 0.15 in the conversion's interval, all of it the next. The
    request (0.2) does not fit the first slice: on its last attempt it is allocated within it, and its epoch is
    refused; with a second attempt it waits and is paid at the next interval's batch."""
    settings = config(attempts=attempts, releases=2, global_epsilon=Fraction(3, 10))
    state = DeviceState(settings.new_filters())
    first = run(EVENTS, state, settings, until=(INTERVAL + 1) * DAY)
    later = run([], state, settings, until=(INTERVAL + 2) * DAY)
    reports = first + later
    assert [(report.histogram, report.dropped_epochs) for report in reports] == [(histogram, 1 - paid_at)]
    assert [bool(first), bool(later)] == [attempts == 1, attempts == 2]
    assert state.filters.consumed.get(FilterId(GLOBAL, 3), 0) == paid_at * Fraction(2, 10) * 10**12


SCHEDULED = MeasurementConfig(policy="big_bird", global_epsilon=Fraction(2, 5), impression_quota_epsilon=Fraction(3, 10),
                              conversion_quota_epsilon=Fraction(2, 5),
                              scheduling=Scheduling(2 * DAY, attempts=3, releases=6))


def _population(seed: int) -> list:
    """Random devices whose every other request names the impression site (so its quota is public)."""
    impressions, conversions = random_population(seed=seed, devices=6, days=60)
    conversions = [row._replace(attribution_request=row.attribution_request._replace(
        impression_sites=("news.example",))) if index % 2 else row for index, row in enumerate(conversions)]
    return sort_events(impressions + conversions)


def _whole(events: list) -> tuple[list, list]:
    reports, consumed = [], []
    for device in sorted({event.device_id for event in events}):
        state = DeviceState(SCHEDULED.new_filters())
        reports += replay(device, [e for e in events if e.device_id == device], state, SCHEDULED,
                          make_policy("big_bird"), SeededSource(3))
        consumed.append(sorted(state.filters.consumed.items()))
    return reports, consumed


@pytest.mark.parametrize("seed", range(4))
def test_a_replay_cut_anywhere_and_restored_from_its_record_gives_the_whole_replays_reports(seed):
    events = _population(seed)
    expected, consumed = _whole(events)
    assert any(report.dropped_epochs for report in expected)  # the budgets refuse some epochs
    codec = device_codec(SCHEDULED)
    rng = random.Random(seed)
    reports, after = [], []
    for device in sorted({event.device_id for event in events}):
        mine = [event for event in events if event.device_id == device]
        cuts = sorted(rng.sample(range(0, 70 * DAY, MICROS_PER_HOUR), 6))
        record = DeviceRecord(DeviceState(SCHEDULED.new_filters()))
        for cut in cuts:
            chunk = [event for event in mine if record.cut <= event.event_time_micros < cut]
            record.cut = cut
            reports += replay(device, chunk, record.state, SCHEDULED, make_policy("big_bird"), SeededSource(3),
                              until_micros=cut)
            record = codec.decode(codec.encode(record))
        rest = [event for event in mine if event.event_time_micros >= record.cut]
        reports += replay(device, rest, record.state, SCHEDULED, make_policy("big_bird"), SeededSource(3))
        after.append(sorted(record.state.filters.consumed.items()))
    assert reports == expected
    assert after == consumed


def test_scheduling_changes_what_is_paid_on_the_same_events():
    """Not a relabelling of the immediate answers: the same events, answered at once, pay differently."""
    events = _population(0)
    immediate = dataclasses.replace(SCHEDULED, scheduling=None)
    answered = []
    for device in sorted({event.device_id for event in events}):
        answered += replay(device, [e for e in events if e.device_id == device], DeviceState(immediate.new_filters()),
                           immediate, make_policy("big_bird"), SeededSource(3))
    scheduled, _ = _whole(events)
    assert sorted(report.conversion_id for report in answered) == sorted(report.conversion_id for report in scheduled)
    assert [report.charged_units for report in answered] != [report.charged_units for report in scheduled]


def test_epochs_a_scheduled_request_reads_are_kept_past_the_longest_window():
    settings = config(attempts=3)
    state = DeviceState(settings.new_filters())
    run(EVENTS, state, settings, until=CONVERSION_TIME + 1)
    later = CONVERSION_TIME + 200 * DAY  # every window has moved past epoch 3
    assert settings.oldest_reachable_epoch(later) > 3
    assert state.oldest_needed_epoch(settings, later) == 3
    with pytest.raises(ValueError, match="still read by a scheduled request"):
        state.forget_before(4)
    run([], state, settings, until=later)
    assert state.oldest_needed_epoch(settings, later) == settings.oldest_reachable_epoch(later)
    state.forget_before(4)
    assert state.schedule is None  # it kept nothing more: the device can be dropped


def test_a_scheduled_state_is_refused_by_a_job_without_scheduling():
    settings = config(attempts=3)
    record = DeviceRecord(DeviceState(settings.new_filters()))
    run(EVENTS, record.state, settings, until=CONVERSION_TIME + 1)
    data = device_codec(settings).encode(record)
    with pytest.raises(ValueError, match="batched scheduling"):
        device_codec(dataclasses.replace(settings, scheduling=None)).decode(data)


def test_scheduling_applies_to_the_api_policies_without_the_conversion_site_cap():
    with pytest.raises(ValueError, match="applies to the Attribution API's policies"):
        MeasurementConfig(scheduling=Scheduling(DAY))
    with pytest.raises(ValueError, match="conversion-site cap"):
        MeasurementConfig(policy="big_bird", conversion_site_cap=1, scheduling=Scheduling(DAY))
    with pytest.raises(ValueError, match="attempts must be >= 1"):
        Scheduling(DAY, attempts=0)
    assert MeasurementConfig(policy="attribution_api", impression_site_cap=1,
                             scheduling=Scheduling(DAY, 2, 3)).parameters()["scheduling"] == {
        "interval_hours": 24.0, "attempts": 2, "global_releases": 3}
