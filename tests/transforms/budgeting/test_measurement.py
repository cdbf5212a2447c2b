"""The measurement PTransforms: batch on hand-built data, streaming (TestStream) against batch, the portable runner."""
from __future__ import annotations

import random
from fractions import Fraction

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from schemas.rows import AttributionReport, Conversion, DeviceEpochBudget, Impression, IncompleteBatch
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_HOUR
from tests.support.measurement_data import (
    conversion,
    impression,
    nike_example,
    random_population,
    request,
    write_jsonl,
)
from tests.support.streams import milli, shuffled_stream, streaming_options
from transforms.budgeting.measurement import (
    BUDGETS,
    INCOMPLETE,
    REPORTS,
    RESULTS,
    MeasureBatch,
    MeasureStreaming,
    _DeviceFn,
)
from transforms.budgeting.mechanisms.bias import BiasDetection
from transforms.budgeting.mechanisms.device import MeasurementConfig, Scheduling
from transforms.budgeting.mechanisms.queries import QueryBatch, execute
from transforms.budgeting.mechanisms.simulation import simulate
from transforms.core import device_stream
from transforms.core.device_stream import END_OF_INPUT, pack_events, replay_devices
from transforms.core.io import DEAD_LETTERS, END_OF_INPUT_MICROS, EventBatch, PackedEvents
from transforms.core.mechanisms.noise import SeededSource

SEED = 7


def budget(device: str, epoch: int, consumed: float) -> DeviceEpochBudget:
    return DeviceEpochBudget("nike.example", device, epoch, consumed, 1.0)


def report_shapes(reports):
    """(query key, histogram) of each report: the report id is random."""
    return sorted((r.query_key, r.histogram) for r in reports)


@pytest.fixture()
def nike_files(tmp_path):
    impressions, conversions = nike_example()
    return write_jsonl(tmp_path / "imps.jsonl", impressions), write_jsonl(tmp_path / "convs.jsonl", conversions)


# (histograms of c0, c1, c2; budget rows) per policy, computed by hand (see tests/support/measurement_data.py).
NIKE_EXPECTED = {
    "cookie_monster": (
        [(100.0, 0.0), (0.0, 70.0), (0.0, 0.0)],
        [budget("ann", 0, 1.0), budget("ann", 1, 0.35), budget("ann", 2, 0.0), budget("ann", 3, 0.0)]
        + [budget("bob", e, 0.0) for e in range(-1, 4)],
    ),
    # Every epoch of c1's window must pay 0.5; epoch 0 cannot, so nothing is paid and c1 carries zeros.
    "ara_like": (
        [(100.0, 0.0), (0.0, 0.0), (0.0, 0.0)],
        [budget("ann", 0, 1.0)] + [budget("ann", e, 0.0) for e in range(1, 4)]
        + [budget("bob", e, 0.5) for e in range(-1, 4)],
    ),
    # No device budget: c1 sees both impressions (35 each). The one full batch (c0, c1; B = 2) pays
    # min(1, 0.5) = 0.5 centrally on epochs 0..3; bob's report waits for a second report.
    "ipa_like": (
        [(100.0, 0.0), (35.0, 35.0), (0.0, 0.0)],
        [budget("ann", e, 0.5) for e in range(4)] + [budget("bob", -1, 0.0)] + [budget("bob", e, 0.5) for e in range(4)],
    ),
}


@pytest.mark.parametrize("policy", sorted(NIKE_EXPECTED))
def test_batch_gives_the_hand_computed_reports_budgets_and_queries(policy, nike_files):
    histograms, budgets = NIKE_EXPECTED[policy]
    config = MeasurementConfig(policy=policy)
    source = SeededSource(SEED)
    # The one full batch: ann's two reports, in conversion-time order.
    batch = QueryBatch(
        "nike.example", "q", 0, (22 * MICROS_PER_DAY, "ann", "c1"), 2,
        (histograms[0][0] + histograms[1][0], histograms[0][1] + histograms[1][1]), 0.5, 100.0, (0, 1, 2, 3),
    )
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | MeasureBatch(*nike_files, config, source, batch_size=2, emit_budgets=True)
        assert_that(out[REPORTS] | beam.Map(lambda r: (r.query_key, r.histogram)),
                    equal_to([("q", h) for h in histograms]), label="reports")
        assert_that(out[BUDGETS], equal_to(budgets), label="budgets")
        assert_that(out[RESULTS], equal_to([execute(batch, SeededSource(SEED))]), label="results")
        assert_that(out[INCOMPLETE], equal_to([IncompleteBatch("nike.example", "q", 1)]), label="incomplete")
        assert_that(out[DEAD_LETTERS], equal_to([]), label="no_dead_letters")


