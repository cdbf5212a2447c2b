"""Kafka topics as the input of a local streaming run: a consumer that feeds Beam's ``TestStream``.

Why this shape (DESIGN.md, "Streaming on this machine: measured facts"): the DirectRunner's streaming engine
does not run an unbounded splittable DoFn, and the FnApiRunner runs one but fires event-time timers without a
real watermark. What runs here with correct event time is a ``TestStream`` in its ``endpoint`` form: the runner
pulls events (elements, watermark advances) from a TestStreamService over gRPC. ``KafkaStreamService`` is that
service (run in a process of its own by ``stream_process``), and a real consumer of a real broker:

* it reads each input topic with ``confluent-kafka`` (partitions assigned explicitly; offsets from the
  consumer group's commits, else from ``start``), decodes each message with ``schemas.messages`` into a row or
  a dead letter, and sends the rows of one poll as **one element** (a tuple of rows) timestamped with their
  earliest event time: Beam's cost is per element (about 15 thousand elements/s here), so a micro-batch of
  thousands of events per element is what lets a streaming job keep up with a topic;
* **event time comes from the record**; each input's watermark is the minimum, over its partitions that are
  not read to their end, of the latest event time read from the partition (a partition read to its end does
  not hold the watermark back). The pipelines wait their allowed lateness beyond it before a step is final;
* a record more than the allowed lateness behind its input's watermark is a dead letter ``late``;
* **deduplication**: Kafka delivers at least once, so each record's own id (join: group, user and time;
  device events: device and event id) is remembered for the allowed lateness behind the watermark, and a second
  copy is a dead letter ``duplicate`` (not an input error). A copy arriving after its id was forgotten is behind
  the watermark by more than the allowed lateness, hence ``late``: no copy is ever counted twice;
* at the end (``stop=end`` reached, or ``request_stop`` from a signal) it sends every input's report
  (records read, parsed, dead-lettered, per topic partition) and closes the stream, which advances every
  watermark to infinity: the pipeline drains and finishes;
* offsets are committed by ``commit``, which the driver calls only after the pipeline has finished (every sink
  flushed) and the run was judged: a crash before that re-reads from the previous commit.
"""
from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import apache_beam as beam
import grpc
from apache_beam.coders import PickleCoder
from apache_beam.portability.api import beam_runner_api_pb2, beam_runner_api_pb2_grpc
from apache_beam.testing.test_stream import TestStream

from schemas.codecs import EventSpec, row_to_dict
from schemas.messages import decode_message
from schemas.record_ids import RECORD_IDS
from schemas.rows import DeadLetter
from schemas.time_units import MICROS_PER_HOUR
from transforms.core.bus.consumer import assigned_consumer, read_to_end
from transforms.core.bus.endpoints import Endpoint, KafkaTopic
from transforms.core.durable.acknowledgement import WatermarkBound
from transforms.core.durable.positions import Place, source_position
from transforms.core.durable.store import StateStore
from transforms.core.durable.stores import open_store
from transforms.core.io import (
    DEAD_LETTERS,
    END_OF_INPUT_MICROS,
    INPUT_FILES,
    EventBatch,
    InputFileReport,
    PackedEvents,
)
from transforms.core.noise_key import KeyLocation

LATE, DUPLICATE = "late", "duplicate"
_POLL_MESSAGES = 50_000  # at most this many messages per element (one poll of the consumer)
_POLL_SECONDS = 0.1
EMIT_SECONDS = 1.0  # by default, a live topic's records (and watermark) are sent to the runner at most this often
_CATCH_UP_WATERMARK_SECONDS = 30.0  # while a backlog is read, the watermarks the runner sees move at most this often
_MAX_ELEMENT_BYTES = 3 << 20
_NEVER = -(1 << 63)  # a time before every event time: nothing is late before the first watermark
_HEARTBEAT_SECONDS = 1.0  # the runner stops a TestStream that sends nothing for 30 s
_log = logging.getLogger("pmbeam.bus")


