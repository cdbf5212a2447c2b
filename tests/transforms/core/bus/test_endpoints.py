"""Names of topics and subscriptions: what parses, and the one-line errors for what does not."""
from __future__ import annotations

import pytest

from transforms.core.bus.endpoints import (
    EndpointError,
    KafkaTopic,
    PubSubPath,
    is_bus,
    parse_endpoint,
    parse_kafka_config,
)


def test_a_kafka_uri_with_its_own_parameters_and_librdkafka_properties():
    topic = parse_endpoint("kafka://b1:9092,b2:9093/joins?group=g1&start=latest&stop=end&schema_id=7"
                           "&security.protocol=SASL_SSL")
    assert topic == KafkaTopic("b1:9092,b2:9093", "joins", "g1", "latest", "end", 7,
                               (("security.protocol", "SASL_SSL"),))
    assert topic.uri == "kafka://b1:9092,b2:9093/joins"
    config = topic.client_config(**{"group.id": "default", "security.protocol": "PLAINTEXT"})
    assert config == {"group.id": "default", "bootstrap.servers": "b1:9092,b2:9093", "security.protocol": "SASL_SSL"}


def test_defaults_and_the_command_line_configuration_wins_over_the_uri():
    extra = parse_kafka_config(["sasl.mechanism=PLAIN", "client.id=a=b"])
    topic = parse_endpoint("kafka://127.0.0.1:9092/t?sasl.mechanism=SCRAM-SHA-256", extra)
    assert (topic.group, topic.start, topic.stop, topic.schema_id) == (None, "earliest", "never", None)
    assert topic.client_config()["sasl.mechanism"] == "PLAIN"
    assert topic.client_config()["client.id"] == "a=b"


def test_pubsub_topics_and_subscriptions():
    topic = parse_endpoint("pubsub://projects/my-project/topics/joins")
    assert topic == PubSubPath("my-project", "topics", "joins") and not topic.is_subscription
    subscription = parse_endpoint("pubsub://projects/my-project/subscriptions/joins-sub")
    assert subscription.is_subscription and subscription.path == "projects/my-project/subscriptions/joins-sub"


@pytest.mark.parametrize("name, words", [
    ("kafka://host/joins", "HOST:PORT"),
    ("kafka://host:9092/", "topic name"),
    ("kafka://host:9092/a b", "topic name"),
    ("kafka://host:9092/t?grup=g", "unknown parameter 'grup'"),
    ("kafka://host:9092/t?start=beginning", "start must be one of"),
    ("kafka://host:9092/t?stop=later", "stop must be one of"),
    ("kafka://host:9092/t?schema_id=x", "schema_id"),
    ("pubsub://projects/p/topic/t", "pubsub://projects/PROJECT/topics/TOPIC"),
    ("http://host/t", "not a kafka:// or pubsub://"),
])
def test_bad_names_are_one_line_errors(name, words):
    with pytest.raises(EndpointError) as error:
        parse_endpoint(name)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_kafka_config_takes_key_value_pairs():
    with pytest.raises(EndpointError, match="KEY=VALUE"):
        parse_kafka_config(["security.protocol"])


def test_is_bus():
    assert is_bus("kafka://h:1/t") and is_bus("pubsub://projects/p/topics/t")
    assert not is_bus("/data/joins-*.avro") and not is_bus("gs://bucket/joins-*")
