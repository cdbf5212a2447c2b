"""The W3C Attribution API's own end-to-end suite (``tests/conformance/w3c_attribution``: the 26 cases of
github.com/w3c/attribution ``impl/e2e-tests`` at the commit its NOTICE.md names, copied unmodified with their
licence): every event of every case does what the case expects, through ``pm-beam attribution-e2e`` too.
Deterministic: no false-failure probability to state."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines import attribution_e2e
from transforms.attribution_api.e2e import run_case

SUITE = Path(__file__).parent / "w3c_attribution" / "e2e-tests"
CONFIG = json.loads((SUITE / "CONFIG.json").read_text())
CASES = sorted(path for path in SUITE.glob("*.json") if path.name != "CONFIG.json")


def test_the_suite_is_the_specifications_26_cases():
    assert len(CASES) == 26
    assert (SUITE.parent / "LICENSE.md").exists() and "9fab4e8e2e36e51ddae0f4b3853f92703544688a" in \
        (SUITE.parent / "NOTICE.md").read_text()


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_every_event_of_the_case_does_what_it_expects(path: Path):
    outcomes = run_case(json.loads(path.read_text()), CONFIG)
    assert outcomes and [outcome for outcome in outcomes if not outcome.passed] == []


def test_the_command_prints_a_line_per_case_and_passes(capsys):
    assert attribution_e2e.main([str(path) for path in [*CASES, SUITE / "CONFIG.json"]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 27 and lines[-1] == "26 cases: 26 passed, 0 failed"
    assert all(line.split()[-1] == "pass" for line in lines[:-1])


def test_a_case_that_fails_or_cannot_be_read_says_so(tmp_path, capsys):
    case = json.loads((SUITE / "basic.json").read_text())
    case["events"][-1]["expected"] = [0, 0, 5]
    (tmp_path / "CONFIG.json").write_text(json.dumps(CONFIG))
    (tmp_path / "wrong.json").write_text(json.dumps(case))
    assert attribution_e2e.main([str(tmp_path / "wrong.json")]) == 1
    assert "fail: at 3 s, measureConversion: histogram [0, 5, 0], expected [0, 0, 5]" in capsys.readouterr().out
    (tmp_path / "broken.json").write_text("{")
    assert attribution_e2e.main([str(tmp_path / "broken.json")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