class Deduplicator:
    """The ids seen in the last ``horizon_micros`` of event time behind the watermark, in hour buckets (one set
    per hour of event time, dropped whole once the hour is beyond the horizon)."""

    def __init__(self, horizon_micros: int) -> None:
        self._horizon = horizon_micros
        self._hours: dict[int, set] = {}

    def first(self, key: Hashable, event_time_micros: int) -> bool:
        """Whether this is the first copy of ``key`` (and remember it)."""
        hour = event_time_micros // MICROS_PER_HOUR
        seen = self._hours.get(hour)
        if seen is None:
            self._hours[hour] = {key}
            return True
        if key in seen:
            return False
        seen.add(key)
        return True

    def forget_before(self, watermark_micros: int) -> None:
        """Drop the hours that end more than the horizon behind ``watermark_micros``."""
        limit = watermark_micros - self._horizon
        for hour in [hour for hour in self._hours if (hour + 1) * MICROS_PER_HOUR <= limit]:
            del self._hours[hour]

    def __len__(self) -> int:
        return sum(len(seen) for seen in self._hours.values())


@dataclass(frozen=True)
class TopicInput:
    """One input of a job read from a topic: its ``name`` (the output tag), where, what and how encoded."""

    name: str
    topic: Endpoint  # a KafkaTopic on the local path; Pub/Sub and other runners use Beam's transforms
    spec: EventSpec
    fmt: str
    lateness_micros: int
    group: str  # the consumer group, when the URI does not name one
    check: Callable[[Any], str | None] | None = None  # the job's own check of a valid row (as ReadEvents' check)
    # how a poll's rows (plain tuples) are packed for the job's first step, in the source's process
    # (``PackedEvents``); None: sent as they are (``EventBatch``)
    pack: Callable[[type, list], list] | None = None
    # a job with durable state (``transforms.core.durable``), as (store URI, job id, the key its rows are sealed
    # with): each element carries its
    # ``SourcePosition``, the dead letters are kept in the store, and the partitions named in ``resume``
    # (partition, next offset, records read, of which dead) are read on from the job's last snapshot
    durable: tuple[str, str, KeyLocation] | None = None
    resume: tuple[tuple[int, int, int, int], ...] = ()
    pipeline: str = ""  # the job's pipeline (a durable store records whose job an id is)
    # a durable job's: the file in which the source publishes each watermark before it sends it (its steps'
    # releases are acknowledged by event time, ``transforms.core.durable.acknowledgement``)
    watermark_bound: str | None = None
    # a live topic's records and watermark go to the runner at most this often: each watermark step is a firing
    # of the job's stateful steps, and of a durable job a snapshot
    emit_seconds: float = EMIT_SECONDS


@dataclass
class _Partition:
    next_offset: int | None = None  # the next offset to read; None: where ``start`` begins, nothing read yet
    latest_micros: int | None = None  # the latest event time read
    read: int = 0
    dead: int = 0

    @property
    def parsed(self) -> int:
        return self.read - self.dead


