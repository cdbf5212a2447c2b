"""The Aggregation Service job: aggregatable reports in, a noisy summary report out (seed 000 Alg. 1).

    python -m pipelines.aggregate --reports PATH --output DIR [--domain PATH]
        [--mode domain|key-discovery|threshold] [--epsilon 10] [--delta 1e-5] [--l1 65536] [--l0 20]
        [--job-id ID] [--ledger sqlite:///PATH | postgresql://...] [--private-key PATH] [--filtering-ids 0]
        [--debug] [--no-noise] [--seed N] [Beam options]

Writes ``DIR/summary_report-*.avro`` (``AggregatedFact``; ``.jsonl`` with ``--output-format json``), with
``--debug`` also ``DIR/debug_summary_report-*`` (SENSITIVE: unnoised sums), ``DIR/dead_letters-*.jsonl`` and
``DIR/summary.json``. A job whose reports have too many errors, or that would exceed the privacy budget of any
unit, releases nothing, spends nothing and exits with status 1 and the failure code.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipelines import common
from pipelines.options import OUTPUT_HELP, fraction_option
from schemas.aggregatable import read_key_file
from transforms.core.io import DEAD_LETTERS, WriteDeadLetters
from transforms.core.mechanisms.budget_units import epsilon_units
from transforms.core.mechanisms.noise import make_source
from transforms.summary_reports.aggregation import DEBUG_PREFIX, SUMMARY_PREFIX, WRITTEN, Aggregate, AggregationJob
from transforms.summary_reports.ledger import LedgerError, LedgerLimits, open_ledger, redact_url
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L0, DEFAULT_L1, MODES, AggregationParams

DEFAULT_LEDGER = "sqlite:///.pm-beam/ledger.db"
OUTPUT_PREFIXES = (SUMMARY_PREFIX, DEBUG_PREFIX, "dead_letters")
FAILED_EXIT = 1


@dataclass(frozen=True)
class AggregateRun:
    """The job as the workers see it plus what only the driver needs."""

    job: AggregationJob
    reports: str
    domain: str | None
    output: str
    output_format: str
    seed: int | None

    @property
    def params(self) -> AggregationParams:
        return self.job.params


def build_parser() -> argparse.ArgumentParser:
    parser = common.CliParser(
        prog="python -m pipelines.aggregate",
        description="Noisy summary reports from aggregatable reports (the Aggregation Service, seed 000 Alg. 1), with "
        "key discovery, the shipped thresholding, and a durable privacy-budget ledger. Unknown options go to Beam.",
    )
    parser.add_argument("--reports", required=True, help="file or glob of Avro AggregatableReport files")
    parser.add_argument("--output", required=True, help=OUTPUT_HELP)
    parser.add_argument("--domain", help="output domain: Avro AggregationBucket files, or text with one bucket per line")
    parser.add_argument("--mode", choices=MODES, default="domain",
                        help="domain: the domain's buckets only (default); key-discovery: Alg. 1's tau threshold, no "
                        "domain; threshold: the shipped service's rule (domain always, other buckets above a threshold)")
    parser.add_argument("--epsilon", default="10", help="epsilon of this job, in (0, 64] (default 10)")
    parser.add_argument("--delta", default="1e-5", help="delta of key discovery and thresholding (default 1e-5)")
    parser.add_argument("--l1", type=int, default=DEFAULT_L1, help=f"contribution budget L1 (default {DEFAULT_L1})")
    parser.add_argument("--l0", type=int, default=DEFAULT_L0, help=f"contributions per report L0 (default {DEFAULT_L0})")
    parser.add_argument("--job-id", help="job id; re-running the same id after a crash never charges twice (default: a new UUID)")
    parser.add_argument("--ledger", default=os.environ.get("PM_BEAM_LEDGER", DEFAULT_LEDGER),
                        help="privacy-budget ledger: sqlite:///PATH or postgresql://... "
                        f"(default $PM_BEAM_LEDGER or {DEFAULT_LEDGER})")
    parser.add_argument("--epsilon-star", default="64", help="per-unit capacity eps_* of the ledger (default 64)")
    parser.add_argument("--max-uses", type=int, default=1, help="per-unit number of uses l_* (default 1: no requerying)")
    parser.add_argument("--private-key", help='key file {"keys": [{"id", "key"}]} of raw X25519 private keys (HPKE payloads)')
    parser.add_argument("--filtering-ids", default="0", help="comma-separated filtering ids to aggregate (default 0)")
    parser.add_argument("--error-threshold", type=float, default=0.10,
                        help="fail when more than this share of the reports has errors (default 0.10)")
    parser.add_argument("--now", type=int, help="job time in seconds since the epoch (default: the clock); reports "
                        "scheduled more than 90 days earlier are dead letters")
    parser.add_argument("--output-format", choices=("avro", "json"), default="avro", help="summary report format")
    parser.add_argument("--debug", action="store_true", help="debug run: debug-mode reports only, a debug output "
                        "with unnoised sums (SENSITIVE), no budget charged")
    parser.add_argument("--no-noise", action="store_true", help="with --debug: release exact sums")
    parser.add_argument("--seed", type=int, help="seeded noise for simulation and tests (default: secure OS randomness)")
    return parser


def _filtering_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise common.CliError(f"--filtering-ids must be comma-separated integers, got {text!r}") from None
    if not ids or any(not 0 <= fid < 2**64 for fid in ids):
        raise common.CliError(f"--filtering-ids must name integers in [0, 2^64), got {text!r}")
    return ids


def parse_job(argv: list[str] | None) -> tuple[AggregateRun, list[str]]:
    """The run and the remaining (Beam) arguments; CliError for bad or inconsistent options."""
    args, beam_args = build_parser().parse_known_args(argv)
    try:
        epsilon, delta = fraction_option("--epsilon", args.epsilon), fraction_option("--delta", args.delta)
        params = AggregationParams(args.mode, epsilon, delta, args.l1, args.l0)
    except ValueError as error:
        raise common.CliError(str(error)) from None
    if args.mode == "domain" and args.domain is None:
        raise common.CliError("--mode domain needs --domain (or choose --mode key-discovery or threshold)")
    if args.mode == "key-discovery" and args.domain is not None:
        raise common.CliError("--mode key-discovery discovers its keys from the reports: drop --domain or choose another mode")
    if args.no_noise and not args.debug:
        raise common.CliError("--no-noise is for debug runs only: add --debug")
    if not 0 <= args.error_threshold <= 1:
        raise common.CliError(f"--error-threshold must be in [0, 1], got {args.error_threshold}")
    if args.max_uses < 1:
        raise common.CliError(f"--max-uses must be >= 1, got {args.max_uses}")
    epsilon_star = fraction_option("--epsilon-star", args.epsilon_star)
    if epsilon_star <= 0:
        raise common.CliError(f"--epsilon-star must be > 0, got {args.epsilon_star}")
    private_keys = {}
    if args.private_key:
        try:
            private_keys = read_key_file(args.private_key)
        except ValueError as error:
            raise common.CliError(str(error)) from None
    job = AggregationJob(
        params=params,
        job_id=args.job_id or str(uuid.uuid4()),
        filtering_ids=_filtering_ids(args.filtering_ids),
        ledger_url=None if args.debug else args.ledger,
        limits=LedgerLimits(epsilon_units(epsilon_star, "down"), args.max_uses),
        private_keys=private_keys,
        now_seconds=int(time.time()) if args.now is None else args.now,
        error_threshold=args.error_threshold,
        debug=args.debug,
        noise=not args.no_noise,
    )
    run = AggregateRun(job, args.reports, args.domain, args.output, args.output_format, args.seed)
    return run, beam_args


def build(pipeline: beam.Pipeline, job: AggregateRun) -> None:
    """Aggregate (the summary-report shards are written by the release step), then the receipt and dead letters."""
    out = job.output.rstrip("/")
    result = pipeline | "Aggregate" >> Aggregate(job.job, job.reports, job.domain, make_source(job.seed), out, job.output_format)
    # result["receipt"]: one dict; result["dead_letters"]: DeadLetter
    for name in ("receipt", WRITTEN):  # small records the driver reads back (and removes) after the run
        result[name] | f"{name}Json" >> beam.Map(json.dumps) | f"Write{name}" >> beam.io.WriteToText(
            f"{out}/{name}", shard_name_template="", file_name_suffix=".jsonl")
    result[DEAD_LETTERS] | "WriteDeadLetters" >> WriteDeadLetters(out)


def _guarantee(params: AggregationParams, noise: bool) -> str:
    if not noise:
        return "none: exact sums (debug run without noise)"
    eps = float(params.epsilon)
    if params.mode == "domain":
        return f"({eps:g}, 0)-DP per report of L1 norm <= {params.l1} (discrete Laplace, Alg. 1 without key discovery)"
    if params.mode == "key-discovery":
        return (f"({eps:g}, {float(params.delta):g})-DP per report with <= {params.l0} contributions of L1 norm <= "
                f"{params.l1} (Alg. 1 with key discovery, tau = {params.tau:.1f}; Thm. 4.3)")
    return (f"({eps:g}, {params.l0} x {float(params.delta):g})-DP per report with <= {params.l0} contributions of L1 norm "
            f"<= {params.l1} (thresholding, T = {params.public_threshold:.1f})")


def summarise(run: AggregateRun, result, elapsed_seconds: float) -> dict:
    """summary.json: parameters, guarantee, the receipt (budget outcome) and counts read back from the outputs."""
    out = run.output.rstrip("/")
    receipt, written = (_read_back(f"{out}/{name}.jsonl") for name in ("receipt", WRITTEN))
    receipt = receipt[0]
    stats = receipt.pop("stats")
    dead_by_reason = common.dead_letters_by_reason(out)
    facts = sorted(entry["path"] for entry in written if entry["kind"] == SUMMARY_PREFIX)
    debug = sorted(entry["path"] for entry in written if entry["kind"] == DEBUG_PREFIX)
    released = sum(entry["records"] for entry in written if entry["kind"] == SUMMARY_PREFIX)
    params = run.params
    return {
        "pipeline": "aggregate",
        "status": receipt["status"],
        "receipt": receipt,
        "parameters": {
            "reports": run.reports, "domain": run.domain, "output": run.output, "mode": params.mode,
            "epsilon": str(params.epsilon), "delta": str(params.delta), "l1": params.l1, "l0": params.l0,
            "job_id": run.job.job_id, "ledger": redact_url(run.job.ledger_url), "filtering_ids": list(run.job.filtering_ids),
            "epsilon_star_units": run.job.limits.epsilon_star_units, "max_uses": run.job.limits.max_uses,
            "encrypted_payloads": bool(run.job.private_keys), "debug": run.job.debug, "noise": run.job.noise,
            "noise_source": "none" if not run.job.noise else "seeded" if run.seed is not None else "secure",
            "seed": run.seed, "error_threshold": run.job.error_threshold, "now_seconds": run.job.now_seconds,
        },
        "privacy": {"guarantee": _guarantee(params, run.job.noise), "scale": str(params.scale),
                    "tau": params.tau if params.mode == "key-discovery" else None,
                    "threshold": params.public_threshold if params.mode == "threshold" else None},
        "counts": {
            "read": stats.get("read", 0),
            "aggregated_reports": stats.get("aggregated_reports", 0),
            "contributions": stats.get("contributions", 0),
            "contributions_other_filtering_ids": stats.get("contributions_other_filtering_ids", 0),
            "report_errors": receipt["errors"],
            "dead_lettered": sum(dead_by_reason.values()),
            "dead_lettered_by_reason": dead_by_reason,
            "released_buckets": released,
        },
        "elapsed_seconds": round(elapsed_seconds, 3),
        "outputs": {"summary_report": facts, "debug_summary_report": debug,
                    "dead_letters": common.output_files(out, "dead_letters")},
    }


def _read_back(path: str) -> list[dict]:
    """The JSON Lines records of a small file the job wrote for the driver, which it then removes."""
    records = list(common.read_records(path))
    FileSystems.delete([path])
    return records


def run(job: AggregateRun, beam_args: list[str]) -> dict:
    """Runs the job; marks it complete in the ledger when it released; returns (and writes) its summary."""
    files = common.input_files([job.reports], "avro")
    if job.domain is not None:
        common.input_files([job.domain], "avro")
    common.prepare_output(job.output, OUTPUT_PREFIXES)
    ledger_url, limits = job.job.ledger_url, job.job.limits
    if ledger_url is not None:
        try:  # fail early, before any work, on a bad URL or limits that differ from the ledger's
            open_ledger(ledger_url, limits).close()
        except LedgerError as error:
            raise common.CliError(f"ledger: {error}") from None
    print(f"aggregation: {len(files)} report file(s), mode {job.params.mode}, epsilon {float(job.params.epsilon):g}, "
          f"job id {job.job.job_id}", flush=True)
    summary = common.execute(job, beam_args, build, summarise, streaming=False, output=job.output)
    if summary["status"] == "ok" and ledger_url is not None:
        with open_ledger(ledger_url, limits) as ledger:
            ledger.complete(job.job.job_id)
    return summary


def report_lines(job: AggregateRun, summary: dict) -> list[str]:
    counts, receipt = summary["counts"], summary["receipt"]
    lines = [
        f"guarantee: {summary['privacy']['guarantee']}",
        f"noise source: {summary['parameters']['noise_source']}",
        f"read {counts['read']} reports, aggregated {counts['aggregated_reports']} ({counts['contributions']} contributions), "
        f"{common.dead_letters_text(counts)}",
    ]
    if summary["status"] != "ok":
        return lines + [f"FAILED {receipt['code']}: {receipt['message']}", f"  {summary['outputs']['summary']}"]
    out = job.output.rstrip("/")
    outputs = summary["outputs"]
    return lines + [
        f"budget: {receipt['charge']} ({receipt['units']} units) for job {receipt['job_id']}",
        f"released buckets: {counts['released_buckets']}",
        f"took {summary['elapsed_seconds']:.1f} s",
        "outputs:",
        f"  {out}/summary_report-*: {len(outputs['summary_report'])} file(s)",
        *([f"  {out}/debug_summary_report-*: {len(outputs['debug_summary_report'])} file(s) (SENSITIVE)"]
          if outputs["debug_summary_report"] else []),
        *(f"  {path}" for path in outputs["dead_letters"]),
        f"  {outputs['summary']}",
    ]


def main(argv: list[str] | None = None) -> int:
    return common.cli_main(argv, parse_job, run, report_lines, lambda summary: 0 if summary["status"] == "ok" else FAILED_EXIT)


if __name__ == "__main__":
    sys.exit(main())