def test_reports_have_a_fixed_shape_and_carry_nothing_about_budgets(nike_files):
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | MeasureBatch(*nike_files, MeasurementConfig(), SeededSource(SEED), batch_size=2)
        shapes = out[REPORTS] | beam.Map(lambda r: (type(r) is AttributionReport, len(r.histogram), r.requested_epsilon))
        assert_that(shapes, equal_to([(True, 2, 1.0), (True, 2, 0.5), (True, 2, 0.5)]))


def test_invalid_conversions_become_dead_letters_and_the_rest_goes_on(tmp_path):
    impressions, conversions = nike_example()
    too_long = conversions[2]._replace(
        conversion_id="long", attribution_request=conversions[2].attribution_request._replace(window_days=120)
    )
    paths = write_jsonl(tmp_path / "i.jsonl", impressions), write_jsonl(tmp_path / "c.jsonl", [*conversions, too_long])
    with open(paths[1], "a") as handle:
        handle.write('{"device_id": "x"\n')
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | MeasureBatch(*paths, MeasurementConfig(), SeededSource(SEED), batch_size=2)
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda d: d.reason), equal_to(["window_too_long", "malformed_json"]),
                    label="reasons")
        assert_that(out[REPORTS] | beam.combiners.Count.Globally(), equal_to([3]), label="reports")


# Policies, and Appendix D bias detection on the on-device ones (Thm. 15 with heartbeats, Thm. 16 without).
CONFIGS = {
    "cookie_monster": MeasurementConfig(policy="cookie_monster"),
    "ara_like": MeasurementConfig(policy="ara_like"),
    "ipa_like": MeasurementConfig(policy="ipa_like"),
    "cookie_monster+bias": MeasurementConfig(bias=BiasDetection(Fraction(1, 2), heartbeats=True)),
    "ara_like+bias": MeasurementConfig(policy="ara_like", bias=BiasDetection(Fraction(2), count="reports")),
    # the Attribution API's budgets, tight enough that the global budget and the quotas refuse some epochs
    "attribution_api": MeasurementConfig(policy="attribution_api", global_epsilon=Fraction(3, 5),
                                         impression_quota_epsilon=Fraction(2, 5)),
    "big_bird": MeasurementConfig(policy="big_bird", global_epsilon=Fraction(1), impression_quota_epsilon=Fraction(4, 5),
                                  conversion_quota_epsilon=Fraction(1, 2), impression_site_cap=1, conversion_site_cap=1),
    # Big Bird's batched scheduling: reports held for up to 3 two-day intervals, the global budget released in 6
    "big_bird+scheduling": MeasurementConfig(policy="big_bird", global_epsilon=Fraction(2, 5),
                                             impression_quota_epsilon=Fraction(3, 10),
                                             scheduling=Scheduling(2 * MICROS_PER_DAY, attempts=3, releases=6)),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batch_equals_the_in_memory_reference(name, tmp_path):
    impressions, conversions = random_population(seed=4)
    config = CONFIGS[name]
    expected = simulate(impressions + conversions, config, SeededSource(SEED), 3)
    assert expected.reports and expected.results and expected.budgets
    assert all((r.bias_bound is not None) == (config.bias is not None) for r in expected.results)
    paths = write_jsonl(tmp_path / "i.jsonl", impressions), write_jsonl(tmp_path / "c.jsonl", conversions)
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | MeasureBatch(*paths, config, SeededSource(SEED), 3, emit_budgets=True, shards=4)
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        assert_that(out[RESULTS], equal_to(expected.results), label="results")
        assert_that(out[BUDGETS], equal_to(expected.budgets), label="budgets")
        assert_that(out[INCOMPLETE], equal_to(expected.incomplete), label="incomplete")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_streaming_with_out_of_order_events_equals_batch(name):
    """Batch equals the reference (above), so streaming equal to the reference is streaming equal to batch."""
    impressions, conversions = random_population(seed=3)
    config = CONFIGS[name]
    expected = simulate(impressions + conversions, config, SeededSource(SEED), 3)
    assert expected.reports and expected.results and expected.budgets
    late = [impressions[0]._replace(impression_id="late-one")]
    stream = shuffled_stream(impressions + conversions, seed=5, chunks=5, lead_micros=MICROS_PER_DAY,
                             tail_micros=400 * MICROS_PER_DAY, late=late)
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | MeasureStreaming(
            config, SeededSource(SEED), 3, emit_budgets=True
        )
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        assert_that(out[RESULTS], equal_to(expected.results), label="results")
        assert_that(out[BUDGETS], equal_to(expected.budgets), label="budgets")
        assert_that(out[INCOMPLETE], equal_to(expected.incomplete), label="incomplete")
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda d: d.reason), equal_to(["late"]), label="late")


