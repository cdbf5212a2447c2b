"""Reading events from files and writing records, with dead letters for everything that does not parse.

``ReadEvents`` matches a file pattern and decodes every file with the codec of
its format (Avro, JSON Lines or length-delimited protobuf, by extension or
explicit). Files are the unit of parallelism: a large input should come as
several shards. Each record becomes a typed row on the main output or a
``DeadLetter`` on the ``dead_letters`` output; the counters of namespace
``pmbeam.io`` reconcile ``read == parsed + dead_lettered`` (and
``dead_lettered`` is the sum of the ``dead_letter.<reason>`` counters); the
distribution ``event_time_micros`` records each file's latest event time.
"""
from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import pickle
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol, cast

import apache_beam as beam
import fastavro
from apache_beam.coders import BytesCoder
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from schemas.codecs import FILE_FAILURES, READERS, UNREADABLE_FILE, EventSpec, format_of, row_to_dict
from schemas.formats import load_avro_schema
from schemas.rows import DeadLetter
from transforms.core import metrics
from transforms.core.durable.acknowledgement import sink_written
from transforms.core.inspected import InspectedOnceDoFn
from transforms.core.progress import note_read
from transforms.core.runner_kind import runs_here

METRICS_NAMESPACE = "pmbeam.io"
DEAD_LETTERS = "dead_letters"
INPUT_FILES = "input_files"
DEAD_LETTER_PREFIX = "dead_letter."
OUTPUT_FORMATS = ("jsonl", "avro")


class InputFileReport(NamedTuple):
    """What reading one input file gave: records ``read`` (``parsed`` + ``dead_lettered``) and, when the rest of
    the file was lost (``schemas.codecs.FILE_FAILURES``), the ``failure`` reason. Written by every run to
    ``input_files-*.jsonl``: exact counts on every runner (Beam's counters are not, in streaming), and what the
    driver judges the input by before anything is released."""

    path: str
    read: int
    parsed: int
    dead_lettered: int
    failure: str | None


class EventBatch(NamedTuple):
    """The events of one poll of a streaming source (``transforms.core.bus``) as one element, and the source's
    watermark once they were read: a record later read more than the allowed lateness behind it is dead-lettered
    at the source, so a stateful step may treat it as a promise that the pipeline's watermark will get there.

    ``rows`` are plain tuples in the field order of ``row_type`` (a named tuple costs three times as much to
    pickle and unpickle, and every element crosses the runner's gRPC stream pickled); ``typed`` gives the rows.
    ``position``: for a job with durable state, the element's ``SourcePosition`` (``transforms.core.durable``):
    its number in the input's stream and where the topic's partitions stand after its records."""

    rows: list
    watermark_micros: int | None
    row_type: type | None = None
    position: bytes | None = None

    def typed(self) -> list:
        """The rows as ``row_type`` rows."""
        if self.row_type is None:
            return self.rows
        make = cast(Any, self.row_type)._make
        return [make(row) for row in self.rows]


class PackedEvents(NamedTuple):
    """The events of one poll of a streaming source already in the form the job's first step makes of them,
    packed in the source's own process (``TopicInput.pack``): for the device replays, ``DevicePendingEvents``
    records per shard and hour (``transforms.core.device_stream.pack_events``), as ``(shard, earliest event
    time, record bytes)``. ``watermark_micros``, ``row_type`` and ``position`` as in ``EventBatch``."""

    records: list
    watermark_micros: int | None
    row_type: type
    position: bytes | None = None


# The watermark of a source's last batch (no rows): the end of its input, after which every step is final.
END_OF_INPUT_MICROS = GlobalWindow().max_timestamp().micros


class InputError(Exception):
    """Input that cannot be used: no file matches a pattern, or the files cannot be listed (one line for the user)."""


