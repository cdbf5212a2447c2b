"""Processes that charge the privacy-budget ledger for its contention and crash tests
(``tests/transforms/summary_reports/test_ledger_contention.py``), and the test's handle on them.

The nursery. A test starts one ``python -m tests.support.ledger_workers nursery`` process, which imports the ledger
(and psycopg) once and then forks every worker the test asks for: a worker is an OS process of its own with its own
database connection, and starts in milliseconds instead of the ~0.2 s of a fresh interpreter (a test starts tens).
Being their parent, the nursery is also what kills them by process id (SIGKILL) and reaps them: a child's process id
cannot be reused before its parent has reaped it, so killing it from there never hits another process. Workers die
with the nursery (``PR_SET_PDEATHSIG``), and the nursery kills and reaps every worker left when its stdin closes.

Its protocol, one line each: commands on stdin ``start NAME MODE CONFIG`` (``CONFIG`` a JSON file) and ``kill NAME``;
on stdout ``started NAME PID``, ``ready NAME`` (written by the worker itself) and ``exit NAME CODE`` (when reaped;
-9 after SIGKILL). Each line is one ``write`` below PIPE_BUF, so the lines of several processes never interleave.
A worker's stderr goes to ``NAME.stderr`` beside its config, shown when it fails.

The workers:

- ``race``: open the ledger, say ``ready``, wait for the start line (a shared lock on ``start_lock``, which the test
  holds exclusively until it releases every worker at once), run the config's charges in order, write
  ``[job_id, "charged" | "exhausted", exhausted_units]`` per charge to ``NAME.results.json`` and exit 0. With
  ``open_at_go`` it opens the ledger only after the start line: the workers race to create it.
- ``chaos``: open the ledger, say ``ready``, then charge (and sometimes ``complete``) for ever, until it is killed.
  Before each operation it appends what it is about to do to its own log file, and after it the outcome, each line
  with one ``write`` on an ``O_APPEND`` descriptor, so a kill leaves at most one operation in doubt: the last
  line. Its requests come from a ``random.Random`` seeded by the config.

``Nursery`` and ``Worker`` are the test's side; every wait has a watchdog (a hung process fails the test instead of
hanging it; no assertion is about time).
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
import traceback
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HOUR = 480_000  # an hour step (scheduled_report_time // 3600), as in test_ledger.py
KEY_ID = "0123456789abcdef"  # the noise key id the jobs are charged under
WATCHDOG_SECONDS = 120  # a process silent this long is hung: the test fails (a guard, not a timing assertion)


def key(name: object) -> str:
    """A 64-hex-digit budget key, as the shared-id hashing produces."""
    return hashlib.sha256(str(name).encode()).hexdigest()


def _say(line: str) -> None:
    """One protocol line on stdout, in one ``write`` (atomic on a pipe below PIPE_BUF bytes)."""
    os.write(1, (line + "\n").encode())


# --- the workers


def _race(name: str, config: dict[str, Any], directory: Path) -> None:
    """A ``race`` worker (module docstring); its results go to a file, written after the race so that reporting
    does not pace it."""
    from transforms.summary_reports.ledger import LedgerLimits, PrivacyBudgetExhausted, open_ledger

    def start_line() -> None:
        _say(f"ready {name}")
        with open(config["start_lock"], "rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)  # granted to every worker at once when the test lets go

    if config["open_at_go"]:  # the race includes opening (and creating) the ledger
        start_line()
    with open_ledger(config["url"], LedgerLimits(*config["limits"])) as ledger:
        if not config["open_at_go"]:
            start_line()
        results = []
        for job_id, epsilon_units, units in config["charges"]:
            try:
                outcome = ledger.charge(job_id, epsilon_units, [tuple(unit) for unit in units], KEY_ID)
                results.append([job_id, outcome.status, 0])
            except PrivacyBudgetExhausted as error:
                results.append([job_id, "exhausted", error.exhausted_units])
    (directory / f"{name}.results.json").write_text(json.dumps(results))


def chaos_position(config: dict[str, Any], number: int) -> int:
    """The first budget key of a ``chaos`` worker's window at its ``number``-th job: the window slides one key
    every ``jobs_per_key`` jobs from the worker's ``base``, so that the ledger does not saturate (later charges
    still commit, and kills land in writing transactions too). The test starts each worker where the killed ones
    had got to, so the windows of the workers running at the same time overlap: they race for the same units."""
    return config["base"] + number // config["jobs_per_key"]


def chaos_request(rng: random.Random, config: dict[str, Any], number: int) -> tuple[int, list[tuple[str, int]]]:
    """The ``number``-th request of a ``chaos`` worker: an epsilon (budget units) and 1 to ``max_units`` distinct
    units of its window (``key_span`` keys times ``hours`` hours)."""
    first = chaos_position(config, number)
    window = [(first + k, hour) for k in range(config["key_span"]) for hour in range(config["hours"])]
    units = [(key(f"chaos-{k}"), HOUR + hour) for k, hour in rng.sample(window, rng.randint(1, config["max_units"]))]
    return rng.choice(config["epsilon_units"]), units


def _chaos(name: str, config: dict[str, Any], directory: Path) -> None:
    """A ``chaos`` worker (module docstring): charges and completes until it is killed."""
    from transforms.summary_reports.ledger import LedgerLimits, PrivacyBudgetExhausted, open_ledger

    rng = random.Random(config["seed"])
    log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def note(record: dict[str, Any]) -> None:  # one write: a kill leaves whole lines (the last may be cut off)
        os.write(log, (json.dumps(record) + "\n").encode())

    with open_ledger(config["url"], LedgerLimits(*config["limits"])) as ledger:
        _say(f"ready {name}")
        for number in range(sys.maxsize):
            time.sleep(rng.uniform(0, config["max_pause"]))  # between jobs (see CHAOS in the test)
            job_id = f"{name}-{number}"
            epsilon_units, units = chaos_request(rng, config, number)
            note({"op": "charge", "job": job_id, "epsilon_units": epsilon_units, "units": units})
            try:
                ledger.charge(job_id, epsilon_units, units, KEY_ID)
            except PrivacyBudgetExhausted as error:
                note({"outcome": "exhausted", "job": job_id, "exhausted_units": error.exhausted_units})
                continue
            note({"outcome": "charged", "job": job_id})
            if rng.random() < config["complete_probability"]:
                note({"op": "complete", "job": job_id})
                ledger.complete(job_id)
                note({"outcome": "completed", "job": job_id})


_MODES = {"race": _race, "chaos": _chaos}


# --- the nursery


def _die_with_parent() -> None:
    """Linux sends this process SIGKILL when its parent dies (elsewhere this does nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG; CDLL(None): the symbols already loaded (libc)


def _run_worker(name: str, mode: str, config_path: str, wakeup: tuple[int, int]) -> None:
    """In the forked child: its own stdin (none) and stderr, the nursery's signal set-up undone; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in wakeup:
            os.close(fd)
        _die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        path = Path(config_path)
        stderr = os.open(path.with_suffix(".stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(stderr, 2)
        os.close(stderr)
        _MODES[mode](name, json.loads(path.read_text()), path.parent)
        code = 0
    except BaseException:  # reported on stderr; the exit code says it failed
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(code)


def _nursery() -> None:
    """Fork, kill and reap workers on the test's commands until its stdin closes (module docstring)."""
    import transforms.summary_reports.ledger  # noqa: F401 - imported once, before the forks

    with contextlib.suppress(ImportError):
        import psycopg  # noqa: F401
    _die_with_parent()
    wakeup = os.pipe()  # SIGCHLD writes a byte here, so select wakes up when a worker dies
    for fd in wakeup:
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wakeup[1])
    names: dict[int, str] = {}  # pid -> name, until reaped
    pids: dict[str, int] = {}
    pending, closed = b"", False
    while names or not closed:
        readable, _, _ = select.select([wakeup[0]] if closed else [0, wakeup[0]], [], [])
        if wakeup[0] in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wakeup[0], 4096)
        while names:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                break
            _say(f"exit {names.pop(pid)} {os.waitstatus_to_exitcode(status)}")
        if 0 not in readable:
            continue
        data = os.read(0, 65536)
        if not data:  # the test is done: kill what is left, then reap it above
            closed = True
            for pid in names:
                os.kill(pid, signal.SIGKILL)
            continue
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            command, name, *arguments = line.decode().split()
            if command == "start":
                pid = os.fork()
                if pid == 0:
                    _run_worker(name, *arguments, wakeup=wakeup)
                names[pid], pids[name] = name, pid
                _say(f"started {name} {pid}")
            elif command == "kill" and pids[name] in names:  # not reaped yet: the pid is still the worker's
                os.kill(pids[name], signal.SIGKILL)


