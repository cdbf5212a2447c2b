"""The project's one set of time units (DESIGN.md, "Time"): event time is UTC, in integer microseconds or seconds
since the Unix epoch; every module that converts between units takes its constants from here."""
from __future__ import annotations

MICROS_PER_MILLI = 1_000
MICROS_PER_SECOND = 1_000_000
SECONDS_PER_MINUTE = 60
SECONDS_PER_HOUR = 3_600
SECONDS_PER_DAY = 86_400
MICROS_PER_MINUTE = SECONDS_PER_MINUTE * MICROS_PER_SECOND
MICROS_PER_HOUR = SECONDS_PER_HOUR * MICROS_PER_SECOND
MICROS_PER_DAY = SECONDS_PER_DAY * MICROS_PER_SECOND

# Anything at or after 2100-01-01T00:00:00Z is taken for a unit mistake (nanoseconds, or a sentinel) rather than
# a real event.
MAX_EVENT_TIME_MICROS = 4_102_444_800 * MICROS_PER_SECOND
