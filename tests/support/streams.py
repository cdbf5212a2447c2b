"""TestStream helpers for the streaming PTransform tests: streaming options and shuffled, chunked arrival."""
from __future__ import annotations

import random
from collections.abc import Iterable

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.utils.timestamp import Timestamp

from transforms.core.device_stream import END_OF_INPUT


def streaming_options() -> PipelineOptions:
    """Pipeline options with streaming on (a TestStream needs them)."""
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    return options


def milli(micros: int) -> Timestamp:
    """``micros`` rounded down to a whole millisecond: TestStream watermarks are whole milliseconds."""
    return Timestamp(micros=micros // 1000 * 1000)


def shuffled_stream(rows: Iterable, seed: int, *, chunks: int, lead_micros: int, tail_micros: int,
                    late: Iterable = ()) -> TestStream:
    """A TestStream of ``rows`` (anything with ``event_time_micros``) in time order cut into about ``chunks``
    chunks, shuffled within each chunk (``random.Random(seed)``). The watermark passes a chunk only once it is all
    in (nothing is late): after each chunk it moves to ``lead_micros`` before the next chunk's first event, after
    the last one to ``tail_micros`` past the last event. Then ``late`` rows arrive behind the watermark, and the
    watermark goes to the end of input and to infinity."""
    rng = random.Random(seed)
    rows = sorted(rows, key=lambda row: row.event_time_micros)
    stream = TestStream()
    chunk = max(1, len(rows) // chunks)
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        rng.shuffle(part)
        stream = stream.add_elements(part)
        following = rows[start + chunk:start + chunk + 1]
        if following:
            stream = stream.advance_watermark_to(milli(following[0].event_time_micros - lead_micros))
    stream = stream.advance_watermark_to(milli(rows[-1].event_time_micros + tail_micros))
    late = list(late)
    if late:
        stream = stream.add_elements(late)
    return stream.advance_watermark_to(END_OF_INPUT).advance_watermark_to_infinity()
