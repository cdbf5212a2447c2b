"""``pm-beam audit`` (``pipelines.audit``): its outputs, its case selection, and its exit status."""
from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import pytest

from audit.cases.aggregation import make_noisy_sum_case
from pipelines import audit as audit_cli
from tests.audit.broken import HalfScaleAggregationParams

SOME = ["aggregation.noisy_sum@eps=1", "event_level.event*"]


def test_a_quick_audit_writes_the_table_the_json_the_csv_and_the_figure(tmp_path: Path, capsys) -> None:
    status = audit_cli.main(["--quick", "--cases", *SOME, "--output", str(tmp_path)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    results = json.loads((tmp_path / "results.json").read_text())
    names = [row["name"] for row in results["cases"]]
    assert names == ["aggregation.noisy_sum@eps=1", "event_level.event@eps=1", "event_level.event@eps=14"]
    assert results["mode"] == "quick" and results["noise_source"] == "secure" and results["confidence"] == 0.999
    for row in results["cases"]:
        assert 0 <= row["epsilon_lower_bound"] <= row["claimed_epsilon"] and row["consistent"]
        assert row["samples_per_side"] > 0 and row["event"].startswith("S ")
    with (tmp_path / "results.csv").open() as handle:
        assert [row["name"] for row in csv.DictReader(handle)] == names
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# Privacy audit") and all(f"`{name}`" in report for name in names)
    assert (tmp_path / "epsilon.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[3/3] event_level.event@eps=14" in printed and "every audited bound is at or below its claim" in printed


def test_list_names_every_case(capsys) -> None:
    assert audit_cli.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(audit_cli.all_cases()) and lines[0].startswith("kanon.tlap@eps=0.25")


@pytest.mark.parametrize(("argv", "message"), [
    (["--cases", "nothing.*", "--output", "x"], "error: no audit case matches nothing.*; `--list` shows the cases"),
    (["--quick"], "error: --output DIR is required (or --list)"),
])
def test_usage_errors_are_one_line(argv: list[str], message: str, capsys) -> None:
    assert audit_cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [message]


def test_a_refuted_claim_exits_1_naming_the_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(audit_cli, "all_cases", lambda: [make_noisy_sum_case(Fraction(1), HalfScaleAggregationParams)])
    assert audit_cli.main(["--quick", "--no-plot", "--output", str(tmp_path)]) == 1
    assert "the audit refutes the claim of aggregation.noisy_sum@eps=1" in capsys.readouterr().err
    assert not json.loads((tmp_path / "results.json").read_text())["cases"][0]["consistent"]
    assert not (tmp_path / "epsilon.png").exists()
