"""A run's outputs are released all at once, after its input was judged, or not at all.

DESIGN.md, "Command-line conventions": a run whose input is broken fails instead of releasing a partial
answer. Every event pipeline therefore writes into a staging directory inside its output directory
(``.staging-<id>``); once the pipeline has finished, the driver reads back what each input file gave
(``input_files-*.jsonl``, ``transforms.core.io.InputFileReport``) and the dead letters, and judges the input:

* a file whose rest was lost (truncated or corrupt, unreadable: ``schemas.codecs.FILE_FAILURES``) fails the run;
* an input without a single valid record fails the run;
* dead letters above ``--max-error-fraction`` of the records read fail the run.

A run that passes moves every file it wrote into the output directory. A run that fails moves only its dead
letters and its input report, so that the user can see why, writes a ``summary.json`` with ``status: failed``
and the reason, and releases nothing else.
"""
from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import FlinkRunnerOptions

from pipelines import common, deferred, topics
from pipelines.flink import defaults as flink_defaults
from pipelines.flink import jobs as flink_jobs
from pipelines.flink import rest
from pipelines.runners import runner_name
from transforms.core.bus.kafka_stream import DUPLICATE, StreamIncomplete
from transforms.core.collector import streaming_collector
from transforms.core.durable.step import StreamEnded
from transforms.core.durable.store import StoreUnavailable
from transforms.core.io import INPUT_FILES
from transforms.core.runner_kind import runs_here
from transforms.core.secrets import SecretUnavailable


def staging_dir(output: str) -> str:
    """A fresh staging directory inside ``output``."""
    return f"{output.rstrip('/')}/.staging-{uuid.uuid4().hex[:12]}"


def input_failure(reports: list[dict], counts: dict, max_error_fraction: float) -> str | None:
    """Why the input fails the run (one line), or None when it does not: ``reports`` are the input files'
    ``InputFileReport`` records, ``counts`` the run's input counts (``common.input_counts``)."""
    for report in reports:
        if report["failure"]:
            return (f"input file {report['path']} is truncated, corrupt or unreadable ({report['failure']} after "
                    f"{report['parsed']} valid records): replace it and run again")
    if not counts["parsed"]:
        if not counts["read"]:
            return "the input holds no records"
        return f"none of the {counts['read']} records read is valid (see the dead letters)"
    # a duplicate is a message an at-least-once bus delivered twice (dropped at the source): not an input error
    read, dead = counts["read"], counts["dead_lettered"] - counts["dead_lettered_by_reason"].get(DUPLICATE, 0)
    if dead > max_error_fraction * read:
        return (f"{dead} of {read} records are dead letters ({dead / read:.1%}), more than --max-error-fraction "
                f"{max_error_fraction:g} (see the dead letters)")
    return None


def publish(staging: str, output: str, *, everything: bool) -> None:
    """Moves the files of ``staging`` into ``output`` (all of them, or only the diagnostics) and removes it."""
    matched = FileSystems.match([f"{staging}/*"])[0].metadata_list
    files = [m.path for m in matched if everything or m.path.rsplit("/", 1)[-1].startswith(common.DIAGNOSTICS)]
    if files:
        FileSystems.rename(files, [f"{output.rstrip('/')}/{path.rsplit('/', 1)[-1]}" for path in files])
    FileSystems.delete([staging])


@contextlib.contextmanager
def completed_run(job: Any, beam_args: list[str], build: Callable, output: str, *, streaming: bool,
                  name: str = "job") -> Iterator[tuple]:
    """Build the job's pipeline (``build(pipeline, job, output)``), run it to completion and yield Beam's result
    and its topic source (``pipelines.topics``; None without topic inputs), closed on exit. The caller commits
    the source's offsets once it has judged the run.

    A run that only hands the job over (a template launch) raises ``deferred.Submitted`` once it has; inside
    ``pm-beam release`` nothing is built or run, and the result is that of a job that ran elsewhere
    (``pipelines.deferred``)."""
    if deferred.releasing() is not None:
        yield deferred.NoMetrics(), None
        return
    options = common.pipeline_options(beam_args, streaming=streaming, name=name)
    pipeline = beam.Pipeline(options=options)
    try:
        build(pipeline, job, output)
    except BaseException:
        topics.discard(pipeline)  # a topic source the graph had started: closed, its consumers with it
        raise
    if deferred.submits_only(options):
        if topics.reads_here(pipeline):
            topics.discard(pipeline)
            raise common.CliError("--template_location hands the job to a runner that runs it elsewhere (Dataflow); "
                                  "topics this process reads for the local runner cannot be handed over: drop it")
        deferred.mark_completion(pipeline, output)  # the job's last step: its end, which no driver waits for
        try:
            pipeline.run()  # writes the job file, which the launcher submits: nothing runs here
        finally:
            topics.discard(pipeline)
        raise deferred.Submitted(output, None)
    elsewhere = not runs_here(options)
    on_flink = streaming and flink_defaults.is_flink(options)
    draining = flink_jobs.draining_on_signal(options) if on_flink else contextlib.nullcontext(None)
    collector = streaming_collector() if streaming else contextlib.nullcontext()
    with topics.running(pipeline) as source, collector:
        try:
            with draining as drained:
                result = pipeline.run()
                result.wait_until_finish()
        except Exception as error:
            if on_flink and not drained.requested:
                savepoint = flink_jobs.cancelled_savepoint(options)  # stopped to be resumed
                if savepoint is not None:
                    raise Suspended(savepoint) from None
            for kind in (StoreUnavailable, SecretUnavailable):  # its state could not be kept, a key not read
                failure = _one_line_failure(error, kind)
                if failure is not None:
                    raise common.RunFailure(failure) from None
            if source is not None:  # a stream that failed is the first cause; the steps' errors follow from it
                _raise_if_incomplete(source)
            failure = _one_line_failure(error, StreamEnded)
            if failure is None and elsewhere:  # the runner's own failure: its first line, and where to look
                failure = _remote_failure(error, options)
            if failure is None:
                raise
            raise common.RunFailure(failure) from None
        if source is not None:
            _raise_if_incomplete(source)  # the runner ends a stream it failed to read as if it had ended
        if on_flink and not drained.requested and not topics.reads_to_end(pipeline):
            # a job that neither read its topics to the end nor was drained by this driver: stopped to be resumed
            raise Suspended(flink_jobs.savepoint_of(options))
        yield result, source


