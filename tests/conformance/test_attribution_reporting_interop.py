"""Chrome's Attribution Reporting interop suite, through ``python -m pipelines.interop``.

Every case of ``attribution_reporting_interop/`` (copied unmodified from Chromium, BSD licence: see its NOTICE.md)
is replayed through this project's browser (the header parser, the attribution storage, the event-level and
aggregatable clients in their specification modes) and every report it expects compared exactly, debug reports
included. The issue's 14 cases must pass; no case may fail (a case that needs a feature this project lacks is "out
of scope", naming it; a superseded one is listed with its reason); and docs/registrations.md's table and the
README's summary must say what the runner says.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipelines import interop
from schemas import jsonc

SUITE = Path(__file__).parent / "attribution_reporting_interop"
CASES = sorted(path for path in SUITE.glob("*.json") if path.name != interop.DEFAULT_CONFIG_NAME)
DEFAULT_CONFIG = jsonc.loads((SUITE / interop.DEFAULT_CONFIG_NAME).read_text())
README = Path(__file__).parents[2] / "README.md"
DOCS = Path(__file__).parents[2] / "docs" / "registrations.md"
REQUIRED = ("basic", "basic_aggregatable", "event_level_trigger_priority", "dedup_key", "expired_source",
            "event_report_window", "most_recent_source", "max_event_level_reports_per_source",
            "aggregatable_report_window", "event_level_trigger_filter_data", "aggregatable_dedup_key",
            "aggregatable_budget", "null_aggregatable_report", "parse_failures")
PASSED = (interop.PASS,)


@pytest.mark.parametrize("name", REQUIRED)
def test_the_required_cases_pass(name):
    result = interop.run_case(SUITE / f"{name}.json", DEFAULT_CONFIG)
    assert result.result in PASSED, result.line()


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_no_case_fails(path):
    result = interop.run_case(path, DEFAULT_CONFIG)
    assert result.result != interop.FAIL, result.line()
    if result.result == interop.OUT_OF_SCOPE:
        assert result.detail  # the missing feature is named
    if result.result == interop.SUPERSEDED:  # only the cases listed, each with the difference it makes
        assert path.stem in interop.SUPERSEDED_CASES and "expected report not sent" in result.detail


def test_every_case_compares_reports():
    """The suite is not passed vacuously: the cases that pass compare hundreds of reports, debug reports among them."""
    results = [interop.run_case(path, DEFAULT_CONFIG) for path in CASES]
    assert sum(result.compared_reports for result in results if result.result in PASSED) >= 50
    assert all(result.compared_reports == result.expected_reports for result in results if result.result in PASSED)


def _docs_table() -> dict[str, tuple[str, int]]:
    """docs/registrations.md's interop rows: case -> (result, reports compared)."""
    text = DOCS.read_text()
    section = text[text.index("## The interop suite, case by case"):]
    section = section[:section.index("\n## ", 1)]
    rows = re.findall(r"^\| Chrome interop \| `([a-z0-9_]+)` \| ([^|]+?) \| ([0-9]+) \|", section, flags=re.MULTILINE)
    return {case: (result.strip(), int(compared)) for case, result, compared in rows}


def _summary(results: list[interop.CaseResult]) -> str:
    counts = {kind: sum(1 for r in results if r.result == kind)
              for kind in (interop.PASS, interop.FAIL, interop.SUPERSEDED, interop.OUT_OF_SCOPE)}
    compared = sum(r.compared_reports for r in results if r.result == interop.PASS)
    return (f"{len(results)} cases: {counts[interop.PASS]} pass, {counts[interop.FAIL]} fail, "
            f"{counts[interop.SUPERSEDED]} superseded, {counts[interop.OUT_OF_SCOPE]} out of scope; {compared} reports "
            "compared")


def test_the_docs_table_and_the_readme_summary_say_what_the_runner_says():
    table = _docs_table()
    assert set(table) == {path.stem for path in CASES}
    results = [interop.run_case(path, DEFAULT_CONFIG) for path in CASES]
    for result in results:
        expected = f"out of scope: {result.detail}" if result.result == interop.OUT_OF_SCOPE else result.result
        compared = result.compared_reports if result.result == interop.PASS else 0
        assert table[result.case] == (expected, compared), result.case
    for page in (README, DOCS):  # the summary, wherever its lines break
        assert _summary(results) in " ".join(page.read_text().split()), page.name


# ------------------------------------------------------------------------------------------ the runner itself


