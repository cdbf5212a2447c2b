"""A bundle's buffered records as one element per shard: what the step before each streaming stateful step (the
k-anonymity shards, the device replays) emits at the end of a bundle.

One element per shard, so that the stateful step takes a bundle's records, the sources' watermarks and (for a
durable job) the positions of the batches they came from in one call, with no timer firing in between
(``transforms.core.durable``); timestamped with the earliest of its records, which holds the watermark until the
element is processed.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue


def per_shard_elements(records: Iterable[tuple[int, int, bytes]], hint: bytes | None, shards: int,
                       hint_micros: int | None) -> Iterator[WindowedValue]:
    """``(shard, (record bytes, ...))`` for each shard with records, from ``(shard, earliest event time, record)``;
    ``hint`` (a record of the sources' watermarks and positions, or None) goes to every shard, timestamped
    ``hint_micros`` (the earliest of the bundle's batches; 0 when it had none)."""
    per_shard: dict[int, tuple[list[bytes], list[int]]] = {}  # shard -> (records, their timestamps)
    for shard, earliest, data in records:
        held, stamps = per_shard.setdefault(shard, ([], []))
        held.append(data)
        stamps.append(earliest)
    if hint is not None:
        for shard in range(shards):
            held, stamps = per_shard.setdefault(shard, ([], []))
            held.append(hint)
            stamps.append(hint_micros if hint_micros is not None else 0)
    for shard, (held, stamps) in per_shard.items():
        yield WindowedValue((shard, tuple(held)), Timestamp(micros=min(stamps)), (GlobalWindow(),))
