"""``python -m pipelines.kanon`` end to end on generated join events: outputs, summary.json, determinism, errors."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import fastavro
import pytest

from pipelines import generate, kanon
from schemas.rows import KAnonVerdict

WINDOW = 168
HOUR = 3_600_000_000
# Generated data: 300 groups, about 20,000 joins over 14 days, 1 % bad records (JSON Lines: the most reasons).
DATASET = ["--groups", "300", "--joins", "20000", "--days", "14", "--bad-fraction", "0.01", "--seed", "11",
           "--format", "jsonl", "--quiet"]
# A smaller one for the streaming run (the streaming DirectRunner fires a timer per group and step).
SMALL_DATASET = ["--groups", "60", "--joins", "3000", "--days", "7", "--bad-fraction", "0.01", "--seed", "5",
                 "--format", "pb", "--quiet"]


def _generate(directory: Path, arguments: list[str]) -> dict:
    assert generate.main(["kanon", "--output", str(directory), *arguments]) == 0
    return json.loads((directory / "generation.json").read_text())


def _run(input_dir: Path, output: Path, *extra: str) -> int:
    return kanon.main(["--input", str(input_dir / "joins-*"), "--output", str(output), "--seed", "3",
                       "--runner=FnApiRunner", *extra])


def _verdicts(output: Path) -> list[KAnonVerdict]:
    rows = []
    for path in sorted(output.glob("verdicts-*")):
        if path.suffix == ".avro":
            with open(path, "rb") as handle:
                rows += [KAnonVerdict(**record) for record in fastavro.reader(handle)]
        else:
            rows += [KAnonVerdict(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    return rows


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """(input directory, generation.json) of the main dataset."""
    directory = tmp_path_factory.mktemp("joins")
    return directory, _generate(directory, DATASET)


@pytest.fixture(scope="module")
def batch(dataset, tmp_path_factory):
    """The output directory of one default batch run (emit changes, JSON Lines) with seed 3."""
    output = tmp_path_factory.mktemp("kanon") / "out"
    assert _run(dataset[0], output) == 0
    return output


def test_summary_has_parameters_privacy_and_reconciled_counts(dataset, batch):
    """summary.json: seeded noise, the default (3, 1e-5) stream guarantee, counts that match the generator."""
    _, generation = dataset
    summary = json.loads((batch / "summary.json").read_text())
    parameters = summary["parameters"]
    assert parameters["noise_source"] == "seeded" and parameters["seed"] == 3
    assert parameters["window_hours"] == WINDOW and parameters["k"] == 50 and parameters["emit"] == "changes"
    assert summary["privacy"]["stream_epsilon"] == pytest.approx(3)
    assert summary["privacy"]["stream_delta"] == pytest.approx(1e-5)
    counts = summary["counts"]
    assert counts["read"] == counts["parsed"] + counts["dead_lettered"]
    assert sum(counts["dead_lettered_by_reason"].values()) == counts["dead_lettered"]
    stats = generation["stats"]
    assert counts["parsed"] == stats["joins_written"]
    assert counts["dead_lettered"] == stats["bad_written"] > 0
    assert counts["dead_lettered_by_reason"] == stats["bad_by_reason"]
    assert counts["verdict_records"] == len(_verdicts(batch)) > 0
    dead_files = list(batch.glob("dead_letters-*.jsonl"))
    assert len(dead_files) == 1
    letters = [json.loads(line) for line in dead_files[0].read_text().splitlines()]
    assert len(letters) == stats["bad_written"]
    assert all(letter["raw"] and letter["source"].startswith(str(dataset[0])) for letter in letters)


def test_verdicts_are_valid_changes(batch):
    """In 'changes' mode each group's verdicts alternate true/false starting with true, on proper hour steps."""
    verdicts = _verdicts(batch)
    by_group: dict[str, list[KAnonVerdict]] = {}
    for verdict in verdicts:
        assert isinstance(verdict.interest_group, str) and verdict.interest_group
        assert isinstance(verdict.k_anonymous, bool)
        assert verdict.step_start_micros == verdict.step * HOUR
        assert verdict.instance_start_step == verdict.step - verdict.step % WINDOW
        by_group.setdefault(verdict.interest_group, []).append(verdict)
    for group, history in by_group.items():
        history.sort(key=lambda v: v.step)
        assert len({v.step for v in history}) == len(history), group
        assert [v.k_anonymous for v in history] == [i % 2 == 0 for i in range(len(history))], group
    assert sum(v.k_anonymous for v in verdicts) >= 1


def test_same_seed_gives_identical_verdict_files(dataset, batch, tmp_path):
    """A second run with the same seed writes byte-identical verdict files."""
    assert _run(dataset[0], tmp_path / "again") == 0
    first = sorted(batch.glob("verdicts-*"))
    second = sorted((tmp_path / "again").glob("verdicts-*"))
    assert [p.name for p in first] == [p.name for p in second]
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_emit_all_agrees_with_changes(dataset, batch, tmp_path):
    """--emit all gives at least as many records, and each agrees with the last change at or before its step."""
    assert _run(dataset[0], tmp_path / "all", "--emit", "all") == 0
    changes, every = _verdicts(batch), _verdicts(tmp_path / "all")
    assert len(every) >= len(changes)
    assert json.loads((tmp_path / "all" / "summary.json").read_text())["parameters"]["emit"] == "all"
    history: dict[str, list[KAnonVerdict]] = {}
    for verdict in changes:
        history.setdefault(verdict.interest_group, []).append(verdict)
    for verdict in every:
        earlier = [c for c in history.get(verdict.interest_group, []) if c.step <= verdict.step]
        expected = max(earlier, key=lambda c: c.step).k_anonymous if earlier else False
        assert verdict.k_anonymous == expected, verdict


