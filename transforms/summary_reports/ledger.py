"""The Aggregation Service's durable privacy-budget ledger (Ghazi et al., Alg. 1 and Alg. 6 phase "# 2. Budget Bounding").

What it is. The aggregation service keeps, per budget unit, the sum B_eps of the epsilons of the jobs that
used it and the number of those jobs (its uses: the count that Sec. 2.1.1 bounds by l_star, B_delta in Alg. 1).
A budget unit is ``(budget_key, hour)``: ``budget_key`` is a 64-hex-digit SHA-256 string computed elsewhere
from the reports' shared information (Ghazi et al. footnote 2: the shipped service budgets per shared id, not per
report) and ``hour = scheduled_report_time // 3600``. This module stores those counters in SQLite (one file, one host) or
PostgreSQL (many workers), so the budget survives restarts and is shared by every process of every pipeline.

The rule (Alg. 1, and Alg. 6 phase 2, which simulates it): a job with privacy parameter eps over units U

    if some u in U has B_eps(u) + eps > eps_star or uses(u) + 1 > l_star: abort, charge nothing
    else: B_eps(u) += eps and uses(u) += 1 for every u in U

It is all-or-nothing: an aborted job writes nothing, not even its job row, and raises
``PrivacyBudgetExhausted`` with the number of exhausted units and their budget keys.

Requerying (Ghazi et al. footnotes 3 and 4, Remark 2.1). eps_star = 64 (footnote 3) and l_star = 1 (footnote 4:
every report takes part in at most one aggregation, i.e. no requerying) are the shipped behaviour and the
defaults here. A larger l_star models the proposed requerying extension, whose privacy Ghazi et al. prove: a unit
then serves up to l_star jobs as long as the sum of their epsilons stays within eps_star.

Exact budgets (DESIGN.md "Budgets are exact"). Budgets are integers of 1 / UNITS_PER_EPSILON epsilon in BIGINT
columns, charges rounded up and capacities rounded down (``epsilon_units``), so rounding only makes the ledger
stricter. The check is written as ``used > capacity - charge`` so it cannot overflow, and the unit table also
carries a CHECK constraint with the limits the ledger was created with, so no writer can ever store more.
The limits are fixed when a ledger is created (table ``ledger_meta``); opening it with other limits is a
``LedgerConfigError``.

Idempotency. A charge is recorded under its job id with a SHA-256 fingerprint of the request (epsilon units
and the sorted distinct units). Re-running the same job id with the same request charges nothing and returns
``"already_charged"``, so a retried worker does not burn budget twice; the same job id with another request is
a ``JobConflict``. A retried release step, or a job re-run with the same job id after a crash, must not draw
fresh noise for the same data: that would publish a second answer the ledger cannot see. So the job's noise is
derived from the noise key, which the ledger never sees (``transforms.core.noise_key``: HKDF over the key, the job
id and a public nonce), and the first charge of a job records, in the same transaction, that nonce (16 bytes from
the OS CSPRNG) and the id of the noise key (``ChargeOutcome.noise_nonce``): every retry or re-run of the job id
derives exactly the same noise and writes the same answer, and one under another key is refused
(``NoiseKeyMismatch``). The ledger holds no key material: with it and a released summary, the noise cannot be
recomputed (docs/security.md). ``complete``, called once the outputs are written, then refuses the job id for
good (``JobAlreadyCompleted``).

Earlier versions (schema 1) kept each job's noise secret in the ledger (table ``ledger_secrets``). Opening such a
ledger migrates it to schema 2 and drops that table: a completed job needs no secret, and a job charged but not
completed under schema 1 is refused on its retry (``JobFromEarlierVersion``): its secret is gone, and a retry with
other noise could publish a second answer.

Concurrency. A charge is one transaction that reads and writes the counters under a lock that serialises all
charges (and ``complete``), so two processes racing for the same units cannot both pass the check:
SQLite uses ``BEGIN IMMEDIATE`` (the database write lock, taken before the first read) with a generous busy
timeout, in WAL mode with synchronous=FULL so a committed charge is on disk before any output is released.
PostgreSQL takes ``LOCK TABLE ledger_units IN SHARE ROW EXCLUSIVE MODE`` in a READ COMMITTED transaction. That
mode conflicts with itself and with every row-modifying statement, but not with plain reads, so charges run one
after another while ``usage`` readers proceed; since every statement in READ COMMITTED takes a fresh snapshot
after the lock was granted, each charge sees every earlier committed charge. Row locks in key order would let
disjoint jobs run in parallel, but they cannot lock units that do not exist yet (two jobs inserting the same new
unit would both see "no row"), and a 100,000-unit job would take 100,000 row locks; a job is a coarse, rare
event, so serialising charges is simpler and provably correct. Requests are bulk-loaded into a temporary table
(executemany on SQLite, COPY on PostgreSQL) and checked and applied with two set-based statements.
"""
from __future__ import annotations