def test_portable_runner_loopback(nike_files):
    histograms, budgets = NIKE_EXPECTED["cookie_monster"]
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"])
    with beam.Pipeline(options=options) as p:
        out = p | MeasureBatch(*nike_files, MeasurementConfig(), SeededSource(SEED), batch_size=2, emit_budgets=True)
        assert_that(out[REPORTS] | beam.Map(lambda r: r.histogram), equal_to(histograms), label="reports")
        assert_that(out[BUDGETS], equal_to(budgets), label="budgets")


def test_budget_rows_sum_to_the_exact_charges(nike_files):
    # 0.35 is 0.5 * 70 / 100 in exact units: the float row is the nearest double to the exact Fraction.
    _, budgets = NIKE_EXPECTED["cookie_monster"]
    assert budgets[1].consumed_epsilon == float(Fraction(1, 2) * Fraction(70, 100))


@pytest.mark.parametrize("lateness_days", [1, 0])
def test_streaming_allowed_lateness(lateness_days):
    """ann also has an unrelated impression at day 8.2; the watermark passes day 8.5 before I2 (day 8) arrives.
    With a day of allowed lateness ann has not replayed past day 8 yet and I2 counts; without, her day-8.2
    impression was replayed when the watermark passed it, so I2 is a dead letter ``late``."""
    impressions, conversions = nike_example()
    other = impression("ann", 8.2, "I3", "zz")
    config = MeasurementConfig()
    straggler = impressions[1]  # I2, the impression ann's c1 is attributed to
    rows = sorted([impressions[0], other, *conversions], key=lambda row: row.event_time_micros)
    stream = (
        TestStream()
        .add_elements(rows[:3])  # I1 (day 1), c0 (day 2), I3 (day 8.2)
        .advance_watermark_to(milli(int(8.5 * MICROS_PER_DAY)))
        .add_elements([straggler])
        .add_elements(rows[3:])
        .advance_watermark_to(milli(400 * MICROS_PER_DAY))
        .advance_watermark_to(END_OF_INPUT)
        .advance_watermark_to_infinity()
    )
    kept = [*rows, straggler] if lateness_days else rows
    expected = simulate(kept, config, SeededSource(SEED), 2)
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | MeasureStreaming(
            config, SeededSource(SEED), 2, allowed_lateness_micros=lateness_days * MICROS_PER_DAY
        )
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        assert_that(out[RESULTS], equal_to(expected.results), label="results")
        late = [] if lateness_days else ["late"]
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda d: d.reason), equal_to(late), label="late")