def require_input(pattern: str) -> list[str]:
    """The files matching ``pattern``; an ``InputError`` when there are none or they cannot be listed."""
    try:
        matches = FileSystems.match([pattern])[0].metadata_list
    except Exception as error:  # noqa: BLE001 - every filesystem raises its own type
        raise InputError(f"cannot read input {pattern!r}: {error}") from None
    if not matches:
        raise InputError(f"no input file matches {pattern!r}")
    return sorted(m.path for m in matches)


class RowFold(Protocol):
    """Folds the valid rows of a file into a few aggregates inside the reading call.

    Beam's cost is per element, so a pipeline that only needs aggregates
    (distinct users per group and hour, events per device) pays it per
    aggregate instead of per record.
    """

    pending: int  # rows added since the last drain
    flush_rows: int  # drain when this many rows are pending (bounds the memory a file can take)

    def add(self, row: Any) -> None: ...

    def drain(self) -> Iterable[Any]:
        """The aggregates of the rows added since the last drain; empties the fold."""


class FrameFold(RowFold, Protocol):
    """A ``RowFold`` that also takes a ``FrameReader``'s accepted rows as one columnar value."""

    def add_frame(self, frame: Any) -> None: ...


class FrameRead(NamedTuple):
    """A whole file read by a ``FrameReader``: ``frame``, the rows it accepted as one columnar value (for the
    fold's ``add_frame``), ``rows`` and ``latest`` (their count and latest event time, -1 for none), ``dead``,
    the dead letters the reader's own check of those rows made, and ``others``, the other records as (position
    in the file, row or dead letter), which go on like the rows of a codec reader."""

    frame: Any
    rows: int
    latest: int
    dead: list
    others: list


class FrameReader(Protocol):
    """A columnar shortcut for whole Avro files (``ReadEvents``' ``frames``): the file as a ``FrameRead``, or
    None to leave it to the codec reader. It gives each record the same fate as the codec reader and the
    job's ``check`` would."""

    def read(self, handle: Any, path: str) -> FrameRead | None: ...


_CHECK_MASK = (1 << 16) - 1


