"""The event-level PTransforms: batch against the plain replay (noise off: the mechanism's client), streaming
(TestStream, shuffled arrival) against batch with seeded noise, dead letters, late events, the portable runner."""
from __future__ import annotations

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
    write_jsonl,
)
from tests.support.streams import milli, shuffled_stream, streaming_options
from transforms.core.device_stream import END_OF_INPUT, replay_devices
from transforms.core.io import DEAD_LETTERS, END_OF_INPUT_MICROS, EventBatch
from transforms.core.mechanisms.noise import SeededSource
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
