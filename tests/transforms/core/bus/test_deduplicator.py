"""The source's deduplication: a second copy of an id within the horizon is recognised; ids are forgotten only
once their hour is beyond the horizon behind the watermark."""
from __future__ import annotations

from schemas.record_ids import RECORD_IDS
from schemas.time_units import MICROS_PER_HOUR
from transforms.core.bus.kafka_stream import Deduplicator
from transforms.core.mechanisms.time_steps import hour_step  # noqa: F401  (the hours the buckets follow)

H = MICROS_PER_HOUR


def test_a_second_copy_is_recognised_and_ids_are_forgotten_beyond_the_horizon():
    seen = Deduplicator(horizon_micros=2 * H)
    assert seen.first("a", 10 * H + 5)
    assert not seen.first("a", 10 * H + 5)
    assert seen.first("b", 11 * H)
    seen.forget_before(12 * H)  # hour 10 ends 1 h behind: within the horizon
    assert not seen.first("a", 10 * H + 5) and len(seen) == 2
    seen.forget_before(13 * H)  # hour 10 ends 2 h behind: beyond it; hour 11 is kept
    assert len(seen) == 1 and not seen.first("b", 11 * H)


def test_every_event_type_has_an_id():
    from schemas.codecs import EVENT_SPECS

    assert set(RECORD_IDS) == set(EVENT_SPECS)
