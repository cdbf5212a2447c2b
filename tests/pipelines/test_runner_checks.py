"""A runner that cannot start from here is one line naming the fix, before the pipeline is built
(pipelines/runners.py): Dataflow without the gcp extra, Flink without a cluster, a job server nobody runs."""
from __future__ import annotations

import importlib.metadata
import socket
from collections.abc import Iterator

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.generate import main as generate
from pipelines.kanon import main as kanon
from pipelines.processes import free_port
from pipelines.runners import RunnerUnavailable, check_runner, missing_extra, runner_name

DATAFLOW = ["--runner", "DataflowRunner", "--project", "p", "--region", "r", "--temp_location", "gs://b/tmp"]


@pytest.fixture(scope="module")
def joins(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("joins")
    assert generate(["kanon", "--output", str(out), "--groups", "5", "--joins", "200", "--days", "1", "--quiet"]) == 0
    return f"{out}/joins-*"


@pytest.mark.parametrize("runner", ["DataflowRunner", "dataflow", "apache_beam.runners.dataflow.DataflowRunner"])
def test_runner_names_are_matched_as_beam_matches_them(runner):
    assert runner_name(PipelineOptions(["--runner", runner])) == "dataflow"


def test_the_missing_requirements_of_an_extra_are_exactly_those_not_installed():
    missing = missing_extra("apache-beam", "gcp")
    for name in missing:
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            importlib.metadata.version(name)
    assert missing_extra("privacy-measurement-beam", "kafka") == []  # the test extra installs confluent-kafka


@pytest.mark.skipif(not missing_extra("apache-beam", "gcp"), reason="the gcp extra is installed here")
def test_dataflow_without_the_gcp_extra_is_one_line_naming_the_install_command(joins, tmp_path, capsys):
    assert kanon(["--input", joins, "--output", str(tmp_path / "out"), *DATAFLOW]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert error.startswith("error: --runner DataflowRunner needs the gcp extra")
    assert error.endswith("pip install 'privacy-measurement-beam[gcp]'")
    assert not list((tmp_path / "out").glob("verdicts-*"))


def test_flink_without_a_master_is_one_line_naming_the_option(joins, tmp_path, capsys):
    assert kanon(["--input", joins, "--output", str(tmp_path / "out"), "--runner", "FlinkRunner"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: --runner FlinkRunner needs --flink_master HOST:8081") and "\n" not in error
    assert error.endswith("(one on this machine: make flink-up)")


def test_a_flink_master_or_job_endpoint_nobody_answers_at_is_refused():
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(RunnerUnavailable, match=f"no Flink cluster answers at --flink_master {address}"):
        check_runner(PipelineOptions(["--runner", "FlinkRunner", "--flink_master", address]))
    with pytest.raises(RunnerUnavailable, match=f"no job server answers at --job_endpoint {address}"):
        check_runner(PipelineOptions(["--runner", "PortableRunner", "--job_endpoint", address]))
    with pytest.raises(RunnerUnavailable, match="must be HOST:PORT"):
        check_runner(PipelineOptions(["--runner", "FlinkRunner", "--flink_master", "flink"]))


@pytest.fixture
def listening() -> Iterator[str]:
    """The HOST:PORT of a socket that accepts connections for the test's length."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_a_listening_flink_master_with_its_job_server_and_workers_and_the_embedded_job_server_pass(listening):
    check_runner(PipelineOptions(["--runner", "FlinkRunner", "--flink_master", f"http://{listening}",
                                  "--job_endpoint", listening, "--environment_type", "EXTERNAL",
                                  "--environment_config", "127.0.0.1:50000"]))
    check_runner(PipelineOptions(["--runner", "PortableRunner", "--job_endpoint", listening]))
    check_runner(PipelineOptions(["--runner", "PortableRunner", "--job_endpoint", "embed"]))
    check_runner(PipelineOptions(["--runner", "FnApiRunner"]))


def test_a_flink_cluster_nobody_recorded_needs_its_job_server_and_workers_named(listening, monkeypatch, tmp_path):
    """Left to Beam, such a run started a job server of its own and asked for Docker workers: where none can
    start, the job restarted for minutes and the driver never returned."""
    monkeypatch.setenv("PM_BEAM_FLINK_HOME", str(tmp_path))  # a home with no cluster recorded
    for named in ([], ["--job_endpoint", listening], ["--environment_type", "EXTERNAL"]):
        with pytest.raises(RunnerUnavailable) as refused:
            check_runner(PipelineOptions(["--runner", "FlinkRunner", "--flink_master", listening, *named]))
        assert str(refused.value).startswith(f"--flink_master {listening} is not the cluster recorded in {tmp_path} ")
        assert "--job_endpoint" in str(refused.value) and "--environment_type" in str(refused.value)