def test_streaming_releases_a_scheduled_report_when_the_watermark_passes_its_interval():
    """Batched scheduling with daily intervals and 2 attempts: a conversion on day 23 is released at the end of
    day 24, by a firing then (its device wakes for it), not at the end of the input."""
    config = MeasurementConfig(policy="big_bird", scheduling=Scheduling(MICROS_PER_DAY, attempts=2))
    rows = [impression("ann", 22.5, "I1"), conversion("ann", 23.25, "c1", 40.0, request())]
    release = 25 * MICROS_PER_DAY
    stream = (TestStream().add_elements(rows).advance_watermark_to(milli(30 * MICROS_PER_DAY))
              .advance_watermark_to(END_OF_INPUT).advance_watermark_to_infinity())
    expected = simulate(rows, config, SeededSource(SEED), 1)
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | MeasureStreaming(config, SeededSource(SEED), 1)
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        timed = out[REPORTS] | beam.Map(lambda report, at=beam.DoFn.TimestampParam: at.micros)
        assert_that(timed, equal_to([release]), label="released at the end of day 24")


def test_the_streaming_device_step_cut_anywhere_gives_the_batch_reports_and_drops_what_it_no_longer_needs():
    """The streaming step's replay of each device (its epochs expired and their budget rows emitted, its schedule
    forgotten when idle) over random cuts across 200 days, its record written and read back at each, then the end of
    the input: the reference's reports and budget rows, and nothing kept at the end."""
    config = CONFIGS["big_bird+scheduling"]
    impressions, conversions = random_population(seed=6)
    events = impressions + conversions
    expected = simulate(events, config, SeededSource(SEED), 3)
    step = _DeviceFn(config, SeededSource(SEED), 3, emit_budgets=True, lateness_micros=0)
    step.setup()
    rng = random.Random(2)
    reports, budgets = [], []
    for device in sorted({event.device_id for event in conversions}):
        mine = [event for event in events if event.device_id == device]
        record = step.new_record()
        for cut in [*sorted(rng.sample(range(0, 200 * MICROS_PER_DAY, MICROS_PER_HOUR), 8)), END_OF_INPUT_MICROS]:
            arriving = [event for event in mine if record.cut <= event.event_time_micros < cut]
            for output in step.replay(device, record, record.advance(cut, arriving), cut):
                if isinstance(output, beam.pvalue.TaggedOutput):
                    budgets.append(output.value)
                else:
                    reports.append(output)
            record = step.codec.decode(step.codec.encode(record))
        device_state = record.state
        assert device_state.schedule is None and not device_state.filters.consumed and not device_state.impressions
    assert sorted(reports) == sorted(expected.reports)
    assert sorted(budgets) == sorted(expected.budgets)


def _packed(poll: list, watermark_micros: int) -> list:
    """A poll's rows as a topic source sends them: one ``PackedEvents`` per row type, timestamped with its
    earliest event, carrying the source's watermark."""
    elements = []
    for row_type in sorted({type(row) for row in poll}, key=lambda kind: kind.__name__):
        mine = [row for row in poll if type(row) is row_type]
        element = PackedEvents(pack_events(row_type, [tuple(row) for row in mine]), watermark_micros, row_type)
        elements.append(TimestampedValue(element, Timestamp(micros=min(row.event_time_micros for row in mine))))
    return elements


