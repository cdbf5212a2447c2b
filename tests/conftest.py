"""Fixtures shared by several test modules: a real PostgreSQL server for the ledger's tests, a real Kafka-protocol
broker for the event-bus tests and the Pub/Sub emulator when the machine has it (each started once per worker)."""
import pytest  # noqa: E402

from tests.support.kafka import kafka_broker  # noqa: F401  (fixture)
from tests.support.postgres import postgres_dsn, postgres_url  # noqa: F401  (fixtures)
from tests.support.pubsub import pubsub_emulator  # noqa: F401  (fixture)
from transforms.core.durable.store import STORE_ENVIRONMENT  # noqa: E402


@pytest.fixture(autouse=True)
def _state_store_of_the_test(tmp_path, monkeypatch):
    """Every test's streaming jobs keep their durable state in a store of the test's own (the default,
    ``.pm-beam/state.sqlite`` of the working directory, would be shared by every test of the run)."""
    monkeypatch.setenv(STORE_ENVIRONMENT, f"sqlite:///{tmp_path}/state.sqlite")
