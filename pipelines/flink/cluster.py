"""A standalone Flink cluster on loopback, as JVM processes without Docker, with what Beam's portable runner needs
beside it; started by ``make flink-up`` (``pm-beam flink up``) and by the tests (docs/flink.md).

The cluster's processes, each started in a session of its own and stopped by its process id:

* **JobManager** (``StandaloneSessionClusterEntrypoint``) with Flink's REST API on 127.0.0.1 (8081 by default),
  and **TaskManager** (``TaskManagerRunner``, two task slots), with the JVM and ``-D`` options that Flink's
  ``BashJavaUtils`` computes for its memory configuration, as Flink's own start scripts do, and Flink's
  ``--add-opens`` flags for Java 17. Checkpoints and savepoints go to ``<home>/state/``.
* **Beam's Flink job server** (``FlinkJobServerDriver``, ``pipelines.flink.artifacts``), to which the Python SDK
  submits jobs (``--job_endpoint``).
* **A Kafka expansion service** from the same jar, whose Java transforms run in the ``EMBEDDED`` environment:
  Beam's Java SDK harness inside the TaskManager's JVM (its default, Docker, cannot run here).
* **A Python SDK worker pool** (``apache_beam.runners.worker.worker_pool_main``) from this interpreter's
  environment: the ``EXTERNAL`` environment the TaskManager asks for Python workers.

``<home>/cluster.json`` records the addresses, versions and process ids (``ClusterRecord``): ``pm-beam flink
down`` stops exactly those processes, and a pipeline run with ``--runner FlinkRunner --flink_master
127.0.0.1:8081`` takes its job server, environment and expansion service from it (``pipelines.flink.defaults``).
The default home is ``$PM_BEAM_FLINK_HOME``, else ``$XDG_STATE_HOME/pm-beam/flink`` (``~/.local/state``): it
holds the streaming jobs' checkpoints and savepoints, which are privacy state, not cache.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from pipelines.flink import artifacts, rest
from pipelines.processes import answers, free_port, is_running, java, log_tail, start, stop_pid, wait_until

HOME_ENVIRONMENT = "PM_BEAM_FLINK_HOME"
RECORD = "cluster.json"
SCRATCH = "tmp"  # the processes' working directories (Flink's io.tmp.dirs), removed when the cluster stops
DEFAULT_REST_PORT = 8081
DEFAULT_SLOTS = 2
_START_SECONDS = 120
# Flink's start scripts give every JVM these on Java 17 (env.java.opts.all of Flink's default configuration)
JAVA17_OPENS = [
    *(f"--add-exports={module}=ALL-UNNAMED" for module in (
        "java.base/sun.net.util", "java.rmi/sun.rmi.registry", "jdk.compiler/com.sun.tools.javac.api",
        "jdk.compiler/com.sun.tools.javac.file", "jdk.compiler/com.sun.tools.javac.parser",
        "jdk.compiler/com.sun.tools.javac.tree", "jdk.compiler/com.sun.tools.javac.util",
        "java.security.jgss/sun.security.krb5")),
    *(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text", "java.time",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks")),
]
# The Kafka expansion service's own options: its Java transforms run inside the TaskManager (EMBEDDED: no Docker
# here), and KafkaIO reads through Beam's UnboundedSource, which Flink runs as a native source that checkpoints its
# consumers' positions, stops with a savepoint and drains. Beam 2.62's splittable-DoFn read (the default) could not
# be drained (the drain's savepoint never completed) and its offset-commit step failed every checkpoint on Flink.
EXPANSION_OPTIONS = ["--defaultEnvironmentType=EMBEDDED", "--experiments=use_deprecated_read"]
_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = File
appender.file.type = File
appender.file.name = File
appender.file.fileName = ${sys:log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.pekko.name = org.apache.pekko
logger.pekko.level = WARN
"""


