"""Records to a Kafka topic, each with a key and a stable id, flushed before a bundle is done.

Every message carries the record's key (the interest group, the device, the report's shared id...) as its Kafka
key, so that one key's records stay in order on one partition, and a stable id (header ``id``: a function of the
record, the same on every retry) so that consumers can deduplicate what an at-least-once pipeline sends twice.
The producer is flushed in ``finish_bundle``, and a delivery failure fails the bundle: the runner retries it,
and the offsets of the input are committed only after the pipeline finished (``kafka_stream``).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import apache_beam as beam

from transforms.core import metrics
from transforms.core.bus.endpoints import KafkaTopic
from transforms.core.durable.acknowledgement import sink_written
from transforms.core.inspected import InspectedOnceDoFn
from transforms.core.progress import OUTPUTS

_FLUSH_SECONDS = 60


class _WriteToKafkaFn(InspectedOnceDoFn):
    def __init__(self, topic: KafkaTopic, encode: Callable[[Any], bytes], key_of: Callable[[Any], str],
                 id_of: Callable[[Any], str]) -> None:
        self._topic = topic
        self._encode = encode
        self._key_of = key_of
        self._id_of = id_of

    def setup(self) -> None:
        self._producer = _producer(self._topic)

    def start_bundle(self) -> None:
        self._failures: list[str] = []
        self._pending = 0

    def _delivered(self, error, message) -> None:
        if error is not None:
            self._failures.append(error.str())

    def process(self, record):
        self._producer.produce(self._topic.topic, value=self._encode(record), key=self._key_of(record).encode(),
                               headers=[("id", self._id_of(record).encode())], on_delivery=self._delivered)
        self._pending += 1
        if self._pending % 1000 == 0:
            self._producer.poll(0)

    def finish_bundle(self) -> None:
        left = self._producer.flush(_FLUSH_SECONDS)
        if left or self._failures:
            failure = self._failures[0] if self._failures else f"{left} messages not delivered in {_FLUSH_SECONDS} s"
            raise RuntimeError(f"writing to {self._topic.uri} failed: {failure}")
        OUTPUTS.add(self._pending)
        metrics.outputs_written(self._topic.topic, self._pending)


_PRODUCERS: dict[tuple, Any] = {}  # client configuration -> this process's producer
_PRODUCERS_LOCK = threading.Lock()


def _producer(topic: KafkaTopic) -> Any:
    """This process's producer for the topic's client configuration, made once. The streaming DirectRunner
    copies a DoFn, and calls its ``setup``, for every bundle: a producer per bundle (its connections, threads and
    buffers) grew a live job by 7 MB a minute at 15,000 events/s (``benchmarks/streaming_soak.py``). A producer
    is thread-safe, and each bundle still flushes before it is done."""
    from confluent_kafka import Producer  # the kafka extra

    config = topic.client_config(**{"linger.ms": 5, "acks": "all"})
    key = tuple(sorted(config.items()))
    with _PRODUCERS_LOCK:
        producer = _PRODUCERS.get(key)
        if producer is None:
            producer = _PRODUCERS[key] = Producer(config)
        return producer


def close_producers() -> None:
    """Forget this process's producers (after a run: each has flushed with its last bundle), so that a later
    run in the process connects afresh and no producer keeps reconnecting to a broker that has gone."""
    with _PRODUCERS_LOCK:
        producers = list(_PRODUCERS.values())
        _PRODUCERS.clear()
    for producer in producers:
        producer.flush(_FLUSH_SECONDS)


class WriteToKafkaTopic(beam.PTransform):
    """Writes each record to ``topic``: value ``encode(record)``, key ``key_of(record)``, header id ``id_of(record)``."""

    def __init__(self, topic: KafkaTopic, encode: Callable[[Any], bytes], key_of: Callable[[Any], str],
                 id_of: Callable[[Any], str]) -> None:
        super().__init__()
        self._fn = _WriteToKafkaFn(topic, encode, key_of, id_of)

    def expand(self, records):
        written = records | "Produce" >> beam.ParDo(self._fn)
        sink_written(written)  # flushed before its bundle is done: the job's releases are acknowledged after it
        return written