import hashlib
import operator
import secrets
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON, epsilon_units, units_epsilon
from transforms.core.private_files import create_private_file
from transforms.core.urls import redact_url

__all__ = [
    "DEFAULT_EPSILON_STAR", "DEFAULT_MAX_USES", "ChargeOutcome", "JobAlreadyCompleted", "JobConflict",
    "JobFromEarlierVersion", "Ledger", "LedgerConfigError", "LedgerError", "LedgerLimits", "NoiseKeyMismatch",
    "PrivacyBudgetExhausted", "open_ledger", "sqlite_ledger_path",
]

DEFAULT_EPSILON_STAR = 64  # Ghazi et al. footnote 3
DEFAULT_MAX_USES = 1  # Ghazi et al. footnote 4: no requerying
BUSY_TIMEOUT_SECONDS = 300  # how long a charge waits for another process's charge to finish
SCHEMA_VERSION = "2"  # 2: no noise secrets (the noise key's id and a nonce per job); 1 kept ledger_secrets
_BIGINT_MAX = 2**63 - 1
_PG_SCHEMA_LOCK = 0x706D5F6C656467  # advisory lock id serialising schema creation ("pm_ledg")

Unit = tuple[str, int]


@dataclass(frozen=True)
class LedgerLimits:
    """The per-unit limits: capacity eps_star in budget units and l_star, the number of jobs a unit may serve."""

    epsilon_star_units: int
    max_uses: int

    def __post_init__(self) -> None:
        for name in ("epsilon_star_units", "max_uses"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _BIGINT_MAX:
                raise ValueError(f"{name} must be an integer in [0, 2**63), got {value!r}")
        if self.max_uses < 1:
            raise ValueError(f"max_uses (l_star) must be at least 1, got {self.max_uses}")

    @classmethod
    def from_epsilon(cls, epsilon_star: Any = DEFAULT_EPSILON_STAR, max_uses: int = DEFAULT_MAX_USES) -> LedgerLimits:
        """Limits from an epsilon (int, Fraction, decimal string or float), rounded down to budget units."""
        return cls(epsilon_units(epsilon_star, "down"), max_uses)

    def describe(self) -> str:
        """The limits in words, for error messages."""
        return (f"epsilon_star_units={self.epsilon_star_units} (epsilon {units_epsilon(self.epsilon_star_units)}), "
                f"max_uses={self.max_uses}")


@dataclass(frozen=True)
class ChargeOutcome:
    """``status`` is ``"charged"`` (this call charged) or ``"already_charged"`` (an earlier run of the same job id
    charged the same request; nothing was charged now); ``units`` is the number of distinct units requested;
    ``noise_nonce`` the public nonce the job's noise is derived with (drawn at its first charge)."""

    job_id: str
    status: str
    units: int
    noise_nonce: bytes = b""


class LedgerError(Exception):
    """Base of the ledger's errors; ``code`` is a stable machine-readable string."""

    code = "LEDGER_ERROR"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    def __reduce__(self) -> tuple:  # picklable with its code (errors may cross process boundaries)
        return type(self), (str(self), self.code)


class PrivacyBudgetExhausted(LedgerError):
    """Some unit would exceed eps_star or l_star: the job was aborted and nothing was charged (Alg. 1 "Abort")."""

    code = "PRIVACY_BUDGET_EXHAUSTED"

    def __init__(self, job_id: str, exhausted_units: int, budget_keys: tuple[str, ...]) -> None:
        shown = ", ".join(budget_keys[:3]) + (", ..." if len(budget_keys) > 3 else "")
        super().__init__(f"job {job_id!r}: privacy budget exhausted for {exhausted_units} unit(s) of "
                         f"{len(budget_keys)} budget key(s) ({shown}); nothing was charged")
        self.job_id = job_id
        self.exhausted_units = exhausted_units
        self.budget_keys = budget_keys

    def __reduce__(self) -> tuple:
        return type(self), (self.job_id, self.exhausted_units, self.budget_keys)


class JobConflict(LedgerError):
    """The job id was charged before with a different request (epsilon or unit set)."""

    code = "JOB_ID_CONFLICT"


class NoiseKeyMismatch(LedgerError):
    """The job id was charged under another noise key: its retry would draw other noise than its first run."""

    code = "NOISE_KEY_MISMATCH"


class JobFromEarlierVersion(LedgerError):
    """The job id was charged, not completed, by a version that kept its noise secret in the ledger (schema 1)."""

    code = "JOB_FROM_EARLIER_VERSION"


class JobAlreadyCompleted(LedgerError):
    """The job id was marked complete; running it again would release a second noisy answer."""

    code = "JOB_ALREADY_COMPLETED"


class LedgerConfigError(LedgerError):
    """Bad URL, missing driver, unreachable database, or limits that differ from the ledger's own."""

    code = "LEDGER_CONFIG"


class Ledger(ABC):
    """Per-unit privacy budgets shared by every process that opens the same URL."""

    limits: LedgerLimits

    @abstractmethod
    def charge(self, job_id: str, epsilon_units: int, units: Iterable[Unit], noise_key_id: str) -> ChargeOutcome:
        """Charge ``epsilon_units`` and one use to every distinct unit, atomically and all-or-nothing, for a job
        whose noise is derived from the noise key ``noise_key_id``.

        Raises ``PrivacyBudgetExhausted`` (nothing written), ``JobConflict``, ``JobAlreadyCompleted``,
        ``NoiseKeyMismatch``, ``JobFromEarlierVersion``; returns ``"already_charged"`` (with the nonce of the first
        charge) for a repeat of an earlier identical charge. An empty unit set records the job only.
        """

    @abstractmethod
    def complete(self, job_id: str) -> None:
        """Mark a charged job as done (after its outputs are written): its job id can never be charged again."""

    @abstractmethod
    def usage(self, units: Iterable[Unit]) -> dict[Unit, tuple[int, int]]:
        """``(epsilon_units_used, uses)`` per distinct unit, ``(0, 0)`` for units never charged."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_ledger(url: str, limits: LedgerLimits) -> Ledger:
    """Open (creating if needed) the ledger at ``url`` with ``limits``.

    ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (parent directories are created), or a
    PostgreSQL DSN ``postgresql://...`` / ``postgres://...`` (needs the ``postgres`` extra).
    """
    if not isinstance(limits, LedgerLimits):
        raise TypeError(f"limits must be a LedgerLimits, got {type(limits).__name__}")
    path = sqlite_ledger_path(url)
    if path is not None:
        return _SqliteLedger(path, limits)
    if url.startswith(("postgresql://", "postgres://")):
        return _PostgresLedger(url, limits)
    raise LedgerConfigError(f"unsupported ledger URL {redact_url(url)!r}: use sqlite:///path/to/ledger.db or postgresql://...")




def sqlite_ledger_path(url: str) -> str | None:
    """The file of a SQLite ledger URL (None for another URL); ``LedgerConfigError`` for one naming no file."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):]
    if not path or path == ":memory:" or path.endswith("/"):
        raise LedgerConfigError(f"a SQLite ledger needs a file path, got {url!r} (a ledger must be durable)")
    return path


def _check_job_id(job_id: str) -> None:
    if not isinstance(job_id, str) or not job_id:
        raise ValueError(f"a job id must be a non-empty string, got {job_id!r}")


def _distinct_units(units: Iterable[Unit]) -> list[Unit]:
    """The sorted distinct ``(budget_key, hour)`` pairs of ``units``, validated."""
    distinct = set()
    for budget_key, hour in units:
        if not isinstance(budget_key, str) or not budget_key:
            raise ValueError(f"a budget key must be a non-empty string, got {budget_key!r}")
        try:
            hour = operator.index(hour)
        except TypeError:
            raise ValueError(f"an hour must be an integer (scheduled_report_time // 3600), got {hour!r}") from None
        if not -_BIGINT_MAX <= hour <= _BIGINT_MAX:
            raise ValueError(f"hour out of range: {hour}")
        distinct.add((budget_key, hour))
    return sorted(distinct)


def _fingerprint(epsilon_units: int, request: list[Unit]) -> str:
    """SHA-256 of the request; budget keys are length-prefixed so no two requests share an encoding."""
    digest = hashlib.sha256(f"ledger-request-v1;{UNITS_PER_EPSILON};{epsilon_units};".encode())
    digest.update("".join(f"{len(key)}:{key}{hour};" for key, hour in request).encode())
    return digest.hexdigest()


class _SqlLedger(Ledger):
    """The logic shared by both backends; SQL is written with ``?`` placeholders."""

    _unit_table_suffix = ""
    _key_type = "TEXT"

    def __init__(self, conn: Any, limits: LedgerLimits, where: str) -> None:
        self._conn = conn
        self._thread_lock = threading.Lock()  # one transaction at a time on the shared connection
        self.limits = limits
        self.where = where
        try:
            self._create_schema()
        except BaseException:
            self.close()
            raise

    # --- backend hooks
    @abstractmethod
    def _execute(self, cur: Any, sql: str, params: tuple = ()) -> Any: ...

    @abstractmethod
    def _load_request(self, cur: Any, request: list[Unit]) -> None: ...

    @abstractmethod
    def _locked(self, schema: bool = False) -> Any:
        """Context manager: a transaction holding the lock that serialises charges; yields a cursor."""

    @abstractmethod
    def _reading(self) -> Any:
        """Context manager: a transaction for reading; yields a cursor."""

    # --- schema
    def _schema(self) -> list[str]:
        cap, uses = self.limits.epsilon_star_units, self.limits.max_uses
        return [
            "CREATE TABLE IF NOT EXISTS ledger_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS ledger_units (budget_key {self._key_type} NOT NULL, hour BIGINT NOT NULL, "
            f"used_units BIGINT NOT NULL CHECK (used_units BETWEEN 0 AND {cap}), "
            f"uses BIGINT NOT NULL CHECK (uses BETWEEN 0 AND {uses}), PRIMARY KEY (budget_key, hour))"
            + self._unit_table_suffix,
            # status: 'charged' or 'completed'; times are seconds since the Unix epoch (UTC); the noise key's id
            # and the public nonce the job's noise is derived with (NULL: charged under schema 1)
            "CREATE TABLE IF NOT EXISTS ledger_jobs (job_id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, "
            "epsilon_units BIGINT NOT NULL, units BIGINT NOT NULL, status TEXT NOT NULL, "
            "charged_at BIGINT NOT NULL, completed_at BIGINT, noise_key_id TEXT, noise_nonce TEXT)",
        ]

    def _migrate(self, cur: Any) -> None:
        """Schema 1 to 2: the jobs' noise key and nonce columns; the noise secrets dropped."""
        row = self._execute(cur, "SELECT value FROM ledger_meta WHERE name = 'schema_version'").fetchone()
        if row is None or row[0] != "1":
            return
        for column in ("noise_key_id", "noise_nonce"):
            self._execute(cur, f"ALTER TABLE ledger_jobs ADD COLUMN {column} TEXT")
        self._execute(cur, "DROP TABLE IF EXISTS ledger_secrets")
        self._execute(cur, "UPDATE ledger_meta SET value = ? WHERE name = 'schema_version'", (SCHEMA_VERSION,))

    def _create_schema(self) -> None:
        wanted = {"epsilon_star_units": str(self.limits.epsilon_star_units), "max_uses": str(self.limits.max_uses),
                  "units_per_epsilon": str(UNITS_PER_EPSILON), "schema_version": SCHEMA_VERSION}
        with self._locked(schema=True) as cur:
            for statement in self._schema():
                self._execute(cur, statement)
            self._migrate(cur)
            for name, value in wanted.items():
                self._execute(cur, "INSERT INTO ledger_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                              (name, value))
            stored = dict(self._execute(cur, "SELECT name, value FROM ledger_meta").fetchall())
        if stored != wanted:
            raise LedgerConfigError(
                f"the ledger at {self.where} was created with epsilon_star_units={stored.get('epsilon_star_units')}, "
                f"max_uses={stored.get('max_uses')} (units_per_epsilon={stored.get('units_per_epsilon')}, schema "
                f"{stored.get('schema_version')}) but is opened with {self.limits.describe()} (units_per_epsilon="
                f"{UNITS_PER_EPSILON}, schema {SCHEMA_VERSION}); open it with the limits it was created with or use a "
                "new ledger")

    # --- the ledger
    def charge(self, job_id: str, epsilon_units: int, units: Iterable[Unit], noise_key_id: str) -> ChargeOutcome:
        _check_job_id(job_id)
        if not isinstance(noise_key_id, str) or not noise_key_id:
            raise ValueError(f"a noise key id must be a non-empty string, got {noise_key_id!r}")
        if isinstance(epsilon_units, bool) or not isinstance(epsilon_units, int) or not 0 < epsilon_units <= _BIGINT_MAX:
            raise ValueError(f"epsilon_units must be a positive integer below 2**63, got {epsilon_units!r}")
        request = _distinct_units(units)
        fingerprint = _fingerprint(epsilon_units, request)
        with self._locked() as cur:
            job = self._execute(cur, "SELECT fingerprint, status, epsilon_units, units, noise_key_id, noise_nonce "
                                     "FROM ledger_jobs WHERE job_id = ?", (job_id,)).fetchone()
            if job is not None:
                if job[1] == "completed":
                    raise JobAlreadyCompleted(f"job {job_id!r} is complete; running it again would release a second "
                                              "noisy answer: use a new job id for a new query")
                if job[4] is None:
                    raise JobFromEarlierVersion(
                        f"job {job_id!r} was charged, not completed, by an earlier version that kept its noise secret "
                        "in the ledger; that secret is gone, and a retry with other noise could publish a second "
                        "answer: give the query a new job id (it is charged again)")
                if job[0] != fingerprint:
                    raise JobConflict(f"job {job_id!r} was charged before with another request (epsilon_units={job[2]}, "
                                      f"{job[3]} units), now epsilon_units={epsilon_units}, {len(request)} units")
                if job[4] != noise_key_id:
                    raise NoiseKeyMismatch(f"job {job_id!r} was charged under noise key {job[4]}, this run has "
                                           f"{noise_key_id}: run it with the key it was charged under (--noise-key)")
                return ChargeOutcome(job_id, "already_charged", len(request), bytes.fromhex(job[5]))
            self._load_request(cur, request)
            exhausted = self._execute(
                cur,
                "SELECT r.budget_key FROM ledger_request r LEFT JOIN ledger_units u "
                "ON u.budget_key = r.budget_key AND u.hour = r.hour "
                "WHERE COALESCE(u.used_units, 0) > ? OR COALESCE(u.uses, 0) > ?",
                (self.limits.epsilon_star_units - epsilon_units, self.limits.max_uses - 1),
            ).fetchall()
            if exhausted:  # raising rolls the transaction back: nothing is written
                raise PrivacyBudgetExhausted(job_id, len(exhausted), tuple(sorted({row[0] for row in exhausted})))
            self._execute(
                cur,
                "INSERT INTO ledger_units (budget_key, hour, used_units, uses) "
                "SELECT budget_key, hour, CAST(? AS BIGINT), 1 FROM ledger_request WHERE true "
                "ON CONFLICT (budget_key, hour) DO UPDATE SET used_units = ledger_units.used_units + excluded.used_units, "
                "uses = ledger_units.uses + 1",
                (epsilon_units,),
            )
            nonce = secrets.token_hex(16)
            self._execute(cur, "INSERT INTO ledger_jobs (job_id, fingerprint, epsilon_units, units, status, charged_at, "
                               "noise_key_id, noise_nonce) VALUES (?, ?, ?, ?, 'charged', ?, ?, ?)",
                          (job_id, fingerprint, epsilon_units, len(request), int(time.time()), noise_key_id, nonce))
        return ChargeOutcome(job_id, "charged", len(request), bytes.fromhex(nonce))

    def complete(self, job_id: str) -> None:
        _check_job_id(job_id)
        with self._locked() as cur:
            job = self._execute(cur, "SELECT status FROM ledger_jobs WHERE job_id = ?", (job_id,)).fetchone()
            if job is None:
                raise LedgerError(f"job {job_id!r} was never charged and cannot be completed", code="JOB_UNKNOWN")
            if job[0] != "completed":
                self._execute(cur, "UPDATE ledger_jobs SET status = 'completed', completed_at = ? WHERE job_id = ?",
                              (int(time.time()), job_id))

    def usage(self, units: Iterable[Unit]) -> dict[Unit, tuple[int, int]]:
        request = _distinct_units(units)
        with self._reading() as cur:
            self._load_request(cur, request)
            rows = self._execute(cur, "SELECT r.budget_key, r.hour, COALESCE(u.used_units, 0), COALESCE(u.uses, 0) "
                                      "FROM ledger_request r LEFT JOIN ledger_units u "
                                      "ON u.budget_key = r.budget_key AND u.hour = r.hour").fetchall()
        return {(key, int(hour)): (int(used), int(uses)) for key, hour, used, uses in rows}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where}, {self.limits.describe()})"


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, retried while SQLite answers "database is locked", up to the busy timeout.

    Why a loop: switching a new file (still in rollback-journal mode) to WAL reads the file and then takes its
    write lock. A connection that already reads and asks for the write lock while another connection holds it
    gets SQLITE_BUSY at once, without the busy handler (waiting could deadlock). So when several processes open a
    new ledger at once, all but the one switching the file could fail with "database is locked" despite the
    busy timeout (found by tests/transforms/summary_reports/test_ledger_contention.py: 8 processes opening a new
    ledger together; shown deterministically there with a connection holding the write lock). The error ends that
    statement and its read; once the file is in WAL mode (kept in the file), the pragma only reads the mode.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