class _ParseFileFn(beam.DoFn):
    """Decodes one matched file into rows (or folded aggregates) and dead letters, counting both."""

    def __init__(
        self,
        spec: EventSpec,
        fmt: str | None,
        fold: Callable[[], RowFold] | None = None,
        check: Callable[[Any], str | None] | None = None,
        frames: FrameReader | None = None,
    ) -> None:
        self._spec = spec
        self._fmt = fmt
        self._fold = fold
        self._check = check
        self._frames = frames

    def setup(self) -> None:
        self._read = Metrics.counter(METRICS_NAMESPACE, "read")
        self._parsed = Metrics.counter(METRICS_NAMESPACE, "parsed")
        self._dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered")
        self._latest = Metrics.distribution(METRICS_NAMESPACE, "event_time_micros")

    def _framed(self, readable: fileio.ReadableFile, fmt: str) -> FrameRead | None:
        if self._frames is None or fmt != "avro":
            return None
        with readable.open() as handle:
            return self._frames.read(handle, readable.metadata.path)

    def process(self, readable: fileio.ReadableFile):
        path = readable.metadata.path
        fmt = format_of(path, self._fmt)
        parsed = 0
        latest = -1
        dead_by_reason: dict[str, int] = {}
        fold = self._fold() if self._fold else None
        add = fold.add if fold is not None else None
        check = self._check
        framed = self._framed(readable, fmt)
        noted = 0  # valid records already counted for the progress line (transforms.core.progress)
        if framed is not None:
            cast(FrameFold, fold).add_frame(framed.frame)  # frames come with a FrameFold (ReadEvents)
            parsed, latest = framed.rows, framed.latest
            for letter in framed.dead:
                dead_by_reason[letter.reason] = dead_by_reason.get(letter.reason, 0) + 1
                yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
        try:
            with contextlib.ExitStack() as files:
                items: Iterable[tuple[int, Any]]  # (position, a row of the spec's type, or a dead letter)
                if framed is None:
                    items = enumerate(READERS[fmt](self._spec, files.enter_context(readable.open()), path))
                else:
                    items = framed.others
                for position, item in items:
                    if type(item) is not DeadLetter and check is not None:
                        reason = check(item)
                        if reason is not None:
                            item = DeadLetter(raw=row_json_line(item), reason=reason, source=f"{path}#{position}")
                    if type(item) is DeadLetter:
                        dead_by_reason[item.reason] = dead_by_reason.get(item.reason, 0) + 1
                        yield beam.pvalue.TaggedOutput(DEAD_LETTERS, item)
                        continue
                    if item.event_time_micros > latest:
                        latest = item.event_time_micros
                    if add is None:
                        yield item
                    else:
                        add(item)
                    parsed += 1
                    if not parsed & _CHECK_MASK:  # every 65,536 rows: progress and the fold's memory bound
                        note_read(parsed - noted, 0)
                        noted = parsed
                        if fold is not None and fold.pending >= fold.flush_rows:
                            yield from fold.drain()
        except (OSError, EOFError, zlib.error) as error:  # an unreadable or truncated compressed file
            reason = UNREADABLE_FILE
            dead_by_reason[reason] = dead_by_reason.get(reason, 0) + 1
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTERS, DeadLetter(raw=f"{type(error).__name__}: {error}", reason=reason, source=path)
            )
        if fold is not None:
            yield from fold.drain()
        if parsed:
            self._latest.update(latest)
        dead = sum(dead_by_reason.values())
        note_read(parsed - noted, dead)  # what the progress line has not counted yet
        failure = next((reason for reason in dead_by_reason if reason in FILE_FAILURES), None)
        yield beam.pvalue.TaggedOutput(INPUT_FILES, InputFileReport(path, parsed + dead, parsed, dead, failure))
        self._read.inc(parsed + dead)
        self._parsed.inc(parsed)
        self._dead.inc(dead)
        for reason, count in dead_by_reason.items():
            Metrics.counter(METRICS_NAMESPACE, DEAD_LETTER_PREFIX + reason).inc(count)


class ReadEvents(beam.PTransform):
    """Rows of ``spec`` from the files matching ``file_pattern``; outputs ``events`` and ``dead_letters``.

    With ``fold`` (a factory of ``RowFold``), ``events`` carries the fold's
    aggregates instead of the rows. With ``check`` (a row to a dead-letter
    reason, or None), rows valid for the schema but not for the job (an
    attribution window longer than allowed) become dead letters too. With
    ``frames`` (a ``FrameReader``, which needs a ``fold`` with an ``add_frame``
    method), Avro files the reader takes are decoded as columns, with the same
    rows and dead letters as record by record.
    """

    def __init__(
        self,
        file_pattern: str,
        spec: EventSpec,
        fmt: str | None = None,
        fold: Callable[[], RowFold] | None = None,
        check: Callable[[Any], str | None] | None = None,
        frames: FrameReader | None = None,
    ) -> None:
        super().__init__()
        self._pattern = file_pattern
        self._spec = spec
        self._fmt = fmt
        self._fold = fold
        self._check = check
        self._frames = frames

    def expand(self, pbegin):
        return (
            pbegin
            | "Match" >> fileio.MatchFiles(self._pattern, empty_match_treatment="DISALLOW")
            | "SpreadFiles" >> beam.Reshuffle()
            | "Open" >> fileio.ReadMatches()
            | "Parse"
            >> beam.ParDo(_ParseFileFn(self._spec, self._fmt, self._fold, self._check, self._frames))
            .with_outputs(DEAD_LETTERS, INPUT_FILES, main="events")
        )


def flatten_reads(reads: list) -> tuple:
    """``(events, dead_letters, input_files)`` of several ``ReadEvents`` results, each flattened into one."""
    return tuple(
        [getattr(read, output) for read in reads] | f"Flatten_{output}" >> beam.Flatten()
        for output in ("events", DEAD_LETTERS, INPUT_FILES)
    )


