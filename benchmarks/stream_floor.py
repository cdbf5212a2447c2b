"""The transport floor of the streaming measurement job, for ``streaming_throughput.py``: the same job with its
device step (``transforms.core.device_stream.replay_devices``: buffering per shard and hour, the timers, the
device replays) replaced by a stateless step that drops every event. What remains is what any job reading these
topics on the local runner pays: the topic source and its stream into the DirectRunner, Beam's per-bundle work in
every step, the sinks and the output topic, start-up and drain. Benchmark only: never imported by the package."""
from __future__ import annotations

import apache_beam as beam

from transforms.budgeting import measurement
from transforms.core.io import DEAD_LETTERS


class _DropFn(beam.DoFn):
    """Takes every element and emits nothing."""

    def process(self, element):
        return ()


def _drop_devices(rows, replay, main: str, *tags: str, durable=None) -> beam.pvalue.DoOutputsTuple:
    return rows | "DropDevices" >> beam.ParDo(_DropFn()).with_outputs(DEAD_LETTERS, *tags, main=main)


def install() -> None:
    """Replace the measurement job's device step (call before the pipeline is built)."""
    measurement.replay_devices = _drop_devices
