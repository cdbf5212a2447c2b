"""The k-anonymity PTransform: batch, streaming (TestStream) and the portable runner."""
from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to

from schemas.rows import DeadLetter, JoinEvent, KAnonVerdict
from schemas.time_units import MICROS_PER_HOUR, MICROS_PER_SECOND
from tests.support.naive_kanon import naive_changes, naive_verdicts
from tests.support.sources import ConstantSource
from tests.support.streams import streaming_options
from transforms.core.mechanisms.noise import SeededSource, TruncatedLaplace
from transforms.kanon.mechanisms.above_threshold import AboveThreshold, AboveThresholdWithPeriodicRestart
from transforms.kanon.mechanisms.group_replay import KAnonParameters
from transforms.kanon.verdicts import KAnonymityVerdicts

NOISE = TruncatedLaplace(epsilon=2.0, delta=0.1)  # A = 1.75
BASE_STEP = 491_904  # a multiple of both 4 and 168 hours since the epoch (2026-02-12)


def parameters(k: int = 5, w: int = 4, emit: str = "changes") -> KAnonParameters:
    at = AboveThreshold(k=k, window_steps=w, threshold_noise=NOISE, step_noise=NOISE)
    return KAnonParameters(mechanism=AboveThresholdWithPeriodicRestart(at), emit=emit)


def join(group: str, user: str, step: int, minute: int = 0) -> JoinEvent:
    return JoinEvent(group, user, (BASE_STEP + step) * MICROS_PER_HOUR + minute * 60 * MICROS_PER_SECOND)


# Group "g": duplicates (same user, same hour), a user rejoining in another hour, out of order.
HAND_BUILT = [
    join("g", "c", 0, 50), join("g", "a", 0, 1), join("g", "a", 0, 59), join("g", "b", 0, 2),
    join("g", "d", 1), join("g", "a", 1),
    join("g", "e", 2, 30),
    join("g", "a", 5),
    *[join("g", u, 9, i) for i, u in enumerate("fghij")],
    join("small", "a", 3), join("small", "b", 3), join("small", "a", 6),
    *[join("big", f"u{i}", 1) for i in range(12)],
]