class CountDeadLetters(beam.PTransform):
    """Counts dead letters produced after parsing (for example ``late`` joins) in the same counters as ReadEvents.

    Such a record was already counted as parsed; the ``dead_lettered`` counter
    of this transform is kept apart (``late_dead_lettered``) so that
    ``read == parsed + dead_lettered`` still holds for the parse stage.
    """

    def expand(self, dead_letters):
        def count(letter: DeadLetter) -> DeadLetter:
            Metrics.counter(METRICS_NAMESPACE, "late_dead_lettered").inc()
            Metrics.counter(METRICS_NAMESPACE, DEAD_LETTER_PREFIX + letter.reason).inc()
            return letter

        return dead_letters | beam.Map(count)


def row_json_line(row: NamedTuple | dict) -> str:
    """A row (or a record that already is a mapping) as one JSON line (JSON Lines outputs, and the ``raw`` of a
    dead letter made from a row)."""
    return json.dumps(record_of(row), sort_keys=False)


def record_of(row: Any) -> dict:
    """A row as the mapping the writers take (a record that already is one as it is)."""
    return row if isinstance(row, dict) else row_to_dict(row)


def jsonl_bytes(records: Iterable[dict]) -> bytes:
    """Records as JSON Lines."""
    return "".join(json.dumps(record) + "\n" for record in records).encode("utf-8")


def _write_whole(path: str, write: Callable[[Any], None]) -> None:
    """``write(handle)`` into a temporary file beside ``path``, then renamed to it: the file is there whole or not
    at all (atomic on a local or POSIX file system; os.rename, a copy on GCS), and replaces one a failed attempt
    left."""
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    with FileSystems.create(temporary) as handle:
        write(handle)
    FileSystems.rename([temporary], [path])


def write_shard_file(path: str, records: Iterable[dict], fmt: str, schema: str | None) -> None:
    """One output shard, Avro with ``schema`` or JSON Lines, written whole or not at all (a retry that renames over
    it writes the same bytes when its records are the same, since the Avro sync marker is a function of the path)."""
    if fmt == "avro":
        assert schema is not None  # WriteRecords: Avro needs a schema
        marker = hashlib.blake2b(path.rsplit("/", 1)[-1].encode("utf-8"), digest_size=16).digest()
        _write_whole(path, lambda handle: fastavro.writer(handle, load_avro_schema(schema), records,
                                                          sync_marker=marker))
    else:
        _write_whole(path, lambda handle: handle.write(jsonl_bytes(records)))


def _chunk_of(records: list[dict], fmt: str) -> bytes:
    """Records as a chunk of the streaming file sink (``_RecordsPerBundleFn``): JSON Lines ready to be written, or
    for Avro the pickled list of them (``_write_chunks`` reads both)."""
    return pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL) if fmt == "avro" else jsonl_bytes(records)


def _write_chunks(path: str, chunks: Iterable[bytes], fmt: str, schema: str | None) -> None:
    """The shard of ``_chunk_of``'s chunks, written whole (``write_shard_file``), one chunk in memory at a time."""
    if fmt == "avro":
        write_shard_file(path, (record for chunk in chunks for record in pickle.loads(chunk)), fmt, schema)
    else:
        def write(handle) -> None:
            for chunk in chunks:
                handle.write(chunk)

        _write_whole(path, write)


_SPILLS: set[str] = set()  # this process's spill directories (``spill_directory``), removed by ``remove_spills``
_SPILL_HOMES: set[str] = set()  # the durable jobs' homes they are in (``spill_into``), removed after them
_SPILL_LOCK = threading.Lock()
_SPILL_RUN = uuid.uuid4().hex[:12]  # this run's mark on the chunks it spills (``start_spills``)
_SPILL_HOME: str | None = None  # a durable job's: where its spills stay across its runs (``spill_into``)


