"""A Kafka consumer on every partition of a topic, starting where its group's commits say: what the local topic
source (``kafka_stream``) and the report collector (``pipelines.collect_reports``) share.

Partitions are assigned explicitly (no group rebalance to wait for: one local consumer reads them all) and offsets
are committed by the caller, after what it read is safe. "Read to its end" is judged against the high watermark
the last fetch reported (the tansu test broker answers ListOffsets for LATEST wrongly; DESIGN.md).
"""
from __future__ import annotations

import time
from typing import Any

from transforms.core.bus.endpoints import KafkaTopic

_STARTS = {"earliest": -2, "latest": -1}  # librdkafka's OFFSET_BEGINNING and OFFSET_END
_COORDINATOR_SECONDS = 30


def assigned_consumer(topic: KafkaTopic, group: str, resume: dict[int, int] | None = None,
                      **settings: Any) -> tuple[Any, dict[int, int | None]]:
    """A confluent-kafka consumer of group ``topic.group or group`` assigned to every partition of ``topic``, from
    ``resume``'s offset for a partition it names (a durable job's snapshot), else the group's committed offsets,
    else ``topic.start``; and per partition the next offset it reads (None: the start of the log or its end, as
    ``start`` says). A ValueError (one line) when the topic does not exist, or when ``start=committed`` and a
    partition has neither."""
    from confluent_kafka import Consumer, TopicPartition  # the kafka extra

    group = topic.group or group
    consumer = Consumer(topic.client_config(**{
        "group.id": group,
        "enable.auto.commit": False,  # the caller commits, once what it read is safe
        "auto.offset.reset": "latest" if topic.start == "latest" else "earliest",
        **settings,
    }))
    described = consumer.list_topics(topic.topic, timeout=15).topics.get(topic.topic)
    if described is None or described.error is not None or not described.partitions:
        consumer.close()
        error = "no such topic" if described is None or described.error is None else described.error.str()
        raise ValueError(f"cannot read {topic.uri}: {error}")
    committed = _committed(consumer, [TopicPartition(topic.topic, number) for number in sorted(described.partitions)])
    positions: dict[int, int | None] = {}
    assignment = []
    resume = resume or {}
    for partition in committed:
        if partition.partition in resume:
            partition.offset = resume[partition.partition]
        if partition.offset >= 0:
            positions[partition.partition] = partition.offset
        elif topic.start not in _STARTS:
            consumer.close()
            raise ValueError(f"cannot read {topic.uri}: start=committed, but group {group!r} has no committed offset "
                             f"for partition {partition.partition}")
        else:
            positions[partition.partition] = None
        assignment.append(TopicPartition(topic.topic, partition.partition,
                                         partition.offset if partition.offset >= 0 else _STARTS[topic.start]))
    consumer.assign(assignment)
    return consumer, positions


def _committed(consumer: Any, partitions: list) -> list:
    """The group's committed offsets of ``partitions``, asked again while the broker answers that the group's
    coordinator is not ready (a broker just started, a coordinator moving): a retriable state, for at most
    ``_COORDINATOR_SECONDS``."""
    from confluent_kafka import KafkaError, KafkaException

    waiting = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR)
    deadline = time.monotonic() + _COORDINATOR_SECONDS
    while True:
        try:
            return consumer.committed(partitions, timeout=15)
        except KafkaException as error:
            if error.args[0].code() not in waiting or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def read_to_end(consumer: Any, topic: str, partition: int, next_offset: int | None) -> bool:
    """Whether ``partition`` is read to the end its last fetch reported (False before any fetch answered)."""
    from confluent_kafka import TopicPartition

    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
    if high < 0:
        return False
    return (next_offset if next_offset is not None else low) >= high


def records_to_end(topic: KafkaTopic, group: str) -> int:
    """How many records ``topic`` holds beyond where a read by ``group`` starts (its committed offsets, else
    ``topic.start``), asked of the broker now: what a read that stops at the end it found has to read. A
    ValueError (one line) when the topic does not exist."""
    from confluent_kafka import TopicPartition

    consumer, positions = assigned_consumer(topic, group)
    try:
        total = 0
        for partition, next_offset in positions.items():
            low, high = consumer.get_watermark_offsets(TopicPartition(topic.topic, partition), timeout=15)
            start = next_offset if next_offset is not None else (high if topic.start == "latest" else low)
            total += max(high - start, 0)
        return total
    finally:
        consumer.close()
