"""The event-level PTransforms: batch against the plain replay (noise off: the mechanism's client), streaming
(TestStream, shuffled arrival) against batch with seeded noise, dead letters, late events, the portable runner."""
from __future__ import annotations

import random

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from schemas.codecs import EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER, read_avro
from schemas.rows import DeadLetter, EventLevelSource, EventLevelTrigger
from synthetic.event_level import generate_event_level
from tests.support.event_level_events import (
    DAY,
    MINUTE,
    client_replay,
    hand_built,
    per_device,
    random_events,
    source,
    split,
    trigger,
    write_jsonl,
)
from tests.support.streams import milli, shuffled_stream, streaming_options
from transforms.core import device_stream
from transforms.core.device_stream import END_OF_INPUT, replay_devices
from transforms.core.io import DEAD_LETTERS, END_OF_INPUT_MICROS, EventBatch
from transforms.core.mechanisms.noise import SecureSource, SeededSource
from transforms.event_level.mechanisms import devices
from transforms.event_level.mechanisms.devices import SourceCheck
from transforms.event_level.reports import REPORTS, EventLevelReportsBatch, EventLevelReportsStreaming, _DeviceFn

SEED = 11
EPSILON = 1.5  # low enough that many sources are randomized


def expected(rows, epsilon):
    return list(devices.replay_devices(per_device(rows), epsilon, SeededSource(SEED)))


def inputs(tmp_path, rows, source_lines=(), trigger_lines=()):
    sources, triggers = split(rows)
    return (write_jsonl(tmp_path / "sources.jsonl", sources, source_lines),
            write_jsonl(tmp_path / "triggers.jsonl", triggers, trigger_lines))


def test_noiseless_batch_is_the_mechanismsclient_replay(tmp_path):
    rows = hand_built()
    devices = per_device(rows)
    plain = [report for device in sorted(devices) for report in client_replay(devices[device])]
    sources, triggers = inputs(tmp_path, rows)
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | EventLevelReportsBatch(sources, triggers, None, SeededSource(SEED), shards=3)
        assert_that(out[REPORTS] | beam.Map(tuple), equal_to(plain))


def test_batch_dead_letters_invalid_configurations_and_malformed_events(tmp_path):
    rows = hand_built()
    bad = [source("d1", 3, "video", "video"), source("d2", 3, "states", max_reports=20),
           source("d3", 3, "expiry", expiry_days=31)]
    sources, triggers = inputs(tmp_path, rows + bad, source_lines=['{"device_id": "d1"}'],
                               trigger_lines=['{"device_id": "d1", "event_time_micros": 5, "trigger_id": "t", '
                                              '"reporting_origin": "o", "destination": "x", "trigger_data": -2}', "{"])
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | EventLevelReportsBatch(sources, triggers, EPSILON, SeededSource(SEED), shards=2)
        assert_that(out[REPORTS], equal_to(expected(rows, EPSILON)), label="reports")
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda letter: letter.reason), equal_to([
            "unknown_source_type", "too_many_states", "expiry_out_of_range", "missing_field:event_time_micros",
            "negative_value:trigger_data", "malformed_json",
        ]), label="dead")


def test_streaming_with_shuffled_arrival_equals_batch(tmp_path):
    rows = hand_built() + random_events(seed=5)
    want = expected(rows, EPSILON)
    assert any(report.randomized_trigger_rate > 0 for report in want)
    sources, triggers = inputs(tmp_path, rows)
    with TestPipeline(runner="FnApiRunner") as p:  # batch equals the plain replay ...
        out = p | EventLevelReportsBatch(sources, triggers, EPSILON, SeededSource(SEED), shards=4)
        assert_that(out[REPORTS], equal_to(want))
    late = [rows[0]._replace(event_time_micros=rows[0].event_time_micros - MINUTE, source_id="late")]
    # shuffled within six chunks of time; the watermark stops a minute short of each chunk
    stream = shuffled_stream(rows, seed=9, chunks=6, lead_micros=MINUTE, tail_micros=DAY, late=late)
    with TestPipeline(options=streaming_options()) as p:  # ... and so does streaming
        out = p | stream | EventLevelReportsStreaming(EPSILON, SeededSource(SEED))
        assert_that(out[REPORTS], equal_to(want), label="reports")
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda letter: letter.reason), equal_to(["late"]), label="late")


def test_streaming_with_allowed_lateness_takes_a_late_event_in():
    rows = hand_built()
    late = rows[2]  # d1's first trigger, sent after the watermark passed it (by less than the allowed lateness)
    on_time = rows[:2] + rows[3:]
    stream = (TestStream().add_elements(on_time[:2]).advance_watermark_to(milli(late.event_time_micros + MINUTE))
              .add_elements([late] + on_time[2:]).advance_watermark_to(END_OF_INPUT).advance_watermark_to_infinity())
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | EventLevelReportsStreaming(EPSILON, SeededSource(SEED), allowed_lateness_micros=60 * MINUTE)
        assert_that(out[REPORTS], equal_to(expected(rows, EPSILON)), label="reports")
        assert_that(out[DEAD_LETTERS], equal_to([]), label="late")