def spill_into(home: str | None) -> None:
    """The spill directories of the outputs built from now on go in ``home`` (a durable job's, which its restarted
    runs find whatever their staging directory: ``StateStore.spill_home``), or beside each output (None)."""
    global _SPILL_HOME
    _SPILL_HOME = home
    if home is not None:
        with _SPILL_LOCK:
            _SPILL_HOMES.add(home)


def spill_directory(prefix: str) -> str:
    """Where a local live run keeps the chunks of the unbounded output ``prefix`` until its drain writes the file:
    ``<prefix>.spill/``, or ``<home>/<name>`` in a durable job's home (``spill_into``). ``start_spills`` empties
    it as a run starts, or keeps it for a restarted durable job."""
    name = prefix.rstrip("/").rsplit("/", 1)[-1]
    directory = f"{prefix}.spill" if _SPILL_HOME is None else f"{_SPILL_HOME}/{name}"
    with _SPILL_LOCK:
        _SPILLS.add(directory)
    return directory


def start_spills(keep: bool) -> None:
    """As a run starts: its spill directories emptied, or (``keep``: a durable job restarted after a crash) kept,
    since the chunks its earlier runs spilled may hold releases its release log has since dropped
    (``transforms.core.durable.acknowledgement``). Either way this run's chunks carry a mark of their own."""
    global _SPILL_RUN
    with _SPILL_LOCK:
        directories = list(_SPILLS)
        _SPILL_RUN = uuid.uuid4().hex[:12]
    if not keep:
        for directory in directories:
            _remove(directory)


def remove_spills() -> None:
    """After a run that ended (drained, or stopped without durable state): its spill directories go; their records
    are in the output files of a drained run. A durable job's run that failed keeps them for its restart
    (``forget_spills``)."""
    with _SPILL_LOCK:
        directories = [*_SPILLS, *_SPILL_HOMES]  # a durable job's home after the directories in it
        _SPILLS.clear()
        _SPILL_HOMES.clear()
    for directory in directories:
        _remove(directory)


def forget_spills() -> None:
    """After a durable job's run that failed: its spill directories stay, for the run that resumes the job."""
    with _SPILL_LOCK:
        _SPILLS.clear()
        _SPILL_HOMES.clear()


def _remove(directory: str) -> None:
    paths = [found.path for found in FileSystems.match([f"{directory}/*"])[0].metadata_list]
    if paths:
        FileSystems.delete(paths)
    if FileSystems.exists(directory):  # a local directory (an object store has none)
        FileSystems.delete([directory])


def _spill(directory: str, chunk: bytes) -> None:
    """A chunk written whole into ``directory``, named by wall-clock time and this run's mark (the order chunks
    arrive in, across a job's runs). A local one is on disk when this returns (a durable job's store may drop
    the releases it holds as soon as the bundle is done); its directory exists (``_WriteAtDrainFn.setup``)."""
    path = f"{directory}/{time.time_ns():020d}-{_SPILL_RUN}-{uuid.uuid4().hex}.chunk"
    if "://" in directory:
        _write_whole(path, lambda handle: handle.write(chunk))
        return
    temporary = f"{path}.tmp"
    with open(temporary, "wb") as handle:
        handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(temporary, path)


def _spilled(directory: str, fmt: str) -> Iterator[bytes]:
    """The chunks of ``directory`` in the order they arrived, read one at a time; when several runs spilled them
    (a durable job restarted), without the records an earlier chunk holds: a restarted job emits again what its
    release log had not yet dropped, some of which a crashed run had spilled."""
    names = sorted(found.path for found in FileSystems.match([f"{directory}/*.chunk"])[0].metadata_list)
    runs = {name.rsplit("/", 1)[-1].split("-")[1] for name in names}
    seen: set[bytes] | None = set() if len(runs) > 1 else None
    for name in names:
        with FileSystems.open(name) as handle:
            chunk = handle.read()
        yield chunk if seen is None else _new_records(chunk, fmt, seen)


