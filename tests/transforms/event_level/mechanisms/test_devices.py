"""Event-level reports over rows (``devices``): configurations from source rows and their dead-letter
reasons, keyed and vectorised randomized response, a device's replay against the mechanism's client, and the
client's two additions (a caller's s*, forgetting expired sources)."""
from __future__ import annotations

import pytest

from schemas.rows import EventLevelSource, TriggerSpec
from tests.support.event_level_events import DAY, client_replay, hand_built, per_device, random_events, source, trigger
from transforms.core.mechanisms.noise import SecureSource, SeededSource
from transforms.event_level.mechanisms.client import EventLevelClient, EventSource, EventTrigger
from transforms.event_level.mechanisms.config import ConfigurationError, event_config, navigation_config
from transforms.event_level.mechanisms.devices import (
    EventLevelDevice,
    SourceCheck,
    choose_randomized,
    config_or_reason,
    event_order,
    replay_devices,
    source_config,
)
from transforms.event_level.mechanisms.information_gain import randomized_trigger_rate
from transforms.event_level.mechanisms.outputs import count_outputs, is_output

SECONDS_PER_DAY = DAY // 1_000_000


def test_unset_fields_take_the_source_types_defaults():
    assert source_config(source("d", 0, "s")) == navigation_config()
    assert source_config(source("d", 0, "s", "event", expiry_days=3)) == event_config(3 * SECONDS_PER_DAY)


def test_trigger_specs_give_each_listed_value_its_windows_and_buckets():
    row = source("d", 0, "s", max_reports=2, matching="exact", expiry_days=5,
                 specs=(TriggerSpec((7, 2), (SECONDS_PER_DAY, 9 * SECONDS_PER_DAY), (3, 6)), TriggerSpec((4,), (), ())))
    config = source_config(row)
    assert config.trigger_data_values == (2, 4, 7)
    assert config.spec_for(7).window_ends == (SECONDS_PER_DAY, 5 * SECONDS_PER_DAY)  # clamped to the expiry
    assert config.spec_for(7).summary_buckets == (3, 6)
    assert config.spec_for(4).window_ends == (2 * SECONDS_PER_DAY, 5 * SECONDS_PER_DAY)  # navigation defaults, clamped
    assert config.spec_for(4).summary_buckets == (1, 2)  # 1..M


@pytest.mark.parametrize("changes, reason", [
    (dict(source_type="video"), "unknown_source_type"),
    (dict(expiry_seconds=3600), "expiry_out_of_range"),
    (dict(max_event_level_reports=10**15), "max_reports_out_of_range"),
    (dict(max_event_level_reports=-1), "max_reports_out_of_range"),
    (dict(trigger_data_matching="fuzzy"), "unknown_matching_mode"),
    (dict(trigger_specs=(TriggerSpec((1, 2), (), ()),)), "modulus_needs_values_0_to_n_minus_1"),
    (dict(trigger_specs=(TriggerSpec(tuple(range(40)), (), ()),)), "too_many_trigger_data"),
    (dict(trigger_specs=(TriggerSpec((0,), (), ()), TriggerSpec((0,), (), ()))), "duplicate_trigger_data"),
    (dict(trigger_specs=(TriggerSpec((0,), (5, 3), ()),)), "windows_not_increasing"),
    (dict(trigger_specs=(TriggerSpec((0,), (1, 2, 3, 4, 5, 6), ()),)), "too_many_windows"),
    (dict(trigger_specs=(TriggerSpec((0,), (), (2, 2)),)), "buckets_not_increasing"),
    (dict(trigger_data_matching="exact", trigger_specs=(TriggerSpec((2**40,), (), ()),)), "trigger_data_out_of_range"),
    (dict(max_event_level_reports=20), "too_many_states"),
])
def test_invalid_configurations_give_their_reason(changes, reason):
    row = source("d", 0, "s")._replace(**changes)
    assert config_or_reason(row, 14.0) == reason
    assert SourceCheck(14.0)(row) == reason
    if reason != "too_many_states":  # that one is check_configuration's, at an epsilon
        with pytest.raises(ConfigurationError, match=f"^{reason}:"):
            source_config(row)


def test_information_gain_is_judged_at_the_jobs_epsilon():
    row = source("d", 0, "s", "event", max_reports=3,
                 specs=[TriggerSpec((0, 1, 2, 3), (SECONDS_PER_DAY, 2 * SECONDS_PER_DAY), ())])
    assert SourceCheck(14.0)(row) == "information_gain_too_high"  # |O| = C(11, 3) = 165: 7.4 bits > 6.5
    assert SourceCheck(1.0)(row) is None
    assert SourceCheck(None)(row) is None  # noise off: only the configuration itself
    assert SourceCheck(14.0)(trigger("d", 0, "t")) is None


def test_keyed_choices_do_not_depend_on_how_sources_are_grouped():
    rows = [row for row in random_events(seed=3, devices=8, per_device=12) if type(row) is EventLevelSource]
    pairs = [(row.device_id, row) for row in rows]
    together = choose_randomized(pairs, 1.0, SeededSource(4))
    one_by_one = [choose_randomized([pair], 1.0, SeededSource(4))[0] for pair in reversed(pairs)][::-1]
    assert together == one_by_one
    assert together != choose_randomized(pairs, 1.0, SeededSource(5))
    assert any(choice is None for choice in together) and any(choice is not None for choice in together)
    for (_, row), choice in zip(pairs, together, strict=True):
        assert choice is None or is_output(source_config(row), choice)


