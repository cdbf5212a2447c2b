"""The state store a URI names (``--state-store``): PostgreSQL or SQLite."""
from __future__ import annotations

from transforms.core.durable.postgres_store import PostgresStore
from transforms.core.durable.sealing import Seal
from transforms.core.durable.sqlite_store import SqliteStore
from transforms.core.durable.store import StateStore, StoreUnavailable
from transforms.core.noise_key import KeyLocation
from transforms.core.secrets import SecretUnavailable
from transforms.core.urls import redact_url


def open_store(uri: str, key: KeyLocation) -> StateStore:
    """The store at ``uri``: ``postgresql://...`` (or ``postgres://``), else SQLite (``sqlite:///PATH`` or a path),
    its rows sealed under ``key`` (``sealing``). A ``StoreUnavailable`` when it cannot be opened."""
    try:
        seal = Seal(key)
    except SecretUnavailable as error:
        raise StoreUnavailable(f"state store {redact_url(uri)}: {error}") from None
    if uri.startswith(("postgresql://", "postgres://")):
        return PostgresStore(uri, seal)
    return SqliteStore(uri, seal)