def verdict(group: str, step: int, anonymous: bool, w: int = 4) -> KAnonVerdict:
    s = BASE_STEP + step
    return KAnonVerdict(group, s, s * MICROS_PER_HOUR, anonymous, (s // w) * w)


def test_batch_without_noise_gives_the_hand_computed_verdicts():
    # Distinct users per window (w = 4) for g: c_0 = 3, c_1 = 4, c_2 = 5 -> latch; restart at 4: c_4 = 3 (a, d, e
    # are in [1, 4]); a at 5; restart at 8: c_8 = 1; c_9 = 5 (f..j; a's join at 5 left [6, 9]) -> latch; restart at
    # 12: c_12 = 5 -> latch again; restart at 16: empty -> false. "small" never reaches 5; "big" latches at once.
    expected = [
        verdict("g", 2, True), verdict("g", 4, False), verdict("g", 9, True), verdict("g", 16, False),
        verdict("big", 1, True), verdict("big", 8, False),  # big: still in [1, 4] at the restart at 4
    ]
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(HAND_BUILT) | KAnonymityVerdicts(parameters(), ConstantSource())
        assert_that(out["verdicts"], equal_to(expected), label="verdicts")
        assert_that(out["dead_letters"], equal_to([]), label="no_dead_letters")


def literal_verdicts(joins: list[JoinEvent], source, emit: str = "changes") -> list[KAnonVerdict]:
    """What the literal Alg. 1 (tests/support/naive_kanon.py) releases for these joins, k = 5, w = 4."""
    by_group: dict[str, dict[int, set[str]]] = {}
    for j in joins:
        by_group.setdefault(j.interest_group, {}).setdefault(j.event_time_micros // MICROS_PER_HOUR, set()).add(j.user_id)
    expected = []
    for group, steps in by_group.items():
        naive = naive_verdicts(steps, 5, 4, NOISE, source, group, max(steps) + 9)
        if emit == "changes":
            expected += [verdict(group, t - BASE_STEP, anonymous) for t, anonymous in naive_changes(naive)]
        else:
            expected += [verdict(group, t - BASE_STEP, anonymous) for t, (anonymous, count) in naive.items() if count]
    return expected


@pytest.mark.parametrize("emit", ["changes", "all"])
def test_batch_with_seeded_noise_matches_the_literal_algorithm(emit):
    source = SeededSource(11)
    expected = literal_verdicts(HAND_BUILT, source, emit)
    assert any(v.k_anonymous for v in expected), "the seed should produce a positive verdict"
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(HAND_BUILT) | KAnonymityVerdicts(parameters(emit=emit), source)
        assert_that(out["verdicts"], equal_to(expected))


@pytest.mark.parametrize("window", [168, 720])
def test_batch_long_windows_latch_and_restart_on_the_week_and_month_grid(window):
    # 60 users in one hour: far above k = 50 + noise at w = 168 and w = 720 (the window Protected Audience uses).
    noise = TruncatedLaplace(epsilon=1.0, delta=1e-6)  # A = 13.1, 2A = 26.2 < 50
    at = AboveThreshold(k=50, window_steps=window, threshold_noise=noise, step_noise=noise)
    params = KAnonParameters(mechanism=AboveThresholdWithPeriodicRestart(at))
    first = (BASE_STEP // window + 1) * window  # an instance start
    joins = [JoinEvent("ig", f"u{i}", (first + 5) * MICROS_PER_HOUR) for i in range(60)]
    expected = [
        KAnonVerdict("ig", first + 5, (first + 5) * MICROS_PER_HOUR, True, first),
        # the 60 users stay in the window until first + 5 + w - 1, past the restart at first + w: latch again;
        # at first + 2w the window is empty: fall back to false.
        KAnonVerdict("ig", first + 2 * window, (first + 2 * window) * MICROS_PER_HOUR, False, first + 2 * window),
    ]
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(joins) | KAnonymityVerdicts(params, SeededSource(5))
        assert_that(out["verdicts"], equal_to(expected))


def _timestamped(j: JoinEvent):
    return beam.window.TimestampedValue(j, j.event_time_micros / MICROS_PER_SECOND)


def _watermark_at(step: int, lateness_micros: int = 0) -> float:
    """Seconds just past the end of ``step`` plus the lateness: step is final from here."""
    return ((BASE_STEP + step + 1) * MICROS_PER_HOUR + lateness_micros) / MICROS_PER_SECOND


@pytest.mark.parametrize("emit", ["changes", "all"])
def test_streaming_equals_batch_with_out_of_order_joins_and_dead_letters_late_ones(emit):
    lateness = 30 * 60 * MICROS_PER_SECOND  # 30 minutes
    params = parameters(emit=emit)
    source = SeededSource(4)
    on_time = list(HAND_BUILT)
    late = join("g", "zz", 0, 10)
    # Arrival order: reversed within each batch; the watermark advances between batches.
    stream = TestStream().add_elements([_timestamped(j) for j in reversed(on_time[:6])])
    stream = stream.add_elements([_timestamped(j) for j in reversed(on_time[6:])])
    stream = stream.advance_watermark_to(_watermark_at(2, lateness))
    stream = stream.add_elements([_timestamped(late)])  # step 0 is final: late
    stream = stream.advance_watermark_to(_watermark_at(40, lateness))
    stream = stream.advance_watermark_to_infinity()
    # Batch releases the literal algorithm's verdicts (test above); streaming must release the same.
    expected = literal_verdicts(on_time, source, emit)
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | KAnonymityVerdicts(params, source, streaming=True, allowed_lateness_micros=lateness)
        assert_that(out["verdicts"], equal_to(expected), label="verdicts")
        assert_that(
            out["dead_letters"] | beam.Map(lambda d: (d.reason, d.source, "zz" in d.raw)),
            equal_to([("late", "kanon", True)]),
            label="late",
        )


def test_streaming_accepts_a_join_within_the_allowed_lateness():
    lateness = 2 * MICROS_PER_HOUR
    params = parameters()
    joins = [join("g", u, 0) for u in "abcd"]
    straggler = join("g", "e", 0, 45)
    stream = TestStream().add_elements([_timestamped(j) for j in joins])
    stream = stream.advance_watermark_to(_watermark_at(1))  # past the end of step 0, within the lateness
    stream = stream.add_elements([_timestamped(straggler)])
    # Advance past every timer before the end: on the streaming DirectRunner, outputs of timers that a timer set
    # while the watermark is already at infinity can miss a downstream assert_that.
    stream = stream.advance_watermark_to(_watermark_at(20, lateness)).advance_watermark_to_infinity()
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | KAnonymityVerdicts(params, ConstantSource(), streaming=True, allowed_lateness_micros=lateness)
        # Without noise, step 0 is k-anonymous only if the straggler "e" (the fifth user) was counted.
        assert_that(out["verdicts"], equal_to([verdict("g", 0, True), verdict("g", 4, False)]))


def test_portable_runner_loopback_gives_the_same_verdicts():
    source = SeededSource(11)
    expected = literal_verdicts(HAND_BUILT, source)
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"])
    with beam.Pipeline(options=options) as p:
        out = p | beam.Create(HAND_BUILT) | KAnonymityVerdicts(parameters(), source)
        assert_that(out["verdicts"], equal_to(expected))


def test_negative_lateness_is_rejected():
    with pytest.raises(ValueError):
        KAnonymityVerdicts(parameters(), ConstantSource(), allowed_lateness_micros=-1)


def test_dead_letter_type_is_declared():
    out_type = KAnonymityVerdicts(parameters(), ConstantSource())
    assert out_type is not None and DeadLetter._fields == ("raw", "reason", "source")
