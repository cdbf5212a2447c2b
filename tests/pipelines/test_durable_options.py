"""The durable-state options of the streaming jobs (docs/durability.md, "Options"): where they land, with their
defaults. Deterministic: no false-failure probability to state."""
from __future__ import annotations

from pipelines import kanon, topics
from schemas.codecs import JOIN_EVENT
from transforms.core.bus.kafka_stream import EMIT_SECONDS
from transforms.core.durable.store import DEFAULT_STORE, STORE_ENVIRONMENT


def test_the_snapshot_interval_store_and_job_reach_the_run_and_its_topic_source(tmp_path, monkeypatch):
    uri = "kafka://127.0.0.1:9/joins"
    job, _ = kanon.parse_job(["--input", uri, "--output", str(tmp_path), "--snapshot-seconds", "3",
                              "--state-store", "sqlite:///state.sqlite", "--job-id", "kanon-a"])
    assert (job.run.snapshot_seconds, job.run.state_store, job.run.job_id) == (3, "sqlite:///state.sqlite", "kanon-a")
    assert topics.topic_input("joins", uri, JOIN_EVENT, job.run, "kanon").emit_seconds == 3
    monkeypatch.delenv(STORE_ENVIRONMENT)
    job, _ = kanon.parse_job(["--input", uri, "--output", str(tmp_path)])
    assert (job.run.snapshot_seconds, job.run.state_store, job.run.job_id) == (EMIT_SECONDS, DEFAULT_STORE, None)
    assert job.run.parameters()["state_store"] == DEFAULT_STORE


def test_a_store_url_is_recorded_without_its_password(tmp_path):
    job, _ = kanon.parse_job(["--input", "kafka://127.0.0.1:9/joins", "--output", str(tmp_path),
                              "--state-store", "postgresql://state:secret@db:5432/pm"])
    assert job.run.parameters()["state_store"] == "postgresql://state:***@db:5432/pm"
