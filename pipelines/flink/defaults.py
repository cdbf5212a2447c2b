"""What a run on ``--runner FlinkRunner --flink_master ADDRESS`` takes from the cluster ``make flink-up`` recorded.

Beam's ``FlinkRunner`` alone would start a job server from a jar it downloads (not reachable here) and ask the
TaskManager for Python workers in Docker containers (no engine here); the project's cluster has a job server,
a Python SDK worker pool and a Kafka expansion service of its own (``pipelines.flink.cluster``). When the
Flink master a run names is the recorded cluster's REST address, every one of these options the command line
leaves out is filled in from ``cluster.json``:

==============================  ================================================================================
``--job_endpoint``              the cluster's Beam job server
``--environment_type``          ``EXTERNAL``: the cluster's Python SDK worker pool (``--environment_config``)
``--environment_cache_millis``  ``ENVIRONMENT_CACHE_MILLIS``: the TaskManager hands a job's Python worker on to its
                                next stages (Beam's default, 0, starts one for each, about 2 s each: a small batch
                                job on the test cluster took 10 s without the cache, 8 s with it)
``--parallelism``               the TaskManager's slots (2)
``--expansion-service``         the Kafka expansion service whose Java transforms run in the TaskManager (EMBEDDED)
==============================  ================================================================================

On any Flink cluster, recorded or not, a streaming run is checkpointed (``--checkpointing_interval``, default
``DEFAULT_CHECKPOINT_MILLIS``): without checkpoints a failure restarts the job with empty state, which would draw
fresh noise over data it has released and give every budget back. Every run gets a ``--job_name`` of its own,
by which the driver finds its job in Flink's REST API (``pipelines.flink.rest.job_named``). A streaming job that
reads its topics to the end shuts its sources down when they are done (``finish_when_read``).
"""
from __future__ import annotations

import uuid
from pathlib import Path

from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    GoogleCloudOptions,
    PipelineOptions,
    PortableOptions,
    StandardOptions,
)

from pipelines.flink.cluster import ClusterRecord, default_home
from pipelines.options.flink import FlinkStateOptions

DEFAULT_CHECKPOINT_MILLIS = 10_000
# How long the TaskManager hands a job's Python worker to the stages that ask for one (Beam's environment cache,
# counted from the worker's start): long enough for a batch job's stages, which follow each other within seconds,
# and short enough that a worker left by a finished job (seen here to stay until its time is up) does not hold its
# memory for long.
ENVIRONMENT_CACHE_MILLIS = 60_000
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")


def _normal_address(address: str) -> str:
    """``127.0.0.1:8081`` for ``http://localhost:8081/`` and the like."""
    address = address.split("://", 1)[-1].rstrip("/")
    host, _, port = address.rpartition(":")
    return f"{'127.0.0.1' if host in _LOOPBACK_NAMES else host}:{port}"


def is_flink(options: PipelineOptions) -> bool:
    runner = options.view_as(StandardOptions).runner
    name = runner if isinstance(runner, str) else type(runner).__name__
    return name.rsplit(".", 1)[-1].lower() in ("flinkrunner", "flink")


def recorded_cluster(options: PipelineOptions, home: Path | None = None) -> ClusterRecord | None:
    """The cluster recorded in ``home`` (default ``cluster.default_home()``) when the run goes to Flink at its REST
    address; None otherwise."""
    if not is_flink(options):
        return None
    record = ClusterRecord.load(home or default_home())
    master = options.view_as(FlinkRunnerOptions).flink_master
    if record is None or _normal_address(master) != _normal_address(record.rest):
        return None
    return record


def complete(options: PipelineOptions, name: str) -> ClusterRecord | None:
    """Fill in, on ``options``, what a Flink run leaves out (this module's docstring); the recorded cluster the
    run goes to, or None."""
    if not is_flink(options):
        return None
    named = options.view_as(GoogleCloudOptions)  # --job_name: Beam's Java jobName, the Flink job's name
    if not named.job_name:
        named.job_name = f"pm-beam-{name}-{uuid.uuid4().hex[:8]}"
    state = options.view_as(FlinkStateOptions)
    if options.view_as(StandardOptions).streaming and state.checkpointing_interval is None:
        state.checkpointing_interval = DEFAULT_CHECKPOINT_MILLIS
    record = recorded_cluster(options)
    if record is None:
        return None
    portable = options.view_as(PortableOptions)
    if not portable.job_endpoint:
        portable.job_endpoint = record.job_endpoint
    if not portable.environment_type:
        portable.environment_type, portable.environment_config = "EXTERNAL", record.worker_pool
    if not portable.environment_cache_millis:  # Beam's default, 0: no cache
        portable.environment_cache_millis = ENVIRONMENT_CACHE_MILLIS
    flink = options.view_as(FlinkRunnerOptions)
    if flink.parallelism in (None, -1):
        flink.parallelism = record.parallelism
    return record


def finish_when_read(options: PipelineOptions) -> None:
    """A Flink streaming job whose every input is a bounded read (``stop=end``) shuts its sources down once idle,
    so that it finishes when they are read; Beam's default with checkpoints keeps them running forever. Not for
    unbounded reads: Beam's Kafka read continues itself through its own Impulse source, and once that shut down the
    job finished at once."""
    state = options.view_as(FlinkStateOptions)
    if is_flink(options) and state.shutdown_sources_after_idle_ms is None:
        state.shutdown_sources_after_idle_ms = 0


def expansion_service(options: PipelineOptions) -> str | None:
    """The recorded cluster's Kafka expansion service, for a run that goes to it; None otherwise."""
    record = recorded_cluster(options)
    return None if record is None else record.expansion_service
