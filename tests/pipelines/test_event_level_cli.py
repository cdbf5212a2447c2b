"""``python -m pipelines.event_level`` end to end on tiny hand-built inputs (JSON Lines and Avro)."""
from __future__ import annotations

import glob
import json

import fastavro
import pytest

from pipelines import event_level
from pipelines.__main__ import COMMANDS
from tests.support.cli import run_main
from tests.support.event_level_events import (
    hand_built,
    per_device,
    random_events,
    source,
    split,
    write_avro,
    write_jsonl,
)
from transforms.core.mechanisms.noise import SeededSource
from transforms.event_level.mechanisms.devices import replay_devices

EPSILON = 2.0
BAD_SOURCES = [source("d1", 3, "video", "video"), source("d2", 3, "states", max_reports=20)]
BAD_LINES = ['{"device_id": "d1"}', "not json"]


def _rows():
    return hand_built() + random_events(seed=2)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The same events as JSON Lines (with bad records) and as Avro (sources with bad configurations only)."""
    out = tmp_path_factory.mktemp("event_level")
    sources, triggers = split(_rows())
    return {
        "jsonl": (write_jsonl(out / "sources.jsonl", sources + BAD_SOURCES, BAD_LINES),
                  write_jsonl(out / "triggers.jsonl", triggers)),
        "avro": (write_avro(out / "sources.avro", sources + BAD_SOURCES, "event_level_source"),
                 write_avro(out / "triggers.avro", triggers, "event_level_trigger")),
    }


def _run(capsys, argv) -> tuple[int, dict, str]:
    return run_main(event_level.main, capsys, argv)


def _reports(output) -> list[tuple]:
    records = []
    for path in sorted(glob.glob(str(output / "reports-*"))):
        if path.endswith(".avro"):
            with open(path, "rb") as handle:
                records += list(fastavro.reader(handle))
        else:
            with open(path, encoding="utf-8") as handle:
                records += [json.loads(line) for line in handle]
    return sorted(tuple(record.values()) for record in records)


def _expected() -> list[tuple]:
    return sorted(tuple(report) for report in replay_devices(per_device(_rows()), EPSILON, SeededSource(7)))


@pytest.mark.parametrize("fmt, output_format", [("jsonl", "avro"), ("avro", "jsonl")])
def test_batch_writes_reports_dead_letters_and_a_summary(inputs, tmp_path, capsys, fmt, output_format):
    sources, triggers = inputs[fmt]
    output = tmp_path / "out"
    status, summary, printed = _run(capsys, ["--sources", sources, "--triggers", triggers, "--output", output,
                                             "--seed", "7", "--epsilon", EPSILON, "--output-format", output_format,
                                             "--shards", "3"])
    assert status == 0
    assert _reports(output) == _expected()
    counts = summary["counts"]
    reasons = {"unknown_source_type": 1, "too_many_states": 1}
    if fmt == "jsonl":
        reasons.update({"missing_field:event_time_micros": 1, "malformed_json": 1})
    assert counts["dead_lettered_by_reason"] == reasons
    assert counts["read"] == counts["parsed"] + counts["dead_lettered"] == len(_rows()) + sum(reasons.values())
    sources_count = len(split(_rows())[0])
    assert counts["sources"] == sources_count and 0 < counts["randomized_sources"] < sources_count
    assert counts["reports"] == len(_expected())
    parameters = summary["parameters"]
    assert (parameters["noise_source"], parameters["seed"], parameters["epsilon"]) == ("seeded", 7, EPSILON)
    assert "Thm. 5.1" in summary["privacy"] and "Alg. 8" in summary["privacy"]
    assert f"reports {counts['reports']}" in printed and str(output / "summary.json") in printed
    assert "noise source: seeded (seed 7)" in printed


def test_streaming_writes_the_same_reports_as_batch(inputs, tmp_path, capsys):
    sources, triggers = inputs["jsonl"]
    output = tmp_path / "stream"
    status, summary, _ = _run(capsys, ["--sources", sources, "--triggers", triggers, "--output", output, "--seed", "7",
                                       "--epsilon", EPSILON, "--streaming", "--allowed-lateness-seconds", "60"])
    assert status == 0 and summary["parameters"]["streaming"] is True
    assert _reports(output) == _expected()
    assert summary["counts"]["dead_lettered"] == 4


def test_secure_noise_by_default(inputs, tmp_path, capsys):
    sources, triggers = inputs["avro"]
    status, summary, _ = _run(capsys, ["--sources", sources, "--triggers", triggers, "--output", tmp_path / "out"])
    assert status == 0
    assert (summary["parameters"]["noise_source"], summary["parameters"]["epsilon"]) == ("secure", 14.0)


@pytest.mark.parametrize("extra, message", [
    (["--epsilon", "15"], "argument --epsilon: must be a number in [0, 14], got 15"),
    (["--epsilon", "nan"], "argument --epsilon: must be a number in [0, 14], got nan"),
    (["--shards", "0"], "argument --shards: must be an integer >= 1, got 0"),
    (["--seed", "-1"], "argument --seed: must be an integer in [0, 2^64 - 1], got -1"),
    (["--allowed-lateness-seconds", "-1"], "argument --allowed-lateness-seconds: must be an integer >= 0, got -1"),
    (["--output-format", "csv"], "invalid choice"),
])
def test_bad_options_are_one_line_errors(inputs, tmp_path, capsys, extra, message):
    sources, triggers = inputs["jsonl"]
    status, _, printed = _run(capsys, ["--sources", sources, "--triggers", triggers, "--output", tmp_path / "out", *extra])
    assert status == 2 and message in printed and len(printed.strip().splitlines()) == 1


def test_missing_input_is_a_one_line_error(inputs, tmp_path, capsys):
    status, _, printed = _run(capsys, ["--sources", tmp_path / "none-*.avro", "--triggers", inputs["avro"][1],
                                       "--output", tmp_path / "out"])
    assert status == 2 and "no input file matches" in printed and len(printed.strip().splitlines()) == 1


def test_registered_as_a_command():
    assert COMMANDS["event-level"][0] == "pipelines.event_level"
