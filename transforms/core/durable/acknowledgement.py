"""Which of a durable job's releases every sink has written: what lets its steps drop them from the release log.

A durable step writes each firing's outputs to its release log before it emits them (``step``), so that a crash
between the two loses nothing. Once every sink has written an output, its log entry serves no purpose, and a job
live for weeks would otherwise keep every report it ever released. The acknowledgement is by event time, on the
local runner only (where the durable store serves), and rests on three measured facts of its streaming engine
(``apache_beam.runners.direct``; DESIGN.md, "Streaming on this machine"):

1. an element waiting at a step holds that step's watermark below the element's timestamp, and so every watermark
   downstream of it; a timer that fired holds nothing (a stateful step's outputs can reach a sink whose watermark
   is already past the firing's time);
2. every watermark of the run is at most the highest the topic source has sent: ``WatermarkBound``, which the
   source publishes in a shared file before it sends it;
3. one bundle runs at a time (``NUM_WORKERS`` of the executor is 1): nothing advances while a firing runs.

A durable step therefore emits what a firing releases at ``release_time``: after its firing time and after the
bound (fact 2), hence after every watermark of the run, now (fact 3) and until its outputs are written (fact 1).
``AcknowledgeReleases`` follows every sink of the job (``sink_written``): its watermark timer, set after the bound,
fires at ``T`` only once every sink's watermark is past ``T``, which proves that every output stamped before ``T``
was written (a file chunk renamed into its spill directory, a topic's producer flushed). ``acknowledged(job)`` is
then ``T``, and a step's next snapshot drops the log entries stamped before it, in the same transaction.

Without the bound (a job read by another source, or a runner with several workers) nothing is stamped or
acknowledged, and the log keeps everything, as before.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile
import threading
import weakref

import apache_beam as beam
from apache_beam.runners.direct.executor import _ExecutorServiceParallelExecutor
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow, TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from transforms.core.inspected import InspectedOnceDoFn

_FORMAT = struct.Struct("<q")
_NOTHING_SENT = -(1 << 62)  # before the source's first watermark: every watermark of the run is below this
END_MICROS = GlobalWindow().max_timestamp().micros  # the latest time an element may have (the end of input)


class WatermarkBound:
    """The highest watermark a job's topic source has sent, in a shared 8-byte file: the source ``publish``es a
    watermark before it sends it, so the driver's ``read`` is never below any watermark of the run."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "r+b")  # noqa: SIM115 - mapped for the object's life
        self._map = mmap.mmap(self._file.fileno(), _FORMAT.size)

    @classmethod
    def create(cls) -> WatermarkBound:
        """A new bound (nothing sent yet) in a private temporary file."""
        handle, path = tempfile.mkstemp(prefix="pm-beam-watermark-")
        with os.fdopen(handle, "wb") as file:
            file.write(_FORMAT.pack(_NOTHING_SENT))
        return cls(path)

    def publish(self, micros: int) -> None:
        """The source is about to send a watermark of ``micros`` (an aligned 8-byte store: read whole)."""
        if micros > self.read():
            _FORMAT.pack_into(self._map, 0, micros)

    def read(self) -> int:
        return _FORMAT.unpack_from(self._map, 0)[0]

    def unlink(self) -> None:
        """Remove the file's name once every process that shares the bound has it open (the mapping stays): a run
        killed without its cleanup (SIGKILL) leaves nothing behind."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def close(self, remove: bool = False) -> None:
        self._map.close()
        self._file.close()
        if remove:
            self.unlink()


_BOUNDS: dict[str, WatermarkBound] = {}  # job id -> the bound of its run in this process (``acknowledge_sinks``)
_ACKNOWLEDGED: dict[str, int] = {}  # job id -> the time before which every output stamped was written
_SINKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # pipeline -> its sinks' last PCollections
_LOCK = threading.Lock()


def one_bundle_at_a_time() -> bool:
    """Fact 3 of the module: the DirectRunner's executor runs one bundle at a time."""
    return _ExecutorServiceParallelExecutor.NUM_WORKERS == 1


