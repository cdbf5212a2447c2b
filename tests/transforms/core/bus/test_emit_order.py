"""The order of what a topic source sends the runner in one emit (``KafkaStreamService._emit``): every input's rows
and dead letters first, then the inputs' watermarks. A stateful step reading two inputs then has both inputs'
batches before the runner's watermark moves, and takes a watermark step in one firing: sent input by input, the
first input's watermark moved the runner's to the second input's old one first, a firing of its own
(benchmarks/README.md, session 12). The service's readers and event makers are stood in for by plain records:
the order is ``_emit``'s alone."""
import threading
from types import SimpleNamespace

from transforms.core.bus.kafka_stream import KafkaStreamService
from transforms.core.io import DEAD_LETTERS, END_OF_INPUT_MICROS, INPUT_FILES


def _service(watermarks: dict[str, int | None]) -> KafkaStreamService:
    service = object.__new__(KafkaStreamService)  # no consumer, no gRPC server: only what _emit reads
    service._readers = [SimpleNamespace(source=SimpleNamespace(name=name), watermark_micros=micros)
                        for name, micros in watermarks.items()]
    service._batch_events = lambda reader, rows: [("rows", reader.source.name, tuple(rows))]
    service._list_events = lambda tag, items, micros: [("dead letters", tag, tuple(items))]
    service._watermark_event = lambda tag, micros: ("watermark", tag, micros)
    return service


def test_every_inputs_rows_and_dead_letters_come_before_any_watermark():
    service = _service({"sources": 5_000, "triggers": 7_000})
    held = {"sources": ([(1,)], ["bad source"]), "triggers": ([(2,), (3,)], [])}
    assert list(service._emit(held, {}, advance=True)) == [
        ("rows", "sources", ((1,),)), ("dead letters", DEAD_LETTERS, ("bad source",)),
        ("rows", "triggers", ((2,), (3,))),
        ("watermark", "sources", 5_000), ("watermark", "triggers", 7_000),
        ("watermark", DEAD_LETTERS, 5_000), ("watermark", INPUT_FILES, 5_000),  # the slowest input's
    ]
    assert held == {"sources": ([], []), "triggers": ([], [])}


def test_a_watermark_is_sent_once_it_moved_and_only_when_the_emit_advances():
    service = _service({"sources": 5_000, "triggers": None})  # triggers: nothing read yet, no watermark
    sent = {"sources": 5_000}
    held = {"sources": ([(1,)], []), "triggers": ([], [])}
    assert list(service._emit(held, sent, advance=True)) == [("rows", "sources", ((1,),))]
    service._readers[0].watermark_micros = 6_000
    held["sources"][0].append((2,))
    assert list(service._emit(held, sent, advance=False)) == [("rows", "sources", ((2,),))]
    assert list(service._emit(held, sent, advance=True)) == [("watermark", "sources", 6_000)]
    assert sent == {"sources": 6_000}


class _BoundedReader:
    """A ``stop=end`` input that reads ``polls`` (lists of (event time,) rows) in turn and is at its end after the
    last one: each poll's watermark is its latest event time."""

    def __init__(self, name: str, polls: list[list[tuple]]) -> None:
        self.source = SimpleNamespace(name=name, emit_seconds=0.0, spec=SimpleNamespace(row_type=None))
        self.topic = SimpleNamespace(stop="end")
        self.marks = None
        self.watermark_micros: int | None = None
        self._polls = list(polls)

    def poll(self) -> tuple[list, list]:
        rows = self._polls.pop(0) if self._polls else []
        if rows:
            self.watermark_micros = max(time for time, in rows)
        return rows, []

    def at_end(self) -> bool:
        return not self._polls

    def reports(self) -> list:
        return []


def test_a_bounded_read_sends_its_last_rows_without_a_watermark_step_of_their_own():
    """The last poll of a read that stops at the end was not full, which made it a live poll whose watermark went
    out: a step that fired every stateful step over nearly all it held, just before the end's firing (which
    encodes nothing, the state being final). The end now follows the last rows at once (benchmarks/README.md,
    session 13)."""
    service = _service({})
    reader = _BoundedReader("sources", [[(1_000,)], [(2_000,)]])
    service._readers, service.inputs = [reader], [reader.source]
    service._store, service._stop = None, threading.Event()
    service._element_event = lambda tag, batch, micros: ("end of", tag, batch.watermark_micros)
    events = list(service._events())
    assert events[:4] == [("rows", "sources", ((1_000,),)), ("watermark", "sources", 1_000),
                          ("watermark", DEAD_LETTERS, 1_000), ("watermark", INPUT_FILES, 1_000)]
    assert events[4:] == [("rows", "sources", ((2_000,),)), ("end of", "sources", END_OF_INPUT_MICROS),
                          *(("watermark", tag, END_OF_INPUT_MICROS) for tag in service.tags),
                          ("dead letters", INPUT_FILES, ())]
