"""``pm-beam flink status|jobs|stop|down`` against the session's real cluster (``pm-beam flink up`` is what the
cluster fixture runs, as ``FlinkCluster.start``). Deterministic: no false-failure probability to state."""
from __future__ import annotations

import pytest

from pipelines.flink.cli import main as flink

pytestmark = pytest.mark.flink


def test_status_names_every_process_running_and_the_free_slots(flink_cluster, capsys):
    assert flink(["status", "--home", str(flink_cluster.home)]) == 0
    printed = capsys.readouterr().out
    for name in ("jobmanager", "taskmanager", "job_server", "expansion_service", "worker_pool"):
        assert f"{name}" in printed
    assert "NOT RUNNING" not in printed and "1 task manager(s)" in printed


def test_jobs_lists_the_clusters_jobs(flink_cluster, on_flink, tmp_path, capsys):
    from pipelines.generate import main as generate
    from pipelines.kanon import main as kanon

    assert generate(["kanon", "--output", str(tmp_path / "joins"), "--groups", "5", "--joins", "300", "--days", "1",
                     "--seed", "1", "--quiet"]) == 0
    assert kanon(["--input", str(tmp_path / "joins" / "joins-*"), "--output", str(tmp_path / "out"), "--seed", "1",
                  *on_flink, "--job_name", "cli-listed"]) == 0
    capsys.readouterr()
    assert flink(["jobs", "--home", str(flink_cluster.home)]) == 0
    assert any(line.split()[1:] == ["FINISHED", "cli-listed"] for line in capsys.readouterr().out.splitlines())


def test_stopping_a_job_flink_does_not_know_and_a_cluster_nobody_recorded_are_one_line(flink_cluster, tmp_path,
                                                                                      capsys):
    assert flink(["stop", "no-such-job", "--home", str(flink_cluster.home)]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: Flink at") and "has no job named 'no-such-job'" in error and "\n" not in error
    assert flink(["down", "--home", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == f"error: no cluster is recorded in {tmp_path} (nothing to stop)"