# What Beam's jobs need of Flink, beyond its defaults, each measured here (docs/flink.md); deploy/flink/compose.yaml
# gives its cluster the same (tests/deploy/test_flink_compose.py).
TUNING = {
    # managed memory (state backends, batch sorting) a fifth instead of two fifths: with the off-heap sizes below,
    # Flink's default left a 4 GB TaskManager's memory over-committed ("Sum of configured ... exceed")
    "taskmanager.memory.managed.fraction": "0.2",
    # the Fn API's gRPC streams to the Python workers allocate direct (off-heap) buffers, which Flink caps
    # at its off-heap sizes: with the defaults a batch job's TaskManager died of "OutOfMemoryError: Direct
    # buffer memory"
    "taskmanager.memory.task.off-heap.size": "512m",
    "taskmanager.memory.framework.off-heap.size": "256m",
    # a streaming Beam job's stages exchange data over many channels (each a few buffers): Flink's default
    # network memory (a tenth) refused a Kafka read at parallelism 2 ("Insufficient number of network
    # buffers: required 512, but only 403 available")
    "taskmanager.memory.network.fraction": "0.15",
    "taskmanager.memory.network.min": "256mb",
    # a batch job's every exchange is a sort-merge result partition that takes 512 buffers by default;
    # Beam's batch translation makes many small stages, and with a few dozen of them deployed at once the
    # TaskManager ran out ("required 512, but only 499 available") and the job failed over and over
    "taskmanager.network.sort-shuffle.min-buffers": "64",
    # a streaming job that fails restarts from its last checkpoint, after a pause that doubles from 1 s up to a
    # minute while it keeps failing, and is back to 1 s after 10 minutes without a failure (the strategy Flink 1.19
    # defaults to for a checkpointed job). A job that runs for weeks is not stopped by a count of failures over its life
    # (fixed-delay's 10 attempts), and a restart tried while the lost TaskManager's replacement is still starting
    # (each such try fails with "Could not acquire the minimum required resources") waits longer each time rather
    # than spending a fixed allowance in 20 s: the failover tests on a loaded machine ran out of both
    "restart-strategy.type": "exponential-delay",
    "restart-strategy.exponential-delay.initial-backoff": "1 s",
    "restart-strategy.exponential-delay.max-backoff": "1 min",
    "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
    "restart-strategy.exponential-delay.reset-backoff-threshold": "10 min",
    "restart-strategy.exponential-delay.jitter-factor": "0.1",
    # Beam's SDK harness and its classes are loaded by the job's class loader, which Flink may otherwise
    # report as leaked when a job ends
    "classloader.check-leaked-classloader": "false",
    # Beam's runner is on the TaskManager's classpath (deploy/flink/taskmanager/pom.xml says why): a job's
    # classes come from there, not from each job's copy of the job server's jar
    "classloader.resolve-order": "parent-first",
}


class ClusterUnavailable(Exception):
    """The cluster could not be started, found or stopped: one line saying why and what to do."""


def default_home() -> Path:
    """``$PM_BEAM_FLINK_HOME``, else ``$XDG_STATE_HOME/pm-beam/flink`` (``~/.local/state/pm-beam/flink``)."""
    if os.environ.get(HOME_ENVIRONMENT):
        return Path(os.environ[HOME_ENVIRONMENT]).expanduser().resolve()
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "pm-beam" / "flink"


@dataclasses.dataclass(frozen=True)
class ClusterRecord:
    """What ``make flink-up`` started, where it listens, and what a pipeline run on it needs (``cluster.json``)."""

    home: str
    flink_version: str
    beam_version: str
    rest: str  # HOST:PORT of Flink's REST API (what --flink_master names)
    job_endpoint: str  # Beam's job server
    expansion_service: str  # Kafka's cross-language transforms, run EMBEDDED in the TaskManager
    worker_pool: str  # the EXTERNAL environment's Python SDK worker pool
    python: str  # the worker pool's interpreter
    parallelism: int
    checkpoints: str  # file:// URL of state.checkpoints.dir
    savepoints: str  # file:// URL of state.savepoints.dir
    pids: dict[str, int]  # process -> pid (each the leader of its own process group)

    def save(self) -> Path:
        path = Path(self.home) / RECORD
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")
        temporary.replace(path)
        return path

    @classmethod
    def load(cls, home: Path) -> ClusterRecord | None:
        """The record in ``home``, or None when there is none."""
        try:
            return cls(**json.loads((home / RECORD).read_text()))
        except FileNotFoundError:
            return None

    def running(self) -> dict[str, bool]:
        """Whether each recorded process is alive."""
        return {name: is_running(pid) for name, pid in self.pids.items()}


