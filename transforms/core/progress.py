"""The one-line progress report of a run, at most every few seconds.

    progress: read 1,204,311 (31,870/s), watermark 2026-02-04T23:00:00Z (lag 12.0 s of event time),
              dead letters 12, outputs written 40,114

A streaming run's topic source reports its reads, its watermark and what the sinks of this process wrote
(``OUTPUTS``); a batch run's file readers report the records read so far (``note_read``: no watermark, no
outputs until the end). The counts are this process's: a runner on other machines has its own monitoring; these
are the local runners', whose DoFns run in the driver's process (or, with the DirectRunner's worker processes,
each in its own).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from schemas.time_units import iso_micros

INTERVAL_SECONDS = 5.0


class _Count:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n


OUTPUTS = _Count()
_READ, _DEAD = _Count(), _Count()
_batch_line: ProgressLine | None = None


def note_read(parsed: int, dead_lettered: int) -> None:
    """A file reader's records since its last call: counted, and a progress line when one is due."""
    global _batch_line
    _READ.add(parsed + dead_lettered)
    _DEAD.add(dead_lettered)
    if _batch_line is None:
        _batch_line = ProgressLine()
    _batch_line({"read": _READ.value, "dead_lettered": _DEAD.value})


class ProgressLine:
    """Prints ``status`` dicts (``read``, ``dead_lettered``, and for a streaming source ``watermark_micros`` and
    ``lag_micros``) as one line, at most every ``interval`` seconds (``write`` defaults to print)."""

    def __init__(self, interval: float = INTERVAL_SECONDS, write: Callable[[str], None] | None = None) -> None:
        self.interval = interval
        self._write = write or (lambda line: print(line, flush=True))
        self._started = self._last = time.monotonic()
        self._last_read = 0
        self._outputs_at_start = OUTPUTS.value

    def __call__(self, status: dict) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        rate = (status["read"] - self._last_read) / (now - self._last)
        self._last, self._last_read = now, status["read"]
        self._write(self.line(status, rate))

    def line(self, status: dict, rate: float) -> str:
        parts = [f"progress: read {status['read']:,} ({rate:,.0f}/s)"]
        if "watermark_micros" in status:  # a streaming source's
            watermark = status["watermark_micros"]
            if watermark is None:
                parts.append("watermark not yet known")
            else:
                lag = status["lag_micros"] or 0
                parts.append(f"watermark {iso_micros(watermark)} (lag {lag / 1e6:,.1f} s of event time)")
        parts.append(f"dead letters {status['dead_lettered']:,}")
        if "watermark_micros" in status:
            parts.append(f"outputs written {OUTPUTS.value - self._outputs_at_start:,}")
        return ", ".join(parts)