# --- the test's side


class WorkerFailed(AssertionError):
    """A worker exited when it should not have, or a process stayed silent past the watchdog."""


class Nursery:
    """The nursery process of one test; ``start`` forks a worker; ``close`` kills and reaps what is left."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.start_lock = directory / "start.lock"
        self._lock = open(self.start_lock, "wb")  # noqa: SIM115 - released by go() or close()
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # the race workers wait behind it
        with open(directory / "nursery.stderr", "wb") as stderr:
            self.process = subprocess.Popen([sys.executable, "-m", "tests.support.ledger_workers", "nursery"], cwd=ROOT,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        self._buffer = b""
        self._messages: dict[str, deque[list[str]]] = defaultdict(deque)
        self.workers: list[Worker] = []

    def start(self, mode: str, config: dict[str, Any], name: str) -> Worker:
        """Fork a ``mode`` worker called ``name`` (unique in the test) with ``config``."""
        config_path = self.directory / f"{name}.json"
        config_path.write_text(json.dumps(config))
        self._send(f"start {name} {mode} {config_path}")
        worker = Worker(self, name, int(self.next_message(name, "started")[0]), config)
        self.workers.append(worker)
        return worker

    def go(self) -> None:
        """The start line: every race worker waiting for it gets it at once."""
        fcntl.flock(self._lock, fcntl.LOCK_UN)

    def _send(self, line: str) -> None:
        self.process.stdin.write((line + "\n").encode())

    def next_message(self, name: str, kind: str | None = None) -> list[str]:
        """The next protocol line about worker ``name`` (of ``kind``, if given: the worker's own ``ready`` may
        come before the nursery's ``started``), split, without its name; read with a watchdog."""
        while True:
            queue = self._messages[name]
            found = next((message for message in queue if kind in (None, message[0])), None)
            if found is not None:
                queue.remove(found)
                return found if kind is None else found[1:]
            self._read_more(name)

    def _read_more(self, name: str) -> None:
        """Read the nursery's next lines (waiting at most the watchdog) into the per-worker queues."""
        ready, _, _ = select.select([self.process.stdout], [], [], WATCHDOG_SECONDS)
        chunk = os.read(self.process.stdout.fileno(), 65536) if ready else b""
        if not chunk:
            raise WorkerFailed(f"waiting for {name}: the nursery {'exited' if ready else 'is hung'}; {self._stderr()}")
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            kind, about, *rest = line.decode().split()
            self._messages[about].append([kind, *rest])

    def kill(self, name: str) -> None:
        """Have the nursery SIGKILL worker ``name`` by its process id, unless it has already reaped it."""
        self._send(f"kill {name}")

    def _stderr(self) -> str:
        return "nursery stderr: " + (self.directory / "nursery.stderr").read_text(errors="replace")[-3000:]

    def close(self) -> None:
        """Close the nursery's stdin: it kills (SIGKILL, by pid) and reaps every worker left, then exits."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=WATCHDOG_SECONDS)
        except subprocess.TimeoutExpired:  # hung: its workers die with it (PR_SET_PDEATHSIG)
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self._lock.close()


class Worker:
    """A forked worker: ``wait_ready``, ``kill`` (SIGKILL by the nursery, then reaped), ``results``."""

    def __init__(self, nursery: Nursery, name: str, pid: int, config: dict[str, Any]) -> None:
        self.nursery, self.name, self.pid, self.config = nursery, name, pid, config
        self.stderr_path = nursery.directory / f"{name}.stderr"
        self.returncode: int | None = None

    def _failure(self, what: str) -> WorkerFailed:
        stderr = self.stderr_path.read_text(errors="replace")[-3000:] if self.stderr_path.exists() else ""
        return WorkerFailed(f"worker {self.name} (pid {self.pid}) {what}; exit code {self.returncode}; "
                            f"stderr:\n{stderr}")

    def _message(self) -> list[str]:
        message = self.nursery.next_message(self.name)
        if message[0] == "exit":
            self.returncode = int(message[1])
        return message

    def wait_ready(self) -> None:
        """Wait for the worker's ``ready`` line (module docstring)."""
        message = self._message()
        if message != ["ready"]:
            raise self._failure(f"said {message} instead of 'ready'")

    def wait_exit(self) -> int:
        """Wait until the nursery has reaped the worker; its exit code."""
        while self.returncode is None:
            self._message()
        return self.returncode

    def kill(self) -> int:
        """SIGKILL unless it has exited, and reaped; its exit code (-9 when killed)."""
        if self.returncode is None:
            self.nursery.kill(self.name)
        return self.wait_exit()

    def results(self) -> list[Any]:
        """A ``race`` worker's results, once it has exited 0."""
        if self.wait_exit() != 0:
            raise self._failure("failed")
        return json.loads((self.nursery.directory / f"{self.name}.results.json").read_text())


def main(argv: list[str]) -> None:
    """``nursery``: run the nursery (the workers are forked from it)."""
    if argv != ["nursery"]:
        raise SystemExit("usage: python -m tests.support.ledger_workers nursery")
    _nursery()


if __name__ == "__main__":
    main(sys.argv[1:])
