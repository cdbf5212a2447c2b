"""The project's one set of time units (DESIGN.md, "Time"): event time is UTC, in integer microseconds or seconds
since the Unix epoch; every module that converts between units takes its constants from here."""
from __future__ import annotations

import datetime as dt

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


def parse_start(text: str) -> int:
    """``YYYY-MM-DD`` (00:00 UTC) or an ISO 8601 date-time (UTC when no offset is given) as epoch microseconds."""
    moment = dt.datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return (moment - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


def iso_micros(micros: int) -> str:
    """Epoch microseconds as ISO 8601 UTC (``...Z``), with microseconds only when there are some."""
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)
    return moment.isoformat(timespec="microseconds" if micros % MICROS_PER_SECOND else "seconds").replace("+00:00", "Z")
