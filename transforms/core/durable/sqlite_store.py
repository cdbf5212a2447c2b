"""The SQLite state store: the default, one file (``.pm-beam/state.sqlite`` unless ``--state-store`` names
another), for the jobs of one machine.

``sqlite:///relative/path``, ``sqlite:////absolute/path`` (as the ``--ledger`` option spells SQLite) or a plain
path; ``?timeout=SECONDS`` is how long a write waits for another writer (default 10). The file is in
write-ahead-log mode with ``synchronous=FULL``: a committed snapshot survives the process and the machine. A job's
claim is an exclusive ``flock`` on a file beside the database, which the kernel releases when the owning process
dies, however it dies. The file, its write-ahead log and its lock files are created ``0600`` (SQLite gives its log
the database's mode), its directory ``0700`` when it is created here (``transforms.core.private_files``).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from urllib.parse import parse_qs

from transforms.core.durable.sealing import Seal
from transforms.core.durable.store import JobClaim, StateStore, StoreUnavailable
from transforms.core.private_files import FILE_MODE, create_private_file

_DEFAULT_TIMEOUT_SECONDS = 10.0


def sqlite_path(uri: str) -> tuple[str, float]:
    """The database path and the write timeout of a SQLite store URI."""
    location, _, query = uri.partition("?")
    if location.startswith("sqlite:"):
        if not location.startswith("sqlite:///"):
            raise StoreUnavailable(f"state store {uri}: use sqlite:///relative/path or sqlite:////absolute/path")
        location = location.removeprefix("sqlite:///")
    timeout = parse_qs(query).get("timeout", [str(_DEFAULT_TIMEOUT_SECONDS)])[0]
    try:
        seconds = float(timeout)
    except ValueError:
        raise StoreUnavailable(f"state store {uri}: timeout must be a number of seconds, got {timeout!r}") from None
    if not location:
        raise StoreUnavailable(f"state store {uri}: no file named")
    return location, seconds


class SqliteStore(StateStore):
    """A SQLite database file; one connection, shared by the threads of the process under a lock."""

    def __init__(self, uri: str, seal: Seal) -> None:
        self.uri = uri
        self.seal = seal
        self._path, timeout = sqlite_path(uri)
        self._lock = threading.Lock()
        try:
            create_private_file(self._path)  # 0600 in a 0700 directory, before SQLite creates it (and its WAL)
            self._connection = sqlite3.connect(self._path, timeout=timeout, isolation_level=None,
                                               check_same_thread=False)
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=FULL")
            with self._transaction() as cursor:
                self._create_schema(cursor)
        except (OSError, sqlite3.Error) as error:
            raise StoreUnavailable(f"state store {uri}: cannot open {self._path}: {error}") from None

    def _spill_root(self) -> str:
        return f"{self._path}.spill"  # beside the database, in its private directory

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cursor = self._connection.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")

    def _claim_lock(self, job_id: str) -> JobClaim | None:
        digest = hashlib.blake2b(job_id.encode("utf-8"), digest_size=8).hexdigest()
        handle = os.fdopen(os.open(f"{self._path}.{digest}.lock", os.O_RDWR | os.O_CREAT, FILE_MODE), "r+b")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None

        def release() -> None:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()

        return JobClaim(release)

    def size_bytes(self) -> int:
        """The database file and its write-ahead log."""
        return sum(os.path.getsize(path) for path in (self._path, f"{self._path}-wal") if os.path.exists(path))

    def close(self) -> None:
        with self._lock:
            self._connection.close()
