"""The privacy-budget ledger under contention and crashes, on SQLite and PostgreSQL (a real server, real OS
processes, real SIGKILLs; DESIGN.md "Testing conventions").

The workers are OS processes of their own, each with its own connection, forked by a nursery process
(``tests.support.ledger_workers``), which also kills them by process id and reaps them.

Racing processes (``test_racing_processes_charge_exactly_the_budget``). ``RACE_PROCESSES`` workers open the ledger,
are released together by one start line (a file lock they all wait on), and each runs the same
``RACE_CHARGES_PER_PROCESS`` charges (one job id per process and group, every process in the same order, shuffled
once with ``RACE_SEED``), so they race for the same units at the same moments. Limits eps_star = 10, l_star = 4.

- ``RACE_FULL_GROUPS`` groups of three units (two hours of one key and another key) that every job of the group
  charges whole, with epsilon 1, 2, 3 or 5: min(10 // eps, 4) = 4, 4, 3, 2 of the group's 8 jobs fit, whatever the
  order (the uses bind for 1 and 2, the epsilons for 3 and 5).
- ``RACE_PARTIAL_GROUPS`` groups of partially overlapping jobs: even processes charge {left, shared}, odd ones
  {shared, right}, epsilon 1, where ``left`` already carries 3 uses (room for exactly one more). At most one left
  job can pass, and then only on both units; the shared unit always ends with exactly 4 uses. A left job refused on
  ``left`` that still charged ``shared`` (a non-atomic path) would show as a shared unit with more uses than jobs.

Exactly ``RACE_SUCCEEDED`` of the ``RACE_TRIED`` charges succeed: per unit, the ledger's usage is the sum of the
charges the processes report as successful, no unit exceeds the limits, the refused jobs left no job row and no
secret. ``test_processes_creating_a_new_ledger_at_once`` races the creation too: the processes open a ledger that
does not exist yet only after the start line. On SQLite this found a bug, fixed in ledger.py (``_switch_to_wal``)
and shown deterministically by ``test_a_new_sqlite_ledger_waits_while_another_connection_holds_its_write_lock``.

SIGKILL at random moments (``test_sigkill_at_random_moments_leaves_the_ledger_consistent``). ``KILL_CONCURRENT``
workers (mode ``chaos``) charge for ever and ``complete`` some of their jobs, each over a window of units that
slides one key per job and starts where the killed workers had got to (so the windows of the running workers
overlap and the ledger does not saturate); each first appends what it is about to do to a log of its own. The test
turns to the workers in turn and has each killed (SIGKILL, by process id, by the nursery that forked it and then
reaps it) a random delay (uniform in [0, ``KILL_MAX_DELAY``] s, from ``random.Random(KILL_SEED)``) after it was
turned to, and starts the next generation in its place: ``KILLS`` kills in all. Then, with every worker dead and
(PostgreSQL) every session of theirs ended, the ledger must be exactly the sum of the job rows it holds: for each
job row, every unit of the logged request carries its charge; no unit carries a charge without a job row; every
job acknowledged to a worker is there, no refused one is; every job row has its secret. Finally each job in doubt
(the operation a worker was killed in) is retried with the same request: ``already_charged`` if it had committed
(``JobAlreadyCompleted`` if it was completed), else charged now if and only if its units have room, and never
charged twice; the same job id with another request is a ``JobConflict``.

The numbers: the race's are fixed (module constants below); the kills' (how many charges were tried, succeeded,
refused, were in doubt) depend on the scheduling and are printed (``pytest -s``), with the seed.
"""
from __future__ import annotations

import contextlib
import json
import random
import signal
import sqlite3
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ledger_workers import HOUR, KEY_ID, WATCHDOG_SECONDS, Nursery, Worker, chaos_position, key
from transforms.core.mechanisms.budget_units import epsilon_units
from transforms.summary_reports.ledger import (
    JobAlreadyCompleted,
    JobConflict,
    LedgerLimits,
    PrivacyBudgetExhausted,
    open_ledger,
)

Unit = tuple[str, int]
Usage = dict[Unit, tuple[int, int]]

