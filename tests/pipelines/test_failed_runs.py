"""A run whose input is broken fails, and releases nothing (DESIGN.md, "Command-line conventions").

Every event pipeline, on small generated inputs, with one of its inputs replaced by: a truncated Avro file, a
file of records that are all invalid, an empty file, or valid records mixed with more invalid ones than
``--max-error-fraction`` allows. Each such run exits 1 with one ``error:`` line, writes ``summary.json`` with
``status: failed``, keeps its dead letters and input report, and leaves no other output; the same input with the
threshold raised (where the threshold is the only reason) is released. The aggregation job's own failures
(and its ledger) are tested in ``test_aggregate_cli.py``.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
from pathlib import Path

import fastavro
import pytest

from pipelines import event_level, kanon, measurement, summary_client
from synthetic.ara import generate_ara
from synthetic.event_level import generate_event_level
from synthetic.kanon import generate_kanon
from synthetic.microbenchmark import generate_microbenchmark

GARBAGE = "not json\n"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    generate_kanon(root / "kanon", groups=20, users=2000, joins=2000, days=2, progress=False)
    generate_microbenchmark(root / "measurement", knob1=0.5, knob2=0.1, batch_size=20, products=2, days=40, progress=False)
    generate_ara(root / "ara", devices=60, days=3, progress=False)
    generate_event_level(root / "event_level", sources=100, days=3, progress=False)
    return root


# entry point, main, the input that gets broken, the other inputs, the outputs a released run writes
PIPELINES = {
    "kanon": (kanon.main, ("--input", "kanon/joins-*.avro"), (), "verdicts"),
    "measurement": (measurement.main, ("--conversions", "measurement/conversions-*.avro"),
                    ("--impressions", "measurement/impressions-*.avro", "--batch-size", "20"), "reports"),
    "summary_client": (summary_client.main, ("--triggers", "ara/triggers-*.avro"),
                       ("ara", "--sources", "ara/sources-*.avro"), "reports"),
    "event_level": (event_level.main, ("--triggers", "event_level/triggers-*.avro"),
                    ("--sources", "event_level/sources-*.avro"), "reports"),
}


def _broken_input(datasets: Path, tmp_path: Path, pattern: str, how: str, valid_records: int) -> str:
    """A copy of the input ``pattern`` broken as ``how`` says; its path."""
    (original,) = glob.glob(str(datasets / pattern))
    if how == "truncated":
        data = Path(original).read_bytes()
        broken = tmp_path / "broken.avro"
        broken.write_bytes(data[: len(data) * 2 // 3])
    elif how == "all_invalid":
        broken = tmp_path / "broken.jsonl"
        broken.write_text(GARBAGE * 5)
    elif how == "empty":
        broken = tmp_path / "broken.jsonl"
        broken.write_text("")
    else:  # "over_threshold": the valid records, and three times as many invalid ones as all inputs hold
        broken = tmp_path / "mixed"
        broken.mkdir()
        shutil.copy(original, broken / "valid.avro")
        (broken / "invalid.jsonl").write_text(GARBAGE * 3 * valid_records)
        return str(broken / "*")
    return str(broken)


def _run(name: str, datasets: Path, tmp_path: Path, how: str, *extra: str, capsys) -> tuple[int, dict, str, Path]:
    main, (option, pattern), others, _ = PIPELINES[name]
    output = tmp_path / "out"
    inputs = [pattern, *(value for value in others if "/" in value)]
    valid_records = sum(_records(path) for value in inputs for path in glob.glob(str(datasets / value)))
    broken = _broken_input(datasets, tmp_path, pattern, how, valid_records)
    argv = [*(str(datasets / value) if "/" in value else value for value in others), option, broken,
            "--output", str(output), "--seed", "1", *extra]
    status = main(argv)
    summary = json.loads((output / "summary.json").read_text())
    return status, summary, capsys.readouterr().err, output


def _records(path: str) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in fastavro.reader(handle))


def _released(output: Path, prefix: str) -> list[str]:
    return [name for name in os.listdir(output) if name.startswith(prefix)]


BROKEN = [
    ("truncated", "is truncated, corrupt or unreadable (malformed_avro"),
    ("all_invalid", "none of the 5 records read is valid"),
    ("empty", "the input holds no records"),
    ("over_threshold", "more than --max-error-fraction 0.1"),
]


# "all_invalid" and "empty" only where the broken input is the only one: elsewhere the other inputs' valid records
# make five invalid ones a share below the threshold, and a run without triggers is a legitimate run
@pytest.mark.parametrize("name, how, says", [
    (name, how, says) for name in PIPELINES for how, says in BROKEN
    if name == "kanon" or how not in ("all_invalid", "empty")
])
def test_a_broken_input_fails_the_run_and_releases_nothing(name, how, says, datasets, tmp_path, capsys):
    status, summary, err, output = _run(name, datasets, tmp_path, how, capsys=capsys)
    assert status == 1
    assert err.count("\n") == 1 and err.startswith("error: ") and says in err and "nothing was released" in err
    assert summary["status"] == "failed" and says in summary["failure"]
    assert not _released(output, PIPELINES[name][3])  # nothing released
    assert _released(output, "dead_letters") and _released(output, "input_files")
    assert not [entry for entry in os.listdir(output) if entry.startswith(".staging")]


@pytest.mark.parametrize("name", PIPELINES)
def test_the_threshold_is_the_users_choice(name, datasets, tmp_path, capsys):
    status, summary, err, output = _run(name, datasets, tmp_path, "over_threshold", "--max-error-fraction", "0.8",
                                        capsys=capsys)
    assert status == 0 and summary["status"] == "ok" and not err
    assert summary["parameters"]["max_error_fraction"] == 0.8
    counts = summary["counts"]
    assert counts["dead_lettered_by_reason"].get("malformed_json", 0) > 0
    assert _released(output, PIPELINES[name][3])


def test_a_truncated_file_fails_whatever_the_threshold(datasets, tmp_path, capsys):
    status, summary, _, output = _run("kanon", datasets, tmp_path, "truncated", "--max-error-fraction", "1",
                                      capsys=capsys)
    assert status == 1 and "truncated" in summary["failure"]
    report = [json.loads(line) for line in (output / "input_files-00000-of-00001.jsonl").read_text().splitlines()]
    assert [entry["failure"] for entry in report] == ["malformed_avro"]


def test_a_streaming_run_is_judged_the_same(datasets, tmp_path, capsys):
    status, summary, err, output = _run("kanon", datasets, tmp_path, "over_threshold", "--streaming", capsys=capsys)
    assert status == 1 and "more than --max-error-fraction" in err
    assert not _released(output, "verdicts")
