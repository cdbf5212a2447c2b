"""What a topic read on a production runner accounts for, as the local path does (``kafka_stream``): each record
counted once, a second copy of it dead-lettered ``duplicate``, and one ``InputFileReport`` per topic once the run
drains, which the driver judges the input by (``pipelines.release``) and ``summary.json`` counts from.

* ``FirstCopies``: by the record's own id (``schemas.record_ids``), the first copy passes and a later copy is a
  dead letter ``duplicate`` (Kafka delivers at least once), as long as the id is remembered: by hour of event time,
  until the watermark is the allowed lateness past the hour's end, after which a copy is behind the watermark by
  more than the lateness, hence ``late`` in the stateful steps. The ids are kept in state by hour and by one of
  ``SHARDS`` shards, each bundle's records met in one batch per (shard, hour).
* ``TopicReport``: the messages read from a topic and its dead letters, counted per bundle and partition, summed
  in state keyed by the partition and emitted when the watermark reaches the end of time (a drained or bounded
  run), as ``InputFileReport(path=<topic URI>/<partition>, read, parsed, dead_lettered, None)``, the local path's
  reports (a partition that gave nothing has none).
"""
from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import apache_beam as beam
from apache_beam.coders import PickleCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow, TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from schemas.rows import DeadLetter
from schemas.time_units import MICROS_PER_HOUR
from transforms.core.bus.kafka_stream import DUPLICATE, partition_path, row_text
from transforms.core.io import DEAD_LETTERS, InputFileReport

SHARDS = 16  # shards of record ids per hour in the deduplicating step: its parallelism