# --- racing processes: every number is fixed
RACE_SEED = 20_250_611  # shuffles the order of the groups (the same order for every process)
RACE_PROCESSES = 8
RACE_LIMITS = LedgerLimits.from_epsilon(10, 4)  # eps_star = 10, l_star = 4
RACE_FULL_EPSILONS = (1, 2, 3, 5)  # the full-overlap groups cycle through these: 4, 4, 3, 2 of 8 jobs fit
RACE_FULL_GROUPS = 32
RACE_PARTIAL_GROUPS = 8
RACE_LEFT_PRECHARGED = 3  # uses already on each partial group's left unit: one more fits
RACE_CHARGES_PER_PROCESS = RACE_FULL_GROUPS + RACE_PARTIAL_GROUPS  # 40
RACE_TRIED = RACE_PROCESSES * RACE_CHARGES_PER_PROCESS  # 320
RACE_SUCCEEDED = 136  # 8 x (4 + 4 + 3 + 2) in the full groups + 8 x 4 (the shared unit's uses) in the partial ones
RACE_REFUSED = RACE_TRIED - RACE_SUCCEEDED  # 184
OPEN_RACE_CHARGES = 2  # per process, when the processes also race to create the ledger: 16 tried, 4 succeed

# --- SIGKILL at random moments: the kills are fixed, what they interrupt is not
KILL_SEED = 1_729  # the delays before the kills; worker g's requests come from random.Random(KILL_SEED * 1000 + g)
KILL_CONCURRENT = 4  # workers charging at once
KILLS = 32  # SIGKILLs per backend: every worker started is killed once
KILL_MAX_DELAY = 0.12  # seconds
KILL_LIMITS = LedgerLimits.from_epsilon(10, 4)
CHAOS = {  # the workers' requests (tests.support.ledger_workers.chaos_request)
    "key_span": 40, "hours": 3, "jobs_per_key": 1,  # a window of 40 keys x 3 hours, one key further every job
    "max_units": 8, "complete_probability": 0.3,
    # A pause of up to 2 ms before each job, as a real worker does other work between jobs. Without it the workers
    # hold SQLite's write lock back to back and starve a newcomer, whose busy handler polls (sleeping up to 100 ms
    # between tries): opening the ledger then took up to 9 s (a fairness limit of SQLite's busy handler, not a
    # correctness problem).
    "max_pause": 0.002,
}


def eps(value: object) -> int:
    """A job's epsilon in budget units (charges round up)."""
    return epsilon_units(value, "up")


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of a new, empty ledger on each backend (as in test_ledger.py)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ledger.db"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def nursery(tmp_path: Path) -> Iterator[Nursery]:
    """The process that forks the test's workers; at the end of the test it kills (by pid) and reaps any still
    running (a failed test), then exits."""
    workers = Nursery(tmp_path / "workers")
    yield workers
    workers.close()


def _backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


def _stored(url: str) -> tuple[dict[str, tuple[str, int, int, str]], set[str], Usage]:
    """The ledger's tables, read in one transaction: job rows ``job_id -> (fingerprint, epsilon_units, units,
    status)``, the job ids with a noise key id and nonce, and every unit row ``(budget_key, hour) -> (used_units, uses)``."""
    queries = ("SELECT job_id, fingerprint, epsilon_units, units, status FROM ledger_jobs",
               "SELECT job_id FROM ledger_jobs WHERE noise_key_id IS NOT NULL AND noise_nonce IS NOT NULL",
               "SELECT budget_key, hour, used_units, uses FROM ledger_units")
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
        try:
            conn.execute("BEGIN")
            jobs, nonces, units = (conn.execute(query).fetchall() for query in queries)
            conn.execute("COMMIT")
        finally:
            conn.close()
    else:
        import psycopg

        with psycopg.connect(url) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with conn.transaction():
                jobs, nonces, units = (conn.execute(query).fetchall() for query in queries)
    return ({job: (fingerprint, int(epsilon), int(count), status) for job, fingerprint, epsilon, count, status in jobs},
            {job for (job,) in nonces},
            {(budget_key, int(hour)): (int(used), int(uses)) for budget_key, hour, used, uses in units})


def _expected_units(charges: Iterable[tuple[int, Iterable[Unit]]]) -> Usage:
    """The unit rows that exactly ``charges`` (epsilon units, units) produce: per unit, the sum of their epsilons
    and their number."""
    totals: dict[Unit, list[int]] = defaultdict(lambda: [0, 0])
    for epsilon, units in charges:
        for unit in units:
            totals[unit][0] += epsilon
            totals[unit][1] += 1
    return {unit: (used, uses) for unit, (used, uses) in totals.items()}


