"""Fixtures shared by several test modules: a real PostgreSQL server for the ledger's tests, a real Kafka-protocol
broker for the event-bus tests and the Pub/Sub emulator when the machine has it (each started once per worker)."""
from tests.support.kafka import kafka_broker  # noqa: F401  (fixture)
from tests.support.postgres import postgres_dsn, postgres_url  # noqa: F401  (fixtures)
from tests.support.pubsub import pubsub_emulator  # noqa: F401  (fixture)
