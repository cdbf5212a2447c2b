"""A job submitted without waiting (``--template_location``, as a Dataflow Flex Template's launcher runs it) leaves
its outputs staged with a manifest; ``pm-beam release`` later judges and publishes them exactly as a waiting
driver does (pipelines/deferred.py). On the local runner the job really runs inside the submission, so what the
release finds is what a finished Dataflow job leaves."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import FixedWindows

from pipelines import aggregate, kanon
from pipelines.common import read_records
from pipelines.deferred import COMPLETE, MANIFEST, mark_completion, pipeline_arguments
from pipelines.generate import main as generate
from pipelines.release_submitted import main as release
from tests.support.aggregatable_reports import NOW, record, shared_info, write_avro
from tests.support.kafka import fresh_topic

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def joins(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("joins")
    assert generate(["kanon", "--output", str(out), "--groups", "30", "--joins", "6000", "--days", "2", "--seed", "5",
                     "--quiet"]) == 0
    return f"{out}/joins-*"


def _ledger_status(ledger: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(ledger) as connection:
        return connection.execute("SELECT job_id, status FROM ledger_jobs").fetchall()


def _verdicts(output: Path) -> list[str]:
    return sorted(line for path in output.glob("verdicts-*") for line in path.read_text().splitlines())


def test_a_submitted_run_releases_nothing_until_released_and_then_exactly_what_a_waiting_run_does(joins, tmp_path,
                                                                                                 capsys):
    waited, submitted = tmp_path / "waited", tmp_path / "submitted"
    assert kanon.main(["--input", joins, "--output", str(waited), "--seed", "3"]) == 0
    assert kanon.main(["--input", joins, "--output", str(submitted), "--seed", "3", "--kafka-config",
                       "sasl.password=hunter2", "--template_location", str(tmp_path / "job.json")]) == 0
    assert f"pm-beam release --output {submitted}" in capsys.readouterr().out
    assert not _verdicts(submitted) and not (submitted / "summary.json").exists()  # nothing released yet
    manifest = json.loads((submitted / MANIFEST).read_text())
    assert manifest["module"] == "pipelines.kanon" and "hunter2" not in json.dumps(manifest)
    assert "--template_location" not in manifest["arguments"]
    staged = submitted / manifest["staging"]
    assert list(staged.glob("verdicts-*"))  # the job's outputs, staged
    mark = staged / COMPLETE  # the job's last step: written once every other step had finished
    assert json.loads(mark.read_text())["final_steps"] >= 3  # verdicts, dead letters, input report at least
    mark.rename(tmp_path / "mark")  # as if the job were still running: the release refuses and touches nothing
    assert release(["--output", str(submitted)]) == 2
    assert "the job has not finished" in capsys.readouterr().err and (submitted / MANIFEST).exists()
    assert list(staged.glob("verdicts-*"))
    (tmp_path / "mark").rename(mark)
    assert release(["--output", str(submitted)]) == 0
    assert _verdicts(submitted) == _verdicts(waited) and _verdicts(waited)
    summary = json.loads((submitted / "summary.json").read_text())
    waited_summary = json.loads((waited / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["counts"]["read"] == waited_summary["counts"]["read"] > 0
    assert summary["counts"]["verdict_records"] == waited_summary["counts"]["verdict_records"]
    assert "pm-beam release" in summary["counters_note"]
    assert not (submitted / MANIFEST).exists() and not list(submitted.glob(".staging-*"))
    assert not (submitted / COMPLETE).exists()  # the mark is not an output
    assert release(["--output", str(submitted)]) == 2  # released once: a second release has nothing to do
    assert "no job was submitted" in capsys.readouterr().err


def test_a_submitted_run_whose_input_is_broken_is_refused_at_release_publishing_only_the_diagnostics(tmp_path):
    broken = tmp_path / "joins.jsonl"
    broken.write_text('{"not": "a join"}\n' * 5)
    output = tmp_path / "out"
    assert kanon.main(["--input", str(broken), "--output", str(output), "--template_location", "job"]) == 0
    assert release(["--output", str(output)]) == 1
    summary = json.loads((output / "summary.json").read_text())
    assert summary["status"] == "failed" and "none of the 5 records read is valid" in summary["failure"]
    assert list(output.glob("dead_letters-*")) and not list(output.glob("verdicts-*"))


def test_a_submitted_aggregation_charges_in_its_job_and_is_completed_in_the_ledger_at_release(tmp_path):
    reports = write_avro(str(tmp_path / "reports.avro"),
                         [record(shared_info(i, debug=True), [(1 + i % 3, 100, 0)]) for i in range(30)])
    output, ledger = tmp_path / "out", tmp_path / "ledger.db"
    arguments = ["--reports", reports, "--output", str(output), "--mode", "key-discovery", "--now", str(NOW),
                 "--ledger", f"sqlite:///{ledger}", "--job-id", "deferred", "--seed", "1", "--output-format", "jsonl"]
    assert aggregate.main([*arguments, "--template_location", "job"]) == 0
    assert not (output / "summary.json").exists() and (output / COMPLETE).exists()
    assert _ledger_status(ledger) == [("deferred", "charged")]  # the job charged its budget before releasing
    assert release(["--output", str(output)]) == 0
    assert _ledger_status(ledger) == [("deferred", "completed")] and not (output / COMPLETE).exists()
    summary = json.loads((output / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["receipt"]["status"] == "ok"
    assert summary["counts"]["aggregated_reports"] == 30
    released = [row for path in output.glob("summary_report-*") for row in read_records(str(path))]
    assert len(released) == summary["counts"]["released_buckets"]


def test_a_submission_from_python_dash_m_names_the_pipelines_module(joins, tmp_path):
    output = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "pipelines.kanon", "--input", joins, "--output", str(output),
                             "--template_location", "job"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((output / MANIFEST).read_text())["module"] == "pipelines.kanon"
    assert release(["--output", str(output)]) == 0 and list(output.glob("verdicts-*"))


def test_the_manifest_keeps_the_pipelines_own_arguments_only():
    argv = ["--input", "a", "--runner", "DataflowRunner", "--kafka-config", "sasl.password=x", "--seed", "3",
            "--kafka-config=sasl.username=u", "--template_location", "gs://b/t"]
    beam = ["--runner", "DataflowRunner", "--template_location", "gs://b/t"]
    assert pipeline_arguments(argv, beam) == ["--input", "a", "--seed", "3"]


def test_the_completion_mark_of_an_unbounded_pipeline_is_written_when_its_stream_ends(tmp_path):
    """A streaming job's leaves are unbounded: the mark waits for the end of their global window (a drain on
    Dataflow; here, the end of a TestStream on the streaming DirectRunner)."""
    options = PipelineOptions(["--runner", "DirectRunner", "--streaming"])
    with beam.Pipeline(options=options) as pipeline:
        stream = (TestStream().add_elements([1, 2]).advance_watermark_to(10).add_elements([3])
                  .advance_watermark_to_infinity())
        events = pipeline | stream | beam.WindowInto(FixedWindows(5))
        _ = events | "Sum" >> beam.CombineGlobally(sum).without_defaults()
        _ = events | "Double" >> beam.Map(lambda value: 2 * value)
        assert not (tmp_path / COMPLETE).exists()
        mark_completion(pipeline, str(tmp_path))
    assert json.loads((tmp_path / COMPLETE).read_text()) == {"final_steps": 2, "elements": 5}  # 2 sums, 3 doubles


def test_a_template_launch_reading_topics_on_the_local_runner_is_refused(kafka_broker, tmp_path, capsys):
    output = tmp_path / "out"
    assert kanon.main(["--input", f"kafka://{kafka_broker.address}/{fresh_topic('joins')}?stop=end", "--output", str(output),
                       "--template_location", "job", "--state-store", "none"]) == 2
    assert "--template_location" in capsys.readouterr().err
    assert not (output / MANIFEST).exists()