def _within_limits(units: Usage, limits: LedgerLimits) -> bool:
    return all(used <= limits.epsilon_star_units and uses <= limits.max_uses for used, uses in units.values())


# --- racing processes


def _race_plan() -> tuple[list[tuple[str, int]], dict[tuple[str, int], tuple[int, list[list[Unit]]]]]:
    """The common order of the groups, and per group its epsilon and the unit sets of its jobs by process."""
    plan: dict[tuple[str, int], tuple[int, list[list[Unit]]]] = {}
    for group in range(RACE_FULL_GROUPS):
        units = [(key(f"full-{group}"), HOUR), (key(f"full-{group}"), HOUR + 1), (key(f"full-{group}-b"), HOUR)]
        plan["full", group] = (eps(RACE_FULL_EPSILONS[group % len(RACE_FULL_EPSILONS)]), [units] * RACE_PROCESSES)
    for group in range(RACE_PARTIAL_GROUPS):
        left, shared, right = _partial_units(group)
        plan["partial", group] = (eps(1), [[left, shared] if p % 2 == 0 else [shared, right] for p in range(RACE_PROCESSES)])
    order = sorted(plan)
    random.Random(RACE_SEED).shuffle(order)
    return order, plan


def _partial_units(group: int) -> tuple[Unit, Unit, Unit]:
    """(left, shared, right) of a partial-overlap group."""
    return (key(f"left-{group}"), HOUR), (key(f"shared-{group}"), HOUR), (key(f"right-{group}"), HOUR + 1)


def _race_job(group: tuple[str, int], process: int) -> str:
    return f"{group[0]}-{group[1]}-p{process}"


def _race(nursery: Nursery) -> dict[str, tuple[str, int]]:
    """Release the ``race`` workers together (once all are ready) and collect what each reports:
    job id -> (status, exhausted units)."""
    for worker in nursery.workers:
        worker.wait_ready()
    nursery.go()  # the start line, to every worker at once
    reported = {}
    for worker in nursery.workers:
        results = worker.results()
        assert len(results) == len(worker.config["charges"]), (worker.name, results)
        reported.update({job: (status, exhausted) for job, status, exhausted in results})
    return reported