class KafkaTopicReader:
    """Reads one ``TopicInput``: decoded rows and dead letters per poll, its watermark, its offsets."""

    def __init__(self, source: TopicInput) -> None:
        from confluent_kafka import TopicPartition  # the kafka extra

        self.source = source
        self.topic = topic = cast(KafkaTopic, source.topic)
        resume = {partition: (next_offset, read, dead) for partition, next_offset, read, dead in source.resume}
        self._consumer, starts = assigned_consumer(topic, source.group, {p: o for p, (o, _, _) in resume.items()}, **{
            "fetch.wait.max.ms": 50,
            "queued.min.messages": 200_000,
            "max.partition.fetch.bytes": 10_485_760,
            "session.timeout.ms": 6000,
        })
        self._partitions = {number: _Partition(start, None, *resume.get(number, (start, 0, 0))[1:])
                            for number, start in starts.items()}
        self._topic_partition = TopicPartition
        self._dedupe = Deduplicator(source.lateness_micros)
        self._record_id = RECORD_IDS[source.spec.name]
        self.watermark_micros: int | None = None
        # a durable job's elements say where the partitions stand after them: after each row, its partition's
        # (partition, offset, read, dead); and its dead letters are kept: (partition, offset, DeadLetter)
        self.marks: list[tuple[int, int, int, int]] | None = [] if source.durable else None
        self.letters: list[tuple[int, int, DeadLetter]] | None = [] if source.durable else None
        self.sequence = 0  # the number of the input's next element
        self.sent_places: dict[int, Place] = {number: (p.next_offset, p.read, p.dead)
                                              for number, p in self._partitions.items() if p.next_offset is not None}

    def poll(self) -> tuple[list, list]:
        """The rows and dead letters of one poll of the consumer (at most ``_POLL_MESSAGES`` messages)."""
        source, topic = self.source, self.topic
        spec, fmt, schema_id, check = source.spec, source.fmt, topic.schema_id, source.check
        partitions, first, record_id = self._partitions, self._dedupe.first, self._record_id
        rows: list = []
        dead: list = []
        watermark = self.watermark_micros
        late_before = _NEVER if watermark is None else watermark - source.lateness_micros
        where = functools.partial(message_place, topic.uri)  # named only in a dead letter
        marks, letters = self.marks, self.letters
        for message in self._consumer.consume(_POLL_MESSAGES, timeout=_POLL_SECONDS):
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise RuntimeError(f"Kafka consumer of {topic.uri} failed: {error.str()}")
                _log.warning("Kafka consumer of %s: %s", topic.uri, error.str())
                continue
            offset = message.offset()  # set on every message that is not an error
            partition = partitions[message.partition()]
            partition.next_offset = offset + 1
            partition.read += 1
            row = decode_message(spec, fmt, message.value() or b"", "", schema_id)
            if type(row) is DeadLetter:
                partition.dead += 1
                dead.append(row._replace(source=where(message.partition(), offset)))
                if letters is not None:
                    letters.append((message.partition(), offset, dead[-1]))
                continue
            event_time = row.event_time_micros
            reason = LATE if event_time < late_before else None if check is None else check(row)
            if reason is None and not first(record_id(row), event_time):
                reason = DUPLICATE
            if reason is not None:
                partition.dead += 1
                dead.append(DeadLetter(raw=row_text(row), reason=reason, source=where(message.partition(), offset)))
                if letters is not None:
                    letters.append((message.partition(), offset, dead[-1]))
                continue
            latest = partition.latest_micros
            if latest is None or event_time > latest:
                partition.latest_micros = event_time
            rows.append(row)
            if marks is not None:
                marks.append((message.partition(), offset, partition.read, partition.dead))
        self._advance_watermark()
        return rows, dead

    def position_after(self, marks: list[tuple[int, int, int, int]], last: bool) -> bytes:
        """The ``SourcePosition`` of the input's next element, whose rows are the next ``marks`` of those read:
        with ``last`` (its rows are the last read so far), where every partition stands now, dead letters after
        them included. Numbers the element."""
        places = self.sent_places
        if last:
            places.update((number, (p.next_offset, p.read, p.dead))
                          for number, p in self._partitions.items() if p.next_offset is not None)
        else:
            for partition, offset, read, dead in marks:
                places[partition] = (offset + 1, read, dead)
        position = source_position(self.source.name, self.sequence, places)
        self.sequence += 1
        return position

    def _at_end(self, number: int, partition: _Partition) -> bool:
        return read_to_end(self._consumer, self.topic.topic, number, partition.next_offset)

    def _advance_watermark(self) -> None:
        """The minimum latest event time over the partitions not read to their end (all of them once every
        partition is at its end); it never moves back."""
        holding: list[int] = []
        latest: list[int] = []
        for number, partition in self._partitions.items():
            if partition.latest_micros is not None:
                latest.append(partition.latest_micros)
            if not self._at_end(number, partition):
                if partition.latest_micros is None:
                    return  # unread records and none read yet: the partition's first record may be the earliest
                holding.append(partition.latest_micros)
        candidate = min(holding) if holding else max(latest, default=None)
        if candidate is not None and (self.watermark_micros is None or candidate > self.watermark_micros):
            self.watermark_micros = candidate
            self._dedupe.forget_before(candidate)

    def at_end(self) -> bool:
        """Whether every partition is read to the end its last fetch reported."""
        return all(self._at_end(number, partition) for number, partition in self._partitions.items())

    def reports(self) -> list[InputFileReport]:
        """What was read per partition (``InputFileReport``: the path names the topic partition)."""
        return [
            InputFileReport(partition_path(self.source.topic.uri, number), p.read, p.parsed, p.dead, None)
            for number, p in self._partitions.items()
        ]

    def counts(self) -> tuple[int, int, int | None]:
        """Records read and dead-lettered so far, and the latest event time read (None before the first)."""
        partitions = self._partitions.values()
        latest = max((p.latest_micros for p in partitions if p.latest_micros is not None), default=None)
        return sum(p.read for p in partitions), sum(p.dead for p in partitions), latest

    def consumer_lag(self) -> dict[int, int]:
        """Per partition, the messages not yet read: its end at the last fetch minus the next offset (0 before
        the first fetch answered)."""
        lag = {}
        for number, partition in self._partitions.items():
            low, high = self._consumer.get_watermark_offsets(self._topic_partition(self.topic.topic, number),
                                                             cached=True)
            start = partition.next_offset if partition.next_offset is not None else low
            lag[number] = max(0, high - start) if high >= 0 else 0
        return lag

    def commit(self) -> None:
        """Commit the offsets read (synchronously), for the next run of the same group to start from."""
        offsets = [self._topic_partition(self.topic.topic, number, p.next_offset)
                   for number, p in self._partitions.items() if p.next_offset is not None]
        if offsets:
            self._consumer.commit(offsets=offsets, asynchronous=False)

    def close(self) -> None:
        self._consumer.close()


