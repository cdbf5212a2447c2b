"""Python's cyclic garbage collector during a streaming run: ``streaming_collector``.

At its defaults (700, 10, 10) the collector walks every live container object at each full collection, and a
streaming run allocates in bursts (a firing replays every device that has events, a topic source decodes a poll
of up to 50,000 messages at once). Measured on the measurement job from a topic, 11 full collections took 1.5 to
1.7 s of a 15 to 19 s run; in the topic source process, decoding an ARA source message took 9.2 µs at the defaults
against 6.6 µs at ``STREAMING_THRESHOLDS`` (``benchmarks/README.md``, issue 40). So a streaming run collects less
often, and what is alive when it starts (modules, classes, the pipeline's graph, the source's consumers: about a
hundred thousand containers) is frozen (``gc.freeze``): it lives as long as the run, and no collection walks it
again. The cost is cyclic garbage kept a little longer; reference counting frees everything else at once.
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

STREAMING_THRESHOLDS = (10_000, 50, 100)


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
