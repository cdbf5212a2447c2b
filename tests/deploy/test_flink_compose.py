"""The Flink recipe (deploy/flink/), checked without a Docker daemon: compose.yaml's images against the installed
Beam and the Flink versions it publishes a runner for, its shared directories, the worker pool against the
command the remote-worker tests run, and submit.sh's commands (recorded by stand-ins) against the pipelines'
parsers and the cluster's ports."""
from __future__ import annotations

import importlib
import re
import shlex

import apache_beam
import pytest
import yaml
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PortableOptions, StandardOptions

from pipelines.__main__ import COMMANDS
from pipelines.flink.artifacts import FLINK_VERSION
from pipelines.flink.cluster import EXPANSION_OPTIONS, TUNING
from tests.deploy.recipes import FLINK, ROOT, bash_syntax_error, beam_pipelines, run_recorded
from tests.support.worker_pool import PORT_OPTION, WORKER_POOL_COMMAND

COMPOSE = yaml.safe_load((FLINK / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
SUBMIT = FLINK / "submit.sh"
STREAMING_COMMANDS = ("kanon", "measurement", "summary-client", "event-level")


def dockerfile_arguments() -> dict[str, str]:
    """The ``ARG NAME=DEFAULT`` lines of deploy/flink/Dockerfile."""
    lines = (line.split(" ", 1)[1] for line in (FLINK / "Dockerfile").read_text().splitlines()
             if line.startswith("ARG ") and "=" in line)
    return dict(line.split("=", 1) for line in lines)


def flink_version() -> str:
    """The Flink minor version of the image the jobmanager and the taskmanager run."""
    images = {SERVICES[name]["image"] for name in ("jobmanager", "taskmanager", "jobserver", "expansion")}
    assert images == {f"pm-beam-flink:{apache_beam.__version__}"}, images
    assert SERVICES["jobmanager"]["build"]["dockerfile"] == "deploy/flink/Dockerfile"
    version = dockerfile_arguments()["FLINK"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    return version.rsplit(".", 1)[0]


def flink_properties() -> dict[str, str]:
    lines = SERVICES["taskmanager"]["environment"]["FLINK_PROPERTIES"].splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def mounts(service: str) -> dict[str, str]:
    """The service's volumes, target -> source (short syntax)."""
    return {target: source for source, target in (volume.split(":") for volume in SERVICES[service]["volumes"])}


def option(arguments: list[str], name: str) -> str:
    """The value of ``--name=value`` among ``arguments``."""
    [value] = [argument.split("=", 1)[1] for argument in arguments if argument.startswith(f"{name}=")]
    return value


def published(service: str) -> set[int]:
    ports = [port.split(":") for port in SERVICES[service].get("ports", [])]
    assert all(host == container for host, container in ports), ports
    return {int(container) for _, container in ports}


def test_flink_is_a_version_beam_publishes_a_runner_for_and_the_one_run_here():
    assert flink_version() in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    assert dockerfile_arguments()["FLINK"] == FLINK_VERSION  # what make flink-up runs and the tests test


def test_the_image_builds_the_installed_beams_runner_from_the_local_clusters_recipes():
    assert dockerfile_arguments()["BEAM_VERSION"] == apache_beam.__version__
    dockerfile = (FLINK / "Dockerfile").read_text()
    assert "COPY deploy/flink /build" in dockerfile and "-f /build/pom.xml package" in dockerfile
    assert "/opt/flink/lib/" in dockerfile  # the runner on the TaskManager's classpath, as TUNING loads it


def test_the_job_server_and_the_expansion_service_are_the_local_clusters():
    job_server = SERVICES["jobserver"]["entrypoint"]
    assert job_server[:3] == ["java", "-jar", "/opt/beam/job-server.jar"]
    assert option(job_server, "--flink-master") == "jobmanager:8081"
    assert option(job_server, "--job-host") == "0.0.0.0"
    assert option(job_server, "--expansion-port") == "-1"
    assert published("jobserver") == {8099, 8098}
    expansion = SERVICES["expansion"]["entrypoint"]
    assert expansion[:5] == ["java", "-cp", "/opt/beam/job-server.jar",
                             "org.apache.beam.sdk.expansion.service.ExpansionService", "8097"]
    assert expansion[5:] == EXPANSION_OPTIONS and published("expansion") == {8097}
    assert 8081 in published("jobmanager")


def test_the_cluster_is_tuned_as_the_local_one():
    properties = flink_properties()
    assert {key: properties.get(key) for key in TUNING} == TUNING


def test_the_taskmanager_reads_the_artifacts_where_the_job_server_stages_them():
    artifacts = option(SERVICES["jobserver"]["entrypoint"], "--artifacts-dir")
    assert mounts("jobserver")[artifacts] == mounts("taskmanager")[artifacts]
    assert mounts("jobserver")[artifacts] in COMPOSE["volumes"]


def test_checkpoints_and_savepoints_are_where_the_jobmanager_and_the_taskmanager_share():
    state = {target: source for target, source in mounts("taskmanager").items() if source in COMPOSE["volumes"]}
    for key in ("state.checkpoints.dir", "state.savepoints.dir"):
        path = flink_properties()[key].removeprefix("file://")
        [target] = [target for target in state if path.startswith(target + "/")]
        assert mounts("jobmanager")[target] == state[target], key
    assert f"SAVEPOINTS={flink_properties()['state.savepoints.dir']}" in SUBMIT.read_text()


def worker_pool_port() -> int:
    service = SERVICES["worker-pool"]
    command = [*service["entrypoint"], *service.get("command", [])]
    assert command[:-1] == list(WORKER_POOL_COMMAND)
    return int(option(command, PORT_OPTION))


def test_the_worker_pool_runs_the_remote_worker_tests_command_beside_the_taskmanager():
    service = SERVICES["worker-pool"]
    assert worker_pool_port() == 50000
    assert service["network_mode"] == "service:taskmanager"
    assert (FLINK / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == (
        ROOT / "deploy" / "dataflow" / "Dockerfile.worker")
    [data] = service["volumes"]
    assert data["type"] == "bind" and data["source"] == data["target"]  # the same path as the submitting machine's


def test_submit_parses():
    assert bash_syntax_error(SUBMIT) == ""


def submitted(tmp_path, arguments: list[str]) -> list[str]:
    """The pm-beam arguments ``submit.sh arguments`` runs ``python -m pipelines`` with."""
    done, calls = run_recorded(SUBMIT, arguments, tmp_path, ("python",), PYTHON="python")
    assert done.returncode == 0, done.stderr
    [[python, module_flag, module, *pm_beam]] = calls
    assert (python, module_flag, module) == ("python", "-m", "pipelines")
    return pm_beam


def parse(pm_beam: list[str]) -> None:
    """``pm-beam``'s arguments, read by the command's parser as its ``main`` reads them (no error)."""
    importlib.import_module(COMMANDS[pm_beam[0]][0]).build_parser().parse_known_args(pm_beam[1:])


def readme_submissions() -> list[list[str]]:
    """The submit.sh commands of deploy/flink/README.md's examples (continued lines joined), split as the shell
    would, with $PM_BEAM_DATA as /data."""
    text = (FLINK / "README.md").read_text().replace("\\\n", " ").replace('"$PM_BEAM_DATA', '"/data')
    lines = (line.strip() for line in text.splitlines())
    return [shlex.split(line)[1:] for line in lines if line.startswith("deploy/flink/submit.sh ")]


def test_the_readme_submits_every_beam_pipeline_and_the_streaming_ones_as_streams():
    submissions = readme_submissions()
    assert {arguments[1] for arguments in submissions if arguments[0] == "batch"} == beam_pipelines()
    assert {arguments[1] for arguments in submissions if arguments[0] == "stream"} == set(STREAMING_COMMANDS)


def test_each_readme_submission_is_a_command_line_the_pipeline_takes(tmp_path):
    for arguments in readme_submissions():
        if arguments[0] in ("batch", "stream", "restore"):
            parse(submitted(tmp_path, arguments))
            (tmp_path / "calls").unlink()


def test_jobs_go_to_the_job_server_and_their_workers_to_the_worker_pool(tmp_path):
    pm_beam = submitted(tmp_path, ["batch", "kanon", "--input", "/data/joins/*", "--output", "/data/kanon"])
    parse(pm_beam)
    options = PipelineOptions(pm_beam[1:])
    portable = options.view_as(PortableOptions)
    assert options.view_as(StandardOptions).runner == "PortableRunner"
    assert portable.job_endpoint == "localhost:8099" and portable.artifact_endpoint == "localhost:8098"
    assert {8099, 8098} <= published("jobserver")
    assert portable.environment_type == "EXTERNAL"
    assert portable.environment_config == f"localhost:{worker_pool_port()}"


TOPIC = "kafka://broker:9092/topic"


@pytest.mark.parametrize("command", [
    ["kanon", "--input", TOPIC],
    ["measurement", "--impressions", TOPIC, "--conversions", TOPIC],
    ["summary-client", "paa", "--events", TOPIC],
    ["event-level", "--sources", TOPIC, "--triggers", TOPIC],
])
def test_streaming_jobs_checkpoint_and_restore_from_a_savepoint(tmp_path, command):
    savepoint = "file:///flink-state/savepoints/savepoint-3f2a"
    pm_beam = submitted(tmp_path, ["restore", savepoint, *command, "--output", "/data/out"])
    assert pm_beam[:len(command)] == command
    given = " ".join(pm_beam)
    for expected in ("--streaming", "--checkpointing_interval 60000", "--expansion-service localhost:8097",
                     f"--savepoint_path {savepoint}"):
        assert f" {expected}" in given, expected
    assert 8097 in published("expansion")
    parse(pm_beam)


def test_stop_takes_a_savepoint_through_the_jobmanager(tmp_path):
    done, calls = run_recorded(SUBMIT, ["stop", "a1b2c3"], tmp_path, ("docker",))
    assert done.returncode == 0, done.stderr
    assert calls == [["docker", "compose", "-f", str(FLINK / "compose.yaml"), "exec", "jobmanager", "flink", "cancel",
                      "--withSavepoint", flink_properties()["state.savepoints.dir"], "a1b2c3"]]
