"""A black-box privacy audit of every mechanism: lower bounds on epsilon from the mechanisms' own outputs.

    python -m pipelines.audit --output docs/audit            # the full audit (make audit, about 10 minutes)
    python -m pipelines.audit --quick --output /tmp/audit    # the quick one (make test runs its cases)
    python -m pipelines.audit --list                         # the cases and what each audits

Each case runs one mechanism, through the code the pipelines call and with secure noise derived from the noise key
as the pipelines derive theirs (``--noise-key``; docs/security.md), on two
neighbouring inputs at the worst case of its proof; an output event chosen on search samples is counted on
fresh ones, and exact Clopper-Pearson intervals turn the counts into a lower bound on epsilon at the claimed
delta (the ``audit`` package says how). Writes results.json, results.csv, report.md and epsilon.png. Exit 0
when every bound is at or below its claim, 1 when one is above (the claim is refuted at that confidence).
"""
from __future__ import annotations

import fnmatch
import secrets
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from audit.auditor import DEFAULT_CONFIDENCE, run_audit
from audit.bounds import require_scipy
from audit.case import AuditCase
from audit.catalogue import all_cases
from audit.report import write_outputs
from evaluation.figures import require_matplotlib
from pipelines.common import CliError, CliParser, fail
from pipelines.options.run import add_key_options, key_location
from schemas.option_values import Exact
from transforms.core.io import InputError

OPEN_UNIT = Exact(0, 1, low_open=True, high_open=True)


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m pipelines.audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", help="directory for results.json, results.csv, report.md and epsilon.png")
    parser.add_argument("--quick", action="store_true",
                        help="the quick sample sizes (seconds per case) instead of the full ones")
    parser.add_argument("--cases", nargs="+", metavar="PATTERN",
                        help="only the cases whose name matches one of these shell patterns (e.g. 'kanon.*')")
    parser.add_argument("--confidence", type=OPEN_UNIT, default=DEFAULT_CONFIDENCE,
                        help=f"confidence of every bound, in (0, 1) (default {DEFAULT_CONFIDENCE})")
    parser.add_argument("--no-plot", action="store_true", help="skip epsilon.png (no matplotlib needed)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    add_key_options(parser, state=False)
    return parser


def select_cases(patterns: Sequence[str] | None) -> list[AuditCase]:
    """The catalogue's cases matching any of ``patterns`` (all without); a pattern matching none is an error."""
    cases = all_cases()
    if not patterns:
        return cases
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(case.name, p) for case in cases)]
    if unmatched:
        raise CliError(f"no audit case matches {', '.join(unmatched)}; `--list` shows the cases")
    return [case for case in cases if any(fnmatch.fnmatchcase(case.name, p) for p in patterns)]


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(argv)
        cases = select_cases(args.cases)
        if args.list:
            for case in cases:
                print(f"{case.name:40} {case.mechanism}; claim ({case.claimed_epsilon:g}, {case.claimed_delta:g}); "
                      f"{case.samples:,} samples per side ({case.quick_samples:,} quick)")
            return 0
        if not args.output:
            raise CliError("--output DIR is required (or --list)")
        require_scipy()
        if not args.no_plot:
            require_matplotlib("audit")
        key = key_location(args.noise_key, args.accept_shared)
    except InputError as error:  # a CliError, or a missing extra
        return fail(error)
    started, rows = time.perf_counter(), []
    mode = "quick" if args.quick else "full"
    print(f"auditing {len(cases)} cases ({mode} sample sizes, confidence {args.confidence})", flush=True)
    for index, case in enumerate(cases, 1):
        source = key.source("audit", case.name, salt=secrets.token_bytes(16))  # as a job: its own nonce
        result = run_audit(case, case.quick_samples if args.quick else case.samples, float(args.confidence), source)
        rows.append(result.to_json())
        verdict = "ok" if result.consistent else "ABOVE THE CLAIM"
        print(f"[{index}/{len(cases)}] {case.name}: claimed eps {case.claimed_epsilon:g}, audited >= "
              f"{result.bound.lower:.4g} ({result.samples:,} samples per side, {result.seconds:.1f} s) {verdict}",
              flush=True)
    header = {"command": "python -m pipelines.audit " + shlex.join(argv), "mode": mode,
              "confidence": float(args.confidence), "noise_source": rows[0]["noise_source"] if rows else "secure",
              "noise_key_id": key.key_id,
              "seconds": time.perf_counter() - started}
    paths = write_outputs(Path(args.output), rows, header, plot=not args.no_plot)
    refuted = [row["name"] for row in rows if not row["consistent"]]
    print("outputs: " + ", ".join(str(path) for path in paths.values()))
    if refuted:
        print(f"the audit refutes the claim of {', '.join(refuted)}", file=sys.stderr)
        return 1
    print("every audited bound is at or below its claim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
