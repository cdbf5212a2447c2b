"""The PostgreSQL state store (``postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE``; the ``postgres`` extra): for
jobs whose workers are on several machines, or whose state must live with the rest of an operator's data.

Every snapshot is one transaction; ``save``'s statements are the SQLite store's (``ON CONFLICT`` upserts). A job's
claim is a session-level advisory lock (``pg_try_advisory_lock``) held by a connection of its own: released
explicitly, and by the server when that connection ends, however the process ends.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from transforms.core.durable.sealing import Seal
from transforms.core.durable.store import TABLES, JobClaim, StateStore, StoreUnavailable
from transforms.core.urls import redact_url

_CONNECT_TIMEOUT_SECONDS = 30
_SCHEMA_LOCK = 0x706D5F7374617465  # "pm_state": creating the tables is serialised across processes


class PostgresStore(StateStore):
    """One PostgreSQL connection, shared by the threads of the process under a lock."""

    def _spill_root(self) -> str:
        return os.path.join(".pm-beam", "spill")  # the local runner's machine: where the default store lives

    def __init__(self, uri: str, seal: Seal) -> None:
        self.uri = redact_url(uri)
        self.seal = seal
        self._dsn = uri
        self._lock = threading.Lock()
        try:
            import psycopg
        except ImportError:
            raise StoreUnavailable(f"state store {self.uri}: PostgreSQL needs psycopg: "
                                   "pip install 'privacy-measurement-beam[postgres]'") from None
        self._psycopg = psycopg
        try:
            self._connection = self._connect()
            with self._transaction() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                self._create_schema(cursor)
        except psycopg.Error as error:
            raise StoreUnavailable(f"state store {self.uri}: cannot open: {str(error).strip()}") from None

    def _connect(self) -> Any:
        options: dict[str, Any] = {} if "connect_timeout" in self._dsn else {"connect_timeout": _CONNECT_TIMEOUT_SECONDS}
        return self._psycopg.connect(self._dsn, autocommit=True, application_name="privacy-measurement-beam-state",
                                     **options)

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock, self._connection.transaction(), self._connection.cursor() as cursor:
            yield cursor

    def _claim_lock(self, job_id: str) -> JobClaim | None:
        key = int.from_bytes(hashlib.blake2b(job_id.encode("utf-8"), digest_size=8).digest(), "big", signed=True)
        holder = self._connect()
        if not holder.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            holder.close()
            return None

        def release() -> None:
            # unlocked before the connection closes: the server ends a closed session asynchronously, and a claim
            # right after a release (a refused start, then the right one) could still find the lock held
            with contextlib.suppress(self._psycopg.Error):  # a broken connection holds no lock either
                holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
            holder.close()

        return JobClaim(release)

    def size_bytes(self) -> int:
        """The store's tables with their indexes and TOAST (``pg_total_relation_size``)."""
        with self._transaction() as cursor:
            cursor.execute("SELECT COALESCE(SUM(pg_total_relation_size(to_regclass(name))), 0) FROM unnest(%s::text[]) AS name",
                           (list(TABLES),))
            return int(cursor.fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._connection.close()