def _packed_polls(rows: list, chunks: int, lead_micros: int, tail_micros: int) -> TestStream:
    """``rows`` in time order cut into about ``chunks`` polls, each sent as a topic source packs it
    (``PackedEvents``, one per row type, with the watermark at the poll's latest event); the watermark passes
    a poll ``lead_micros`` before the next one's first event, and ``tail_micros`` past the last one."""
    rows = sorted(rows, key=lambda row: row.event_time_micros)
    stream = TestStream()
    step = max(1, len(rows) // chunks)
    for start in range(0, len(rows), step):
        poll = rows[start:start + step]
        stream = stream.add_elements(_packed(poll, poll[-1].event_time_micros))
        following = rows[start + step:start + step + 1]
        if following:
            stream = stream.advance_watermark_to(milli(following[0].event_time_micros - lead_micros))
    stream = stream.advance_watermark_to(milli(rows[-1].event_time_micros + tail_micros))
    return stream.advance_watermark_to(END_OF_INPUT).advance_watermark_to_infinity()


def test_streaming_from_polls_packed_by_the_source_equals_batch():
    """A topic source's polls, packed in its process as the device step's records, give the batch outputs."""
    impressions, conversions = random_population(seed=4)
    config = CONFIGS["cookie_monster"]
    expected = simulate(impressions + conversions, config, SeededSource(SEED), 3)
    assert expected.reports and expected.results
    stream = _packed_polls(impressions + conversions, chunks=4, lead_micros=MICROS_PER_DAY,
                           tail_micros=400 * MICROS_PER_DAY)
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | MeasureStreaming(config, SeededSource(SEED), 3, emit_budgets=True)
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        assert_that(out[RESULTS], equal_to(expected.results), label="results")
        assert_that(out[BUDGETS], equal_to(expected.budgets), label="budgets")
        assert_that(out[DEAD_LETTERS], equal_to([]), label="no dead letters")


FIRED: list[int] = []  # the firing times of _CountedDeviceFn, in this process (the DirectRunner runs here)


class _CountedDeviceFn(_DeviceFn):
    def _fire(self, key, fired, *state):
        FIRED.append(fired)
        return super()._fire(key, fired, *state)


def test_once_every_source_has_ended_the_end_of_input_takes_what_is_left_in_one_firing():
    """After the last poll's watermark, the sources send their end (a batch with the end of input as watermark):
    the devices due only to expire epochs later are not replayed in a firing of their own, the end's firing takes
    them, and the outputs (epoch budget rows included) are the batch path's."""
    impressions, conversions = random_population(seed=4)
    rows = impressions + conversions
    config = CONFIGS["cookie_monster"]
    expected = simulate(rows, config, SeededSource(SEED), 3)
    last = max(row.event_time_micros for row in rows)
    stream = TestStream().add_elements(_packed(rows, last)).advance_watermark_to(milli(last))
    for row_type in (Conversion, Impression):
        ended = EventBatch([], END_OF_INPUT_MICROS, row_type)
        stream = stream.add_elements([TimestampedValue(ended, Timestamp(micros=last))])
    stream = stream.advance_watermark_to(END_OF_INPUT).advance_watermark_to_infinity()
    FIRED.clear()
    with TestPipeline(options=streaming_options()) as p:
        out = replay_devices(p | stream, _CountedDeviceFn(config, SeededSource(SEED), 3, True, 0), REPORTS, BUDGETS,
                             RESULTS, INCOMPLETE)
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        assert_that(out[RESULTS], equal_to(expected.results), label="results")
        assert_that(out[BUDGETS], equal_to(expected.budgets), label="budgets")
    assert FIRED[-1] == END_OF_INPUT.micros
    assert all(fired <= milli(last).micros for fired in FIRED[:-1]), FIRED  # no firing between the last poll and the end


REPLAYS: list = []  # (firing time, the earliest impression a replay took), per replay


class _HoldingDeviceFn(_DeviceFn):
    """Records its replays; ``holds`` overrides whether devices hold impressions back; with ``reload`` it drops the
    process's decoded shards before every firing (as a restarted worker would), so that the held events are read
    back from their pending records."""

    def __init__(self, config: MeasurementConfig, *, holds: bool, reload: bool) -> None:
        super().__init__(config, SeededSource(SEED), 3, True, 0)
        self._holds, self._reload = holds, reload

    def _fire(self, key, fired, *state):
        if self._reload:
            device_stream._SHARD_CACHE.clear()
        return super()._fire(key, fired, *state)

    def replay(self, device_id, record, events, fired_micros):
        impressions = [event.event_time_micros for event in events if type(event) is Impression]
        REPLAYS.append((fired_micros, min(impressions, default=None)))
        return super().replay(device_id, record, events, fired_micros)


def _held_back_replays(config: MeasurementConfig, rows: list, expected, *, holds: bool, reload: bool) -> tuple[list, list]:
    """The measurement step over ``rows`` in 15 shuffled chunks (nothing late): checks the outputs against the
    batch path's (``expected``); returns the replays (as ``REPLAYS``) and those that took an impression an earlier
    firing had passed."""
    REPLAYS.clear()
    stream = shuffled_stream(rows, seed=9, chunks=15, lead_micros=MICROS_PER_HOUR, tail_micros=MICROS_PER_DAY)
    with TestPipeline(options=streaming_options()) as p:
        out = replay_devices(p | stream, _HoldingDeviceFn(config, holds=holds, reload=reload), REPORTS, BUDGETS,
                             RESULTS, INCOMPLETE)
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        assert_that(out[RESULTS], equal_to(expected.results), label="results")
        assert_that(out[BUDGETS], equal_to(expected.budgets), label="budgets")
        assert_that(out[INCOMPLETE], equal_to(expected.incomplete), label="incomplete")
    firings = sorted({fired for fired, _ in REPLAYS})
    previous = dict(zip(firings[1:], firings[:-1], strict=True))
    return list(REPLAYS), [(fired, earliest) for fired, earliest in REPLAYS
                           if earliest is not None and fired in previous and earliest < previous[fired]]


def test_devices_hold_their_impressions_until_a_conversion_and_give_the_batch_outputs():
    """A device that only sees impressions is not replayed: it holds them back until its next conversion, its wake
    or the end. The outputs are the batch path's (epoch budget rows included), with fewer replays than without
    holding, and some impression is replayed by a later firing than the first that passed it, which nothing but
    holding does here (the stream sends nothing late)."""
    impressions, conversions = random_population(seed=8, devices=20, days=200)
    rows, config = impressions + conversions, CONFIGS["cookie_monster"]
    expected = simulate(rows, config, SeededSource(SEED), 3)
    holding, held_back = _held_back_replays(config, rows, expected, holds=True, reload=False)
    assert held_back
    replaying, none_held = _held_back_replays(config, rows, expected, holds=False, reload=False)
    assert not none_held
    assert len(holding) < len(replaying), (len(holding), len(replaying))


def test_held_impressions_read_back_from_their_records_give_the_batch_outputs():
    """As above, with the process's decoded shard dropped before every firing (a restarted worker): each firing
    reads the held events back from their pending records, and the devices take the cuts they held them at."""
    impressions, conversions = random_population(seed=8, devices=20, days=200)
    rows, config = impressions + conversions, CONFIGS["cookie_monster"]
    expected = simulate(rows, config, SeededSource(SEED), 3)
    _, held_back = _held_back_replays(config, rows, expected, holds=True, reload=True)
    assert held_back


def _polls(polls: list) -> TestStream:
    """``(rows, day)`` polls as a topic source sends them: every input's watermark at the day with each poll, so that
    one firing takes all the poll's events."""
    stream = TestStream()
    for poll, day in polls:
        watermark = day * MICROS_PER_DAY
        stream = stream.add_elements([*_packed(poll, watermark), *(
            TimestampedValue(EventBatch([], watermark, row_type), Timestamp(micros=watermark))
            for row_type in {Impression, Conversion} - {type(row) for row in poll})]).advance_watermark_to(milli(watermark))
    return stream.advance_watermark_to(END_OF_INPUT).advance_watermark_to_infinity()


def _check_held_replays(stream: TestStream, config: MeasurementConfig, expected, dead_letters: list, *,
                        reload: bool) -> None:
    """The measurement step over ``stream``, holding (``reload``: the shard read back before every firing): its
    reports and budgets are ``expected``'s, its dead letters ``dead_letters`` ((reason, source) pairs); the replays
    are left in ``REPLAYS``."""
    REPLAYS.clear()
    with TestPipeline(options=streaming_options()) as p:
        out = replay_devices(p | stream, _HoldingDeviceFn(config, holds=True, reload=reload), REPORTS, BUDGETS,
                             RESULTS, INCOMPLETE)
        assert_that(out[REPORTS], equal_to([r.public() for r in expected.reports]), label="reports")
        assert_that(out[BUDGETS], equal_to(expected.budgets), label="budgets")
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda d: (d.reason, d.source)), equal_to(dead_letters),
                    label="dead letters")


