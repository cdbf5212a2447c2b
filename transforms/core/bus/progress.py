"""The one-line progress report of a local streaming run, at most every few seconds.

    progress: read 1,204,311 (31,870/s), watermark 2026-02-04T23:00:00Z (lag 0:00:12 of event time),
              dead letters 12, outputs written 40,114

``OUTPUTS`` counts what the sinks of this process have written (a runner on other machines has its own
monitoring; this is the local runner's, whose DoFns run in the driver's process).
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


class ProgressLine:
    """Prints ``status`` dicts (``read``, ``dead_lettered``, ``watermark_micros``, ``lag_micros``) as one line,
    at most every ``interval`` seconds (``write`` defaults to print)."""

    def __init__(self, interval: float = INTERVAL_SECONDS, write: Callable[[str], None] | None = None) -> None:
        self._interval = interval
        self._write = write or (lambda line: print(line, flush=True))
        self._started = self._last = time.monotonic()
        self._last_read = 0
        self._outputs_at_start = OUTPUTS.value

    def __call__(self, status: dict) -> None:
        now = time.monotonic()
        if now - self._last < self._interval:
            return
        rate = (status["read"] - self._last_read) / (now - self._last)
        self._last, self._last_read = now, status["read"]
        self._write(self.line(status, rate))

    def line(self, status: dict, rate: float) -> str:
        watermark = status["watermark_micros"]
        if watermark is None:
            where = "watermark not yet known"
        else:
            lag = status["lag_micros"] or 0
            where = f"watermark {iso_micros(watermark)} (lag {lag / 1e6:,.1f} s of event time)"
        return (f"progress: read {status['read']:,} ({rate:,.0f}/s), {where}, dead letters "
                f"{status['dead_lettered']:,}, outputs written {OUTPUTS.value - self._outputs_at_start:,}")