def test_choices_at_the_extremes():
    pairs = [("d", source("d", 0, f"s{i}", "event")) for i in range(200)]
    for random_source in (SeededSource(1), SecureSource()):
        # eps = 0: never truthful (Q = 0); every output of O is drawn uniformly (3 outputs here)
        assert all(choice is not None for choice in choose_randomized(pairs, 0.0, random_source))
        # noise off: always truthful
        assert choose_randomized(pairs, None, random_source) == [None] * 200
    secure = choose_randomized(pairs, 0.0, SecureSource())
    # P(one of the 3 outputs never drawn in 200) <= 3 (2/3)^200 < 1e-34
    assert set(secure) == {(0, 0), (0, 1), (1, 0)}


@pytest.mark.parametrize("rows", [hand_built(), random_events(seed=1)], ids=["hand_built", "random"])
def test_noiseless_replay_is_the_mechanisms_client(rows):
    devices = per_device(rows)
    expected = [report for device in sorted(devices) for report in client_replay(devices[device])]
    assert expected  # the inputs do send reports
    assert [tuple(report) for report in replay_devices(devices, None, SeededSource(0))] == expected


def test_seeded_replay_sends_the_chosen_outputs_with_the_rate():
    rows = [source("d", 0, "s", "event"), source("d", 1, "s2", "event"), trigger("d", 2, "t", data=1)]
    stats: dict = {}
    reports = list(replay_devices({"d": rows}, 0.0, SeededSource(2), stats))
    assert stats == {"sources": 2, "randomized_sources": 2}
    rate = randomized_trigger_rate(count_outputs(event_config()), 0.0)
    assert rate == 1.0 and all(report.randomized_trigger_rate == rate for report in reports)
    chosen = choose_randomized([("d", rows[0]), ("d", rows[1])], 0.0, SeededSource(2))
    assert len(reports) == sum(sum(choice) for choice in chosen)


def test_a_device_fed_in_pieces_sends_what_it_sends_in_one_call():
    rows = sorted(random_events(seed=7, devices=1, per_device=30), key=event_order)
    sources = [("r0", row) for row in rows if type(row) is EventLevelSource]
    chosen = choose_randomized(sources, 2.0, SeededSource(8))
    whole = EventLevelDevice(2.0, SeededSource(8))
    expected = whole.feed(rows, chosen) + whole.flush()
    pieces = EventLevelDevice(2.0, SeededSource(8))
    got, position = [], 0
    for cut in sorted({row.event_time_micros for row in rows})[::5] + [None]:
        part = [row for row in rows if row.event_time_micros < cut] if cut is not None else rows
        part = part[position:]
        count = sum(type(row) is EventLevelSource for row in part)
        done = sum(type(row) is EventLevelSource for row in rows[:position])
        got += pieces.feed(part, chosen[done:done + count])
        position += len(part)
        if cut is not None:
            got += pieces.advance_to(cut)
            pieces.forget_expired()
    got += pieces.flush()
    assert got == expected and expected


def test_forget_expired_keeps_attribution_and_pending_windows():
    client = EventLevelClient()
    old = EventSource("old", "x", 0, event_config(SECONDS_PER_DAY))
    new = EventSource("new", "x", DAY // 2, event_config(10 * SECONDS_PER_DAY))
    client.register_source(old)
    client.register_source(new)
    client.advance_to(DAY)
    assert [registered.source.source_id for registered in client.forget_expired()] == ["old"]
    assert [registered.source.source_id for registered in client.sources] == ["new"]
    client.register_trigger(EventTrigger("t", "x", 2 * DAY, 1))
    assert [(r.source_id, r.trigger_data) for r in client.flush()] == [("new", 1)]


def test_register_source_takes_a_callers_choice_only_with_noise_on():
    config = event_config()
    noisy = EventLevelClient(epsilon=1.0, random_source=SeededSource(0))
    noisy.register_source(EventSource("s", "x", 0, config), (0, 1))
    assert [(r.trigger_data, r.summary_bucket) for r in noisy.flush()] == [(1, 1)]
    with pytest.raises(ValueError):
        EventLevelClient().register_source(EventSource("s", "x", 0, config), (0, 1))


def test_event_order_breaks_ties_on_time_kind_and_id_by_the_whole_row():
    """Rows with the same time, kind and id (copies that differ elsewhere) sort by their ``repr``, as a key with
    the ``repr`` made for every row would sort them; rows that differ earlier never need it."""
    rows = random_events(seed=3, devices=3, per_device=30)
    twins = [row._replace(reporting_origin=f"{row.reporting_origin}-{k}") for row in rows[:10] for k in (2, 1)]
    everything = rows + twins

    def eager(row) -> tuple:
        return (*event_order(row)[:3], repr(row))

    assert sorted(everything, key=event_order) == sorted(everything, key=eager)
    assert event_order(twins[0]) != event_order(twins[1]) and event_order(rows[0]) == event_order(rows[0])
