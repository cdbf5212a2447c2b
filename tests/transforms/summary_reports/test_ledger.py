"""The Aggregation Service's privacy-budget ledger (Ghazi et al. Alg. 1, Alg. 6 phase 2) on SQLite and PostgreSQL."""
from __future__ import annotations

import hashlib
import multiprocessing
import pickle
import sys
from fractions import Fraction

import pytest

from tests.support.ledger_workers import KEY_ID
from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON, epsilon_units
from transforms.summary_reports.ledger import (
    ChargeOutcome,
    JobAlreadyCompleted,
    JobConflict,
    JobFromEarlierVersion,
    LedgerConfigError,
    LedgerError,
    LedgerLimits,
    NoiseKeyMismatch,
    PrivacyBudgetExhausted,
    open_ledger,
)

HOUR = 480_000  # an hour step: scheduled_report_time // 3600


def _plain(outcome: ChargeOutcome) -> tuple[str, str, int]:
    """An outcome without its nonce (random)."""
    return outcome.job_id, outcome.status, outcome.units


def key(name: object) -> str:
    """A 64-hex-digit budget key, as the shared-id hashing produces."""
    return hashlib.sha256(str(name).encode()).hexdigest()


def eps(value: object) -> int:
    """A job's epsilon in budget units (charges round up)."""
    return epsilon_units(value, "up")


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A URL of a new, empty ledger on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ledger.db"  # tmp_path is absolute: sqlite:////tmp/...
    return request.getfixturevalue("postgres_url")


def test_limits_are_stored_and_a_mismatch_is_rejected(ledger_url: str) -> None:
    limits = LedgerLimits.from_epsilon(64, 1)
    unit = (key("a"), HOUR)
    with open_ledger(ledger_url, limits) as ledger:
        assert _plain(ledger.charge("job-1", eps(10), [unit], KEY_ID)) == ("job-1", "charged", 1)
    with open_ledger(ledger_url, LedgerLimits(64 * UNITS_PER_EPSILON, 1)) as ledger:  # the same limits: durable state
        assert ledger.usage([unit]) == {unit: (10 * UNITS_PER_EPSILON, 1)}
    with pytest.raises(LedgerConfigError) as error:
        open_ledger(ledger_url, LedgerLimits.from_epsilon(32, 1))
    assert error.value.code == "LEDGER_CONFIG"
    assert "epsilon_star_units=64000000000000" in str(error.value) and "epsilon_star_units=32000000000000" in str(error.value)
    with pytest.raises(LedgerConfigError, match=r"max_uses=1\b.*max_uses=2\b"):
        open_ledger(ledger_url, LedgerLimits.from_epsilon(64, 2))


def test_all_or_nothing(ledger_url: str) -> None:
    limits = LedgerLimits.from_epsilon(10, 1)
    spent = [(key(3), HOUR), (key(3), HOUR + 1)]
    request = [(key(i), HOUR) for i in range(10)] + [(key(3), HOUR + 1), (key(11), HOUR + 1)]
    with open_ledger(ledger_url, limits) as ledger:
        ledger.charge("a", eps(1), spent, KEY_ID)
        before = ledger.usage(request)
        with pytest.raises(PrivacyBudgetExhausted) as error:
            ledger.charge("b", eps(1), request, KEY_ID)
        assert (error.value.code, error.value.job_id) == ("PRIVACY_BUDGET_EXHAUSTED", "b")
        assert error.value.exhausted_units == 2  # two hours of one key: counted per unit, listed per key
        assert error.value.budget_keys == (key(3),)
        assert ledger.usage(request) == before  # nothing charged
        assert sum(uses for _, uses in before.values()) == 2
        # Not even the job row was written: the same job id may run with another request.
        others = [unit for unit in request if unit[0] != key(3)]
        assert ledger.charge("b", eps(1), others, KEY_ID).status == "charged"
        # A job whose epsilon alone exceeds eps_star exhausts every unit, known or not.
        with pytest.raises(PrivacyBudgetExhausted) as error:
            ledger.charge("c", eps(11), [(key("new"), HOUR), (key("other"), HOUR)], KEY_ID)
        assert error.value.exhausted_units == 2 and error.value.budget_keys == tuple(sorted([key("new"), key("other")]))


