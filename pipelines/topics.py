"""Topic inputs and outputs of a pipeline run (``kafka://``, ``pubsub://``), on the driver's side.

A pipeline's ``build`` calls ``read_topics`` for its topic inputs and ``write_topic`` for a topic output;
``running`` wraps the run: it installs the SIGINT/SIGTERM handlers that drain a streaming run (the source ends
its stream, the pipeline finishes what it holds, the sinks flush), and hands the sources to the caller, which
commits their offsets once the run was judged (``pipelines.release``) and closes them.

The local path (the DirectRunner, the default) reads Kafka through ``transforms.core.bus.kafka_stream``; a run on
another runner uses Beam's own transforms (``transforms.core.bus.production``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import signal
import sys
import weakref
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

import apache_beam as beam
import orjson

from pipelines import common, durable
from pipelines.common import CliError
from pipelines.flink import defaults as flink_defaults
from pipelines.options.run import RunOptions
from schemas.codecs import EventSpec
from schemas.rows import DeadLetter
from transforms.core.bus.consumer import records_to_end
from transforms.core.bus.endpoints import Endpoint, EndpointError, KafkaTopic, is_bus, parse_endpoint
from transforms.core.bus.kafka_stream import ReadTopics, TopicInput
from transforms.core.bus.production import EXPANSION_SERVICE_HINT, ReadTopicProduction, WriteTopicProduction
from transforms.core.bus.sinks import WriteToKafkaTopic, close_producers
from transforms.core.bus.stream_process import KafkaStreamProcess
from transforms.core.device_stream import pack_events
from transforms.core.durable.acknowledgement import acknowledge_sinks
from transforms.core.durable.step import DurableStep
from transforms.core.io import (
    DEAD_LETTERS,
    INPUT_FILES,
    WriteDeadLetters,
    WriteInputReport,
    forget_spills,
    remove_spills,
    spill_into,
    start_spills,
)
from transforms.core.metrics import JobMetrics, begin_run, serve
from transforms.core.progress import ProgressLine
from transforms.core.runner_kind import runs_here

DEFAULT_MESSAGE_FORMAT = "jsonl"
_SERVICES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # pipeline -> its KafkaStreamProcess
_JOBS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # pipeline -> its DurableJob (durable state)
_TO_END: weakref.WeakSet = weakref.WeakSet()  # pipelines reading their topics to the end on a production runner


def endpoint_of(name: str, options: RunOptions) -> Endpoint:
    """The topic or subscription ``name`` (Kafka ones with ``--kafka-config``); a CliError when it is not one."""
    try:
        return parse_endpoint(name, options.kafka_config)
    except EndpointError as error:
        raise CliError(str(error)) from None


def topic_input(name: str, uri: str, spec: EventSpec, options: RunOptions, pipeline_name: str,
                check: Callable[[Any], str | None] | None = None) -> TopicInput:
    """The ``TopicInput`` ``name`` of a job: the topic ``uri`` of ``spec`` events, in ``--format`` (default
    jsonl), late after ``--allowed-lateness-seconds``, consumer group ``pm-beam-<pipeline>`` unless named, and
    the job's ``check`` of each valid row."""
    return TopicInput(name, endpoint_of(uri, options), spec,
                      options.input_format or DEFAULT_MESSAGE_FORMAT, options.lateness_micros,
                      f"pm-beam-{pipeline_name}", check, pipeline=pipeline_name, emit_seconds=options.snapshot_seconds)


def inputs_text(names: list[str], input_format: str | None) -> str:
    """What a run reads, for its first line: the topics, or how many files (checking that they exist)."""
    if any(is_bus(name) for name in names):
        return ", ".join(name.split("?", 1)[0] for name in names)
    return f"{len(common.input_files(names, input_format))} input file(s)"


def all_topics_or_files(named: dict[str, str]) -> bool:
    """Whether a job's inputs (option -> name) are all topics (True) or all files (False); a CliError when mixed."""
    kinds = {is_bus(name) for name in named.values()}
    if len(kinds) > 1:
        raise CliError(f"{', '.join(named)}: read all from topics or all from files, not some of each")
    return kinds == {True}


