"""The committed full audit (``make audit`` into docs/audit/) matches the catalogue, docs/audit.md's table quotes its
numbers and README.md its summary."""
from __future__ import annotations

import json
import re
from pathlib import Path

from audit.catalogue import all_cases

ROOT = Path(__file__).resolve().parents[2]
RESULTS = json.loads((ROOT / "docs" / "audit" / "results.json").read_text())


def test_it_is_a_full_audit_of_every_case_with_the_catalogues_claims_and_sizes() -> None:
    assert RESULTS["mode"] == "full" and RESULTS["noise_source"] == "secure"
    rows = {row["name"]: row for row in RESULTS["cases"]}
    cases = all_cases()
    assert list(rows) == [case.name for case in cases]
    for case in cases:
        row = rows[case.name]
        assert (row["claimed_epsilon"], row["claimed_delta"]) == (case.claimed_epsilon, case.claimed_delta)
        assert row["samples_per_side"] == case.samples and row["consistent"]
    for name in ("report.md", "results.csv", "epsilon.png"):
        assert (ROOT / "docs" / "audit" / name).stat().st_size > 0


def _quoted_bounds(page: str) -> list[str]:
    """The bold bounds of the page's audit table, in order, split at " / "."""
    return [bound for cell in re.findall(r"\| \*\*([0-9.e+-]+(?: / [0-9.e+-]+)*)\*\* \|", page) for bound in cell.split(" / ")]


def test_the_audit_page_quotes_the_committed_bounds_and_the_readme_their_summary() -> None:
    expected = [f"{row['epsilon_lower_bound']:.4g}" for row in RESULTS["cases"]]
    assert _quoted_bounds((ROOT / "docs" / "audit.md").read_text()) == expected
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"{len(RESULTS['cases'])} cases, every bound at or below its claim" in readme