def message_place(uri: str, partition: int, offset: int) -> str:
    """Where a message is, as its dead letter names it: ``<topic URI>/<partition>@<offset>``."""
    return f"{uri}/{partition}@{offset}"


def partition_path(uri: str, partition: int) -> str:
    """A partition as its ``InputFileReport`` names it: ``<topic URI>/<partition>``."""
    return f"{uri}/{partition}"


def row_text(row: Any) -> str:
    """A row as the ``raw`` of a dead letter made after it was decoded (a late or duplicate copy)."""
    return json.dumps(row_to_dict(row))


def _encoded_event(tag: str, encoded: bytes, timestamp_micros: int) -> Any:
    """A TestStream event adding one encoded element to output ``tag``."""
    payload = beam_runner_api_pb2.TestStreamPayload
    element = payload.TimestampedElement(encoded_element=encoded, timestamp=timestamp_micros)
    return payload.Event(element_event=payload.Event.AddElements(elements=[element], tag=tag))


def stream_tags(inputs: list[TopicInput]) -> list[str]:
    """The output tags of the stream of ``inputs``: one per input, then ``dead_letters`` and ``input_files``."""
    return [source.name for source in inputs] + [DEAD_LETTERS, INPUT_FILES]


class StreamIncomplete(Exception):
    """The pipeline finished without reading the whole stream (one line for the user)."""