def test_a_late_impression_beside_held_ones_is_not_held_when_the_shard_is_read_back():
    """A held device's record keeps the rows of the pending records its firing took whole, with the events of other
    devices, which the read-back skips as behind their cuts. ann replays c0 (her stored cut: day 3), then holds I2
    (day 10, held at day 11). L (day 7.5) comes late, behind the day-11 cut she holds at but not behind her stored cut,
    in the firing where she holds I3: that firing's held record is then made of her admitted events alone, or the
    read-back would hold L again. With the shard read back before every firing, c1 (first touch) takes I2 and I3, L
    is a ``late`` dead letter, and the outputs are the batch path's without L (with it, c1 would credit L)."""
    config = MeasurementConfig()
    first = [impression("ann", 1, "I1", "a1"),
             conversion("ann", 2, "c0", 100.0, request(first_epoch=0, last_epoch=0, requested_epsilon=1.0))]
    held = [impression("ann", 10, "I2", "a1"), impression("ann", 12, "I3", "a1")]
    late = impression("ann", 7.5, "L", "a2")
    c1 = conversion("ann", 14, "c1", 70.0, request(logic="first_touch", report_global_sensitivity=70.0))
    stream = _polls([(first, 3), (held[:1], 11), ([late, held[1]], 13), ([c1], 15)])
    expected = simulate([*first, *held, c1], config, SeededSource(SEED), 3)
    assert expected.reports and expected.reports != simulate([*first, late, *held, c1], config, SeededSource(SEED),
                                                             3).reports
    _check_held_replays(stream, config, expected, [("late", "device ann")], reload=True)
    earliest = [impression_time for _, impression_time in REPLAYS if impression_time is not None]
    assert earliest == [MICROS_PER_DAY, 10 * MICROS_PER_DAY], REPLAYS  # I1 with c0; I2 and I3, not L, with c1


