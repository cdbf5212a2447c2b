"""The columnar batch replay (``frames.replay_frame``) sends exactly what the row replay
(``devices.replay_devices``) sends: on contended hand-made devices (ties, priorities, max reports 0 to 2,
filters, expiries), on generated data with noise off, on and strong, and it leaves most sources out."""
from __future__ import annotations

import random

import pytest

from schemas.codecs import EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER, read_avro
from schemas.frames import sources_frame
from schemas.rows import TriggerSpec
from synthetic.event_level import generate_event_level
from tests.support.event_level_events import per_device, source, split, trigger
from transforms.core.mechanisms.noise import SeededSource
from transforms.event_level.frames import attributable_sources, code_configs, refuse_sources, replay_frame, triggers_frame
from transforms.event_level.mechanisms.devices import SourceCheck, replay_devices

SEED = 5


def both(rows, epsilon):
    sources, triggers = split(rows)
    row_stats, frame_stats = {}, {}
    by_rows = list(replay_devices(per_device(rows), epsilon, SeededSource(SEED), row_stats))
    by_frame = list(replay_frame(sources_frame(sources), triggers, epsilon, SeededSource(SEED), frame_stats))
    assert frame_stats == row_stats
    return by_rows, by_frame


def contended(seed: int) -> list:
    """Devices whose sources compete for the same triggers: a few time slots (ties), priorities 0 and 1, max
    reports 0, 1, 2 or the default, filters from {a, b}, expiries of 1 to 3 days, two destinations."""
    rng = random.Random(seed)
    rows = []
    for d in range(4):
        for i in range(rng.randrange(4, 14)):
            hours = rng.choice((0, 1, 1, 2, 5, 20, 30, 49, 50))
            destination = rng.choice(("https://shop.test", "https://shop.test", "https://other.test"))
            if rng.random() < 0.5:
                rows.append(source(f"c{d}", hours, f"s{i % 5}-{i}", rng.choice(("navigation", "event")),
                                   expiry_days=rng.choice((1, 2, 3)), priority=rng.choice((0, 1)),
                                   filters=rng.sample(("a", "b"), rng.randrange(3)),
                                   max_reports=rng.choice((None, 0, 1, 2)), destination=destination))
            else:
                rows.append(trigger(f"c{d}", hours, f"t{i}", data=rng.randrange(8), value=rng.choice((1, 1, 2, 3)),
                                    filters=rng.sample(("a", "b"), rng.randrange(3)), destination=destination))
    return rows


@pytest.mark.parametrize("epsilon", [None, 14.0, 1.0])
def test_contended_devices_send_what_the_row_replay_sends(epsilon):
    sent = 0
    for seed in range(60):
        by_rows, by_frame = both(contended(seed), epsilon)
        assert by_frame == by_rows, seed
        sent += len(by_rows)
    assert sent > 100  # the devices do report (seeded devices and noise: deterministic, not a statistical bound)


def test_custom_trigger_specs_and_a_source_without_any_trigger():
    specs = (TriggerSpec((3, 9), (86_400, 3 * 86_400), (2, 5, 10)), TriggerSpec((4,), (), ()))
    rows = [
        source("d1", 0, "custom", max_reports=4, matching="exact", specs=specs, expiry_days=10),
        source("d1", 1, "idle", destination="https://nowhere.test"),
        trigger("d1", 2, "t1", data=3, value=3), trigger("d1", 3, "t2", data=9, value=4),
        trigger("d1", 30, "t3", data=4, value=2),
    ]
    by_rows, by_frame = both(rows, None)
    assert by_frame == by_rows and {report.source_id for report in by_frame} == {"custom"}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("event-level")
    generate_event_level(out, sources=6_000, seed=2, progress=False)
    rows = []
    for spec, kind in ((EVENT_LEVEL_SOURCE, "sources"), (EVENT_LEVEL_TRIGGER, "triggers")):
        for path in sorted(out.glob(f"{kind}-*")):
            with open(path, "rb") as handle:
                rows.extend(read_avro(spec, handle, str(path)))
    return rows


@pytest.mark.parametrize("epsilon", [None, 14.0, 2.0])
def test_generated_data_sends_what_the_row_replay_sends(generated, epsilon):
    by_rows, by_frame = both(generated, epsilon)
    assert by_frame == by_rows
    assert by_rows  # the comparison is not vacuous


def test_only_a_few_sources_are_replayed(generated):
    sources, triggers = split(generated)
    coded, configs = code_configs(sources_frame(sources))
    kept = attributable_sources(coded, configs, triggers_frame(triggers))
    # every attributed source is kept, and most idle ones are left out
    assert 0 < kept.len() < len(sources) / 5


def test_refused_configurations_have_the_row_checks_reason():
    good = source("d", 0, "ok")
    rows = [good, source("d", 1, "video", "video"), source("d", 2, "states", max_reports=20), good,
            source("d", 3, "expiry", expiry_days=31), source("d", 4, "gain", "event", max_reports=20)]
    for epsilon in (None, 14.0, 3.0):
        kept, reasons = refuse_sources(sources_frame(rows), epsilon)
        check = SourceCheck(epsilon)
        assert reasons.to_list() == [check(row) for row in rows]
        assert kept.height == sum(check(row) is None for row in rows)