def test_racing_processes_charge_exactly_the_budget(ledger_url: str, nursery: Nursery) -> None:
    """``RACE_PROCESSES`` processes released together race ``RACE_TRIED`` charges for full and partially
    overlapping unit sets (module docstring): exactly ``RACE_SUCCEEDED`` succeed, and the ledger holds exactly
    their charges."""
    order, plan = _race_plan()
    setup = [(f"setup-{group}-{n}", eps(1), [_partial_units(group)[0]])
             for group in range(RACE_PARTIAL_GROUPS) for n in range(RACE_LEFT_PRECHARGED)]
    with open_ledger(ledger_url, RACE_LIMITS) as ledger:  # the schema exists before the race
        for job_id, epsilon, units in setup:
            ledger.charge(job_id, epsilon, units, KEY_ID)
    for process in range(RACE_PROCESSES):
        charges = [(_race_job(group, process), plan[group][0], plan[group][1][process]) for group in order]
        config = {"url": ledger_url, "limits": [RACE_LIMITS.epsilon_star_units, RACE_LIMITS.max_uses],
                  "charges": charges, "open_at_go": False, "start_lock": str(nursery.start_lock)}
        nursery.start("race", config, f"race-{process}")
    reported = _race(nursery)
    assert len(reported) == RACE_TRIED

    charged = {job for job, (status, _) in reported.items() if status == "charged"}
    refused = {job for job, (status, _) in reported.items() if status == "exhausted"}
    assert len(charged) + len(refused) == RACE_TRIED  # no "already_charged", no other outcome
    for group in order:
        epsilon = plan[group][0]
        jobs = [_race_job(group, process) for process in range(RACE_PROCESSES)]
        if group[0] == "full":
            fit = min(RACE_LIMITS.epsilon_star_units // epsilon, RACE_LIMITS.max_uses)
            assert sum(job in charged for job in jobs) == min(fit, RACE_PROCESSES), group
            # A refused job found all three units full at once: it never saw a charge half applied.
            assert {reported[job][1] for job in jobs if job in refused} == {3}, group
        else:
            left_charged = sum(jobs[p] in charged for p in range(0, RACE_PROCESSES, 2))
            right_charged = sum(jobs[p] in charged for p in range(1, RACE_PROCESSES, 2))
            assert left_charged <= RACE_LIMITS.max_uses - RACE_LEFT_PRECHARGED, group
            assert left_charged + right_charged == RACE_LIMITS.max_uses, group  # the shared unit, exactly full
    assert (len(charged), len(refused)) == (RACE_SUCCEEDED, RACE_REFUSED)

    job_rows, nonces, units = _stored(ledger_url)
    requests = {_race_job(group, p): (plan[group][0], plan[group][1][p]) for group in order for p in range(RACE_PROCESSES)}
    requests.update({job_id: (epsilon, units) for job_id, epsilon, units in setup})
    expected_jobs = charged | {job_id for job_id, _, _ in setup}
    # The ledger is exactly the successes the processes report: per unit their epsilons and their number, no
    # unit beyond them, no job row or secret of a refused job.
    assert units == _expected_units(requests[job] for job in expected_jobs)
    assert set(job_rows) == expected_jobs and nonces == expected_jobs
    assert {status for *_, status in job_rows.values()} == {"charged"}
    assert _within_limits(units, RACE_LIMITS)
    with open_ledger(ledger_url, RACE_LIMITS) as ledger:
        assert ledger.usage(units) == units  # what the ledger answers is what it stores
        for group in range(RACE_PARTIAL_GROUPS):
            left, shared, right = _partial_units(group)
            usage = ledger.usage([left, shared, right])
            assert usage[shared] == (eps(RACE_LIMITS.max_uses), RACE_LIMITS.max_uses)
            # All or nothing across the partial overlap: the shared unit's uses are the left unit's new ones plus
            # the right unit's.
            assert usage[left][1] - RACE_LEFT_PRECHARGED + usage[right][1] == usage[shared][1]
    print(f"\n[ledger race, {_backend(ledger_url)}] processes={RACE_PROCESSES} charges tried={RACE_TRIED} "
          f"succeeded={len(charged)} refused={len(refused)} (seed {RACE_SEED})")


def test_processes_creating_a_new_ledger_at_once(ledger_url: str, nursery: Nursery) -> None:
    """The race includes creating the ledger: ``RACE_PROCESSES`` workers released together open a ledger that does
    not exist yet (its schema and limits created by whichever comes first; SQLite also switches the new file to
    WAL) and charge ``OPEN_RACE_CHARGES`` jobs each over one set of units: every worker opens it, and exactly
    l_star = 4 jobs are charged."""
    units = [(key("opening"), HOUR), (key("opening"), HOUR + 1)]
    for process in range(RACE_PROCESSES):
        charges = [(f"open-{process}-{n}", eps(1), units) for n in range(OPEN_RACE_CHARGES)]
        config = {"url": ledger_url, "limits": [RACE_LIMITS.epsilon_star_units, RACE_LIMITS.max_uses],
                  "charges": charges, "open_at_go": True, "start_lock": str(nursery.start_lock)}
        nursery.start("race", config, f"open-{process}")
    reported = _race(nursery)
    charged = {job for job, (status, _) in reported.items() if status == "charged"}
    assert len(reported) == RACE_PROCESSES * OPEN_RACE_CHARGES and len(charged) == RACE_LIMITS.max_uses
    assert {exhausted for status, exhausted in reported.values() if status == "exhausted"} == {len(units)}
    job_rows, nonces, stored_units = _stored(ledger_url)
    assert set(job_rows) == nonces == charged
    assert stored_units == {unit: (eps(RACE_LIMITS.max_uses), RACE_LIMITS.max_uses) for unit in units}
    print(f"\n[ledger opening race, {_backend(ledger_url)}] processes={RACE_PROCESSES} charges tried={len(reported)} "
          f"succeeded={len(charged)} refused={len(reported) - len(charged)}")


def test_a_new_sqlite_ledger_waits_while_another_connection_holds_its_write_lock(tmp_path: Path) -> None:
    """The bug the opening race found, made deterministic: switching a new file to WAL needs its write lock, and
    while another connection holds it (as a process switching the same new file does) SQLite answered "database
    is locked" at once, without the busy handler; ``open_ledger`` failed instead of waiting. It now waits until the
    other connection lets go (here a timer rolls it back after ``release_after`` seconds; should the machine be
    slower than that, the test still passes, it just no longer shows the wait)."""
    path = tmp_path / "ledger.db"
    release_after = 0.3
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # the write lock of a new file, still in rollback-journal mode
        timer = threading.Timer(release_after, other.execute, ("ROLLBACK",))
        timer.start()
        try:
            with open_ledger(f"sqlite:///{path}", RACE_LIMITS) as ledger:
                assert ledger.charge("job", eps(1), [(key(1), HOUR)], KEY_ID).status == "charged"
        finally:
            timer.join()
    finally:
        other.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


# --- SIGKILL at random moments


def _settle(url: str) -> None:
    """Wait until the server has ended the sessions of the killed workers (PostgreSQL): a backend whose client
    died may still be waiting for the lock, and a COMMIT that reached the server may still land. The ledger is
    checked once nothing else can change it. SQLite has no server: a dead process holds nothing."""
    if _backend(url) == "sqlite":
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(WATCHDOG_SECONDS * 20):
            others = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                  "AND backend_type = 'client backend' AND pid <> pg_backend_pid()").fetchone()[0]
            if not others:
                return
            time.sleep(0.05)
    pytest.fail(f"{others} session(s) of killed workers still open after {WATCHDOG_SECONDS} s")


