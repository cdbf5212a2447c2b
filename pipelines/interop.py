"""Run Chrome's Attribution Reporting interop cases: ``python -m pipelines.interop CASE.json... [options]``.

    python -m pipelines.interop tests/conformance/attribution_reporting_interop/*.json
    python -m pipelines.interop basic.json --default-config default_config.json --results results.json

Each case (Chromium ``content/test/data/attribution_reporting/interop/``, format in that folder's README.md: a
configuration, timed registrations with their header JSON, the reports the browser must send) is replayed through
this project's browser (``pipelines.ara_browser``: the header parser, the attribution storage, and the event-level
and aggregatable clients in their specification modes) and its reports compared with the expected ones, as a
multiset of (URL, time, body). One line per case:

* ``pass``: every report the case expects was sent, and nothing else: event-level and aggregatable reports, their
  debug copies, and verbose debug reports (``pipelines.ara_debug_reports``);
* ``fail: <the first difference>``;
* ``superseded: <why>; <the first difference>`` for a case of ``SUPERSEDED_CASES`` that differs: newer cases of
  the suite and Chromium's implementation contradict it (it is still run, and passes if it can);
* ``out of scope: <feature>`` when the case's configuration needs a feature this project does not implement
  (``pipelines.ara_browser.UNIMPLEMENTED_CONFIG``: cross app and web attribution, Android's OS registrations).

Exit status: 0 when nothing failed (a superseded case is not a failure), 1 when a case failed, 2 for a bad option
or an unreadable case. The configuration every case starts from is ``default_config.json`` beside it
(``--default-config`` to choose one).
A case's delivery inputs (``connection``, ``navigation``) are the device's connectivity: each report is compared at
the time its delivery sends it (``transforms.core.mechanisms.report_delivery``).
"""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipelines.ara_browser import (
    UNIMPLEMENTED_CONFIG,
    BrowserConfig,
    replay_device,
    report_record,
)
from pipelines.common import CliParser
from schemas import jsonc
from schemas.registration_log import DeliveryChange, ParsedRegistration, RegistrationFailure, parse_entry

PASS = "pass"
FAIL = "fail"
OUT_OF_SCOPE = "out of scope"
SUPERSEDED = "superseded"
DEFAULT_CONFIG_NAME = "default_config.json"
_NAVIGATION_RULE = (
    "it expects the older rule of one scope set per reporting origin and navigation (a source without scopes fixes "
    "none), which the suite's newer cases attribution_scopes_navigation_limit_no_scopes and _with_scopes contradict "
    "and Chromium's AttributionDataHostManagerImpl no longer follows (a first source without scopes fixes the empty "
    "set)")
# cases of the suite that newer cases of it and Chromium's implementation contradict: run, and a difference is
# reported as "superseded" with the reason, not as a failure
SUPERSEDED_CASES = {
    "attribution_scopes_navigation_limit": _NAVIGATION_RULE,
    "attribution_scopes_same_navigation_scope_rules_apply": _NAVIGATION_RULE,
}


@dataclass(frozen=True)
class CaseResult:
    """One case's verdict: ``result`` is PASS, FAIL or OUT_OF_SCOPE; ``detail`` the first
    difference or the missing features."""

    case: str
    description: str
    result: str
    detail: str = ""
    expected_reports: int = 0
    compared_reports: int = 0

    def line(self) -> str:
        text = f"{self.result}: {self.detail}" if self.detail else self.result
        return f"{self.case:<48} {text}"


class CaseError(ValueError):
    """A case file that cannot be read as an interop case."""


def _canonical(record: Any) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def _order(record: dict[str, Any]) -> tuple:
    return (int(record.get("report_time", 0)), record.get("report_url", ""), _canonical(record))


