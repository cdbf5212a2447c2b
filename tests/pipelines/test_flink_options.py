"""Flink's checkpoint and savepoint options (``pipelines/options/flink.py``; deploy/README.md, "Streaming jobs"):
Beam's Python SDK does not declare them, so the command line must, for a job to be restarted from a savepoint.
Deterministic: no false-failure probability to state."""
from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import kanon


def test_the_command_line_takes_flinks_savepoint_options_and_hands_them_to_beam(tmp_path):
    _, beam_args = kanon.parse_job(["--input", str(tmp_path / "joins.jsonl"), "--output", str(tmp_path / "out"),
                                    "--runner", "FlinkRunner", "--flink_master", "flink:8081",
                                    "--checkpointing_interval", "60000", "--savepoint_path", "s3://b/savepoint-1",
                                    "--allow_non_restored_state"])
    options = PipelineOptions(beam_args).get_all_options()
    assert options["checkpointing_interval"] == 60000
    assert options["savepoint_path"] == "s3://b/savepoint-1" and options["allow_non_restored_state"] is True
