"""Whether a pipeline runs in this process (the DirectRunner, the in-process FnApiRunner) or on a runner that
runs it elsewhere and checkpoints, retries and restores it (Flink, Dataflow, any portable job server)."""
from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

LOCAL_RUNNERS = ("direct", "bundlebaseddirect", "switchingdirect", "fnapi")  # DoFns run in this process


def runs_here(options: PipelineOptions) -> bool:
    """Whether the pipeline runs in this process: the DirectRunner (where kafka:// is read by
    ``KafkaStreamService``) or the in-process FnApiRunner of batch runs (whose topic outputs use a Kafka producer)."""
    runner = options.view_as(StandardOptions).runner
    return runner is None or str(runner).rsplit(".", 1)[-1].removesuffix("Runner").lower() in LOCAL_RUNNERS
