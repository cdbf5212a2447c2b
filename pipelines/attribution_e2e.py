"""Run the W3C Attribution API's end-to-end cases: ``pm-beam attribution-e2e CASE.json... [options]``.

    pm-beam attribution-e2e tests/conformance/w3c_attribution/e2e-tests/*.json

Each case (``impl/e2e-tests/`` of github.com/w3c/attribution, format ``impl/e2e.schema.json``: timed
``saveImpression``, ``measureConversion``, clearing and enabling events, each conversion's expected histogram or
expected error) is run against this project's backend (``transforms.attribution_api``), as the specification's
reference implementation runs it. One line per case: ``pass``, or ``fail: <the first event that differs>``.
The configuration every case starts from (unless it carries its own) is ``CONFIG.json`` beside it
(``--config`` to choose one). Exit status: 0 when every case passed, 1 when one failed, 2 for a bad option or an
unreadable case.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pipelines.common import CliError, CliParser, fail
from transforms.attribution_api.e2e import run_case

CONFIG_NAME = "CONFIG.json"


def build_parser() -> CliParser:
    parser = CliParser(prog="pm-beam attribution-e2e",
                       description="Run the W3C Attribution API's end-to-end cases against this project's backend.")
    parser.add_argument("cases", nargs="+", type=Path, metavar="CASE.json", help="case files (CONFIG.json is skipped)")
    parser.add_argument("--config", type=Path, metavar="PATH",
                        help="the configuration the cases start from (default: CONFIG.json beside each case)")
    return parser


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CliError(f"{path}: cannot read: {error}") from None
    if not isinstance(value, dict):
        raise CliError(f"{path}: not a JSON object")
    return value


def case_line(path: Path, config: dict) -> tuple[bool, str]:
    """Whether the case at ``path`` passed, and its line."""
    case = _json(path)
    try:
        outcomes = run_case(case, config)
    except (KeyError, TypeError, ValueError) as error:
        raise CliError(f"{path}: not an e2e case: {error}") from None
    failed = [outcome for outcome in outcomes if not outcome.passed]
    verdict = "pass" if not failed else f"fail: at {failed[0].seconds} s, {failed[0].event}: {failed[0].detail}"
    return not failed, f"{path.stem:<48} {verdict}"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        paths = sorted(path for path in args.cases if path.name != CONFIG_NAME)
        passed = 0
        for path in paths:
            ok, line = case_line(path, _json(args.config or path.parent / CONFIG_NAME))
            passed += ok
            print(line, flush=True)
    except CliError as error:
        return fail(error)
    print(f"{len(paths)} cases: {passed} passed, {len(paths) - passed} failed")
    return 0 if passed == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
