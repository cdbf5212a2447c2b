"""A run's Flink job, seen from its driver: found in Flink's REST API by its ``--job_name``
(``pipelines.flink.defaults`` gives every run one), drained when the driver of a streaming run is interrupted, and
its savepoint when it was stopped without draining.

A streaming run on the local runner drains on SIGINT or SIGTERM (``pipelines.topics``); on Flink the same
signals to the driver stop the job with a draining savepoint: the sources send the watermark to the end of time,
every timer fires, the job's files are written, and the driver then judges and releases as it does locally. A
job whose topics are read to their end (``stop=end``) ends so by itself. Any other end of a streaming job (a
plain savepoint, ``pm-beam flink stop``; a drain or cancel from Flink's own tools) leaves nothing final: the
driver reports the savepoint to resume from and releases nothing (``pipelines.release``); a job cancelled after
its savepoint (how ``pm-beam flink stop`` stops one, ``pipelines.flink.rest.stop_with_savepoint`` says why) too.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from apache_beam.options.pipeline_options import FlinkRunnerOptions, GoogleCloudOptions, PipelineOptions

from pipelines.flink import rest


def job_of(options: PipelineOptions) -> dict | None:
    """The run's job (``{"jid", "name", "state", ...}``) at its Flink master, or None when Flink has none of
    that name."""
    return rest.job_named(options.view_as(FlinkRunnerOptions).flink_master,
                          options.view_as(GoogleCloudOptions).job_name)


def savepoint_of(options: PipelineOptions) -> str | None:
    """Where the run's job saved its state last when it stopped with a savepoint (None without one)."""
    job = job_of(options)
    if job is None:
        return None
    latest = rest.checkpoints(options.view_as(FlinkRunnerOptions).flink_master, job["jid"]).get("latest") or {}
    return (latest.get("savepoint") or {}).get("external_path")


def cancelled_savepoint(options: PipelineOptions) -> str | None:
    """The savepoint of the run's job when Flink cancelled it after taking one (``pm-beam flink stop``, Flink's
    cancel with savepoint): the job to resume. None when the job is not cancelled or left no savepoint."""
    try:
        job = job_of(options)
        if job is None or job["state"] != "CANCELED":
            return None
        return savepoint_of(options)
    except rest.FlinkRestError:  # the cluster is gone: the job's own failure says more
        return None


def _drain(options: PipelineOptions) -> None:
    """Stop the run's job with a draining savepoint (in a thread of its own: Flink answers once it is done)."""
    try:
        job = job_of(options)
        if job is None or job["state"] in rest.TERMINAL_STATES:
            return
        rest.stop_with_savepoint(options.view_as(FlinkRunnerOptions).flink_master, job["jid"], None, drain=True)
    except rest.FlinkRestError as error:
        print(f"error: could not drain the Flink job: {error}", file=sys.stderr, flush=True)


class Drain:
    """Whether the driver drained its job (``draining_on_signal``)."""

    requested = False


@contextlib.contextmanager
def draining_on_signal(options: PipelineOptions) -> Iterator[Drain]:
    """While the driver waits for a streaming job on Flink: SIGINT and SIGTERM drain the job instead of killing the
    driver (the job would otherwise run on without anyone to release its outputs); yields whether they did."""
    drained = Drain()

    def drain(signum, frame) -> None:
        print(f"{signal.Signals(signum).name}: draining the Flink job (its sources end, every timer fires, its "
              "outputs are written)", file=sys.stderr, flush=True)
        drained.requested = True
        threading.Thread(target=_drain, args=(options,), name="drain-flink-job", daemon=True).start()

    previous = {signum: signal.signal(signum, drain) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield drained
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
