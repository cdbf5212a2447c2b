"""Fixtures shared by several test modules: a real PostgreSQL server for the ledger's tests and a real Kafka-protocol
broker for the event-bus tests (each started once)."""
from tests.support.kafka import kafka_broker  # noqa: F401  (fixture)
from tests.support.postgres import postgres_dsn, postgres_url  # noqa: F401  (fixtures)