def _write_case(tmp_path: Path, name: str, case: dict) -> Path:
    (tmp_path / interop.DEFAULT_CONFIG_NAME).write_text((SUITE / interop.DEFAULT_CONFIG_NAME).read_text())
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(case))
    return path


def test_the_runner_passes_and_prints_a_line_per_case(capsys):
    assert interop.main([str(SUITE / "success_debug_event_level.json"), str(SUITE / "basic.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["basic", "pass"]  # its source-success verbose debug report compared too
    assert lines[1].split() == ["success_debug_event_level", "pass"]  # and this one's debug copy of a report
    assert lines[-1] == "2 cases: 2 passed, 0 failed, 0 superseded, 0 out of scope"


def test_a_wrong_verbose_debug_report_fails(tmp_path):
    """basic's source-success report, expected with another source event id: the case fails on it."""
    case = jsonc.loads((SUITE / "basic.json").read_text())
    debug = next(report for report in case["output"]["reports"] if report["report_url"].endswith("/debug/verbose"))
    debug["payload"][0]["body"]["source_event_id"] = "124"
    result = interop.run_case(_write_case(tmp_path, "wrong_debug", case), DEFAULT_CONFIG)
    assert result.result == interop.FAIL and "source-success" in result.detail


def test_a_fenced_frame_and_a_registration_without_debug_permission_send_no_verbose_debug_report(tmp_path):
    case = jsonc.loads((SUITE / "basic.json").read_text())
    case["output"]["reports"] = [report for report in case["output"]["reports"]
                                 if not report["report_url"].endswith("/debug/verbose")]
    case["input"]["registrations"][0]["registration_request"]["fenced"] = True
    assert interop.run_case(_write_case(tmp_path, "fenced", case), DEFAULT_CONFIG).result == interop.PASS
    del case["input"]["registrations"][0]["registration_request"]["fenced"]
    case["input"]["registrations"][0]["responses"][0]["debug_permission"] = False
    assert interop.run_case(_write_case(tmp_path, "no_permission", case), DEFAULT_CONFIG).result == interop.PASS


def test_a_wrong_expectation_fails_with_the_first_difference(tmp_path, capsys):
    case = jsonc.loads((SUITE / "basic_aggregatable.json").read_text())
    case["output"]["reports"][0]["report_time"] = "3601001"  # the aggregatable report, one millisecond late
    path = _write_case(tmp_path, "late", case)
    results = tmp_path / "results.json"
    assert interop.main([str(path), "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert "late" in out and "fail: expected report not sent" in out and '"report_time":"3601001"' in out
    assert "nearest sent" in out and '"report_time":"3601000"' in out
    assert json.loads(results.read_text())[0]["result"] == interop.FAIL


def test_an_unexpected_report_fails(tmp_path):
    case = jsonc.loads((SUITE / "basic_aggregatable.json").read_text())
    case["output"]["reports"] = case["output"]["reports"][1:]  # the event-level report only
    result = interop.run_case(_write_case(tmp_path, "missing", case), DEFAULT_CONFIG)
    assert result.result == interop.FAIL
    assert result.detail.startswith("unexpected report:") and "report-aggregate-attribution" in result.detail


def test_an_unimplemented_feature_is_out_of_scope_and_named(tmp_path):
    case = jsonc.loads((SUITE / "basic.json").read_text())
    case["api_config"] = {"needs_cross_app_web": True, "a_future_key": "1"}
    result = interop.run_case(_write_case(tmp_path, "android", case), DEFAULT_CONFIG)
    assert result.result == interop.OUT_OF_SCOPE
    assert result.detail == "configuration key 'a_future_key', cross app and web attribution (Android)"


def test_an_unreadable_case_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text("{ not json")
    assert interop.main([str(path)]) == 2
    assert capsys.readouterr().err.startswith("interop: error: ")
    path.write_text(json.dumps({"input": {}}))
    assert interop.main([str(path)]) == 2


def test_the_superseded_cases_are_reported_so_and_exit_zero(capsys):
    paths = [str(SUITE / f"{name}.json") for name in sorted(interop.SUPERSEDED_CASES)]
    assert interop.main(paths) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(line.split()[1] == "superseded:" and "attribution_scopes_navigation_limit_no_scopes" in line
               for line in lines[:-1])
    assert lines[-1] == "2 cases: 0 passed, 0 failed, 2 superseded, 0 out of scope"
