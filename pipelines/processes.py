"""Local servers in processes of their own (brokers, a Flink cluster): free ports, starting, waiting, stopping.

Every server this project starts for a test, a demo or a benchmark listens on 127.0.0.1, is started in a session
of its own, and is stopped by its process id (its whole process group: SIGTERM, then SIGKILL), never by name.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

JAVA_ENVIRONMENT = "JAVA_HOME"


def die_with_parent() -> None:
    """In a child process before exec: Linux sends it SIGTERM when the process that started it dies, so a server
    never outlives a killed test run or demo (elsewhere this does nothing)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_process_group(process: subprocess.Popen, timeout: float = 10) -> None:
    """Stop a process started in a session of its own, and every process it started, by its process id:
    SIGTERM, then SIGKILL after ``timeout`` seconds."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def stop_pid(pid: int, timeout: float = 10) -> bool:
    """Stop the process group led by ``pid`` (a server started by another process: ``make flink-up``): SIGTERM,
    then SIGKILL after ``timeout`` seconds. False when no such process was running."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return True


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead but not yet reaped, is not)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return status != "Z"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    home = os.environ.get(JAVA_ENVIRONMENT)
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise FileNotFoundError("java is not installed (Java 17 or later; set JAVA_HOME or put java on PATH)")
    return found


def start(command: list[str], log: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None,
          tied: bool = True) -> subprocess.Popen:
    """``command`` in a session of its own, its output appended to ``log``. ``tied``: it gets SIGTERM when this
    process dies (a test's server); otherwise it outlives it (``make flink-up``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=die_with_parent if tied else None)


def wait_until(ready: Callable[[], bool], process: subprocess.Popen | None, seconds: float, what: str,
               log: Path | None = None) -> None:
    """Poll ``ready`` until it holds; a ``RuntimeError`` naming ``what`` (and the end of ``log``) when ``process``
    exits first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not ready():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}: {log_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within {seconds:g} s: {log_tail(log)}")
        time.sleep(0.2)


def log_tail(log: Path | None, lines: int = 4) -> str:
    """The last ``lines`` non-empty lines of ``log``, joined by `` | ``."""
    if log is None or not log.exists():
        return "(no log)"
    text = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return " | ".join(text[-lines:])[-1200:] or "(empty log)"