def read_topics(pipeline: beam.Pipeline, inputs: list[TopicInput], options: RunOptions) -> dict:
    """The PCollections of a job's topic ``inputs``: for each input name, its events (``EventBatch``es on the
    local path, rows elsewhere), and ``dead_letters`` and ``input_files``. On the local DirectRunner, Kafka
    topics are read by one ``KafkaStreamService`` per pipeline, in a process of its own (``KafkaStreamProcess``);
    on any other runner, or for Pub/Sub, by Beam's own transforms (``transforms.core.bus.production``)."""
    if _reads_locally(pipeline, inputs):
        return _read_locally(pipeline, inputs, options)
    if options.metrics_port is not None:
        raise CliError("--metrics-port serves a run on the local runner; on this runner the job's counters are "
                       "Beam metrics, in the runner's own monitoring (docs/operations.md)")
    outputs: dict = {}
    dead, reports = [], []
    expansion_service = options.expansion_service or flink_defaults.expansion_service(pipeline.options)
    for source in inputs:
        try:
            read = pipeline | f"Read_{source.name}" >> ReadTopicProduction(
                source.topic, source.spec, source.fmt, source.lateness_micros, source.group, check=source.check,
                expansion_service=expansion_service, timestamp_attribute=options.timestamp_attribute,
                id_attribute=options.id_attribute, max_records=_records_to_end(source))
        except ImportError as error:
            raise CliError(f"reading {source.topic.uri} needs the Google Cloud libraries ({error.name}): "
                           "pip install 'apache-beam[gcp]'") from None
        except CliError:
            raise
        except Exception as error:  # noqa: BLE001 - the expansion service's gRPC errors and our own: one line
            raise CliError(f"cannot read {source.topic.uri}: {_why(error, source.topic, expansion_service)}") from None
        outputs[source.name] = read["rows"]
        dead.append(read[DEAD_LETTERS])
        reports.append(read[INPUT_FILES])
    outputs[DEAD_LETTERS] = dead | "TopicDeadLetters" >> beam.Flatten()
    outputs[INPUT_FILES] = reports | "TopicReports" >> beam.Flatten()  # one per topic, when the run drains
    if all(isinstance(source.topic, KafkaTopic) and source.topic.stop == "end" for source in inputs):
        _TO_END.add(pipeline)
        flink_defaults.finish_when_read(pipeline.options)
    return outputs


def reads_to_end(pipeline: beam.Pipeline) -> bool:
    """Whether the pipeline reads its topics on a production runner to the end they had (``stop=end``): a
    streaming job that then finishes by itself, its last outputs written."""
    return pipeline in _TO_END


def _records_to_end(source: TopicInput) -> int | None:
    """For a Kafka input with ``stop=end`` on a production runner: how many records its topic holds beyond where
    the run starts (the group's committed offsets, else ``start``), which bounds Beam's Kafka read so that it ends
    there, as the local source stops at the end it found. None for an input that does not stop."""
    topic = source.topic
    if not isinstance(topic, KafkaTopic) or topic.stop != "end":
        return None
    try:
        return records_to_end(topic, source.group)
    except ValueError as error:
        raise CliError(str(error)) from None


def read_topic_rows(pipeline: beam.Pipeline, inputs: list[TopicInput], options: RunOptions) -> tuple:
    """The device events of every input of ``inputs`` in one PCollection, for a device replay
    (``transforms.core.device_stream``), with the ``dead_letters`` and ``input_files`` of ``read_topics``: rows,
    or on the local path ``PackedEvents`` (the source's process packs each poll as the replay's first step
    would)."""
    read = read_topics(pipeline, [dataclasses.replace(source, pack=pack_events) for source in inputs], options)
    rows = [read[source.name] for source in inputs] | "TopicRows" >> beam.Flatten()
    return rows, read[DEAD_LETTERS], read[INPUT_FILES]


def _reads_locally(pipeline: beam.Pipeline, inputs: list[TopicInput]) -> bool:
    return runs_here(pipeline.options) and all(isinstance(source.topic, KafkaTopic) for source in inputs)


def _why(error: Exception, endpoint: Endpoint, expansion_service: str | None) -> str:
    """One line on why building a production topic transform failed (an expansion service that does not answer
    is a gRPC error whose text spans lines)."""
    details = getattr(error, "details", None)
    if callable(details) and isinstance(endpoint, KafkaTopic):
        return (f"the Kafka expansion service at {expansion_service} did not answer ({details()}). "
                f"{EXPANSION_SERVICE_HINT}")
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _read_locally(pipeline: beam.Pipeline, inputs: list[TopicInput], options: RunOptions) -> dict:
    if pipeline in _SERVICES:
        raise ValueError("a pipeline reads all its topics through one read_topics call")
    job = durable.open_job(options, inputs)
    if job is not None:
        _JOBS[pipeline] = job
        inputs = job.resumed(inputs)
        spill_into(job.store.spill_home(job.job_id))  # its file outputs' spills outlive a crashed run
    metrics = begin_run()  # the steps of this run count into a registry of its own
    try:
        served = _serve_metrics(metrics, options.metrics_port)
        service = KafkaStreamProcess(inputs, ProgressLine(options.progress_seconds), served).start()
    except BaseException:
        discard(pipeline)
        raise
    _SERVICES[pipeline] = service
    return pipeline | "ReadTopics" >> ReadTopics(inputs, service.endpoint)


def _serve_metrics(metrics: JobMetrics, port: int | None) -> JobMetrics | None:
    """With ``--metrics-port``: the run's metrics served on 127.0.0.1 (``transforms.core.metrics``), its address
    printed; else None. A CliError when the port cannot be bound."""
    if port is None:
        return None
    try:
        port = serve(port)
    except OSError as error:
        raise CliError(f"--metrics-port {port}: cannot serve on 127.0.0.1:{port}: {error.strerror or error}") from None
    print(f"metrics: http://127.0.0.1:{port}/metrics", flush=True)
    return metrics


