"""A durable store of the local streaming jobs' state: what a stateful step writes, per job, in one transaction.

A job (``--job-id``) owns one row in ``jobs`` (its pipeline, whether it was drained). Each stateful step of it
keeps:

* ``steps``: its ``StepSnapshot`` (the shard's record without its keys, the input positions the state reflects,
  whether the end of the input was processed);
* ``keyed``: one row per key (a group's or a device's record, a buffered input record), of which a snapshot
  writes only those its firing changed (upserts and deletes);
* ``releases``: the release log, the records the step released, in order, written before they are released and
  dropped once every sink has written them (``acknowledgement``).

and its topic source keeps ``source_dead_letters``: the dead letters of the messages it read, by topic partition
and offset, written before they are sent, so that a restarted job's dead letters are those of all it read.

``save`` writes a ``StepWrite`` (the frozen record of one firing's changes) in one transaction: state, positions
and the records the firing is about to release go together or not at all. One process claims a job at a time
(``claim``: the second is refused while the first lives, and a crashed owner's claim ends with its process).

Every value is sealed (``sealing``: AES-GCM under the run's state key, a per-key row under a keyed hash of its key),
so the store reveals job ids, step names, row counts and sizes, and nothing of the state itself. ``job_keys`` records
each job's key ids and the public nonce its noise is derived with (``transforms.core.noise_key``): a run under
another key is refused. ``store_meta`` holds the store's format; a store of an earlier version, which kept its rows
in the clear, is refused.

Backends: ``sqlite_store`` (the default, a file under ``.pm-beam/``, created ``0600``) and ``postgres_store``
(several workers, the ``postgres`` extra); ``stores.open_store`` chooses by URI.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.proto import state_pb2
from transforms.core.durable.sealing import FORMAT, Seal, SealBroken

DEFAULT_STORE = "sqlite:///.pm-beam/state.sqlite"
STORE_ENVIRONMENT = "PM_BEAM_STATE_STORE"  # when set, the store of a run that names none (--state-store)


def default_store() -> str:
    """The store a run uses when ``--state-store`` names none: ``PM_BEAM_STATE_STORE``, else ``DEFAULT_STORE``."""
    return os.environ.get(STORE_ENVIRONMENT) or DEFAULT_STORE


DRAINED, RUNNING = "drained", "running"

TABLES = ("store_meta", "jobs", "steps", "keyed", "releases", "source_dead_letters", "job_keys")
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS store_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, pipeline TEXT NOT NULL, status TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS steps (job_id TEXT NOT NULL, step TEXT NOT NULL, snapshot BYTEA NOT NULL, "
    "snapshots BIGINT NOT NULL, PRIMARY KEY (job_id, step))",
    "CREATE TABLE IF NOT EXISTS keyed (job_id TEXT NOT NULL, step TEXT NOT NULL, key TEXT NOT NULL, "
    "value BYTEA NOT NULL, PRIMARY KEY (job_id, step, key))",
    "CREATE TABLE IF NOT EXISTS releases (job_id TEXT NOT NULL, step TEXT NOT NULL, seq BIGINT NOT NULL, "
    "record BYTEA NOT NULL, PRIMARY KEY (job_id, step, seq))",
    "CREATE TABLE IF NOT EXISTS source_dead_letters (job_id TEXT NOT NULL, input TEXT NOT NULL, "
    "partition_number INTEGER NOT NULL, message_offset BIGINT NOT NULL, record BYTEA NOT NULL, "
    "PRIMARY KEY (job_id, input, partition_number, message_offset))",
    # the ids of the keys a job runs under (its state's, its noise's) and the nonce its noise is derived with
    "CREATE TABLE IF NOT EXISTS job_keys (job_id TEXT PRIMARY KEY, state_key_id TEXT NOT NULL, "
    "noise_key_id TEXT NOT NULL, noise_nonce TEXT NOT NULL)",
)

# A test's way to kill the process at a moment no outside signal can hit reliably (the crash tests): ``N`` in the
# middle of the process's Nth snapshot (its rows written, not committed), ``end`` in the middle of the snapshot of
# the end of the input; ``after:N``, ``after:end`` just after that snapshot's commit. Unset, it costs one lookup.
FAULT_ENVIRONMENT = "PM_BEAM_KILL_IN_SNAPSHOT"


def _fault_due(saves: int, snapshot: state_pb2.StepSnapshot) -> tuple[bool, bool]:
    """Whether ``FAULT_ENVIRONMENT`` kills the process in this snapshot, and whether after its commit."""
    fault = os.environ.get(FAULT_ENVIRONMENT)
    if fault is None:
        return False, False
    after = fault.startswith("after:")
    moment = fault.removeprefix("after:")
    return (snapshot.ended if moment == "end" else saves == int(moment)), after


class StoreUnavailable(Exception):
    """The store cannot be opened, read or written (one line for the user)."""


class JobRefused(Exception):
    """The job cannot start on this store: another process runs it, it was drained, or the id is another
    pipeline's (one line for the user)."""