class _SqliteLedger(_SqlLedger):
    """One SQLite file: WAL, synchronous=FULL, ``BEGIN IMMEDIATE`` around every charge."""

    _unit_table_suffix = " WITHOUT ROWID"

    def __init__(self, path: str, limits: LedgerLimits) -> None:
        conn = None
        try:
            create_private_file(path)  # 0600 in a 0700 directory, before SQLite creates it (and its WAL)
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_SECONDS * 1000}")
            _switch_to_wal(conn)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS ledger_request (budget_key TEXT NOT NULL, hour INTEGER NOT NULL)")
        except (OSError, sqlite3.Error) as error:
            if conn is not None:
                conn.close()
            raise LedgerConfigError(f"cannot open the SQLite ledger {path!r}: {error}") from error
        super().__init__(conn, limits, f"sqlite:///{path}")

    def _execute(self, cur: Any, sql: str, params: tuple = ()) -> Any:
        return cur.execute(sql, params)

    def _load_request(self, cur: Any, request: list[Unit]) -> None:
        cur.execute("DELETE FROM ledger_request")
        cur.executemany("INSERT INTO ledger_request (budget_key, hour) VALUES (?, ?)", request)

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Any]:
        with self._thread_lock:
            cur = self._conn.cursor()
            try:
                cur.execute(begin)
            except sqlite3.OperationalError as error:
                raise LedgerError(f"the ledger {self.where} stayed locked for {BUSY_TIMEOUT_SECONDS} s: {error}",
                                  code="LEDGER_BUSY") from error
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            finally:
                cur.close()

    def _locked(self, schema: bool = False) -> Any:
        return self._transaction("BEGIN IMMEDIATE")

    def _reading(self) -> Any:
        return self._transaction("BEGIN")

    def close(self) -> None:
        self._conn.close()


