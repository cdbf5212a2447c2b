"""The progress line of a streaming run: at most one per interval, with the rate since the last one, the
watermark as a UTC time and the outputs the sinks of this process wrote."""
from __future__ import annotations

import time

from transforms.core.progress import OUTPUTS, ProgressLine


def test_one_line_per_interval_with_rate_watermark_and_outputs():
    lines: list[str] = []
    progress = ProgressLine(interval=0.05, write=lines.append)
    status = {"read": 0, "dead_lettered": 0, "watermark_micros": None, "lag_micros": None}
    progress(status)
    assert lines == []  # nothing before the first interval has passed
    time.sleep(0.06)
    OUTPUTS.add(7)
    progress({"read": 1200, "dead_lettered": 3, "watermark_micros": 1_767_571_200_000_000, "lag_micros": 2_500_000})
    progress({"read": 1300, "dead_lettered": 3, "watermark_micros": 1_767_571_200_000_000, "lag_micros": 0})
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("progress: read 1,200 (") and "/s)" in line
    assert "watermark 2026-01-05T00:00:00Z (lag 2.5 s of event time)" in line
    assert line.endswith("dead letters 3, outputs written 7")
    time.sleep(0.06)
    progress(status)
    assert lines[-1].endswith("watermark not yet known, dead letters 0, outputs written 7")


def test_a_batch_line_has_no_watermark_and_no_outputs():
    line = ProgressLine(interval=1).line({"read": 2_000_000, "dead_lettered": 12}, 250_000.4)
    assert line == "progress: read 2,000,000 (250,000/s), dead letters 12"
