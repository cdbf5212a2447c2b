"""What a runner named on the command line needs, checked before the pipeline is built (deploy/README.md).

Beam reports a runner that cannot start with a traceback, often minutes later: the Dataflow runner without the
Google Cloud libraries fails on an import deep inside the submission, ``FlinkRunner`` without a cluster tries to
download a job server and start Flink in-process, and a job endpoint nobody listens on waits for its connection
to time out. Each of these is one line here, naming the command that fixes it (DESIGN.md, "Command-line
conventions").
"""
from __future__ import annotations

import importlib.metadata
import socket

from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PortableOptions, StandardOptions
from packaging.requirements import Requirement

from pipelines.flink.cluster import HOME_ENVIRONMENT, default_home
from pipelines.flink.defaults import recorded_cluster

DISTRIBUTION = "privacy-measurement-beam"
GCP_EXTRA = f"pip install '{DISTRIBUTION}[gcp]'"
FLINK_UP = "make flink-up"
CONNECT_SECONDS = 5.0
_LOCAL_FLINK = ("[auto]", "[local]")  # Beam starts Flink itself, from a job server jar it downloads


class RunnerUnavailable(Exception):
    """The runner the options name cannot run this job from here: one line saying what to do."""


def runner_name(options: PipelineOptions) -> str:
    """``dataflow``, ``flink``, ``portable``, ``direct``...: the runner option without its module path and its
    ``Runner`` suffix, in lower case, as Beam itself matches it."""
    runner = options.view_as(StandardOptions).runner
    name = runner if isinstance(runner, str) else type(runner).__name__
    name = name.rsplit(".", 1)[-1].lower()
    return name[: -len("runner")] if name.endswith("runner") else name


def missing_extra(distribution: str, extra: str) -> list[str]:
    """The requirements that ``distribution``'s ``extra`` adds and this environment lacks (by name)."""
    missing = []
    for text in importlib.metadata.requires(distribution) or ():
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or not marker.evaluate({"extra": extra}) or marker.evaluate({"extra": ""}):
            continue
        try:
            importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement.name)
    return missing


def _address(text: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (an ``http://`` prefix allowed, as Flink's REST address is often written) as a pair."""
    address = text.split("://", 1)[-1].rstrip("/")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RunnerUnavailable(f"{option} must be HOST:PORT, got {text!r}")
    return host, int(port)


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_SECONDS):
            return True
    except OSError:
        return False


def check_runner(options: PipelineOptions) -> None:
    """Raises ``RunnerUnavailable`` when the chosen runner cannot be started from here:

    * ``DataflowRunner`` without the ``gcp`` extra (``apache-beam[gcp]``);
    * ``FlinkRunner`` without ``--flink_master`` (Beam would start Flink itself from a downloaded jar), with a
      Flink master nobody answers at, at a cluster ``make flink-up`` recorded of which a process has died, or at
      a cluster nobody recorded without ``--job_endpoint`` and ``--environment_type`` (Beam would start a job
      server of its own from a downloaded jar and ask the TaskManagers for Docker workers: where they cannot
      start one, the job restarts for minutes and the driver never returns);
    * ``PortableRunner`` with a ``--job_endpoint`` (other than ``embed``) nobody answers at.
    """
    name = runner_name(options)
    if name == "dataflow":
        missing = missing_extra("apache-beam", "gcp")
        if missing:
            raise RunnerUnavailable(f"--runner DataflowRunner needs the gcp extra ({', '.join(missing[:3])}"
                                    f"{', ...' if len(missing) > 3 else ''} missing): {GCP_EXTRA}")
    elif name == "flink":
        master = options.view_as(FlinkRunnerOptions).flink_master
        if master in _LOCAL_FLINK:
            raise RunnerUnavailable("--runner FlinkRunner needs --flink_master HOST:8081, the REST address of a "
                                    f"running Flink cluster (one on this machine: {FLINK_UP})")
        if not _reachable(*_address(master, "--flink_master")):
            raise RunnerUnavailable(f"no Flink cluster answers at --flink_master {master}: start one ({FLINK_UP}) "
                                    "or correct the address")
        record = recorded_cluster(options)
        portable = options.view_as(PortableOptions)
        if record is None and not (portable.job_endpoint and portable.environment_type):
            raise RunnerUnavailable(f"--flink_master {master} is not the cluster recorded in {default_home()} "
                                    f"(set {HOME_ENVIRONMENT} to the home it was started with): on another cluster, "
                                    "give its job server (--job_endpoint) and its Python workers' environment "
                                    "(--environment_type, --environment_config; docs/flink.md)")
        stopped = [name for name, alive in (record.running() if record else {}).items() if not alive]
        if stopped:
            raise RunnerUnavailable(f"the Flink cluster recorded in {record.home} is not whole ({', '.join(stopped)} "
                                    f"not running): make flink-down, then {FLINK_UP}")
    elif name == "portable":
        endpoint = options.view_as(PortableOptions).job_endpoint
        if endpoint and endpoint != "embed" and not _reachable(*_address(endpoint, "--job_endpoint")):
            raise RunnerUnavailable(f"no job server answers at --job_endpoint {endpoint}: start it (for Flink: "
                                    f"{FLINK_UP}) or use --job_endpoint embed")