def _new_records(chunk: bytes, fmt: str, seen: set[bytes]) -> bytes:
    """The chunk without the records (lines, or pickled Avro records) whose digest is in ``seen``, which it joins."""
    records = pickle.loads(chunk) if fmt == "avro" else chunk.splitlines(keepends=True)
    kept = []
    for record in records:
        digest = hashlib.blake2b(pickle.dumps(record) if fmt == "avro" else record, digest_size=16).digest()
        if digest not in seen:
            seen.add(digest)
            kept.append(record)
    return pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL) if fmt == "avro" else b"".join(kept)


class _RecordsPerBundleFn(InspectedOnceDoFn):
    """A bundle's rows as one encoded chunk under one key, ``(0, bytes)`` (``_chunk_of``), emitted at the end of the
    bundle with the earliest of their timestamps. The streaming DirectRunner's cost is per element and step, its
    state encodes what it keeps, and a sink that writes at the drain needs only the records, each made once.
    Counts the rows as outputs of ``sink``."""

    def __init__(self, fmt: str, sink: str) -> None:
        self._fmt, self._sink = fmt, sink

    def start_bundle(self) -> None:
        self._rows: list = []
        self._earliest: Timestamp | None = None

    def process(self, row, timestamp=beam.DoFn.TimestampParam):
        self._rows.append(row)
        if self._earliest is None or timestamp < self._earliest:
            self._earliest = timestamp

    def finish_bundle(self):
        if self._earliest is not None:  # a row came
            metrics.outputs_written(self._sink, len(self._rows))
            chunk = _chunk_of([record_of(row) for row in self._rows], self._fmt)
            yield WindowedValue((0, chunk), self._earliest, (GlobalWindow(),))


class _CountReasonsFn(InspectedOnceDoFn):
    """Dead letters passed on unchanged, counted per reason once per bundle (``metrics.dead_letters_written``)."""

    def start_bundle(self) -> None:
        self._reasons: collections.Counter = collections.Counter()

    def process(self, letter: DeadLetter):
        self._reasons[letter.reason] += 1
        yield letter

    def finish_bundle(self) -> None:
        metrics.dead_letters_written(self._reasons)


class _WriteAtDrainFn(InspectedOnceDoFn):
    """The whole of an unbounded output (chunks of ``_RecordsPerBundleFn``), written as
    ``<prefix>-00000-of-00001.<ext>`` when the watermark reaches the end of time, that is when the run drains.
    Until then the chunks are kept in ``spill`` (a local run: files, so that a job live for weeks does not hold its
    outputs in memory), or in state (a runner that checkpoints it, Flink). The streaming DirectRunner does not hold
    this step's watermark back for the timers upstream that fire during the drain (measured: the timer fired again
    for each of their outputs), so each firing rewrites the file whole with everything received so far, and the
    last firing leaves all of it."""

    CHUNKS = BagStateSpec("chunks", BytesCoder())
    DRAINED = TimerSpec("drained", TimeDomain.WATERMARK)

    def __init__(self, prefix: str, fmt: str, schema: str | None, spill: str | None) -> None:
        self._prefix, self._fmt, self._schema, self._spill = prefix, fmt, schema, spill

    def setup(self) -> None:
        if self._spill is not None and "://" not in self._spill:  # a local spill's directory, once
            os.makedirs(self._spill, exist_ok=True)

    def process(self, element, chunks=beam.DoFn.StateParam(CHUNKS), drained=beam.DoFn.TimerParam(DRAINED)):
        if self._spill is None:
            chunks.add(element[1])
        else:
            _spill(self._spill, element[1])
        drained.set(GlobalWindow().max_timestamp())

    @on_timer(DRAINED)
    def write(self, chunks=beam.DoFn.StateParam(CHUNKS)):
        path = f"{self._prefix}-00000-of-00001.{self._fmt}"
        _write_chunks(path, chunks.read() if self._spill is None else _spilled(self._spill, self._fmt), self._fmt,
                      self._schema)
        yield path