class Suspended(Exception):  # noqa: N818 - an outcome, not an error: the job was stopped to be resumed
    """A streaming job on Flink that ended without draining, with the savepoint it left (None without one):
    nothing is final, nothing is released (``pipelines.flink.jobs``)."""

    def __init__(self, savepoint: str | None) -> None:
        super().__init__(savepoint)
        self.savepoint = savepoint


def _remote_failure(error: Exception, options) -> str:
    """One line for a job that failed on a runner elsewhere: what the runner said first, and where to read more."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
    where = ""
    if flink_defaults.is_flink(options):
        where = f" (its exceptions: {rest.base_url(options.view_as(FlinkRunnerOptions).flink_master)}/#/overview)"
    return f"the job failed on {runner_name(options)}: {lines[0][:500]}{where}"


def _raise_if_incomplete(source) -> None:
    try:
        source.raise_if_incomplete()
    except StreamIncomplete as error:
        raise common.RunFailure(str(error)) from None


def _one_line_failure(error: BaseException, kind: type[Exception]) -> str | None:
    """The message of a ``kind`` failure raised in a step, which the user is told in one line (the runner may
    wrap what a step raised, or carry only its text)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return str(seen).splitlines()[0]
        seen = seen.__cause__ or seen.__context__
    marker = f"{kind.__name__}: "
    text = str(error)
    return text.split(marker, 1)[1].splitlines()[0] if marker in text else None


def execute(job: Any, beam_args: list[str], build: Callable, summarise: Callable, *, name: str, streaming: bool,
            output: str, max_error_fraction: float) -> dict:
    """Build the job's pipeline into a staging directory, run it, judge its input, release or not, and write and
    return the summary: ``summarise(job, result, elapsed seconds, input counts)`` for a released run (reading
    the published outputs), the failure's summary otherwise."""
    started = time.monotonic()
    staging = deferred.releasing() or staging_dir(output)
    try:
        with completed_run(job, beam_args, build, staging, streaming=streaming, name=name) as (result, source):
            reports = list(common.output_records(staging, INPUT_FILES))
            counts = common.input_counts(reports, common.dead_letters_by_reason(staging))
            failure = input_failure(reports, counts, max_error_fraction)
            publish(staging, output, everything=failure is None)
            if failure is None and source is not None:
                source.commit()  # the outputs are flushed and released: the next run starts after what this one read
    except deferred.Submitted:
        raise deferred.Submitted(output, staging) from None  # its outputs wait in staging for `pm-beam release`
    except Suspended as suspended:
        if FileSystems.exists(staging):  # what its timers wrote before the stop: nothing is final
            FileSystems.delete([staging])
        summary = {"pipeline": name, "status": "suspended", "savepoint": suspended.savepoint,
                   "elapsed_seconds": round(time.monotonic() - started, 3), "outputs": {}}
        summary["outputs"]["summary"] = common.write_summary(output, summary)
        return summary
    if failure is None:
        summary = {**summarise(job, result, time.monotonic() - started, counts), "status": "ok"}
        if deferred.releasing() is not None:
            summary["counters_note"] = deferred.COUNTERS_NOTE
    else:
        summary = {
            "pipeline": name,
            "status": "failed",
            "failure": f"{failure}; nothing was released",
            "max_error_fraction": max_error_fraction,
            "counts": counts,
            "elapsed_seconds": round(time.monotonic() - started, 3),
            "outputs": common.diagnostic_files(output),
        }
    summary["outputs"]["summary"] = common.write_summary(output, summary)
    return summary