@pytest.mark.parametrize("reload", [False, True], ids=["shard kept", "shard read back before every firing"])
def test_new_devices_hold_and_drop_the_impressions_no_conversion_can_read_any_more_unreplayed(reload):
    """bob, cat and dan are new to the shard and see impressions only: they hold them from their first firing
    (each is written as a new device with the cut it had, so that a shard read back holds them again). At their
    deadline (a longest window, 90 days, after the earliest), bob, with I100 arriving, drops I1 and I2, which no
    conversion from day 100 on can read, and goes on holding I60 and I100 unreplayed: that firing records I60 again,
    and dan, who holds D60, keeps I60's first record too (read back, I60 is held once). cat, with nothing kept and
    nothing arriving, is replayed, which drops C1 and the device. dan at his deadline (day 150) keeps D60, which a
    conversion that day could read, for a window more. So the only replays that take impressions are cat's at day
    101 (C1), bob's with his conversion (I60 first) and dan's at day 240 (D60, dropped). The outputs are the batch
    path's."""
    config = MeasurementConfig()
    bob = [impression("bob", day, f"I{day}", campaign) for day, campaign in ((1, "a1"), (2, "a1"), (60, "a2"), (100, "a1"))]
    cat, dan = impression("cat", 1, "C1", "a2"), impression("dan", 60, "D60", "a2")
    c = conversion("bob", 120, "c", 60.0, request(window_days=90, logic="equal_credit"))
    stream = _polls([([*bob[:2], cat], 3), ([bob[2], dan], 61), (bob[3:], 101), ([c], 121)])
    expected = simulate([*bob, cat, dan, c], config, SeededSource(SEED), 3)
    assert [report.histogram for report in expected.reports] == [(30.0, 30.0)]  # equal credit: I60 once, I100
    _check_held_replays(stream, config, expected, [], reload=reload)
    taking = [(fired // MICROS_PER_DAY, earliest // MICROS_PER_DAY) for fired, earliest in REPLAYS if earliest]
    # read back, dan's deadline is asked again (``hold_until``: day 150, passed), and bob's wake at day 215 takes him
    assert taking == [(101, 1), (121, 60), (215 if reload else 240, 60)], REPLAYS  # the others: bob's wakes