@dataclass(frozen=True)
class StepWrite:
    """What one firing of a stateful step changed, written in one transaction before it releases anything."""

    snapshot: state_pb2.StepSnapshot
    upserts: Mapping[str, bytes] = field(default_factory=dict)
    deletes: frozenset[str] = frozenset()
    releases: tuple[bytes, ...] = ()
    acknowledged_through: int | None = None  # the last entry of the release log every sink has written, dropped


@dataclass(frozen=True)
class StepRestore:
    """A step's state as its last snapshot left it: nothing (``snapshot`` None) for a step that never wrote one."""

    snapshot: state_pb2.StepSnapshot | None
    keys: dict[str, bytes]
    releases: list[tuple[int, bytes]]  # the release log's entries not yet acknowledged, (number, entry) in order


class JobClaim:
    """A process's claim on a job, held until ``release`` (or until the process ends); ``noise_nonce``: the public
    nonce the job's noise is derived with (drawn when the job started)."""

    noise_nonce = b""

    def __init__(self, release) -> None:
        self._release = release

    def release(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None


class StateStore(ABC):
    """One connection to a store (``uri``); its methods raise ``StoreUnavailable`` for the store's own errors."""

    uri: str
    seal: Seal
    _saves = 0

    @abstractmethod
    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A context manager: a cursor whose statements commit together at its end (or roll back on error)."""

    @abstractmethod
    def _claim_lock(self, job_id: str) -> JobClaim | None:
        """The exclusive claim on ``job_id``, or None when another process holds it."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""

    @abstractmethod
    def size_bytes(self) -> int:
        """What the store takes now (its files, or its tables with their indexes): for the operator's metrics."""

    @abstractmethod
    def _spill_root(self) -> str:
        """The local directory under which the jobs of this store spill their file outputs (``spill_home``)."""

    def spill_home(self, job_id: str) -> str:
        """Where a job of this store keeps the chunks of its file outputs across its runs, until a run drains
        (``transforms.core.io``): its releases are dropped from the store once spilled, so a restarted run finds
        them there, whatever its staging directory."""
        return os.path.join(self._spill_root(), hashlib.blake2b(job_id.encode(), digest_size=8).hexdigest())

    def _sql(self, statement: str) -> str:
        """A statement with ``?`` placeholders in this backend's paramstyle."""
        return statement

    def _create_schema(self, cursor: Any) -> None:
        """The tables, and the store's format: a new store is sealed; one an earlier version wrote (jobs, no
        format) is refused, its rows being in the clear."""
        for statement in SCHEMA:
            cursor.execute(statement)
        cursor.execute(self._sql("SELECT value FROM store_meta WHERE name = ?"), ("format",))
        row = cursor.fetchone()
        if row is None:
            cursor.execute("SELECT COUNT(*) FROM jobs")
            if cursor.fetchone()[0]:
                raise StoreUnavailable(
                    f"state store {self.uri} was written by an earlier version, which kept the jobs' state in the "
                    "clear: drain its jobs with that version and move it away, or name a new --state-store")
            cursor.execute(self._sql("INSERT INTO store_meta (name, value) VALUES (?, ?)"), ("format", FORMAT))
        elif row[0] != FORMAT:
            raise StoreUnavailable(f"state store {self.uri} has format {row[0]}, this version reads {FORMAT}")

    def _run(self, action, what: str):
        try:
            return action()
        except (JobRefused, StoreUnavailable):
            raise
        except SealBroken as error:
            raise StoreUnavailable(f"state store {self.uri}: cannot {what}: {error} (--state-key)") from None
        except Exception as error:  # noqa: BLE001 - the driver's errors differ by backend: one line for the user
            raise StoreUnavailable(f"state store {self.uri}: cannot {what}: {error}") from error

    def claim(self, job_id: str, pipeline: str, noise_key_id: str) -> JobClaim:
        """Claim ``job_id`` for ``pipeline``: refused while another process holds it, when it belongs to another
        pipeline, when it was drained (its state is final), or when it started under another state or noise key."""
        claim = self._run(lambda: self._claim_lock(job_id), "claim the job")
        if claim is None:
            raise JobRefused(f"job {job_id!r} is running in another process (state store {self.uri}): stop it "
                             "first, or give this run another --job-id")
        try:
            claim.noise_nonce = self._run(lambda: self._register(job_id, pipeline, noise_key_id), "register the job")
        except BaseException:
            claim.release()
            raise
        return claim

    def _register(self, job_id: str, pipeline: str, noise_key_id: str) -> bytes:
        with self._transaction() as cursor:
            cursor.execute(self._sql("SELECT pipeline, status FROM jobs WHERE job_id = ?"), (job_id,))
            row = cursor.fetchone()
            if row is None:
                nonce = secrets.token_hex(16)
                cursor.execute(self._sql("INSERT INTO jobs (job_id, pipeline, status) VALUES (?, ?, ?)"),
                               (job_id, pipeline, RUNNING))
                cursor.execute(self._sql("INSERT INTO job_keys (job_id, state_key_id, noise_key_id, noise_nonce) "
                                         "VALUES (?, ?, ?, ?)"), (job_id, self.seal.key_id, noise_key_id, nonce))
                return bytes.fromhex(nonce)
            cursor.execute(self._sql("SELECT state_key_id, noise_key_id, noise_nonce FROM job_keys WHERE job_id = ?"),
                           (job_id,))
            keys = cursor.fetchone()
        for what, started, now in (("state key", keys[0], self.seal.key_id), ("noise key", keys[1], noise_key_id)):
            if started != now:
                raise JobRefused(f"job {job_id!r} started under {what} {started}, this run has {now}: run it with "
                                 f"the key it started with, or give this run a new --job-id (docs/security.md)")
        if row[0] != pipeline:
            raise JobRefused(f"job {job_id!r} in {self.uri} is a {row[0]} job, not {pipeline}: give this run its "
                             "own --job-id")
        if row[1] == DRAINED:
            raise JobRefused(
                f"job {job_id!r} was drained (its every hour read is final and released; state store {self.uri}): "
                "a new run needs a new --job-id, whose state starts empty (docs/durability.md)")
        return bytes.fromhex(keys[2])

    def load(self, job_id: str, step: str) -> StepRestore:
        """The step's last snapshot, its keyed rows and its release log."""
        def read() -> StepRestore:
            with self._transaction() as cursor:
                cursor.execute(self._sql("SELECT snapshot FROM steps WHERE job_id = ? AND step = ?"), (job_id, step))
                row = cursor.fetchone()
                snapshot = None if row is None else self._open_snapshot(row[0], job_id, step)
                cursor.execute(self._sql("SELECT key, value FROM keyed WHERE job_id = ? AND step = ?"), (job_id, step))
                keys = dict(self.seal.open_keyed(value, "keyed", job_id, step, name) for name, value in cursor.fetchall())
                cursor.execute(self._sql("SELECT seq, record FROM releases WHERE job_id = ? AND step = ? ORDER BY seq"),
                               (job_id, step))
                releases = [(seq, self.seal.open(record, "releases", job_id, step, seq))
                            for seq, record in cursor.fetchall()]
            return StepRestore(snapshot, keys, releases)

        return self._run(read, f"read the state of {job_id}/{step}")

    def log_dead_letters(self, job_id: str, input_name: str, letters: list[tuple[int, int, bytes]]) -> None:
        """Keep the dead letters (partition, offset, record) the source made of an input's messages."""
        def store() -> None:
            with self._transaction() as cursor:
                cursor.executemany(self._sql(
                    "INSERT INTO source_dead_letters (job_id, input, partition_number, message_offset, record) VALUES "
                    "(?, ?, ?, ?, ?) ON CONFLICT (job_id, input, partition_number, message_offset) DO UPDATE SET "
                    "record = excluded.record"),
                    [(job_id, input_name, partition, offset,
                      self.seal.seal(record, "dead_letters", job_id, input_name, partition, offset))
                     for partition, offset, record in letters])

        self._run(store, f"write the dead letters of {job_id}/{input_name}")

    def resumed_dead_letters(self, job_id: str, input_name: str, resume: Mapping[int, int]) -> list[bytes]:
        """The source's dead letters of the messages a restarted job does not read again (before each partition's
        ``resume`` offset; all of a partition it does not name are forgotten: it reads them again)."""
        def read() -> list[bytes]:
            with self._transaction() as cursor:
                cursor.execute(self._sql(
                    "SELECT partition_number, message_offset, record FROM source_dead_letters WHERE job_id = ? AND "
                    "input = ? ORDER BY partition_number, message_offset"), (job_id, input_name))
                rows = cursor.fetchall()
                stale = [(job_id, input_name, p, o) for p, o, _ in rows if o >= resume.get(p, 0)]
                cursor.executemany(self._sql(
                    "DELETE FROM source_dead_letters WHERE job_id = ? AND input = ? AND partition_number = ? AND "
                    "message_offset = ?"), stale)
            return [self.seal.open(record, "dead_letters", job_id, input_name, p, o)
                    for p, o, record in rows if o < resume.get(p, 0)]

        return self._run(read, f"read the dead letters of {job_id}/{input_name}")

    def mark_drained(self, job_id: str) -> None:
        """The job's run has processed the end of its input and finished: its state is final."""
        def store() -> None:
            with self._transaction() as cursor:
                cursor.execute(self._sql("UPDATE jobs SET status = ? WHERE job_id = ?"), (DRAINED, job_id))

        self._run(store, f"mark {job_id} drained")

    def snapshots(self, job_id: str) -> dict[str, state_pb2.StepSnapshot]:
        """Every step's last snapshot of the job (what the driver resumes the input from)."""
        def read() -> dict[str, state_pb2.StepSnapshot]:
            with self._transaction() as cursor:
                cursor.execute(self._sql("SELECT step, snapshot FROM steps WHERE job_id = ?"), (job_id,))
                return {step: self._open_snapshot(data, job_id, step) for step, data in cursor.fetchall()}

        return self._run(read, f"read the snapshots of {job_id}")

    def _open_snapshot(self, data: bytes, job_id: str, step: str) -> state_pb2.StepSnapshot:
        return state_pb2.StepSnapshot.FromString(self.seal.open(data, "steps", job_id, step))

    def _row_name(self, job_id: str, step: str, key: str) -> str:
        return self.seal.row_name("keyed", job_id, step, key)

    def save(self, job_id: str, step: str, write: StepWrite) -> int | None:
        """Write one firing's changes in one transaction; returns the number of its first release log entry (None
        when it releases nothing)."""
        self._saves += 1
        kill, after_commit = _fault_due(self._saves, write.snapshot)

        def store() -> int | None:
            first = None
            with self._transaction() as cursor:
                cursor.execute(self._sql(
                    "INSERT INTO steps (job_id, step, snapshot, snapshots) VALUES (?, ?, ?, 1) ON CONFLICT (job_id, "
                    "step) DO UPDATE SET snapshot = excluded.snapshot, snapshots = steps.snapshots + 1"),
                    (job_id, step, self.seal.seal(write.snapshot.SerializeToString(), "steps", job_id, step)))
                if write.deletes:
                    cursor.executemany(self._sql("DELETE FROM keyed WHERE job_id = ? AND step = ? AND key = ?"),
                                       [(job_id, step, self._row_name(job_id, step, key)) for key in write.deletes])
                if write.upserts:
                    rows = []
                    for key, value in write.upserts.items():
                        name = self._row_name(job_id, step, key)
                        rows.append((job_id, step, name, self.seal.seal_keyed(key, value, "keyed", job_id, step, name)))
                    cursor.executemany(self._sql(
                        "INSERT INTO keyed (job_id, step, key, value) VALUES (?, ?, ?, ?) ON CONFLICT (job_id, step, "
                        "key) DO UPDATE SET value = excluded.value"), rows)
                if write.releases:
                    cursor.execute(self._sql("SELECT COALESCE(MAX(seq), -1) FROM releases WHERE job_id = ? AND step = ?"),
                                   (job_id, step))
                    first = cursor.fetchone()[0] + 1
                    cursor.executemany(self._sql("INSERT INTO releases (job_id, step, seq, record) VALUES (?, ?, ?, ?)"),
                                       [(job_id, step, first + n,
                                         self.seal.seal(record, "releases", job_id, step, first + n))
                                        for n, record in enumerate(write.releases)])
                if write.acknowledged_through is not None:
                    cursor.execute(self._sql("DELETE FROM releases WHERE job_id = ? AND step = ? AND seq <= ?"),
                                   (job_id, step, write.acknowledged_through))
                if kill and not after_commit:
                    os.kill(os.getpid(), signal.SIGKILL)  # FAULT_ENVIRONMENT: in the middle of this snapshot
            return first

        first = self._run(store, f"write the state of {job_id}/{step}")
        if kill and after_commit:
            os.kill(os.getpid(), signal.SIGKILL)  # FAULT_ENVIRONMENT: just after this snapshot
        return first