class WriteRecords(beam.PTransform):
    """Writes rows (or records that are already mappings) to ``<prefix>-SSSSS-of-NNNNN.<jsonl|avro>`` with the Avro
    schema ``avro_schema`` for Avro. Streaming, the rows are counted as outputs of the prefix's last part
    (``transforms.core.metrics``)."""

    def __init__(self, file_path_prefix: str, fmt: str, avro_schema: str | None = None, num_shards: int = 0) -> None:
        super().__init__()
        if fmt not in OUTPUT_FORMATS:
            raise ValueError(f"output format must be one of {OUTPUT_FORMATS}, got {fmt!r}")
        if fmt == "avro" and avro_schema is None:
            raise ValueError("writing Avro needs an Avro schema name")
        self._prefix = file_path_prefix
        self._fmt = fmt
        self._avro_schema = avro_schema
        self._num_shards = num_shards

    def expand(self, rows):
        options = rows.pipeline.options
        here = runs_here(options)
        if not rows.is_bounded or (options.view_as(StandardOptions).streaming and not here):
            # a topic's records never end, and Beam's file sinks write an unbounded PCollection only pane by pane
            # of processing time: the run's file is written once, when the run drains (its topic outputs are
            # sent as they are made). So too a streaming run of a bounded read (a topic read to its end) on a
            # runner that checkpoints: on Flink, Beam's file sink checkpoints its side inputs' pushed-back elements
            # wrongly (a ClassCastException declines every checkpoint, and the job restarts)
            written = (
                rows
                | "PerBundle" >> beam.ParDo(_RecordsPerBundleFn(self._fmt, self._prefix.rstrip("/").rsplit("/", 1)[-1]))
                | "WriteAtDrain" >> beam.ParDo(_WriteAtDrainFn(self._prefix, self._fmt, self._avro_schema,
                                                             spill_directory(self._prefix) if here else None))
            )
            sink_written(written)  # a chunk is spilled before its bundle is done: releases are acknowledged after
            return written
        if self._fmt == "jsonl":
            return rows | "ToJson" >> beam.Map(row_json_line) | "WriteJsonl" >> beam.io.WriteToText(
                self._prefix, file_name_suffix=".jsonl", num_shards=self._num_shards
            )
        assert self._avro_schema is not None  # __init__: Avro needs a schema
        return rows | "ToDict" >> beam.Map(record_of) | "WriteAvro" >> beam.io.WriteToAvro(
            self._prefix, schema=load_avro_schema(self._avro_schema), file_name_suffix=".avro", num_shards=self._num_shards
        )


class _WriteOneShard(beam.PTransform):
    """Writes rows to ``<output_dir>/<PREFIX>-00000-of-00001.jsonl``."""

    PREFIX: str

    def __init__(self, output_dir: str) -> None:
        super().__init__()
        self._output_dir = output_dir

    def expand(self, rows):
        return rows | WriteRecords(f"{self._output_dir.rstrip('/')}/{self.PREFIX}", "jsonl", num_shards=1)


class WriteDeadLetters(_WriteOneShard):
    """Writes dead letters ``{raw, reason, source}`` to ``<output_dir>/dead_letters-*.jsonl`` (one shard), counted
    per reason (``transforms.core.metrics``)."""

    PREFIX = DEAD_LETTERS

    def expand(self, letters):
        return super().expand(letters | "CountReasons" >> beam.ParDo(_CountReasonsFn()))


class WriteInputReport(_WriteOneShard):
    """Writes the ``InputFileReport`` of every input file to ``<output_dir>/input_files-*.jsonl`` (one shard)."""

    PREFIX = INPUT_FILES