class _PerBundleFn(beam.DoFn):
    """One element per key and bundle, ``(key, batch of the bundle's items of that key)``, at the earliest timestamp
    of its elements: a stateful step after it touches its state once per key and bundle, not once per record (a
    stateful step's per-element cost on a portable runner is a state call and a timer). ``keyed(element)`` gives
    an element's ``(key, item)``; ``batch(items)`` what is sent for them."""

    def keyed(self, element: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def batch(self, items: list) -> Any:
        return items

    def start_bundle(self) -> None:
        self._batches: dict[Any, list] = defaultdict(list)
        self._earliest: dict[Any, Timestamp] = {}

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        key, item = self.keyed(element)
        self._batches[key].append(item)
        if key not in self._earliest or timestamp < self._earliest[key]:
            self._earliest[key] = timestamp

    def finish_bundle(self):
        for key, items in self._batches.items():
            yield WindowedValue((key, self.batch(items)), self._earliest[key], (GlobalWindow(),))


class _ShardPerBundleFn(_PerBundleFn):
    """``(record id, (place, row))`` to ``((shard of record ids, hour of event time), [(record id, place, row),
    ...])`` per bundle."""

    def keyed(self, element: tuple[str, tuple[str, Any]]) -> tuple[tuple[int, int], tuple]:
        record_id, (place, row) = element
        key = (zlib.crc32(record_id.encode()) % SHARDS, row.event_time_micros // MICROS_PER_HOUR)
        return key, (record_id, place, row)


class _FirstCopiesFn(beam.DoFn):
    """Keyed by (shard, hour): each batch's first copies out, at their own event times; later copies to dead
    letters. The hour's ids are forgotten once the watermark is the horizon past the hour's end, as the local
    source's ``Deduplicator`` forgets them. One timer per key, set when its first ids arrive and never from its
    own callback (Beam 2.62's Flink runner keeps the watermark hold of a timer re-set from its callback: the
    stage's output watermark stops)."""

    SEEN = BagStateSpec("seen", PickleCoder())  # frozensets of record ids
    FORGET = TimerSpec("forget", TimeDomain.WATERMARK)

    def __init__(self, horizon_micros: int) -> None:
        self._horizon = horizon_micros

    def process(self, element: tuple[tuple[int, int], list], seen=beam.DoFn.StateParam(SEEN),
                forget=beam.DoFn.TimerParam(FORGET)):
        (_, hour), batch = element
        known = set().union(*seen.read())
        if not known:
            forget.set(Timestamp(micros=(hour + 1) * MICROS_PER_HOUR + self._horizon))
        new: set[str] = set()
        for record_id, place, row in batch:
            if record_id in known or record_id in new:
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(raw=row_text(row), reason=DUPLICATE,
                                                                        source=place))
                continue
            new.add(record_id)
            yield TimestampedValue(row, Timestamp(micros=row.event_time_micros))
        if new:
            seen.add(frozenset(new))

    @on_timer(FORGET)
    def expire(self, seen=beam.DoFn.StateParam(SEEN)):
        seen.clear()


class FirstCopies(beam.PTransform):
    """``(record id, (place, row))`` in; ``{"rows": first copies, "dead_letters": the other copies}``."""

    def __init__(self, lateness_micros: int) -> None:
        super().__init__()
        self._lateness = lateness_micros

    def expand(self, keyed):
        once = (
            keyed
            | "PerShard" >> beam.ParDo(_ShardPerBundleFn())
            | "FirstCopy" >> beam.ParDo(_FirstCopiesFn(self._lateness)).with_outputs(DEAD_LETTERS, main="rows")
        )
        return {"rows": once.rows, DEAD_LETTERS: once[DEAD_LETTERS]}


class _CountPerBundleFn(_PerBundleFn):
    """Counts a bundle's elements per partition (``where(element)``: its report's path): ``(path, (n, 0))`` per
    path (``read``), or ``(path, (0, n))`` (``dead``)."""

    def __init__(self, where: Callable[[Any], str], dead: bool) -> None:
        self._where, self._dead = where, dead

    def keyed(self, element: Any) -> tuple[str, None]:
        return self._where(element), None

    def batch(self, items: list) -> tuple[int, int]:
        return (0, len(items)) if self._dead else (len(items), 0)


class _ReportAtDrainFn(beam.DoFn):
    """Keyed by partition path: the counts summed in state, emitted as an ``InputFileReport`` at the end of time."""

    COUNTS = ReadModifyWriteStateSpec("counts", PickleCoder())
    DRAINED = TimerSpec("drained", TimeDomain.WATERMARK)

    def process(self, element: tuple[str, tuple[int, int]], counts=beam.DoFn.StateParam(COUNTS),
                drained=beam.DoFn.TimerParam(DRAINED)):
        _, (read, dead) = element
        total_read, total_dead = counts.read() or (0, 0)
        counts.write((total_read + read, total_dead + dead))
        drained.set(GlobalWindow().max_timestamp())

    @on_timer(DRAINED)
    def report(self, key=beam.DoFn.KeyParam, counts=beam.DoFn.StateParam(COUNTS)):
        read, dead = counts.read() or (0, 0)
        yield InputFileReport(path=key, read=read, parsed=read - dead, dead_lettered=dead, failure=None)


class TopicReport(beam.PTransform):
    """``(messages (partition, offset, value), dead letters)`` of the topic ``uri`` to an ``InputFileReport`` per
    partition (per topic on Pub/Sub), emitted when the run drains."""

    def __init__(self, uri: str) -> None:
        super().__init__()
        self._uri = uri

    def expand(self, pcolls):
        messages, dead_letters = pcolls
        uri = self._uri

        def message_path(message: tuple) -> str:
            return uri if message[0] is None else partition_path(uri, message[0])

        def letter_path(letter: DeadLetter) -> str:
            return letter.source.rsplit("@", 1)[0]  # <uri>/<partition>@<offset>, or the URI on Pub/Sub

        counted = (
            messages | "CountRead" >> beam.ParDo(_CountPerBundleFn(message_path, dead=False)),
            dead_letters | "CountDead" >> beam.ParDo(_CountPerBundleFn(letter_path, dead=True)),
        ) | "Counts" >> beam.Flatten()
        return counted | "ReportAtDrain" >> beam.ParDo(_ReportAtDrainFn()).with_output_types(InputFileReport)
