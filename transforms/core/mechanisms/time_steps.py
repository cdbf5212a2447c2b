"""Event time to integer steps (DESIGN.md, "Time"): UTC only, integer arithmetic only."""
from __future__ import annotations

MICROS_PER_SECOND = 1_000_000
MICROS_PER_HOUR = 3600 * MICROS_PER_SECOND


def hour_step(event_time_micros: int) -> int:
    """The hour step ``floor(t / 3600 s)``: hours since the Unix epoch (seed 004 Sec. 1, p = 1 hour)."""
    return event_time_micros // MICROS_PER_HOUR


def step_start_micros(step: int) -> int:
    """The first microsecond of hour step ``step``."""
    return step * MICROS_PER_HOUR
