"""A run on ``--runner FlinkRunner --flink_master ADDRESS`` takes what it leaves out from the cluster ``make
flink-up`` recorded (``pipelines.flink.defaults``), and a recorded cluster of which a process died is refused in
one line (``pipelines.runners``). Deterministic: no false-failure probability to state."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import FlinkRunnerOptions, GoogleCloudOptions, PipelineOptions, PortableOptions

from pipelines.flink import defaults
from pipelines.flink.cluster import HOME_ENVIRONMENT, ClusterRecord
from pipelines.options.flink import FlinkStateOptions
from pipelines.runners import RunnerUnavailable, check_runner


@pytest.fixture()
def listening_master(tmp_path, monkeypatch):
    """A recorded cluster whose REST port answers (a listening socket) and whose processes are this test's own
    sleeping children started in the cluster's home; yields (the record, the sleepers)."""
    monkeypatch.setenv(HOME_ENVIRONMENT, str(tmp_path))
    sleepers = {name: subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
                for name in ("jobmanager", "taskmanager", "job_server", "expansion_service", "worker_pool")}
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        record = ClusterRecord(home=str(tmp_path), flink_version="1.19.3", beam_version="2.62.0",
                               rest=f"127.0.0.1:{port}", job_endpoint="127.0.0.1:7001",
                               expansion_service="127.0.0.1:7002", worker_pool="127.0.0.1:7003",
                               python=sys.executable, parallelism=2, checkpoints="file:///c", savepoints="file:///s",
                               pids={name: process.pid for name, process in sleepers.items()})
        record.save()
        try:
            yield record, sleepers
        finally:
            for process in sleepers.values():
                process.kill()
                process.wait()


def test_a_run_on_the_recorded_cluster_takes_its_job_server_workers_and_expansion_service(listening_master):
    record, _ = listening_master
    port = record.rest.rsplit(":", 1)[1]
    options = PipelineOptions(["--runner", "FlinkRunner", "--flink_master", f"http://localhost:{port}", "--streaming"])
    assert defaults.complete(options, "kanon") == record
    portable = options.view_as(PortableOptions)
    assert (portable.job_endpoint, portable.environment_type, portable.environment_config) == (
        "127.0.0.1:7001", "EXTERNAL", "127.0.0.1:7003")
    assert portable.environment_cache_millis == defaults.ENVIRONMENT_CACHE_MILLIS
    assert options.view_as(FlinkRunnerOptions).parallelism == 2
    assert options.view_as(FlinkStateOptions).checkpointing_interval == defaults.DEFAULT_CHECKPOINT_MILLIS
    assert options.view_as(GoogleCloudOptions).job_name.startswith("pm-beam-kanon-")
    assert defaults.expansion_service(options) == "127.0.0.1:7002"
    check_runner(options)  # every recorded process runs


def test_what_the_command_line_gives_wins_over_the_record(listening_master):
    record, _ = listening_master
    options = PipelineOptions(["--runner", "FlinkRunner", "--flink_master", record.rest, "--job_endpoint", "h:1",
                               "--environment_type", "LOOPBACK", "--environment_cache_millis", "5",
                               "--parallelism", "1", "--job_name", "mine",
                               "--streaming", "--checkpointing_interval", "500"])
    defaults.complete(options, "kanon")
    portable = options.view_as(PortableOptions)
    assert (portable.job_endpoint, portable.environment_type) == ("h:1", "LOOPBACK")
    assert int(portable.environment_cache_millis) == 5  # Beam declares it without a type: a string here
    assert options.view_as(FlinkRunnerOptions).parallelism == 1
    assert options.view_as(GoogleCloudOptions).job_name == "mine"
    assert options.view_as(FlinkStateOptions).checkpointing_interval == 500


def test_another_flink_master_takes_nothing_from_the_record_but_a_batch_run_is_never_checkpointed(listening_master):
    options = PipelineOptions(["--runner", "FlinkRunner", "--flink_master", "flink.example:8081"])
    assert defaults.complete(options, "measurement") is None
    assert options.view_as(PortableOptions).job_endpoint is None
    assert options.view_as(FlinkStateOptions).checkpointing_interval is None  # batch
    assert defaults.expansion_service(options) is None


def test_a_recorded_cluster_with_a_dead_process_is_refused_in_one_line(listening_master):
    record, sleepers = listening_master
    sleepers["job_server"].kill()
    sleepers["job_server"].wait()
    options = PipelineOptions(["--runner", "FlinkRunner", "--flink_master", record.rest])
    with pytest.raises(RunnerUnavailable, match=r"is not whole \(job_server not running\): make flink-down, then "
                                                 "make flink-up"):
        check_runner(options)
    assert os.path.exists(os.path.join(record.home, "cluster.json"))
