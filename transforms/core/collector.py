"""Python's cyclic garbage collector during a streaming run: ``streaming_collector``.

At its defaults (700, 10, 10) the collector walks every live container object at each full collection, and a
streaming run allocates in bursts (a firing replays every device that has events, a topic source decodes a poll
of up to 50,000 messages at once). Measured on the measurement job from a topic, 11 full collections took 1.5 to
1.7 s of a 15 to 19 s run; in the topic source process, decoding an ARA source message took 9.2 µs at the defaults
against 6.6 µs at ``STREAMING_THRESHOLDS`` (``benchmarks/README.md``, issue 40). So a streaming run collects less
often, and what is alive when it starts (modules, classes, the pipeline's graph, the source's consumers: about a
hundred thousand containers) is frozen (``gc.freeze``): it lives as long as the run, and no collection walks it
again. The cost is cyclic garbage kept a little longer; reference counting frees everything else at once.

A firing's young objects include lists of tens of thousands of events, which each young collection walks again
while they live. With collections of the youngest generation every 100,000 allocations rather than 10,000 (and of
the middle one every 20 of those), a replica of the measurement job's live firings (``benchmarks/device_firing.py``)
spent 2.5 s collecting where it spent 5.4 s, of 46 s of firings; the event-level job live at 6,000 events/s, 1.7 to
3.0 s a minute where it spent 3.5 to 7.3 (``benchmarks/README.md``, issue 40, sessions 16 and 17).
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

STREAMING_THRESHOLDS = (100_000, 20, 100)


@contextlib.contextmanager
def streaming_collector() -> Iterator[None]:
    """For the block: the objects alive at its start frozen, and the collector at ``STREAMING_THRESHOLDS``;
    both undone after it."""
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*STREAMING_THRESHOLDS)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*previous)
