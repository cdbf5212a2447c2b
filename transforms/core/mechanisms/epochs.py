"""Event time to device epochs (seed 003 Sec. 3.1, Sec. 4.1; DESIGN.md "Time"): integer arithmetic, UTC only.

Cookie Monster partitions each device's events database by time into epochs
and keeps one privacy filter per (querier, device, epoch). An epoch is
``floor((t - origin) / length)``; the default length is 7 days (seed 003
Sec. 8.1) and the origin the Unix epoch.
"""
from __future__ import annotations

from dataclasses import dataclass

MICROS_PER_DAY = 86_400 * 1_000_000
DEFAULT_EPOCH_DAYS = 7


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
        from the epoch of ``t - window`` to the epoch of ``t``, inclusive (the set E of seed 003 Code Listing 1)."""
        return (
            self.epoch_of(conversion_time_micros - window_days * MICROS_PER_DAY),
            self.epoch_of(conversion_time_micros),
        )
