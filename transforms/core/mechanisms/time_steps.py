"""Event time to integer steps and epochs (DESIGN.md, "Time"): UTC only, integer arithmetic only.

Two clocks. The k-anonymity server counts in hour steps ``floor(t / 3600 s)`` (k-anonymity note Sec. 1, p = 1 hour).
Cookie Monster partitions each device's events database by time into epochs and keeps one privacy filter per
(querier, device, epoch) (Cookie Monster paper Sec. 3.1, 4.1): an epoch is ``floor((t - origin) / length)``, 7 days long by
default (Cookie Monster paper Sec. 8.1) from the Unix epoch. The units themselves are in ``schemas.time_units``.
"""
from __future__ import annotations

from dataclasses import dataclass

from schemas.time_units import MICROS_PER_DAY, MICROS_PER_HOUR

DEFAULT_EPOCH_DAYS = 7


def hour_step(event_time_micros: int) -> int:
    """The hour step ``floor(t / 3600 s)``: hours since the Unix epoch (k-anonymity note Sec. 1, p = 1 hour)."""
    return event_time_micros // MICROS_PER_HOUR


def step_start_micros(step: int) -> int:
    """The first microsecond of hour step ``step``."""
    return step * MICROS_PER_HOUR


@dataclass(frozen=True)
class EpochClock:
    """Epoch numbering: ``length_micros`` long epochs counted from ``origin_micros`` (UTC)."""

    length_micros: int = DEFAULT_EPOCH_DAYS * MICROS_PER_DAY
    origin_micros: int = 0

    def __post_init__(self) -> None:
        if self.length_micros <= 0:
            raise ValueError(f"the epoch length must be positive, got {self.length_micros} microseconds")

    def epoch_of(self, event_time_micros: int) -> int:
        """``floor((t - origin) / length)``."""
        return (event_time_micros - self.origin_micros) // self.length_micros

    def epoch_start_micros(self, epoch: int) -> int:
        """The first microsecond of ``epoch``."""
        return self.origin_micros + epoch * self.length_micros

    def window_epochs(self, conversion_time_micros: int, window_days: int) -> tuple[int, int]:
        """The epochs ``(first, last)`` of an attribution window of ``window_days`` days ending at the conversion:
        from the epoch of ``t - window`` to the epoch of ``t``, inclusive (the set E of Cookie Monster paper Code Listing 1)."""
        return (
            self.epoch_of(conversion_time_micros - window_days * MICROS_PER_DAY),
            self.epoch_of(conversion_time_micros),
        )