NEW_AT_END: list = []


class _NewAtEndDeviceFn(_DeviceFn):
    def replay_new(self, devices, fired_micros):
        NEW_AT_END.append((fired_micros, sorted(devices)))
        return super().replay_new(devices, fired_micros)


def test_devices_new_at_the_end_replay_as_batch_does():
    """A topic source's last polls carry the end of input as their watermark, so their devices' events wait for
    the end's firing: those of devices never seen before go to ``_DeviceFn.replay_new`` (the batch path's
    replay) in one call, the others to ``replay``, and together they send what batch sends."""
    early = hand_built() + random_events(seed=5)
    new = [row._replace(device_id=f"new-{row.device_id}", event_time_micros=row.event_time_micros + 40 * DAY)
           for row in random_events(seed=8, devices=10)]
    # a source at the end for a device with state: replayed by ``replay``
    seen = next(row for row in new if type(row) is EventLevelSource)._replace(device_id="d1", source_id="seen")
    watermark = max(row.event_time_micros for row in early) + DAY
    stream = TestStream().add_elements(early).advance_watermark_to(milli(watermark))
    for row_type in (EventLevelSource, EventLevelTrigger):
        last = EventBatch([tuple(row) for row in new + [seen] if type(row) is row_type], END_OF_INPUT_MICROS, row_type)
        stream = stream.add_elements([TimestampedValue(last, Timestamp(micros=watermark))])
    stream = stream.advance_watermark_to(END_OF_INPUT).advance_watermark_to_infinity()
    want = expected(early + new + [seen], EPSILON)
    assert expected(new, EPSILON)  # the new devices report
    NEW_AT_END.clear()
    with TestPipeline(options=streaming_options()) as p:
        out = replay_devices(p | stream, _NewAtEndDeviceFn(EPSILON, SeededSource(SEED), 0), REPORTS)
        assert_that(out[REPORTS], equal_to(want), label="reports")
        assert_that(out[DEAD_LETTERS], equal_to([]), label="late")
    assert NEW_AT_END == [(END_OF_INPUT.micros, sorted({row.device_id for row in new}))]


@pytest.mark.parametrize("epsilon", [EPSILON, None])
def test_replay_new_sends_what_replay_sends_for_devices_without_state(epsilon):
    """The end's one-call replay of new devices (only the sources that may report, s* per configuration) against
    the device-by-device replay of the same devices to the end, with seeded noise (the same s* both ways) and
    with noise off."""
    devices = per_device(hand_built() + random_events(seed=3, devices=40, per_device=12))
    fn = _DeviceFn(epsilon, SeededSource(SEED), 0)
    fn.setup()
    one_call = list(fn.replay_new(devices, END_OF_INPUT.micros))
    fn.before_replays(devices)
    each = []
    for device_id in sorted(devices):
        record = fn.new_record()
        each += fn.replay(device_id, record, record.advance(END_OF_INPUT.micros, devices[device_id]),
                          END_OF_INPUT.micros)
    assert len(each) > 40 and any(report.randomized_trigger_rate > 0 for report in each) == (epsilon is not None)
    assert one_call == each


