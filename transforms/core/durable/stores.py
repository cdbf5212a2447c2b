"""The state store a URI names (``--state-store``): PostgreSQL or SQLite."""
from __future__ import annotations

from transforms.core.durable.postgres_store import PostgresStore
from transforms.core.durable.sqlite_store import SqliteStore
from transforms.core.durable.store import StateStore


def open_store(uri: str) -> StateStore:
    """The store at ``uri``: ``postgresql://...`` (or ``postgres://``), else SQLite (``sqlite:///PATH`` or a path).
    A ``StoreUnavailable`` when it cannot be opened."""
    if uri.startswith(("postgresql://", "postgres://")):
        return PostgresStore(uri)
    return SqliteStore(uri)
