"""The Aggregation Service job: aggregatable reports in, a noisy summary report out (Ghazi et al. Alg. 1).

    python -m pipelines.aggregate --reports PATH --output DIR [--domain PATH]
        [--mode domain|key-discovery|threshold] [--epsilon 10] [--delta 1e-5] [--l1 65536] [--l0 20]
        [--max-contributions-per-report N] [--max-report-value-sum N]
        [--job-id ID] [--ledger sqlite:///PATH | postgresql://...] [--private-key LOCATION] [--filtering-ids 0]
        [--debug] [--local-test] [--no-noise] [--seed N] [Beam options]

Writes ``DIR/summary_report-*.avro`` (``AggregatedFact``; ``.jsonl`` with ``--output-format jsonl``), with
``--debug`` also ``DIR/debug_summary_report-*`` (SENSITIVE: unnoised sums), ``DIR/dead_letters-*.jsonl`` and
``DIR/summary.json``. A job whose reports have too many errors, or that would exceed the privacy budget of any
unit, releases nothing, spends nothing and exits with status 1 and the failure code.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipelines import common, release
from pipelines.options.aggregate import add_aggregation_options, aggregation_job
from pipelines.options.run import OUTPUT_HELP
from schemas.limits import MAX_KEY_ID_CHARS, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_ENTRIES, MAX_SHARED_INFO_CHARS
from schemas.option_values import SEED, location
from transforms.core.io import DEAD_LETTERS, WriteDeadLetters
from transforms.core.mechanisms.noise import make_source
from transforms.core.urls import redact_url
from transforms.summary_reports.aggregation import DEBUG_PREFIX, SUMMARY_PREFIX, WRITTEN, Aggregate, AggregationJob
from transforms.summary_reports.ledger import LedgerError, open_ledger
from transforms.summary_reports.mechanisms.aggregation import AggregationParams

OUTPUT_PREFIXES = (SUMMARY_PREFIX, DEBUG_PREFIX, "dead_letters")
LOCAL_TEST_GUARANTEE = ("none: nothing in this run is private (local test mode, as the Aggregation Service's Local "
                        "Testing Tool: clear-text reports, no ledger, no budget charged)")
RECEIPT = "receipt"  # the job's budget outcome, RECEIPT.jsonl: written once the job has judged, charged and released


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


def _output_format(text: str) -> str:
    """``--output-format``; ``json``, its old name for JSON Lines, is read as ``jsonl`` with one warning."""
    if text == "json":
        print("warning: --output-format json is deprecated and will be removed; use jsonl", file=sys.stderr)
        return "jsonl"
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = common.CliParser(
        beam_options=True,
        prog="python -m pipelines.aggregate",
        description="Noisy summary reports from aggregatable reports (the Aggregation Service, Ghazi et al. Alg. 1), with "
        "key discovery, the shipped thresholding, and a durable privacy-budget ledger.",
    )
    parser.add_argument("--reports", required=True, type=location, help="file or glob of Avro AggregatableReport files")
    parser.add_argument("--output", required=True, type=location, help=OUTPUT_HELP)
    parser.add_argument("--domain", type=location,
                        help="output domain: Avro AggregationBucket files, or text with one bucket per line")
    parser.add_argument("--output-format", type=_output_format, choices=("avro", "jsonl"), default="avro",
                        help="summary report format: avro (the Aggregation Service's) or jsonl (default avro)")
    parser.add_argument("--seed", type=SEED, help="seeded noise for simulation and tests (default: secure OS randomness)")
    add_aggregation_options(parser)
    return parser


def parse_job(argv: list[str] | None) -> tuple[AggregateRun, list[str]]:
    """The run and the remaining (Beam) arguments; CliError for bad or inconsistent options."""
    args, beam_args = build_parser().parse_known_args(argv)
    job = aggregation_job(args, has_domain=args.domain is not None)
    run = AggregateRun(job, args.reports, args.domain, args.output, args.output_format, args.seed)
    return run, beam_args


def build(pipeline: beam.Pipeline, job: AggregateRun, out: str) -> None:
    """Aggregate (the summary-report shards are written to ``out`` by the release step), then the receipt and dead
    letters."""
    result = pipeline | "Aggregate" >> Aggregate(job.job, job.reports, job.domain, make_source(job.seed), out, job.output_format)
    # result["receipt"]: one dict; result["dead_letters"]: DeadLetter
    for name in (RECEIPT, WRITTEN):  # small records the driver reads back (and removes) after the run
        result[name] | f"{name}Json" >> beam.Map(json.dumps) | f"Write{name}" >> beam.io.WriteToText(
            f"{out}/{name}", shard_name_template="", file_name_suffix=".jsonl")
    result[DEAD_LETTERS] | "WriteDeadLetters" >> WriteDeadLetters(out)


def summarise(run: AggregateRun, result, elapsed_seconds: float) -> dict:
    """summary.json: parameters, guarantee, the receipt (budget outcome) and counts read back from the outputs."""
    out = run.output.rstrip("/")
    receipt, written = (_read_back(f"{out}/{name}.jsonl") for name in (RECEIPT, WRITTEN))
    receipt = receipt[0]
    stats = receipt.pop("stats")
    receipt.pop("noise_nonce", None)  # public, but the summary has no use for it
    dead_by_reason = common.dead_letters_by_reason(out)
    facts = sorted(entry["path"] for entry in written if entry["kind"] == SUMMARY_PREFIX)
    debug = sorted(entry["path"] for entry in written if entry["kind"] == DEBUG_PREFIX)
    released = sum(entry["records"] for entry in written if entry["kind"] == SUMMARY_PREFIX)
    params = run.params
    return {
        "pipeline": "aggregate",
        "status": receipt["status"],
        **({"failure": f"{receipt['code']}: {receipt['message']}"} if receipt["status"] != "ok" else {}),
        "receipt": receipt,
        "parameters": {
            "reports": run.reports, "domain": run.domain, "output": run.output, "mode": params.mode,
            "epsilon": str(params.epsilon), "delta": str(params.delta), "l1": params.l1, "l0": params.l0,
            "job_id": run.job.job_id, "ledger": redact_url(run.job.ledger_url), "filtering_ids": list(run.job.filtering_ids),
            "epsilon_star_units": run.job.limits.epsilon_star_units, "max_uses": run.job.limits.max_uses,
            "encrypted_payloads": run.job.private_key is not None,
            "private_key": redact_url(run.job.private_key), "debug": run.job.debug, "local_test": run.job.local_test,
            "noise": run.job.noise,
            "noise_source": "none" if not run.job.noise else "seeded" if run.seed is not None else "secure",
            "noise_key": None if run.job.noise_key is None else {"location": run.job.noise_key.location,
                                                                 "key_id": run.job.noise_key.key_id},
            "seed": run.seed, "max_error_fraction": run.job.max_error_fraction, "now_seconds": run.job.now_seconds,
            "max_contributions_per_report": run.job.payload_limits.max_contributions,
            "max_report_value_sum": run.job.payload_limits.max_value_sum, "max_payload_entries": MAX_PAYLOAD_ENTRIES,
            "max_payload_bytes": MAX_PAYLOAD_BYTES, "max_shared_info_chars": MAX_SHARED_INFO_CHARS,
            "max_key_id_chars": MAX_KEY_ID_CHARS,
        },
        "privacy": {"guarantee": LOCAL_TEST_GUARANTEE if run.job.local_test else params.guarantee(run.job.noise),
                    "scale": str(params.scale),
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


def release_job(job: AggregateRun, beam_args: list[str]) -> dict:
    """The pipeline, writing into the output directory directly: the job judges its input itself, before it charges
    the budget and releases (``transforms.summary_reports.aggregation.input_failure``); returns (and writes) the
    summary, which says whether it released."""
    started = time.monotonic()
    with release.completed_run(job, beam_args, build, job.output.rstrip("/"), streaming=False,
                               name="aggregate") as (result, _):
        summary = summarise(job, result, time.monotonic() - started)
    summary["outputs"]["summary"] = common.write_summary(job.output, summary)
    return summary


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
    if job.job.local_test:
        print(f"LOCAL TEST MODE: {LOCAL_TEST_GUARANTEE}", file=sys.stderr, flush=True)
    print(f"aggregation: {len(files)} report file(s), mode {job.params.mode}, epsilon {float(job.params.epsilon):g}, "
          f"job id {job.job.job_id}", flush=True)
    summary = release_job(job, beam_args)
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
    return common.cli_main(argv, parse_job, run, report_lines)


if __name__ == "__main__":
    common.run_imported("pipelines.aggregate")
