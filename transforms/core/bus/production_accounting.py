"""What a topic read on a production runner accounts for, as the local path does (``kafka_stream``): each record
counted once, a second copy of it dead-lettered ``duplicate``, and one ``InputFileReport`` per topic once the run
drains, which the driver judges the input by (``pipelines.release``) and ``summary.json`` counts from.

* ``FirstCopies``: keyed by the record's own id (``schemas.record_ids``), the first copy passes and a copy within
  the allowed lateness of event time after it is a dead letter ``duplicate`` (Kafka delivers at least once); the
  id is forgotten once the watermark is the lateness past the first copy, after which a copy is behind the
  watermark by more than the lateness, hence ``late`` in the stateful steps.
* ``TopicReport``: the messages read from a topic and its dead letters, counted per bundle and partition, summed
  in state keyed by the partition and emitted when the watermark reaches the end of time (a drained or bounded
  run), as ``InputFileReport(path=<topic URI>/<partition>, read, parsed, dead_lettered, None)``, the local path's
  reports (a partition that gave nothing has none).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import apache_beam as beam
from apache_beam.coders import BooleanCoder, PickleCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Duration, Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from schemas.rows import DeadLetter
from transforms.core.bus.kafka_stream import DUPLICATE, partition_path, row_text
from transforms.core.io import DEAD_LETTERS, InputFileReport


class _FirstCopyFn(beam.DoFn):
    """``(record id, (place, row))`` to the row, once per id within ``lateness``; other copies to dead letters."""

    SEEN = ReadModifyWriteStateSpec("seen", BooleanCoder())
    FORGET = TimerSpec("forget", TimeDomain.WATERMARK)

    def __init__(self, lateness_micros: int) -> None:
        self._lateness = Duration(micros=lateness_micros)

    def process(self, element: tuple[str, tuple[str, Any]], timestamp=beam.DoFn.TimestampParam,
                seen=beam.DoFn.StateParam(SEEN), forget=beam.DoFn.TimerParam(FORGET)):
        _, (place, row) = element
        if seen.read():
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(raw=row_text(row), reason=DUPLICATE, source=place))
            return
        seen.write(True)
        forget.set(timestamp + self._lateness)
        yield row

    @on_timer(FORGET)
    def expire(self, seen=beam.DoFn.StateParam(SEEN)):
        seen.clear()


class FirstCopies(beam.PTransform):
    """``(record id, (place, row))`` in; ``{"rows": first copies, "dead_letters": the other copies}``."""

    def __init__(self, lateness_micros: int) -> None:
        super().__init__()
        self._lateness = lateness_micros

    def expand(self, keyed):
        once = keyed | "FirstCopy" >> beam.ParDo(_FirstCopyFn(self._lateness)).with_outputs(DEAD_LETTERS, main="rows")
        return {"rows": once.rows, DEAD_LETTERS: once[DEAD_LETTERS]}


class _CountPerBundleFn(beam.DoFn):
    """Counts a bundle's elements per partition (``where(element)``: its report's path); at its end emits
    ``(path, (n, 0))`` per path (``read``), or ``(path, (0, n))`` (``dead``)."""

    def __init__(self, where: Callable[[Any], str], dead: bool) -> None:
        self._where, self._dead = where, dead

    def start_bundle(self) -> None:
        self._counts: Counter = Counter()
        self._earliest: Timestamp | None = None

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        self._counts[self._where(element)] += 1
        if self._earliest is None or timestamp < self._earliest:
            self._earliest = timestamp

    def finish_bundle(self):
        if self._earliest is not None:  # an element came
            for path, count in self._counts.items():
                yield WindowedValue((path, (0, count) if self._dead else (count, 0)), self._earliest, (GlobalWindow(),))


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
