"""A throw-away PostgreSQL server for the tests.

``postgres_dsn`` (session scope) starts a server of its own on 127.0.0.1 and a free port (unix socket in its
temporary directory, trust authentication, fsync off: test use only), yields the DSN of a fresh empty database,
and stops the server and deletes its data directory at the end. ``postgres_url`` (function scope) creates a
uniquely named database on that server for one test.

The binaries are looked up on PATH and under /usr/lib/postgresql/*/bin; when missing and we are root with
apt-get, Debian's ``postgresql`` package is installed. As root, initdb and pg_ctl run as the ``postgres``
system user (created when missing), since initdb refuses to run as root. When none of this is possible the
tests that need the server are skipped with the reason.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from typing import Iterator

import pytest

_WAIT_SECONDS = 30


def _find_bindir() -> str | None:
    """The directory holding initdb and pg_ctl, preferring PATH, then the newest Debian version."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return os.path.dirname(initdb)
    candidates = [d for d in glob.glob("/usr/lib/postgresql/*/bin") if os.path.exists(os.path.join(d, "initdb"))]

    def version(path: str) -> tuple:
        name = path.split("/")[-2]
        return tuple(int(p) for p in name.split(".") if p.isdigit())

    return max(candidates, key=version) if candidates else None


def _run(command: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


def _install_postgres() -> str | None:
    """Install Debian's postgresql package (root with apt-get only); the skip reason, or None on success."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "PostgreSQL (initdb, pg_ctl) is not installed and cannot be installed: not root or no apt-get"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"]):
        print(f"[postgres fixture] PostgreSQL not found, running: {' '.join(command)}", flush=True)
        try:
            result = _run(command, timeout=900, env=env)
        except subprocess.TimeoutExpired:
            return f"{' '.join(command)} timed out"
        if result.returncode != 0:
            return f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()[-500:]}"
    return None


def _server_user() -> tuple[list[str], int | None]:
    """(command prefix, uid to own the data directory): run as ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return [], None
    if not shutil.which("runuser"):
        pytest.skip("running as root but runuser is missing: cannot run initdb as the postgres user")
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        print("[postgres fixture] creating the postgres system user: useradd --system postgres", flush=True)
        result = _run(["useradd", "--system", "--user-group", "--no-create-home", "postgres"], timeout=60)
        if result.returncode != 0:
            pytest.skip(f"cannot create the postgres system user: {result.stderr.strip()}")
        entry = pwd.getpwnam("postgres")
    return ["runuser", "-u", "postgres", "--"], entry.pw_uid


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """A server in a temporary directory, started with pg_ctl and stopped with ``stop``."""

    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        self.prefix, uid = _server_user()
        self.root = tempfile.mkdtemp(prefix="pm-test-postgres-")
        os.chmod(self.root, 0o700)
        if uid is not None:
            os.chown(self.root, uid, -1)
        self.data = os.path.join(self.root, "data")
        self.port: int | None = None

    def _pg(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        command = self.prefix + [os.path.join(self.bindir, tool), *args]
        return _run(command, timeout=_WAIT_SECONDS + 30, cwd=self.root)

    def start(self) -> str:
        """initdb and start; returns the DSN of the ``postgres`` database."""
        result = self._pg("initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale",
                          "--no-sync")
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed: {result.stdout}{result.stderr}")
        for _ in range(3):  # the free port can be taken between the probe and the start
            self.port = _free_port()
            options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.root} "
                       "-c fsync=off -c full_page_writes=off")
            result = self._pg("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "server.log"), "-w",
                              "-t", str(_WAIT_SECONDS), "-o", options, "start")
            if result.returncode == 0:
                return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with open(os.path.join(self.root, "server.log"), encoding="utf-8", errors="replace") as log:
            raise RuntimeError(f"pg_ctl start failed: {result.stdout}{result.stderr}\n{log.read()[-2000:]}")

    def stop(self) -> None:
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            result = self._pg("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", str(_WAIT_SECONDS), "stop")
            if result.returncode != 0:
                self._pg("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "-t", str(_WAIT_SECONDS), "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def _create_database(admin_dsn: str, name: str) -> str:
    """CREATE DATABASE ``name`` on the server of ``admin_dsn``; its DSN."""
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin_dsn.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of a fresh, empty database on a PostgreSQL server started for this test session."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'privacy-measurement-beam[postgres]'")
    bindir = _find_bindir()
    if bindir is None:
        reason = _install_postgres()
        bindir = _find_bindir()
        if bindir is None:
            pytest.skip(reason or "PostgreSQL was installed but initdb/pg_ctl are still not found")
    server = PostgresServer(bindir)
    try:
        admin_dsn = server.start()
        yield _create_database(admin_dsn, "pm_tests")
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_dsn: str) -> Iterator[str]:
    """DSN of a new, uniquely named database on the session's server, for one test."""
    import psycopg

    name = f"pm_test_{uuid.uuid4().hex[:16]}"
    url = _create_database(postgres_dsn, name)
    yield url
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error as error:  # the server is thrown away at the end of the session anyway
        print(f"[postgres fixture] could not drop {name}: {error}")