def _read_log(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """A worker's log records, and whether a last line was cut off by the kill (then dropped: a line is written
    before its operation starts, so an operation whose line is cut off never started)."""
    text = path.read_text() if path.exists() else ""
    lines = text.split("\n")
    return [json.loads(line) for line in lines[:-1]], lines[-1] != ""


def test_sigkill_at_random_moments_leaves_the_ledger_consistent(ledger_url: str, tmp_path: Path,
                                                                nursery: Nursery) -> None:
    """``KILLS`` workers charging and completing over overlapping units, each SIGKILLed at a random moment: the
    ledger is exactly the sum of its job rows, and retrying the jobs in doubt charges each at most once (module
    docstring)."""
    limits = KILL_LIMITS
    open_ledger(ledger_url, limits).close()  # the schema, before the first worker

    reached = 0  # the furthest window position of the killed workers: where the next one starts

    def start(generation: int) -> Worker:
        config = {**CHAOS, "url": ledger_url, "limits": [limits.epsilon_star_units, limits.max_uses],
                  "seed": KILL_SEED * 1000 + generation, "base": reached,
                  "log": str(tmp_path / f"chaos-{generation}.log"), "epsilon_units": [eps(1), eps(2), eps(3)]}
        return nursery.start("chaos", config, f"g{generation}")

    rng = random.Random(KILL_SEED)
    slots = [start(generation) for generation in range(KILL_CONCURRENT)]
    for kill in range(KILLS):
        victim = slots[kill % KILL_CONCURRENT]
        victim.wait_ready()
        time.sleep(rng.uniform(0, KILL_MAX_DELAY))
        exit_code = victim.kill()
        assert exit_code == -signal.SIGKILL, (victim.name, exit_code, victim.stderr_path.read_text()[-3000:])
        records, _ = _read_log(Path(victim.config["log"]))
        if records:
            reached = max(reached, chaos_position(victim.config, int(records[-1]["job"].rsplit("-", 1)[1])))
        if len(nursery.workers) < KILLS:  # every worker started is killed once: KILLS workers in all
            slots[kill % KILL_CONCURRENT] = start(len(nursery.workers))
    assert len(nursery.workers) == KILLS and {worker.returncode for worker in nursery.workers} == {-signal.SIGKILL}
    _settle(ledger_url)

    # What the workers meant to do and what they were told.
    requests: dict[str, tuple[int, list[Unit]]] = {}
    outcomes: dict[str, set[str]] = defaultdict(set)
    in_doubt: list[tuple[str, str]] = []  # (operation, job id) a worker was killed in
    completing: set[str] = set()
    cut_lines = 0
    for generation in range(KILLS):
        records, cut = _read_log(tmp_path / f"chaos-{generation}.log")
        cut_lines += cut
        for record in records:
            if record.get("op") == "charge":
                assert record["job"] not in requests
                requests[record["job"]] = (record["epsilon_units"], [tuple(unit) for unit in record["units"]])
            elif record.get("op") == "complete":
                completing.add(record["job"])
            else:
                outcomes[record["job"]].add(record["outcome"])
        if records and "op" in records[-1]:
            in_doubt.append((records[-1]["op"], records[-1]["job"]))
    told = Counter(outcome for job_outcomes in outcomes.values() for outcome in job_outcomes)

    job_rows, nonces, units = _stored(ledger_url)
    assert set(job_rows) <= set(requests)  # no job row that no worker asked for
    assert nonces == set(job_rows)  # the key id and nonce are written with the job row
    for job, (_, epsilon, count, status) in job_rows.items():
        assert (epsilon, count) == (requests[job][0], len(requests[job][1])), job
        assert status == "charged" or job in completing, job
    for job, job_outcomes in outcomes.items():
        assert ("charged" in job_outcomes) == (job in job_rows), job  # acknowledged charges are durable
        assert "exhausted" not in job_outcomes or job not in job_rows, job
        assert "completed" not in job_outcomes or job_rows[job][3] == "completed", job
    committed_in_doubt = sum(job in job_rows for operation, job in in_doubt if operation == "charge")
    assert len(job_rows) == told["charged"] + committed_in_doubt
    # All or nothing: each unit carries exactly the charges of the job rows whose requests name it, no other.
    assert units == _expected_units(requests[job] for job in job_rows)
    assert _within_limits(units, limits)

    # Retry every job in doubt: the committed ones are already charged (or complete), the others charge now if
    # their units have room; nothing is charged twice; another request under the same job id is refused.
    retried: Counter[str] = Counter()
    with open_ledger(ledger_url, limits) as ledger:
        for operation, job in in_doubt:
            epsilon, request = requests[job]
            before = ledger.usage(request)
            status = job_rows[job][3] if job in job_rows else None
            if status == "completed":
                outcome = "already_completed"
                with pytest.raises(JobAlreadyCompleted):
                    ledger.charge(job, epsilon, request, KEY_ID)
            elif status == "charged":
                outcome = ledger.charge(job, epsilon, request, KEY_ID).status
                assert outcome == "already_charged", job
            elif all(used <= limits.epsilon_star_units - epsilon and uses < limits.max_uses
                     for used, uses in before.values()):  # room on every unit: it charges now, once
                outcome = ledger.charge(job, epsilon, request, KEY_ID).status
                assert outcome == "charged", job
                assert ledger.usage(request) == {unit: (used + epsilon, uses + 1) for unit, (used, uses) in before.items()}
                before = ledger.usage(request)
                assert ledger.charge(job, epsilon, request, KEY_ID).status == "already_charged", job  # not twice
                outcome = "charged_now"
            else:
                outcome = "refused_now"
                with pytest.raises(PrivacyBudgetExhausted):
                    ledger.charge(job, epsilon, request, KEY_ID)
            retried[outcome] += 1
            if outcome != "refused_now":  # the same job id with another request
                with pytest.raises(JobAlreadyCompleted if status == "completed" else JobConflict):
                    ledger.charge(job, epsilon + 1, request, KEY_ID)
            assert ledger.usage(request) == before, job
            if operation == "complete":  # the release step's retry: completing is idempotent
                ledger.complete(job)
                with pytest.raises(JobAlreadyCompleted):
                    ledger.charge(job, epsilon, request, KEY_ID)
    final_rows, final_nonces, final_units = _stored(ledger_url)
    assert final_units == _expected_units(requests[job] for job in final_rows)
    assert final_nonces == set(final_rows) and set(job_rows) <= set(final_rows)
    assert len(final_rows) - len(job_rows) == retried["charged_now"]
    assert _within_limits(final_units, limits)

    print(f"\n[ledger kills, {_backend(ledger_url)}] workers={KILLS} ({KILL_CONCURRENT} at once) kills={KILLS} "
          f"(seed {KILL_SEED}, delays uniform in [0, {KILL_MAX_DELAY}] s) charges tried={len(requests)} "
          f"succeeded={told['charged']} refused={told['exhausted']} completed={told['completed']} "
          f"in doubt: charges={sum(op == 'charge' for op, _ in in_doubt)} (committed={committed_in_doubt}) "
          f"completes={sum(op == 'complete' for op, _ in in_doubt)}; retried: {dict(sorted(retried.items()))}; "
          f"cut log lines={cut_lines}; job rows={len(job_rows)}, unit rows={len(units)}")