@pytest.mark.parametrize("max_uses, third_epsilon", [(3, 4), (2, 1)])
def test_requerying_sums_epsilons_and_uses(ledger_url: str, max_uses: int, third_epsilon: int) -> None:
    """eps_star = 10: two jobs of eps 4 pass. With l_star = 3 a third of eps 4 fails on epsilon (12 > 10), and one
    of eps 2 then fills the unit exactly; with l_star = 2 a third of eps 1 fails on uses (3 > 2) though 9 <= 10."""
    units = [(key("r"), HOUR), (key("r"), HOUR + 1)]
    with open_ledger(ledger_url, LedgerLimits.from_epsilon(10, max_uses)) as ledger:
        assert ledger.charge("q1", eps(4), units, KEY_ID).status == "charged"
        assert ledger.charge("q2", eps(4), units[:1], KEY_ID).status == "charged"
        assert ledger.usage(units) == {units[0]: (eps(8), 2), units[1]: (eps(4), 1)}
        with pytest.raises(PrivacyBudgetExhausted) as error:
            ledger.charge("q3", eps(third_epsilon), units, KEY_ID)
        assert error.value.exhausted_units == 1
        assert ledger.usage(units) == {units[0]: (eps(8), 2), units[1]: (eps(4), 1)}
        if max_uses == 3:
            assert ledger.charge("q4", eps(2), units, KEY_ID).status == "charged"
            assert ledger.usage(units) == {units[0]: (eps(10), 3), units[1]: (eps(6), 2)}


def test_fractional_epsilons_are_exact_and_round_towards_privacy(ledger_url: str) -> None:
    """Capacity 1 is exactly 10**12 units. A quarter is exactly 2.5e11 units, so four quarters fill the unit to
    the last unit. A third is not representable: charges round up to 333333333334 units, so two thirds take
    666666666668 units and the third third (1000000000002 > 10**12) is refused. Rounding can make the ledger
    stricter than exact arithmetic by at most one unit per charge, never laxer."""
    quarter, third = (key("quarter"), HOUR), (key("third"), HOUR)
    with open_ledger(ledger_url, LedgerLimits.from_epsilon(1, 10)) as ledger:
        assert ledger.limits.epsilon_star_units == 10**12
        for job in range(4):
            ledger.charge(f"quarter-{job}", eps(Fraction(1, 4)), [quarter], KEY_ID)
        assert ledger.usage([quarter]) == {quarter: (10**12, 4)}
        with pytest.raises(PrivacyBudgetExhausted):
            ledger.charge("one-more-unit", 1, [quarter], KEY_ID)
        assert eps(Fraction(1, 3)) == 333_333_333_334
        ledger.charge("third-0", eps(Fraction(1, 3)), [third], KEY_ID)
        ledger.charge("third-1", eps("0.3333333333333333"), [third], KEY_ID)  # a float-like 1/3 just below: rounds up too
        assert ledger.usage([third]) == {third: (666_666_666_668, 2)}
        with pytest.raises(PrivacyBudgetExhausted):
            ledger.charge("third-2", eps(Fraction(1, 3)), [third], KEY_ID)
        assert ledger.usage([third]) == {third: (666_666_666_668, 2)}


def test_a_charged_job_keeps_its_noise_key_id_and_nonce_and_no_secret(ledger_url: str) -> None:
    """The first charge records the job's noise key id and a public nonce in its transaction; a retried charge
    returns the same nonce (the same noise); another job has its own; a retry under another noise key is refused;
    the ledger has no table of secrets."""
    units = [(key(i), HOUR) for i in range(3)]
    with open_ledger(ledger_url, LedgerLimits.from_epsilon(10, 1)) as ledger:
        nonce = ledger.charge("job", eps(5), units, KEY_ID).noise_nonce
        assert isinstance(nonce, bytes) and len(nonce) == 16
        assert ledger.charge("job", eps(5), units, KEY_ID).noise_nonce == nonce  # already_charged
        assert ledger.charge("other", eps(5), [(key("x"), HOUR)], KEY_ID).noise_nonce != nonce
        with pytest.raises(NoiseKeyMismatch, match="charged under noise key 0123456789abcdef") as error:
            ledger.charge("job", eps(5), units, "fedcba9876543210")
        assert error.value.code == "NOISE_KEY_MISMATCH"
        with pytest.raises(PrivacyBudgetExhausted):
            ledger.charge("refused", eps(6), units, KEY_ID)
    with open_ledger(ledger_url, LedgerLimits.from_epsilon(10, 1)) as reopened:
        assert reopened.charge("job", eps(5), units, KEY_ID).noise_nonce == nonce  # durable
    assert "ledger_secrets" not in _tables(ledger_url)


