"""Names of sources and sinks: file patterns, ``kafka://`` topics and ``pubsub://`` topics or subscriptions.

    kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?group=G&start=earliest|latest|committed&stop=end|never&schema_id=N
                                           &<librdkafka key>=<value>...]
    pubsub://projects/PROJECT/topics/TOPIC
    pubsub://projects/PROJECT/subscriptions/SUBSCRIPTION

A Kafka URI's own query parameters are ``group`` (the consumer group whose committed offsets a run starts from
and commits to; default ``pm-beam-<pipeline>``), ``start`` (where to start when the group has no committed
offset, or ``committed`` to require one; default ``earliest``), ``stop`` (``end``: stop once every partition is
read to the end it had when the run started, then drain; ``never``, the default: run until stopped) and
``schema_id`` (the Confluent schema-registry id Avro messages must carry). Every other parameter whose name
contains a dot is a librdkafka configuration property (``security.protocol=SASL_SSL``,
``sasl.mechanism=PLAIN``...), as is every ``--kafka-config KEY=VALUE`` of the command line, which wins over
the URI. Anything else is an error naming the parameters that exist.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

KAFKA_SCHEME, PUBSUB_SCHEME = "kafka://", "pubsub://"
STARTS = ("earliest", "latest", "committed")
STOPS = ("end", "never")
_OWN_PARAMETERS = ("group", "start", "stop", "schema_id")
_BROKER = re.compile(r"[A-Za-z0-9.\-\[\]:]+:\d{1,5}")
_PUBSUB = re.compile(r"projects/([a-z][-a-z0-9.:]{3,62})/(topics|subscriptions)/([A-Za-z][\w\-.~+%]{2,254})")


class EndpointError(ValueError):
    """A source or sink name that cannot be used (one line for the user)."""


@dataclass(frozen=True)
class KafkaTopic:
    """A Kafka topic on ``brokers`` (``bootstrap.servers``), with the reading options of the URI."""

    brokers: str
    topic: str
    group: str | None = None
    start: str = "earliest"
    stop: str = "never"
    schema_id: int | None = None
    config: tuple[tuple[str, str], ...] = field(default=())  # librdkafka properties, in the order given

    @property
    def uri(self) -> str:
        return f"{KAFKA_SCHEME}{self.brokers}/{self.topic}"

    def client_config(self, **defaults: Any) -> dict:
        """librdkafka configuration: ``defaults``, then the URI's and the command line's properties."""
        return {**defaults, "bootstrap.servers": self.brokers, **dict(self.config)}


@dataclass(frozen=True)
class PubSubPath:
    """A Pub/Sub topic or subscription: ``projects/P/topics/T`` or ``projects/P/subscriptions/S``."""

    project: str
    kind: str  # "topics" or "subscriptions"
    name: str

    @property
    def path(self) -> str:
        return f"projects/{self.project}/{self.kind}/{self.name}"

    @property
    def uri(self) -> str:
        return f"{PUBSUB_SCHEME}{self.path}"

    @property
    def is_subscription(self) -> bool:
        return self.kind == "subscriptions"


Endpoint = KafkaTopic | PubSubPath


def is_bus(name: str) -> bool:
    """Whether ``name`` names a topic or subscription rather than files."""
    return name.startswith((KAFKA_SCHEME, PUBSUB_SCHEME))


def parse_kafka_config(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    """``--kafka-config KEY=VALUE`` arguments as librdkafka properties."""
    config = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise EndpointError(f"--kafka-config takes KEY=VALUE (a librdkafka property), got {pair!r}")
        config.append((key.strip(), value))
    return tuple(config)


def parse_endpoint(name: str, kafka_config: tuple[tuple[str, str], ...] = ()) -> Endpoint:
    """The topic or subscription ``name`` (``kafka://`` or ``pubsub://``); an ``EndpointError`` saying what is wrong."""
    if name.startswith(PUBSUB_SCHEME):
        match = _PUBSUB.fullmatch(name[len(PUBSUB_SCHEME):])
        if match is None:
            raise EndpointError(f"{name!r} is not pubsub://projects/PROJECT/topics/TOPIC or "
                                "pubsub://projects/PROJECT/subscriptions/SUBSCRIPTION")
        return PubSubPath(*match.groups())
    if not name.startswith(KAFKA_SCHEME):
        raise EndpointError(f"{name!r} is not a kafka:// or pubsub:// name")
    parts = urlsplit(name)
    brokers, topic = parts.netloc, parts.path.strip("/")
    if not brokers or not all(_BROKER.fullmatch(b) for b in brokers.split(",")):
        raise EndpointError(f"{name!r}: the brokers must be HOST:PORT[,HOST:PORT...], got {brokers!r}")
    if not re.fullmatch(r"[A-Za-z0-9._\-]{1,249}", topic):
        raise EndpointError(f"{name!r}: a Kafka topic name is 1 to 249 of letters, digits, '.', '_' and '-', got {topic!r}")
    own: dict[str, str] = {}
    config: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key in _OWN_PARAMETERS:
            own[key] = value
        elif "." in key:
            config.append((key, value))
        else:
            raise EndpointError(f"{name!r}: unknown parameter {key!r}; the URI takes {', '.join(_OWN_PARAMETERS)} "
                                "and librdkafka properties (names with a dot)")
    start, stop = own.get("start", "earliest"), own.get("stop", "never")
    if start not in STARTS:
        raise EndpointError(f"{name!r}: start must be one of {', '.join(STARTS)}, got {start!r}")
    if stop not in STOPS:
        raise EndpointError(f"{name!r}: stop must be one of {', '.join(STOPS)}, got {stop!r}")
    schema_id = own.get("schema_id")
    if schema_id is not None and not (schema_id.isdigit() and int(schema_id) < 2**31):
        raise EndpointError(f"{name!r}: schema_id must be a registry id (0 to 2^31 - 1), got {schema_id!r}")
    group = own.get("group") or None
    return KafkaTopic(brokers, topic, group, start, stop, None if schema_id is None else int(schema_id),
                      tuple(config) + tuple(kafka_config))