def release_time(job_id: str, natural_micros: int) -> int | None:
    """When a durable step of ``job_id`` emits an output it would emit at ``natural_micros``: the first whole
    millisecond after the bound (and not before ``natural_micros``; at most the end of input). None when the job's
    releases are not acknowledged: the output keeps its own time."""
    bound = _BOUNDS.get(job_id)
    if bound is None:
        return None
    after = -(-(bound.read() + 1) // 1000) * 1000
    return min(max(natural_micros, after), END_MICROS)


def stamped(outputs: list, at: int | None) -> list:
    """``outputs`` (values or ``TaggedOutput``s) timestamped ``at`` (unchanged when ``at`` is None)."""
    if at is None:
        return outputs
    timestamp = Timestamp(micros=at)
    tagged = beam.pvalue.TaggedOutput
    return [tagged(output.tag, TimestampedValue(output.value, timestamp)) if isinstance(output, tagged)
            else TimestampedValue(output, timestamp) for output in outputs]


def acknowledged(job_id: str) -> int | None:
    """The time before which every output of ``job_id`` stamped by ``release_time`` was written by every sink."""
    return _ACKNOWLEDGED.get(job_id)


def acknowledge(job_id: str, micros: int) -> None:
    """Every sink of ``job_id`` has written every output stamped before ``micros`` (``_AcknowledgeFn``)."""
    with _LOCK:
        _ACKNOWLEDGED[job_id] = max(_ACKNOWLEDGED.get(job_id, micros), micros)


def sink_written(written) -> None:
    """Register a sink's last PCollection (its watermark passes a time once what it was given before is written)."""
    with _LOCK:
        _SINKS.setdefault(written.pipeline, []).append(written)


class _OneKeyFn(InspectedOnceDoFn):
    """(0, None) for every element: one key, for ``_AcknowledgeFn``'s timer. A DoFn of its own rather than a
    ``beam.Map``, whose wrapper Beam inspects whole at every bundle, and every sink's bundle comes here."""

    def process(self, element):
        yield 0, None


class _AcknowledgeFn(InspectedOnceDoFn):
    """One key: a watermark timer after the bound, set again after it as it fires; each firing acknowledges its
    time (``acknowledged``). A firing past the bound means the runner moved the watermark beyond what the source
    sent (it ends a stream whose source died as if it had ended): nothing is acknowledged from then on."""

    AT = TimerSpec("at", TimeDomain.WATERMARK)

    def __init__(self, job_id: str) -> None:
        self._job_id = job_id

    def _next(self, after_micros: int) -> Timestamp:
        due = release_time(self._job_id, after_micros + 1000)
        return Timestamp(micros=END_MICROS if due is None else due)

    def process(self, element, at=beam.DoFn.TimerParam(AT)):
        at.set(self._next(_NOTHING_SENT))

    @on_timer(AT)
    def fired(self, fire_time=beam.DoFn.TimestampParam, at=beam.DoFn.TimerParam(AT)):
        bound = _BOUNDS.get(self._job_id)
        if bound is None or fire_time.micros > bound.read():  # fact 2 no longer holds
            return
        acknowledge(self._job_id, fire_time.micros)
        if fire_time.micros < END_MICROS:
            at.set(self._next(fire_time.micros))


def acknowledge_sinks(pipeline: beam.Pipeline, job_id: str, bound: WatermarkBound) -> bool:
    """Follow every sink registered for ``pipeline`` with the job's acknowledgement, and stamp its steps' releases
    after ``bound`` from now on. False (nothing done) when the pipeline has no sink, or the runner's executor runs
    several bundles at once (then nothing is acknowledged, and the release log keeps everything)."""
    with _LOCK:
        sinks = _SINKS.pop(pipeline, [])
    if not sinks or not one_bundle_at_a_time():
        return False
    start = pipeline | "AcknowledgeStart" >> beam.Create([None])
    (
        [start, *sinks]
        | "AcknowledgeSinks" >> beam.Flatten()
        | "AcknowledgeKey" >> beam.ParDo(_OneKeyFn())
        | "Acknowledge" >> beam.ParDo(_AcknowledgeFn(job_id))
    )
    with _LOCK:
        _BOUNDS[job_id] = bound
        _ACKNOWLEDGED.pop(job_id, None)
    return True


def forget(job_id: str) -> None:
    """The job's run is over in this process: its bound and acknowledgement go."""
    with _LOCK:
        _BOUNDS.pop(job_id, None)
        _ACKNOWLEDGED.pop(job_id, None)