def _tables(url: str) -> set[str]:
    """The ledger's table names."""
    if url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(url[len("sqlite:///"):]) as conn:
            return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    import psycopg

    with psycopg.connect(url) as conn:
        return {name for (name,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}


def test_a_schema_1_ledger_loses_its_secrets_and_refuses_the_retry_of_an_uncompleted_job(tmp_path) -> None:
    """A ledger an earlier version wrote (schema 1: noise secrets in ``ledger_secrets``) is migrated when opened:
    the secrets dropped, budgets kept; a completed job stays completed; a job charged but not completed cannot be
    retried (its secret is gone: other noise could publish a second answer)."""
    import sqlite3

    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as conn:  # schema 1, as the earlier version created it
        conn.executescript(
            "CREATE TABLE ledger_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE ledger_units (budget_key TEXT NOT NULL, hour BIGINT NOT NULL, used_units BIGINT NOT NULL, "
            "uses BIGINT NOT NULL, PRIMARY KEY (budget_key, hour)) WITHOUT ROWID;"
            "CREATE TABLE ledger_jobs (job_id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, epsilon_units BIGINT "
            "NOT NULL, units BIGINT NOT NULL, status TEXT NOT NULL, charged_at BIGINT NOT NULL, completed_at BIGINT);"
            "CREATE TABLE ledger_secrets (job_id TEXT PRIMARY KEY, secret TEXT NOT NULL);")
        limits = LedgerLimits.from_epsilon(64, 1)
        conn.executemany("INSERT INTO ledger_meta VALUES (?, ?)", [
            ("epsilon_star_units", str(limits.epsilon_star_units)), ("max_uses", "1"),
            ("units_per_epsilon", str(UNITS_PER_EPSILON)), ("schema_version", "1")])
        conn.execute("INSERT INTO ledger_units VALUES (?, ?, ?, 1)", (key("a"), HOUR, eps(5)))
        conn.executemany("INSERT INTO ledger_jobs VALUES (?, 'f', ?, 1, ?, 0, NULL)",
                         [("done", eps(5), "completed"), ("halfway", eps(5), "charged")])
        conn.executemany("INSERT INTO ledger_secrets VALUES (?, ?)", [("done", "ab" * 32), ("halfway", "cd" * 32)])
    with open_ledger(f"sqlite:///{path}", LedgerLimits.from_epsilon(64, 1)) as ledger:
        assert ledger.usage([(key("a"), HOUR)]) == {(key("a"), HOUR): (eps(5), 1)}
        with pytest.raises(JobAlreadyCompleted):
            ledger.charge("done", eps(5), [(key("a"), HOUR)], KEY_ID)
        with pytest.raises(JobFromEarlierVersion, match="new job id"):
            ledger.charge("halfway", eps(5), [(key("a"), HOUR)], KEY_ID)
        assert ledger.charge("new", eps(5), [(key("b"), HOUR)], KEY_ID).status == "charged"
    assert "ledger_secrets" not in _tables(f"sqlite:///{path}")
    assert b"ab" * 32 not in path.read_bytes() and b"cd" * 32 not in path.read_bytes()


def test_idempotency_conflicts_and_completion(ledger_url: str) -> None:
    units = [(key(i), HOUR + i % 2) for i in range(50)]
    with open_ledger(ledger_url, LedgerLimits.from_epsilon(64, 1)) as ledger:
        first = ledger.charge("job", eps(5), units, KEY_ID)
        assert _plain(first) == ("job", "charged", 50)
        used = ledger.usage(units)
        # A retried worker: the same request (in another order, with duplicates) charges nothing.
        again = ledger.charge("job", eps(5), list(reversed(units)) + units[:3], KEY_ID)
        assert again == ChargeOutcome("job", "already_charged", 50, first.noise_nonce)  # the same noise
        assert ledger.usage(units) == used
        with pytest.raises(JobConflict) as error:
            ledger.charge("job", eps(6), units, KEY_ID)
        assert error.value.code == "JOB_ID_CONFLICT"
        with pytest.raises(JobConflict):
            ledger.charge("job", eps(5), units[:-1], KEY_ID)
        ledger.complete("job")
        ledger.complete("job")  # completing twice is harmless
        with pytest.raises(JobAlreadyCompleted) as error:
            ledger.charge("job", eps(5), units, KEY_ID)
        assert error.value.code == "JOB_ALREADY_COMPLETED"
        with pytest.raises(LedgerError) as error:
            ledger.complete("never-charged")
        assert error.value.code == "JOB_UNKNOWN"
        assert ledger.usage(units) == used
        # An empty unit set charges nothing but records the job.
        assert _plain(ledger.charge("empty", eps(5), [], KEY_ID)) == ("empty", "charged", 0)
        assert ledger.charge("empty", eps(5), [], KEY_ID).status == "already_charged"
        with pytest.raises(JobConflict):
            ledger.charge("empty", eps(5), units[:1], KEY_ID)
        assert ledger.usage([(key("unknown"), 0)]) == {(key("unknown"), 0): (0, 0)}
        with pytest.raises(ValueError):
            ledger.charge("zero", 0, units, KEY_ID)
        with pytest.raises(ValueError):
            ledger.charge("bad-hour", eps(1), [(key(1), 1.5)], KEY_ID)


_RACE_ROUNDS = 5
_RACE_UNITS = 2000  # each worker's units; the two workers share half of them


def _race_units(round_: int, worker: int) -> list[tuple[str, int]]:
    start = worker * _RACE_UNITS // 2
    return [(key(f"race-{round_}-{i}"), HOUR + i % 24) for i in range(start, start + _RACE_UNITS)]


def _race_worker(url: str, limits: LedgerLimits, worker: int, barrier, results) -> None:
    """Charge this worker's units once per round, all workers released together by the barrier."""
    try:
        with open_ledger(url, limits) as ledger:
            for round_ in range(_RACE_ROUNDS):
                units = _race_units(round_, worker)
                barrier.wait(timeout=60)
                try:
                    ledger.charge(f"race-{round_}-{worker}", eps(1), units, KEY_ID)
                    results.put((round_, worker, "charged", 0))
                except PrivacyBudgetExhausted as error:
                    results.put((round_, worker, "exhausted", error.exhausted_units))
    except Exception as error:  # reported to the parent, which fails the test
        results.put((-1, worker, "error", repr(error)))
        barrier.abort()


def test_two_processes_racing_for_the_same_units(ledger_url: str) -> None:
    """l_star = 1 and two processes charging overlapping units at the same moment: in every round exactly one
    is charged and the other is refused on the shared units; no unit is ever used twice."""
    limits = LedgerLimits.from_epsilon(64, 1)
    open_ledger(ledger_url, limits).close()  # create the schema before the race
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_race_worker, args=(ledger_url, limits, w, barrier, results)) for w in range(2)]
    for process in workers:
        process.start()
    outcomes: list[tuple] = []
    try:
        while len(outcomes) < 2 * _RACE_ROUNDS and not any(outcome[2] == "error" for outcome in outcomes):
            outcomes.append(results.get(timeout=120))
    finally:
        for process in workers:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    assert not [outcome for outcome in outcomes if outcome[2] == "error"], outcomes
    with open_ledger(ledger_url, limits) as ledger:
        for round_ in range(_RACE_ROUNDS):
            statuses = sorted((status, count) for r, _, status, count in outcomes if r == round_)
            assert statuses == [("charged", 0), ("exhausted", _RACE_UNITS // 2)], (round_, outcomes)
            winner = next(w for r, w, status, _ in outcomes if r == round_ and status == "charged")
            usage = ledger.usage(_race_units(round_, 0) + _race_units(round_, 1))
            assert {unit for unit, (_, uses) in usage.items() if uses} == set(_race_units(round_, winner))
            assert set(usage.values()) == {(0, 0), (eps(1), 1)}


def test_urls(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    limits = LedgerLimits.from_epsilon(64, 1)
    monkeypatch.chdir(tmp_path)
    with open_ledger("sqlite:///nested/dirs/ledger.db", limits) as ledger:  # relative, parents created
        ledger.charge("job", eps(1), [(key(1), HOUR)], KEY_ID)
    assert (tmp_path / "nested" / "dirs" / "ledger.db").exists()
    for url in ("mysql://host/db", "sqlite://relative.db", "sqlite:///:memory:"):
        with pytest.raises(LedgerConfigError):
            open_ledger(url, limits)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # the driver is not installed
    with pytest.raises(LedgerConfigError, match=r"pip install 'privacy-measurement-beam\[postgres\]'"):
        open_ledger("postgresql://user@localhost/ledger", limits)


def test_postgres_scheme_alias(postgres_url: str) -> None:  # noqa: F811  (the fixture imported above)
    limits = LedgerLimits.from_epsilon(64, 1)
    with open_ledger(postgres_url.replace("postgresql://", "postgres://", 1), limits) as ledger:
        assert ledger.charge("job", eps(1), [(key(1), HOUR)], KEY_ID).status == "charged"


def test_errors_survive_pickling() -> None:
    """Errors may cross process boundaries (Beam workers, multiprocessing) with their attributes."""
    error = pickle.loads(pickle.dumps(PrivacyBudgetExhausted("job", 3, (key(1), key(2)))))
    assert (error.code, error.job_id, error.exhausted_units, error.budget_keys) == (
        "PRIVACY_BUDGET_EXHAUSTED", "job", 3, (key(1), key(2)))
    assert pickle.loads(pickle.dumps(LedgerError("busy", code="LEDGER_BUSY"))).code == "LEDGER_BUSY"
    assert isinstance(pickle.loads(pickle.dumps(JobConflict("conflict"))), JobConflict)