def durable_job(pipeline: beam.Pipeline) -> durable.DurableJob | None:
    """The durable job the pipeline continues (its topics read locally with a state store), else None."""
    return _JOBS.get(pipeline)


def durable_step(pipeline: beam.Pipeline, name: str) -> DurableStep | None:
    """Where the stateful step ``name`` of a pipeline keeps its state: in the job's durable store when the
    pipeline reads topics locally with one (``pipelines.durable``), else nowhere but Beam's state (None)."""
    job = _JOBS.get(pipeline)
    return None if job is None else job.step(name)


def _ready(service: KafkaStreamProcess) -> None:
    """Wait for the topic source to serve its stream; a CliError (one line) when it could not join the topics."""
    try:
        service.ready()
    except ImportError:
        raise CliError("reading kafka:// needs confluent-kafka: pip install 'privacy-measurement-beam[kafka]'") from None
    except Exception as error:  # noqa: BLE001 - KafkaException and ValueError: one line for the user
        raise CliError(f"cannot read the input topics: {error}") from None


def write_topic(records, uri: str, options: RunOptions, encode: Callable[[Any], bytes],
                key_of: Callable[[Any], str], id_of: Callable[[Any], str], label: str):
    """Send ``records`` to the topic ``uri`` (each with a key and a stable id): on the local runner a Kafka
    producer (``transforms.core.bus.sinks``), elsewhere Beam's own transforms."""
    endpoint = endpoint_of(uri, options)
    if runs_here(records.pipeline.options) and isinstance(endpoint, KafkaTopic):
        return records | label >> WriteToKafkaTopic(endpoint, encode, key_of, id_of)
    expansion_service = options.expansion_service or flink_defaults.expansion_service(records.pipeline.options)
    try:
        return records | label >> WriteTopicProduction(endpoint, encode, key_of, id_of,
                                                       expansion_service=expansion_service,
                                                       id_attribute=options.id_attribute)
    except Exception as error:  # noqa: BLE001 - as for reading
        raise CliError(f"cannot write {endpoint.uri}: {_why(error, endpoint, expansion_service)}") from None


def write_diagnostics(dead_letters, input_files, output: str, options: RunOptions) -> None:
    """Every run's diagnostics: the dead letters (also to ``--dead-letter-topic``) and the input report."""
    dead_letters | "WriteDeadLetters" >> WriteDeadLetters(output)
    input_files | "WriteInputReport" >> WriteInputReport(output)
    if options.dead_letter_topic:
        write_topic(dead_letters, options.dead_letter_topic, options, lambda letter: orjson.dumps(letter._asdict()),
                    attrgetter("reason"), _dead_letter_id, "SendDeadLetters")


def _dead_letter_id(letter: DeadLetter) -> str:
    """A dead letter's stable id: where it came from and why (the same record is dead for the same reason)."""
    return hashlib.blake2b(f"{letter.source}\n{letter.reason}\n{letter.raw}".encode(), digest_size=16).hexdigest()


def reads_here(pipeline: beam.Pipeline) -> bool:
    """Whether this process reads the pipeline's topics (``KafkaStreamService``, on the local runner)."""
    return pipeline in _SERVICES


def discard(pipeline: beam.Pipeline) -> None:
    """Close the topic source of a pipeline that will not run (its graph failed to build)."""
    service = _SERVICES.pop(pipeline, None)
    if service is not None:
        service.close()
    job = _JOBS.pop(pipeline, None)
    if job is not None:
        spill_into(None)
        job.close()


@contextlib.contextmanager
def running(pipeline: beam.Pipeline) -> Iterator[KafkaStreamProcess | None]:
    """Around ``pipeline.run()``: SIGINT and SIGTERM drain the run instead of killing it; yields the pipeline's
    topic source (None without topic inputs) and closes it at the end, with the run's Kafka producers (an
    ``--output-topic`` of a batch run too) and the spill directories of its file outputs."""
    service = _SERVICES.pop(pipeline, None)
    job = _JOBS.pop(pipeline, None)
    spill_into(None)  # the pipeline is built
    start_spills(keep=job is not None and job.restarted)
    if service is None:
        try:
            yield None
        finally:
            close_producers()
            remove_spills()
        return
    try:
        _ready(service)
    except BaseException:
        service.close()
        if job is not None:
            forget_spills()
            job.close()
        raise
    if job is not None:  # its releases are dropped from the store once every sink has written them
        job.bound.unlink()  # the source has it open
        acknowledge_sinks(pipeline, job.job_id, job.bound)

    def drain(signum, frame) -> None:
        print(f"{signal.Signals(signum).name}: draining (finishing what was read, flushing the outputs)",
              file=sys.stderr, flush=True)
        service.request_stop()

    previous = {signum: signal.signal(signum, drain) for signum in (signal.SIGINT, signal.SIGTERM)}
    finished = False
    try:
        yield service
        if job is not None:  # the run read its stream to the end, and finished
            job.drained()
        finished = True
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        close_producers()
        if finished or job is None:
            remove_spills()
        else:  # a durable job's failed run: what it spilled may be acknowledged, its restart writes it out
            forget_spills()
        service.close()
        if job is not None:
            job.close()