class FlinkCluster:
    """The cluster of this module's docstring in ``home``: ``start`` it, ``stop`` it, and, for failover tests, kill
    and restart its TaskManager. ``tied`` processes die with this one (tests); ``make flink-up`` starts them
    untied. ``settings`` are extra Flink configuration entries (``heartbeat.interval`` for a quick failover);
    ``java_options`` go to every JVM of the cluster (the tests': ``tests.support.flink.SHORT_LIVED_JVM``)."""

    def __init__(self, home: Path, *, rest_port: int = DEFAULT_REST_PORT, slots: int = DEFAULT_SLOTS,
                 tied: bool = True, settings: dict[str, str] | None = None,
                 java_options: tuple[str, ...] = ()) -> None:
        self.home = home.resolve()
        self.rest_port, self.slots, self.tied = rest_port, slots, tied
        self.settings = dict(settings or {})
        self.java_options = java_options
        self._processes: dict[str, subprocess.Popen] = {}
        self.record: ClusterRecord | None = None

    # -- paths --------------------------------------------------------------------------------------------------
    @property
    def conf(self) -> Path:
        return self.home / "conf"

    @property
    def logs(self) -> Path:
        return self.home / "log"

    @property
    def rest(self) -> str:
        return f"127.0.0.1:{self.rest_port}"

    # -- configuration ------------------------------------------------------------------------------------------
    def _write_configuration(self) -> None:
        state = self.home / "state"
        entries = {
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": str(free_port()),
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": str(self.slots),
            "taskmanager.memory.process.size": "4g",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": str(self.rest_port),
            "blob.server.port": str(free_port()),
            "parallelism.default": str(self.slots),
            "state.checkpoints.dir": (state / "checkpoints").as_uri(),
            "state.savepoints.dir": (state / "savepoints").as_uri(),
            "state.checkpoints.num-retained": "3",
            # the processes' working directories (the TaskManager's job jars: about 2 GB a run) inside the cluster's
            # home, removed when it stops, not left in the system's temporary directory
            "io.tmp.dirs": str(self.home / SCRATCH),
            **TUNING,
            **self.settings,
        }
        self.conf.mkdir(parents=True, exist_ok=True)
        # Flink 1.19 reads config.yaml as standard YAML: flattened keys, each value a quoted string
        (self.conf / "config.yaml").write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in entries.items()))
        (self.conf / "log4j.properties").write_text(_LOG4J)
        for directory in ("checkpoints", "savepoints"):
            (state / directory).mkdir(parents=True, exist_ok=True)

    def _flink_java(self, name: str, main: str, jvm: list[str], arguments: list[str], flink: Path,
                    classpath: tuple[Path, ...] = ()) -> list[str]:
        """A Flink process: its JVM options, Java 17's openings, its log, Flink's lib/ and ``classpath``."""
        return [java(), *jvm, *self.java_options, *JAVA17_OPENS, f"-Dlog.file={self.logs / f'{name}.log'}",
                f"-Dlog4j.configurationFile={(self.conf / 'log4j.properties').as_uri()}",
                "-cp", os.pathsep.join([f"{flink / 'lib'}/*", *map(str, classpath)]), main,
                "--configDir", str(self.conf), *arguments]

    def _resource_parameters(self, flink: Path, which: str) -> list[list[str]]:
        """The lines ``BashJavaUtils GET_<which>_RESOURCE_PARAMS`` prints: JVM options, then ``-D`` options."""
        classpath = f"{flink / 'bin' / 'bash-java-utils.jar'}:{flink / 'lib'}/*"
        done = subprocess.run([java(), *self.java_options, "-cp", classpath,
                               "org.apache.flink.runtime.util.bash.BashJavaUtils", f"GET_{which}_RESOURCE_PARAMS",
                               "--configDir", str(self.conf)], capture_output=True, text=True, timeout=60)
        marker = "BASH_JAVA_UTILS_EXEC_RESULT:"
        lines = [line[len(marker):].split() for line in done.stdout.splitlines() if line.startswith(marker)]
        if done.returncode != 0 or len(lines) < 2:
            causes = [line for line in (done.stdout + done.stderr).splitlines() if "Exception" in line] or ["?"]
            raise ClusterUnavailable(f"Flink could not size its {which} memory: {causes[-1].strip()[:500]}")
        return lines

    # -- processes ----------------------------------------------------------------------------------------------
    def _start(self, name: str, command: list[str], env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.Popen:
        process = start(command, self.logs / f"{name}.out", cwd=cwd or self.home, env=env, tied=self.tied)
        self._processes[name] = process
        return process

    def _start_taskmanager(self, flink: Path, jars: artifacts.RunnerJars) -> None:
        """The TaskManager, with Beam's runner on its classpath (``deploy/flink/taskmanager/pom.xml``)."""
        jvm, dynamic = self._resource_parameters(flink, "TM")
        self._start("taskmanager", self._flink_java("taskmanager", "org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
                                                    jvm, dynamic, flink, classpath=(jars.taskmanager,)))

    def _wait_for_slots(self) -> None:
        def registered() -> bool:
            try:
                return rest.overview(self.rest)["slots-total"] >= self.slots
            except rest.FlinkRestError:
                return False
        wait_until(registered, self._processes["taskmanager"], _START_SECONDS, "Flink's TaskManager",
                   self.logs / "taskmanager.log")

    def start(self) -> ClusterRecord:
        """Fetch what is missing, start every process, wait until each answers, and write ``cluster.json``."""
        existing = ClusterRecord.load(self.home)
        if existing is not None and any(existing.running().values()):
            raise ClusterUnavailable(f"a cluster recorded in {self.home / RECORD} is running (Flink at "
                                     f"{existing.rest}): stop it first (make flink-down)")
        if answers(self.rest_port):
            raise ClusterUnavailable(f"port {self.rest_port} is taken: is another Flink running? (stop it, or choose "
                                     "another --rest-port)")
        try:
            flink, jars = artifacts.flink_distribution(), artifacts.runner_jars()
            self._write_configuration()
            self.logs.mkdir(parents=True, exist_ok=True)
            jvm, _ = self._resource_parameters(flink, "JM")
            self._start("jobmanager", self._flink_java(
                "jobmanager", "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint", jvm, [], flink))
            wait_until(lambda: answers(self.rest_port), self._processes["jobmanager"], _START_SECONDS,
                       "Flink's JobManager", self.logs / "jobmanager.log")
            self._start_taskmanager(flink, jars)
            job_port, artifact_port, expansion_port, pool_port = (free_port() for _ in range(4))
            self._start("job_server", [java(), *self.java_options, "-jar", str(jars.job_server),
                                       "--flink-master", self.rest, "--job-host", "127.0.0.1",
                                       "--job-port", str(job_port),
                                       "--artifact-port", str(artifact_port), "--expansion-port", "-1",
                                       "--artifacts-dir", str(self.home / "artifacts")])
            self._start("expansion_service", [java(), *self.java_options, "-cp", str(jars.job_server),
                                              "org.apache.beam.sdk.expansion.service.ExpansionService",
                                              str(expansion_port), *EXPANSION_OPTIONS])
            self._start_worker_pool(pool_port)
            self._wait_for_slots()
            for name, port in (("job_server", job_port), ("expansion_service", expansion_port), ("worker_pool", pool_port)):
                wait_until(lambda port=port: answers(port), self._processes[name], _START_SECONDS,
                           name.replace("_", " "), self.logs / f"{name}.out")
        except (artifacts.ArtifactUnavailable, FileNotFoundError, RuntimeError, subprocess.SubprocessError) as error:
            self.stop()
            raise ClusterUnavailable(str(error)) from None
        except BaseException:
            self.stop()
            raise
        self.record = ClusterRecord(
            home=str(self.home), flink_version=artifacts.FLINK_VERSION, beam_version=artifacts.beam_version(),
            rest=self.rest, job_endpoint=f"127.0.0.1:{job_port}", expansion_service=f"127.0.0.1:{expansion_port}",
            worker_pool=f"127.0.0.1:{pool_port}", python=sys.executable, parallelism=self.slots,
            checkpoints=(self.home / "state" / "checkpoints").as_uri(),
            savepoints=(self.home / "state" / "savepoints").as_uri(),
            pids={name: process.pid for name, process in self._processes.items()})
        self.record.save()
        return self.record

    def _start_worker_pool(self, port: int) -> None:
        """This interpreter's SDK worker pool; its workers are started as ``python``, so this environment's
        ``bin`` goes first on their ``PATH``."""
        environment = dict(os.environ)
        environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
        pool = self.home / "worker-pool"
        pool.mkdir(exist_ok=True)
        self._start("worker_pool", [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                                    f"--service_port={port}"], env=environment, cwd=pool)

    def kill_taskmanager(self) -> None:
        """SIGKILL the TaskManager, as a machine failure would (no shutdown hook runs)."""
        process = self._processes["taskmanager"]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def restart_taskmanager(self) -> None:
        """A new TaskManager in place of a killed one; returns once its slots are registered."""
        self._start_taskmanager(artifacts.flink_distribution(), artifacts.runner_jars())
        self._wait_for_slots()
        if self.record is not None:
            self.record = dataclasses.replace(self.record, pids={**self.record.pids,
                                                                 "taskmanager": self._processes["taskmanager"].pid})
            self.record.save()

    def log_tail(self, name: str) -> str:
        return log_tail(self.logs / f"{name}.log") if (self.logs / f"{name}.log").exists() else log_tail(
            self.logs / f"{name}.out")

    def stop(self) -> None:
        """Stop every process this object started (by process id), the worker pool first, the JobManager last."""
        for name in ("worker_pool", "expansion_service", "job_server", "taskmanager", "jobmanager"):
            process = self._processes.pop(name, None)
            if process is not None and process.poll() is None:
                stop_pid(process.pid)
                process.wait()
        (self.home / RECORD).unlink(missing_ok=True)
        shutil.rmtree(self.home / SCRATCH, ignore_errors=True)

    def __enter__(self) -> FlinkCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _started_in(pid: int, home: Path) -> bool:
    """Whether ``pid`` is a live process working in ``home`` (each recorded process is), not a process that took a
    dead one's pid since."""
    try:
        return is_running(pid) and Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(home)
    except OSError:
        return False


def stop_recorded(home: Path) -> list[str]:
    """Stop the processes recorded in ``home`` (``make flink-down``), by process id; the names of those that were
    running. The record and the processes' working directories are removed; checkpoints and savepoints stay."""
    record = ClusterRecord.load(home)
    if record is None:
        raise ClusterUnavailable(f"no cluster is recorded in {home} (nothing to stop)")
    stopped = []
    for name in ("worker_pool", "expansion_service", "job_server", "taskmanager", "jobmanager"):
        pid = record.pids.get(name)
        if pid is not None and _started_in(pid, home) and stop_pid(pid):
            stopped.append(name)
    (home / RECORD).unlink(missing_ok=True)
    shutil.rmtree(home / SCRATCH, ignore_errors=True)
    return stopped