class _PostgresLedger(_SqlLedger):
    """PostgreSQL: every charge is a READ COMMITTED transaction under ``LOCK TABLE ledger_units IN SHARE ROW
    EXCLUSIVE MODE`` (self-conflicting, so charges are serialised; readers are not blocked). Schema creation is
    serialised by a transaction-scoped advisory lock. Budget keys use the "C" collation: byte order, fast
    whatever the database's locale."""

    _key_type = 'TEXT COLLATE "C"'

    def __init__(self, url: str, limits: LedgerLimits) -> None:
        try:
            import psycopg
        except ImportError as error:
            raise LedgerConfigError("a PostgreSQL ledger needs the psycopg driver: "
                                    "pip install 'privacy-measurement-beam[postgres]'") from error
        self._psycopg = psycopg
        where = redact_url(url)
        options: dict[str, Any] = {} if "connect_timeout" in url else {"connect_timeout": 30}
        conn = None
        try:
            conn = psycopg.connect(url, autocommit=True, application_name="privacy-measurement-beam-ledger", **options)
            conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
            conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS ledger_request (budget_key {self._key_type} NOT NULL, "
                         "hour BIGINT NOT NULL) ON COMMIT DELETE ROWS")
        except psycopg.Error as error:
            if conn is not None:
                conn.close()
            raise LedgerConfigError(f"cannot open the PostgreSQL ledger at {where}: {error}") from error
        super().__init__(conn, limits, where)

    def _execute(self, cur: Any, sql: str, params: tuple = ()) -> Any:
        return cur.execute(sql.replace("?", "%s"), params)

    def _load_request(self, cur: Any, request: list[Unit]) -> None:
        with cur.copy("COPY ledger_request (budget_key, hour) FROM STDIN") as copy:
            for row in request:
                copy.write_row(row)

    @contextmanager
    def _locked(self, schema: bool = False) -> Iterator[Any]:
        try:
            with self._thread_lock, self._conn.transaction(), self._conn.cursor() as cur:
                cur.execute(f"SET LOCAL lock_timeout = '{BUSY_TIMEOUT_SECONDS}s'")
                if schema:
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SCHEMA_LOCK,))
                else:
                    cur.execute("LOCK TABLE ledger_units IN SHARE ROW EXCLUSIVE MODE")
                yield cur
        except self._psycopg.errors.LockNotAvailable as error:
            raise LedgerError(f"the ledger {self.where} stayed locked for {BUSY_TIMEOUT_SECONDS} s: {error}",
                              code="LEDGER_BUSY") from error

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        with self._thread_lock, self._conn.transaction(), self._conn.cursor() as cur:
            yield cur

    def close(self) -> None:
        self._conn.close()
