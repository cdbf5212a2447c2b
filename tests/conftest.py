"""Fixtures shared by several test modules: a real PostgreSQL server for the ledger's tests (started once)."""
from tests.support.postgres import postgres_dsn, postgres_url  # noqa: F401  (fixtures)