class KafkaStreamService(beam_runner_api_pb2_grpc.TestStreamServiceServicer):
    """A TestStreamService over the job's ``TopicInput``s: one output tag per input, plus ``dead_letters`` and
    ``input_files``. Started by ``start`` on 127.0.0.1 and a free port (``endpoint``)."""

    def __init__(self, inputs: list[TopicInput]) -> None:
        self.inputs = inputs
        self._coder = PickleCoder()
        self._stop = threading.Event()
        self._readers: list[KafkaTopicReader] = []
        self._server: grpc.Server | None = None
        self.endpoint = ""
        self.error: str | None = None
        self.completed = False
        self._store: StateStore | None = None  # a durable job's: where its dead letters are kept
        self._job_id = ""
        self._bound: WatermarkBound | None = None  # a durable job's: every watermark is published here first

    @property
    def tags(self) -> list[str]:
        return stream_tags(self.inputs)

    def start(self, address: str = "127.0.0.1:0") -> KafkaStreamService:
        """Join the topics and serve the stream on ``address`` (a free port of 127.0.0.1 by default, or a
        ``unix:`` socket path)."""
        self._readers = [KafkaTopicReader(source) for source in self.inputs]
        durable = {source.durable for source in self.inputs if source.durable is not None}
        if durable:
            [(store_uri, self._job_id, key)] = durable  # one job, one store
            self._store = open_store(store_uri, key)
        bounds = {source.watermark_bound for source in self.inputs if source.watermark_bound is not None}
        if bounds:
            [path] = bounds
            self._bound = WatermarkBound(path)
        self._server = grpc.server(ThreadPoolExecutor(max_workers=2))
        beam_runner_api_pb2_grpc.add_TestStreamServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port(address)
        self.endpoint = f"127.0.0.1:{port}" if address.endswith(":0") else address
        self._server.start()
        return self

    def request_stop(self) -> None:
        """End the stream at the next poll: the pipeline drains what it has and finishes."""
        self._stop.set()

    def commit(self) -> None:
        for reader in self._readers:
            reader.commit()

    def close(self) -> None:
        if self._server is not None:
            self._server.stop(0)
            self._server = None
        for reader in self._readers:
            reader.close()
        self._readers = []
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._bound is not None:
            self._bound.close()
            self._bound = None

    def _element_event(self, tag: str, value: Any, timestamp_micros: int) -> Any:
        return _encoded_event(tag, self._coder.encode(value), timestamp_micros)

    def _list_events(self, tag: str, items: list, timestamp_micros: int) -> Iterator[Any]:
        """``items`` (dead letters, reports) as list elements of at most ``_MAX_ELEMENT_BYTES`` encoded, halved
        until they fit (the runner's gRPC client refuses a message over 4 MiB, and with it the whole stream)."""
        encoded = self._coder.encode(items)
        if len(encoded) > _MAX_ELEMENT_BYTES and len(items) > 1:
            half = len(items) // 2
            yield from self._list_events(tag, items[:half], timestamp_micros)
            yield from self._list_events(tag, items[half:], timestamp_micros)
        else:
            yield _encoded_event(tag, encoded, timestamp_micros)

    @staticmethod
    def _element(source: TopicInput, rows: list, watermark_micros: int | None,
                 position: bytes | None = None) -> EventBatch | PackedEvents:
        row_type = source.spec.row_type
        if source.pack is None:
            return EventBatch(rows, watermark_micros, row_type, position)
        return PackedEvents(source.pack(row_type, rows), watermark_micros, row_type, position)

    def _batch_events(self, reader: KafkaTopicReader, rows: list) -> Iterator[Any]:
        """``rows`` as elements (``_element``) of at most ``_MAX_ELEMENT_BYTES`` encoded (the runner's gRPC client
        takes messages of up to 4 MiB), each timestamped with its earliest event time: cut by the size of a
        sample of the rows, and halved again in the rare case a piece is still too large. A durable job's
        elements carry their positions (``KafkaTopicReader.position_after``)."""
        source, watermark_micros = reader.source, reader.watermark_micros
        sample = rows[:500]
        per_row = len(self._coder.encode(self._element(source, sample, watermark_micros))) / len(sample)
        step = max(1, int(_MAX_ELEMENT_BYTES * 0.8 / per_row))
        for start in range(0, len(rows), step):
            yield from self._pieces(reader, rows, start, min(start + step, len(rows)))
        if reader.marks is not None:
            reader.marks = []

    def _pieces(self, reader: KafkaTopicReader, rows: list, start: int, end: int) -> Iterator[Any]:
        source = reader.source
        marks, position, before = reader.marks, None, None
        if marks is not None:  # a durable job's element says where its partitions stand after it
            before = (dict(reader.sent_places), reader.sequence)
            position = reader.position_after(marks[start:end], end == len(rows))
        encoded = self._coder.encode(self._element(source, rows[start:end], reader.watermark_micros, position))
        if len(encoded) > _MAX_ELEMENT_BYTES and end - start > 1:
            if before is not None:  # the halves take the number and the positions
                reader.sent_places, reader.sequence = before
            half = (start + end) // 2
            yield from self._pieces(reader, rows, start, half)
            yield from self._pieces(reader, rows, half, end)
            return
        time_index = cast(Any, source.spec.row_type)._fields.index("event_time_micros")
        yield _encoded_event(source.name, encoded, min(row[time_index] for row in rows[start:end]))

    def _watermark_event(self, tag: str, micros: int) -> Any:
        """The event advancing ``tag``'s watermark to ``micros``, published to the job's bound first."""
        if self._bound is not None:
            self._bound.publish(micros)
        payload = beam_runner_api_pb2.TestStreamPayload
        return payload.Event(watermark_event=payload.Event.AdvanceWatermark(new_watermark=micros, tag=tag))

    @staticmethod
    def _heartbeat() -> Any:
        payload = beam_runner_api_pb2.TestStreamPayload
        return payload.Event(processing_time_event=payload.Event.AdvanceProcessingTime(advance_duration=0))

    def Events(self, request, context) -> Iterator[Any]:  # noqa: N802 - the gRPC method's name
        """The stream the runner reads: each poll's rows and dead letters, watermark advances, the reports."""
        try:
            yield from self._events()
            self.completed = True
        except GeneratorExit:  # the runner stopped reading before the end: it failed
            self.error = "the runner stopped reading the input stream before its end"
            raise
        except Exception as error:  # handed to the driver, which fails the run with it
            self.error = f"{type(error).__name__}: {error}"
            raise

    def raise_if_incomplete(self) -> None:
        """After the pipeline finished: a ``StreamIncomplete`` unless the whole stream was sent and read (the
        DirectRunner ends a TestStream whose service failed as if the stream had ended)."""
        if not self.completed:
            raise StreamIncomplete(f"reading the input topics failed: {self.error or 'the stream did not end'}; "
                                   "nothing was released or committed")

    def _resumed_dead_letters(self) -> Iterator[Any]:
        """A restarted durable job's dead letters of the messages it does not read again (its earlier runs')."""
        if self._store is None:
            return
        for reader in self._readers:
            resume = {partition: next_offset for partition, next_offset, _, _ in reader.source.resume}
            kept = self._store.resumed_dead_letters(self._job_id, reader.source.name, resume)
            if kept:
                yield from self._list_events(DEAD_LETTERS, [DeadLetter(**json.loads(data)) for data in kept], 0)

    def _keep_dead_letters(self, reader: KafkaTopicReader) -> None:
        """A durable job's dead letters of a poll, kept in its store before they are sent."""
        if self._store is not None and reader.letters:
            self._store.log_dead_letters(self._job_id, reader.source.name, [
                (partition, offset, json.dumps(letter._asdict()).encode()) for partition, offset, letter in reader.letters])
            reader.letters = []

    def _events(self) -> Iterator[Any]:
        yield from self._resumed_dead_letters()
        sent: dict[str, int] = {}
        emit_seconds = min(reader.source.emit_seconds for reader in self._readers)
        last_sent = time.monotonic()
        stop_at_end = all(reader.topic.stop == "end" for reader in self._readers)
        held: dict[str, tuple[list, list]] = {reader.source.name: ([], []) for reader in self._readers}
        held_since = watermark_sent_at = time.monotonic()
        while not self._stop.is_set():
            idle = True
            for reader in self._readers:
                rows, dead = held[reader.source.name]
                got, lost = reader.poll()
                self._keep_dead_letters(reader)
                rows += got
                dead += lost
                idle = idle and not got and not lost
            if stop_at_end and all(reader.at_end() for reader in self._readers):
                break  # what is held goes below, without a watermark step of its own
            full = any(len(rows) >= _POLL_MESSAGES for rows, _ in held.values())
            now = time.monotonic()
            if full or now - held_since >= emit_seconds:
                # one element per input at most every emit_seconds while the topic is live (each element costs
                # the runner a bundle in every step, each final hour a timer firing): bounded overhead per second.
                # A full poll means a backlog: its watermark waits (_CATCH_UP_WATERMARK_SECONDS at most), so that
                # the stateful steps take the backlog in few firings instead of one per poll
                advance = not full or now - watermark_sent_at >= _CATCH_UP_WATERMARK_SECONDS
                yield from self._emit(held, sent, advance)
                held_since = now
                if advance:
                    watermark_sent_at = now
            if idle:
                if time.monotonic() - last_sent > _HEARTBEAT_SECONDS:
                    last_sent = time.monotonic()
                    yield self._heartbeat()
            else:
                last_sent = time.monotonic()
        # the last records without a watermark step of their own, even when the last poll was not full: the end of
        # the input follows at once, and a step just before it would be one more firing of every stateful step
        # over nearly all it holds, where the end's firing encodes nothing (benchmarks/README.md, session 13)
        yield from self._emit(held, sent, advance=False)
        for reader in self._readers:  # the end of every input: a stateful step can finish all it holds at once
            position = None if reader.marks is None else reader.position_after([], last=True)
            yield self._element_event(reader.source.name,
                                      EventBatch([], END_OF_INPUT_MICROS, reader.source.spec.row_type, position),
                                      reader.watermark_micros or 0)
        for tag in self.tags:  # the end of the global window, where timers that wait for the end of input fire
            yield self._watermark_event(tag, END_OF_INPUT_MICROS)
        reports = [report for reader in self._readers for report in reader.reports()]
        yield from self._list_events(INPUT_FILES, reports, 0)

    def _emit(self, held: dict[str, tuple[list, list]], sent: dict[str, int], advance: bool = True) -> Iterator[Any]:
        """What was read since the last emit: every input's rows and dead letters, then (``advance``) each input's
        watermark, and the slowest input's as that of the dead letters and reports (a durable job acknowledges
        its releases once its every sink's watermark is past them, ``transforms.core.durable.acknowledgement``).

        The watermarks come after every input's rows: a stateful step then has every input's batch, and with them
        the watermarks they carry, before the runner's watermark moves, and takes the step in one firing. Sent
        input by input, the first input's watermark moved the runner's up to the second's old one, a firing of
        its own (two firings a step, half of them 0.25 to 0.5 s, in the summary client's soak)."""
        for reader in self._readers:
            name = reader.source.name
            rows, dead = held[name]
            if rows:
                yield from self._batch_events(reader, [tuple(row) for row in rows])
            if dead:
                yield from self._list_events(DEAD_LETTERS, list(dead), reader.watermark_micros or 0)
            held[name] = ([], [])
        for reader in self._readers:
            name = reader.source.name
            watermark = reader.watermark_micros
            if advance and watermark is not None and watermark > sent.get(name, -1):
                sent[name] = watermark
                yield self._watermark_event(name, watermark)
        names = [reader.source.name for reader in self._readers]
        if advance and all(name in sent for name in names):
            slowest = min(sent[name] for name in names)
            if slowest > sent.get(DEAD_LETTERS, -1):
                for tag in (DEAD_LETTERS, INPUT_FILES):
                    sent[tag] = slowest
                    yield self._watermark_event(tag, slowest)

    def status(self) -> dict:
        """Counts for the progress line and the metrics (``transforms.core.metrics``): records read, dead
        letters, the slowest input's watermark and lag; and per input (``inputs``) its reads, its dead letters
        and its consumer lag per partition."""
        read = dead = 0
        watermarks, latest = [], []
        inputs = {}
        for reader in self._readers:
            r, d, newest = reader.counts()
            read, dead = read + r, dead + d
            inputs[reader.source.name] = {"read": r, "dead_lettered": d, "consumer_lag": reader.consumer_lag()}
            watermarks.append(reader.watermark_micros)
            if newest is not None:
                latest.append(newest)
        known = [w for w in watermarks if w is not None]
        watermark = min(known) if known and len(known) == len(watermarks) else None
        return {"read": read, "dead_lettered": dead, "watermark_micros": watermark,
                "lag_micros": None if watermark is None or not latest else max(latest) - watermark, "inputs": inputs}


class ReadTopics(beam.PTransform):
    """The PCollections of the stream a ``KafkaStreamService`` of ``inputs`` serves at ``endpoint``: for each input
    name, its ``EventBatch``es or ``PackedEvents`` (the records read in about a second, or up to
    ``_POLL_MESSAGES``); ``dead_letters``
    (``DeadLetter``) and ``input_files`` (``InputFileReport``)."""

    def __init__(self, inputs: list[TopicInput], endpoint: str) -> None:
        super().__init__()
        self._inputs = inputs
        self._endpoint = endpoint

    def expand(self, pbegin):
        stream = pbegin | "Topics" >> TestStream(coder=PickleCoder(), endpoint=self._endpoint,
                                                 output_tags=set(stream_tags(self._inputs)))
        outputs = {source.name: stream[source.name] for source in self._inputs}
        for tag, kind in ((DEAD_LETTERS, DeadLetter), (INPUT_FILES, InputFileReport)):
            outputs[tag] = stream[tag] | f"Each{kind.__name__}" >> beam.FlatMap(lambda batch: batch).with_output_types(kind)
        return outputs