def first_difference(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> str | None:
    """The first report (in time order) that one side has and the other does not, or None if they are equal
    as multisets."""
    remaining = sorted(actual, key=_order)
    for record in sorted(expected, key=_order):
        match = next((i for i, candidate in enumerate(remaining) if _canonical(candidate) == _canonical(record)), None)
        if match is None:
            near = next((c for c in remaining if c.get("report_url") == record.get("report_url")), None)
            hint = f"; nearest sent: {_canonical(near)}" if near is not None else ""
            return f"expected report not sent: {_canonical(record)}{hint}"
        remaining.pop(match)
    if remaining:
        return f"unexpected report: {_canonical(remaining[0])}"
    return None


def load_case(path: Path) -> dict[str, Any]:
    try:
        case = jsonc.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CaseError(f"{path}: cannot read the case: {error}") from None
    if not isinstance(case, dict) or not isinstance(case.get("input", {}).get("registrations"), list) \
            or not isinstance(case.get("output", {}).get("reports", []), list):
        raise CaseError(f"{path}: not an interop case (needs input.registrations and output.reports)")
    return case


def run_case(path: Path, default_config: dict[str, Any]) -> CaseResult:
    """Replay one case and compare its reports."""
    case = load_case(path)
    name, description = path.stem, str(case.get("description", ""))
    overrides = case.get("api_config", {})
    config, others = BrowserConfig.from_json({**default_config, **overrides})
    features = sorted({UNIMPLEMENTED_CONFIG.get(key, f"configuration key {key!r}") for key in others
                       if key in overrides or key not in UNIMPLEMENTED_CONFIG})
    parsed: list[ParsedRegistration | DeliveryChange | RegistrationFailure] = []
    for entry in case["input"]["registrations"]:
        # a failure registers nothing, as in the browser (its header may be reported)
        parsed.extend(parse_entry(entry, config.aggregation_coordinator_origins))
    expected = case["output"].get("reports", [])
    if features:
        return CaseResult(name, description, OUT_OF_SCOPE, ", ".join(sorted(set(features))), len(expected), 0)
    device = replay_device(parsed, config, random_source=None, test_choices=True)
    actual = [report_record(report, sent) for report, sent in zip(device.reports, device.sent_micros, strict=True)]
    actual += device.debug_reports
    difference = first_difference(expected, actual)
    if difference is not None and name in SUPERSEDED_CASES:
        return CaseResult(name, description, SUPERSEDED, f"{SUPERSEDED_CASES[name]}; {difference}", len(expected), 0)
    if difference is not None:
        return CaseResult(name, description, FAIL, difference, len(expected), len(actual))
    return CaseResult(name, description, PASS, "", len(expected), len(actual))


def default_config_for(path: Path, chosen: Path | None) -> dict[str, Any]:
    """The configuration a case starts from: ``chosen``, else ``default_config.json`` beside the case, else
    the built-in defaults (Chrome's)."""
    config_path = chosen or path.parent / DEFAULT_CONFIG_NAME
    if chosen is None and not config_path.exists():
        return {}
    try:
        config = jsonc.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CaseError(f"{config_path}: cannot read the configuration: {error}") from None
    if not isinstance(config, dict):
        raise CaseError(f"{config_path}: a configuration is a JSON object")
    return config


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m pipelines.interop",
                       description="Run Chrome's Attribution Reporting interop cases against this project's browser.")
    parser.add_argument("cases", nargs="+", type=Path, metavar="CASE.json",
                        help="interop case files (default_config.json is skipped)")
    parser.add_argument("--default-config", type=Path, default=None, metavar="PATH",
                        help="the configuration every case starts from (default: default_config.json beside each case)")
    parser.add_argument("--results", type=Path, default=None, metavar="PATH",
                        help="also write every case's result as JSON to PATH")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    paths = [path for path in args.cases if path.name != DEFAULT_CONFIG_NAME]
    results = []
    try:
        for path in sorted(paths):
            results.append(run_case(path, default_config_for(path, args.default_config)))
            print(results[-1].line(), flush=True)
    except CaseError as error:
        print(f"interop: error: {error}", file=sys.stderr)
        return 2
    counts = {kind: sum(1 for r in results if r.result == kind) for kind in (PASS, FAIL, SUPERSEDED, OUT_OF_SCOPE)}
    print(f"{len(results)} cases: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SUPERSEDED]} superseded, "
          f"{counts[OUT_OF_SCOPE]} out of scope")
    if args.results is not None:
        args.results.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n", encoding="utf-8")
    return 1 if counts[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
