"""The transport floor of a streaming job, for ``streaming_throughput.py``: the same job with its stateful step
replaced by a stateless step that drops every event. For the device jobs (measurement, summary clients,
event-level) that step is ``transforms.core.device_stream.replay_devices`` (buffering per shard and hour, the
timers, the device replays); for k-anonymity, the per-shard buffering and evaluation of
``KAnonymityVerdicts``. What remains is what any job reading these topics on the local runner pays: the topic
source and its stream into the DirectRunner, Beam's per-bundle work in every step, the sinks and the output
topic, start-up and drain. Benchmark only: never imported by the package."""
from __future__ import annotations

import apache_beam as beam

from transforms.budgeting import measurement
from transforms.core.io import DEAD_LETTERS
from transforms.event_level import reports
from transforms.kanon import verdicts
from transforms.kanon.verdicts import LATE
from transforms.summary_reports import clients


class _DropFn(beam.DoFn):
    """Takes every element and emits nothing."""

    def process(self, element):
        return ()


def _drop_devices(rows, replay, main: str, *tags: str, durable=None) -> beam.pvalue.DoOutputsTuple:
    return rows | "DropDevices" >> beam.ParDo(_DropFn()).with_outputs(DEAD_LETTERS, *tags, main=main)


def _drop_joins(self, joins) -> dict:
    dropped = joins | "DropJoins" >> beam.ParDo(_DropFn()).with_outputs(LATE, main="verdicts")
    return {"verdicts": dropped.verdicts, "dead_letters": dropped[LATE]}


def install() -> None:
    """Replace every job's stateful step (call before the pipeline is built)."""
    for module in (measurement, clients, reports):
        module.replay_devices = _drop_devices
    verdicts.KAnonymityVerdicts._expand_streaming = _drop_joins