def test_avro_output_is_readable_and_equals_jsonl(dataset, batch, tmp_path):
    """--output-format avro writes verdicts-*.avro with the KAnonVerdict schema and the same verdicts."""
    output = tmp_path / "avro"
    assert _run(dataset[0], output, "--output-format", "avro") == 0
    files = sorted(output.glob("verdicts-*"))
    assert files and all(p.suffix == ".avro" for p in files)
    with open(files[0], "rb") as handle:
        assert [f["name"] for f in fastavro.reader(handle).writer_schema["fields"]] == list(KAnonVerdict._fields)
    assert sorted(_verdicts(output)) == sorted(_verdicts(batch))


def test_streaming_gives_the_same_verdicts_as_batch(tmp_path):
    """--streaming (DirectRunner, event-time timers) releases the same verdict set as batch for the same seed."""
    input_dir = tmp_path / "joins"
    generation = _generate(input_dir, SMALL_DATASET)
    common = ["--input", str(input_dir / "joins-*"), "--seed", "3"]
    assert kanon.main([*common, "--output", str(tmp_path / "batch"), "--runner=FnApiRunner"]) == 0
    assert kanon.main([*common, "--output", str(tmp_path / "stream"), "--streaming",
                       "--allowed-lateness-seconds", "0"]) == 0
    batch_verdicts, stream_verdicts = _verdicts(tmp_path / "batch"), _verdicts(tmp_path / "stream")
    assert batch_verdicts, "the dataset is too small to release anything"
    assert Counter(stream_verdicts) == Counter(batch_verdicts)
    summary = json.loads((tmp_path / "stream" / "summary.json").read_text())
    assert summary["parameters"]["streaming"] is True
    assert summary["counts"]["dead_lettered_by_reason"] == generation["stats"]["bad_by_reason"]


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_window_of_720_hours_with_k_50_and_default_epsilon_is_refused(dataset, tmp_path, capsys):
    """With w = 720 the default (3, 1e-5) gives a noise bound A above k = 50: one-line error, exit 2."""
    code = _run(dataset[0], tmp_path / "out", "--window-hours", "720", "--k", "50")
    assert code == 2
    assert "noise bound" in _one_line_error(capsys)
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.parametrize(
    "arguments, mentions",
    [
        (["--k", "0"], "--k"),
        (["--epsilon", "3", "--noise-epsilon", "1", "--noise-delta", "1e-6"], "--noise-epsilon"),
        (["--noise-epsilon", "1"], "--noise-delta"),
        (["--noise-delta", "1e-6"], "--noise-epsilon"),
        (["--window-hours", "0"], "--window-hours"),
        (["--allowed-lateness-seconds", "-1"], "lateness"),
        (["--emit", "sometimes"], "--emit"),
        (["--epsilon", "abc", "--delta", "1e-5"], "abc"),
    ],
)
def test_bad_options_exit_2_with_one_line(dataset, tmp_path, capsys, arguments, mentions):
    """Each bad or inconsistent option is a one-line message on stderr and exit status 2, before any work."""
    code = _run(dataset[0], tmp_path / "out", *arguments)
    assert code == 2
    assert mentions in _one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def test_input_pattern_matching_nothing_exits_2(tmp_path, capsys):
    """An input pattern without files is a one-line error naming the pattern, exit 2."""
    pattern = str(tmp_path / "nothing-*.jsonl")
    code = kanon.main(["--input", pattern, "--output", str(tmp_path / "out"), "--runner=FnApiRunner"])
    assert code == 2
    assert pattern in _one_line_error(capsys)


def test_missing_input_option_exits_2(tmp_path, capsys):
    """Without --input the parser reports it in one line (exit 2), as a return value or SystemExit."""
    try:
        code = kanon.main(["--output", str(tmp_path / "out")])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    assert "--input" in _one_line_error(capsys)


def test_input_with_unknown_extension_is_a_one_line_error(tmp_path, capsys):
    """Unreadable input (no format can be told) is reported in one line with exit status 2."""
    (tmp_path / "joins.txt").write_text('{"interest_group": "g", "user_id": "u", "event_time_micros": 1}\n')
    code = kanon.main(["--input", str(tmp_path / "joins.*"), "--output", str(tmp_path / "out"), "--runner=FnApiRunner"])
    assert code == 2
    assert "joins.txt" in _one_line_error(capsys)


def test_help_via_python_dash_m():
    """`python -m pipelines.kanon --help` prints the usage and exits 0."""
    completed = subprocess.run([sys.executable, "-m", "pipelines.kanon", "--help"], capture_output=True, text=True,
                               cwd=Path(kanon.__file__).resolve().parents[1], timeout=120)
    assert completed.returncode == 0, completed.stderr
    for option in ("--input", "--output", "--window-hours", "--k", "--epsilon", "--noise-epsilon", "--emit",
                   "--seed", "--streaming"):
        assert option in completed.stdout