def sparse_triggers(seed: int, devices: int = 12, days: int = 60) -> list:
    """Devices that see two sources a day (views expiring in 7 days, one in 20 a click expiring in 30) and convert
    seldom (a trigger every 8 days): most sources never take a trigger, as in the generator's model."""
    rng = random.Random(seed)
    rows = []
    for d in range(devices):
        for i in range(2 * days):
            click = rng.random() < 0.05
            rows.append(source(f"h{d}", rng.uniform(0, 24 * days), f"s{i}", "navigation" if click else "event",
                               expiry_days=30 if click else 7, priority=100 if click else 0))
        for i in range(days // 8):
            rows.append(trigger(f"h{d}", rng.uniform(0, 24 * days), f"t{i}", data=rng.randrange(8)))
    return rows


HOLD_EPSILON = 6.0  # views (|O| = 3) nearly all truthful, clicks (|O| = 2,925) mostly randomized
REPLAYS: list = []  # (firing time, the earliest source a replay took), per replay
DRAWN: list = []  # (device id, source id) of every s* drawn


class _HoldingDeviceFn(_DeviceFn):
    """Records its replays and the s* it draws; ``holds`` says whether devices hold truthful sources back; with
    ``reload`` it drops the process's decoded shards before every firing (as a restarted worker would), so that
    the held sources are read back from their pending records."""

    def __init__(self, source, *, holds: bool, reload: bool) -> None:
        super().__init__(HOLD_EPSILON, source, 0)
        self._holds, self._reload = holds, reload

    def _fire(self, key, fired, *state):
        if self._reload:
            device_stream._SHARD_CACHE.clear()
        return super()._fire(key, fired, *state)

    def hold_until(self, record, events, held_before=False):
        return super().hold_until(record, events, held_before) if self._holds else None

    def _choose(self, sources):
        DRAWN.extend((device_id, row.source_id) for device_id, row in sources)
        super()._choose(sources)

    def replay(self, device_id, record, events, fired_micros):
        sources = [event.event_time_micros for event in events if type(event) is EventLevelSource]
        REPLAYS.append((fired_micros, min(sources, default=None)))
        return super().replay(device_id, record, events, fired_micros)


def _held_back_replays(rows: list, source, want: list | None, *, holds: bool, reload: bool) -> tuple[list, list]:
    """The event-level step over ``rows`` in 20 shuffled chunks (nothing late), its reports checked against
    ``want`` (when given); returns the replays (as ``REPLAYS``) and those that took a source an earlier firing had
    passed."""
    REPLAYS.clear()
    DRAWN.clear()
    stream = shuffled_stream(rows, seed=9, chunks=20, lead_micros=MINUTE, tail_micros=DAY)
    with TestPipeline(options=streaming_options()) as p:
        out = replay_devices(p | stream, _HoldingDeviceFn(source, holds=holds, reload=reload), REPORTS)
        if want is not None:
            assert_that(out[REPORTS], equal_to(want), label="reports")
        assert_that(out[DEAD_LETTERS], equal_to([]), label="late")
    firings = sorted({fired for fired, _ in REPLAYS})
    previous = dict(zip(firings[1:], firings[:-1], strict=True))
    return list(REPLAYS), [(fired, earliest) for fired, earliest in REPLAYS
                           if earliest is not None and fired in previous and earliest < previous[fired]]


@pytest.mark.parametrize("reload", [False, True])
def test_devices_hold_their_truthful_sources_until_a_trigger_and_send_the_batch_reports(reload):
    """A device whose new events are truthful sources only is not replayed: it holds them back until a trigger,
    its next window end, the longest expiry or the end. The reports are the batch path's (seeded s*, randomized
    sources among them), with fewer replays than without holding, and some source is replayed by a later firing
    than the first that passed it, which nothing but holding does here (the stream sends nothing late). With
    ``reload`` every firing reads the held sources back from their pending records."""
    rows = sparse_triggers(seed=3)
    want = expected(rows, HOLD_EPSILON)
    sources = [(row.device_id, row) for row in rows if type(row) is EventLevelSource]
    assert len(want) > 50 and any(devices.choose_randomized(sources, HOLD_EPSILON, SeededSource(SEED)))
    holding, held_back = _held_back_replays(rows, SeededSource(SEED), want, holds=True, reload=reload)
    assert held_back
    if not reload:
        replaying, none_held = _held_back_replays(rows, SeededSource(SEED), want, holds=False, reload=False)
        assert not none_held
        assert len(holding) < 0.8 * len(replaying), (len(holding), len(replaying))


@pytest.mark.parametrize("reload", [False, True])
def test_a_held_source_keeps_the_s_star_drawn_as_it_arrived(reload):
    """With the secure source (s* not a function of the source), each source's s* is drawn exactly once, at the
    firing it arrives in, though many are replayed by a later one: drawing a held source's s* again at its replay
    would raise its chance of being randomized."""
    rows = sparse_triggers(seed=4, devices=6)
    _, held_back = _held_back_replays(rows, SecureSource(), None, holds=True, reload=reload)
    assert held_back
    sources = sorted((row.device_id, row.source_id) for row in rows if type(row) is EventLevelSource)
    assert sorted(DRAWN) == sources


def test_portable_runner_loopback(tmp_path):
    rows = hand_built()
    sources, triggers = inputs(tmp_path, rows)
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"])
    with beam.Pipeline(options=options) as p:
        out = p | EventLevelReportsBatch(sources, triggers, EPSILON, SeededSource(SEED), shards=2)
        assert_that(out[REPORTS], equal_to(expected(rows, EPSILON)))


def test_batch_on_generated_avro_with_bad_records_matches_the_row_path(tmp_path):
    """The columnar Avro path: the same reports as the row replay and the same dead letters (reason and
    position) as the row readers with the job's configuration check."""
    generate_event_level(tmp_path, sources=4_000, seed=6, bad_fraction=0.02, shards=2, progress=False)
    check = SourceCheck(EPSILON)
    rows, dead = [], []
    for spec, kind in ((EVENT_LEVEL_SOURCE, "sources"), (EVENT_LEVEL_TRIGGER, "triggers")):
        for path in sorted(tmp_path.glob(f"{kind}-*.avro")):
            with open(path, "rb") as handle:
                for position, item in enumerate(read_avro(spec, handle, str(path))):
                    reason = item.reason if type(item) is DeadLetter else check(item)
                    if reason is None:
                        rows.append(item)
                    else:
                        dead.append((reason, item.source if type(item) is DeadLetter else f"{path}#{position}"))
    assert len(dead) > 50
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | EventLevelReportsBatch(str(tmp_path / "sources-*.avro"), str(tmp_path / "triggers-*.avro"), EPSILON,
                                         SeededSource(SEED), shards=3)
        assert_that(out[REPORTS], equal_to(expected(rows, EPSILON)), label="reports")
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda letter: (letter.reason, letter.source)), equal_to(dead),
                    label="dead")
