"""The on-device measurement job: impressions and conversions in, attribution reports and noisy query results out.

    python -m pipelines.measurement --impressions PATH --conversions PATH --output DIR
        [--policy cookie_monster|ara_like|ipa_like] [--epoch-days 7] [--epoch-origin 1970-01-01]
        [--attribution-window-days 30] [--max-attribution-window-days 90] [--epsilon-g 1]
        [--batch-size 2000] [--alpha 0.05 --beta 0.01 [--expected-value C]] [--seed N]
        [--bias-kappa K [--bias-count epochs|reports] [--bias-beta 0.01] [--heartbeats]]
        [--emit-budgets] [--streaming [--allowed-lateness-seconds S]] [Beam options]

Simulates every device's on-device budgeting (Cookie Monster paper: Cookie Monster's
Code Listing 1, or the ARA-like and IPA-like baselines of Sec. 8.1) and the
querier's summation queries over batches of B reports. Writes
``DIR/reports-*``, ``DIR/query_results-*``, ``DIR/incomplete_batches-*``
(reports still waiting for a full batch), with ``--emit-budgets``
``DIR/SENSITIVE_device_epoch_budgets-*`` (per device-epoch consumption, for
evaluation only: never part of what a querier sees), ``DIR/dead_letters-*``
and ``DIR/summary.json``; prints counts and paths. With ``--bias-kappa``, every
report carries the counting coordinate of Cookie Monster paper Appendix D and every query
result the noisy count of empty epochs and a bound on its bias (Thm. 15/16).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from fractions import Fraction
from operator import attrgetter

import apache_beam as beam

from pipelines import common, release, topics
from pipelines.noise import noise_source
from pipelines.options.measurement import add_measurement_options, measurement_config
from pipelines.options.run import RunOptions, add_run_options, run_options
from schemas.codecs import CONVERSION, IMPRESSION
from schemas.messages import MessageEncoder
from schemas.option_values import location
from schemas.time_units import MICROS_PER_DAY
from transforms.budgeting.measurement import (
    BUDGETS,
    INCOMPLETE,
    METRICS_NAMESPACE,
    REPORTS,
    RESULTS,
    ConversionCheck,
    MeasureBatch,
    MeasureStreaming,
)
from transforms.budgeting.mechanisms.device import MeasurementConfig
from transforms.budgeting.mechanisms.policies import POLICIES
from transforms.budgeting.mechanisms.queries import EXECUTED, REJECTED
from transforms.core.io import (
    DEAD_LETTERS,
    INPUT_FILES,
    ReadEvents,
    WriteRecords,
    flatten_reads,
)

OUTPUTS = {
    REPORTS: ("reports", "attribution_report"),
    RESULTS: ("query_results", "query_result"),
    BUDGETS: ("SENSITIVE_device_epoch_budgets", "device_epoch_budget"),
}
INCOMPLETE_PREFIX = "incomplete_batches"
OUTPUT_PREFIXES = (*(prefix for prefix, _ in OUTPUTS.values()), INCOMPLETE_PREFIX)

@dataclass(frozen=True)
class MeasurementJob:
    """Everything a run needs besides Beam's own options."""

    impressions: str
    conversions: str
    run: RunOptions
    output_format: str
    config: MeasurementConfig
    batch_size: int
    emit_budgets: bool


def build_parser() -> common.CliParser:
    parser = common.CliParser(
        beam_options=True,
        prog="python -m pipelines.measurement",
        description="On-device budgeting simulated at population scale (Cookie Monster paper): attribution reports and "
        "noisy summation queries under Cookie Monster, ARA-like or IPA-like budgeting.",
    )
    add_job_options(parser)
    return parser


def add_job_options(parser: common.CliParser, *, policy: bool = True) -> None:
    """The job's options: data, budgeting (with or without ``--policy``), queries, bias detection, run."""
    data = parser.add_argument_group("data")
    data.add_argument("--impressions", required=True, type=location,
                      help="file or glob of impressions (Avro, JSON Lines, delimited protobuf)")
    data.add_argument("--conversions", required=True, type=location,
                      help="file or glob of conversions with their attribution requests")
    data.add_argument("--output-format", choices=("jsonl", "avro"), default="jsonl", help="output file format (default jsonl)")
    add_measurement_options(parser, policy=policy)
    run = parser.add_argument_group("run")
    run.add_argument("--emit-budgets", action="store_true", help="also write per device-epoch consumption (SENSITIVE)")
    add_run_options(run, seed_help="seeded randomness for simulation and tests")


def parse_job(argv: list[str] | None) -> tuple[MeasurementJob, list[str]]:
    """The job and the remaining (Beam) arguments; CliError for bad or inconsistent options."""
    args, beam_args = build_parser().parse_known_args(argv)
    return job_of(args), beam_args


def job_of(args: argparse.Namespace) -> MeasurementJob:
    """The job that parsed options describe; CliError for inconsistent ones."""
    return MeasurementJob(
        impressions=args.impressions,
        conversions=args.conversions,
        run=run_options(args, (args.impressions, args.conversions)),
        output_format=args.output_format,
        config=measurement_config(args),
        batch_size=args.batch_size,
        emit_budgets=args.emit_budgets,
    )


def build(pipeline: beam.Pipeline, job: MeasurementJob, output: str) -> None:
    """The job's graph: read and validate, devices, queries, write every output to ``output`` (the run's staging
    directory, ``pipelines.release``)."""
    options = job.run
    if options.streaming:
        if topics.all_topics_or_files({"--impressions": job.impressions, "--conversions": job.conversions}):
            # Impression and Conversion rows (event time from the records); dead letters of the topics
            rows, read_dead, input_files = topics.read_topic_rows(pipeline, [
                topics.topic_input("impressions", job.impressions, IMPRESSION, options, "measurement"),
                topics.topic_input("conversions", job.conversions, CONVERSION, options, "measurement",
                                   check=ConversionCheck(job.config)),
            ], options)
        else:
            # Impression and Conversion rows; parse dead letters
            impressions = pipeline | "ReadImpressions" >> ReadEvents(job.impressions, IMPRESSION, options.input_format)
            conversions = pipeline | "ReadConversions" >> ReadEvents(
                job.conversions, CONVERSION, options.input_format, check=ConversionCheck(job.config)
            )
            rows, read_dead, input_files = flatten_reads([impressions, conversions])
        measured = rows | "Measure" >> MeasureStreaming(
            job.config, noise_source(pipeline, options, "measurement"), job.batch_size, job.emit_budgets,
            options.lateness_micros,
            topics.durable_step(pipeline, "devices"),  # the job's state store, when it reads topics locally
        )
        dead_letters = (read_dead, measured[DEAD_LETTERS]) | "FlattenDead" >> beam.Flatten()
    else:
        measured = pipeline | "Measure" >> MeasureBatch(
            job.impressions, job.conversions, job.config, noise_source(pipeline, options, "measurement"),
            job.batch_size, options.input_format,
            job.emit_budgets, options.shards,
        )
        dead_letters, input_files = measured[DEAD_LETTERS], measured[INPUT_FILES]
    for tag, (prefix, schema) in OUTPUTS.items():
        if tag != BUDGETS or job.emit_budgets:
            measured[tag] | f"Write_{prefix}" >> WriteRecords(
                f"{output}/{prefix}", job.output_format, schema, num_shards=options.output_shards
            )
    measured[INCOMPLETE] | "WriteIncomplete" >> WriteRecords(f"{output}/{INCOMPLETE_PREFIX}", "jsonl", num_shards=1)
    if options.output_topic:
        encoder = MessageEncoder(job.output_format, OUTPUTS[RESULTS][1])
        topics.write_topic(measured[RESULTS], options.output_topic, options, encoder.encode, attrgetter("querier_site"),
                           lambda r: f"{r.querier_site}/{r.query_key}/{r.batch_index}", "SendResults")
    topics.write_diagnostics(dead_letters, input_files, output, options)


def budget_statistics(output: str) -> dict | None:
    """Average and maximum consumption over the device-epochs requested (Cookie Monster paper Fig. 4), from the budget files."""
    count, total, largest = 0, Fraction(0), 0.0
    for row in common.output_records(output, OUTPUTS[BUDGETS][0]):
        count += 1
        total += Fraction(row["consumed_epsilon"])
        largest = max(largest, row["consumed_epsilon"])
    if not count:
        return None
    return {"device_epochs": count, "average_epsilon": float(total / count), "maximum_epsilon": largest}


def summarise(job: MeasurementJob, result, elapsed_seconds: float, input_counts: dict) -> dict:
    """summary.json: parameters, noise source, guarantee, and counts (read back from the outputs, exact)."""
    output = job.run.output
    measurement_counts = common.counters(result, METRICS_NAMESPACE)
    statuses = {EXECUTED: 0, REJECTED: 0}
    for query_result in common.output_records(output, OUTPUTS[RESULTS][0]):
        statuses[query_result["status"]] += 1
    waiting = sum(row["waiting_reports"] for row in common.output_records(output, INCOMPLETE_PREFIX))
    config = job.config
    summary = {
        "pipeline": "measurement",
        "parameters": {
            "impressions": job.impressions,
            "conversions": job.conversions,
            **job.run.parameters(),
            **config.parameters(),
            "batch_size": job.batch_size,
            "noise": "laplace (exact discrete Laplace on a 2^-20 grid)",
        },
        "privacy": POLICIES[config.policy].guarantee,
        "counts": {
            **input_counts,
            "devices_with_conversions": measurement_counts.get("devices_with_conversions"),
            # exact from the batch runner's counters; streaming counters under-report, so the files are counted there
            "reports": common.count_records(output, OUTPUTS[REPORTS][0])
            if job.run.streaming
            else measurement_counts.get("reports", 0),
            "queries_executed": statuses[EXECUTED],
            "queries_rejected": statuses[REJECTED],
            "reports_waiting_for_a_full_batch": waiting,
        },
        "counters_note": common.STREAMING_COUNTERS_NOTE if job.run.streaming else None,
        "elapsed_seconds": round(elapsed_seconds, 3),
        "outputs": {
            name: common.output_files(output, prefix)
            for name, prefix in (("reports", "reports"), ("query_results", "query_results"),
                                 ("incomplete_batches", INCOMPLETE_PREFIX))
        } | common.diagnostic_files(output),
    }
    if job.emit_budgets:
        summary["SENSITIVE_budget_statistics"] = budget_statistics(output)
        summary["outputs"]["SENSITIVE_device_epoch_budgets"] = common.output_files(output, OUTPUTS[BUDGETS][0])
    return summary


def run(job: MeasurementJob, beam_args: list[str]) -> dict:
    """Runs the job to completion and returns (and writes) its summary."""
    where = topics.inputs_text([job.impressions, job.conversions], job.run.input_format)
    common.prepare_output(job.run.output, OUTPUT_PREFIXES)
    config = job.config
    print(
        f"measurement: {where}, policy {config.policy}, eps_G = {config.capacity_epsilon}, "
        f"epochs of {config.clock.length_micros // MICROS_PER_DAY} days, B = {job.batch_size}",
        flush=True,
    )
    return release.execute(job, beam_args, build, summarise, name="measurement", streaming=job.run.streaming,
                           output=job.run.output, max_error_fraction=job.run.max_error_fraction)


def report_lines(job: MeasurementJob, summary: dict) -> list[str]:
    counts = summary["counts"]
    lines = [
        f"policy {summary['parameters']['policy']}: {summary['privacy']}",
        f"noise source: {summary['parameters']['noise_source']}",
    ]
    bias = summary["parameters"].get("bias_detection")
    if bias:
        lines.append(
            f"bias detection (Appendix D): kappa {bias['kappa']}, counting {bias['count']}, beta {bias['beta']}, "
            f"heartbeats {'on' if bias['heartbeats'] else 'off'}; each query result carries a bias bound"
        )
    lines += [
        f"read {counts['read']}, parsed {counts['parsed']}, {common.dead_letters_text(counts)}",
        f"reports {counts['reports']}; queries executed {counts['queries_executed']}, rejected {counts['queries_rejected']}; "
        f"reports waiting for a full batch {counts['reports_waiting_for_a_full_batch']}",
    ]
    stats = summary.get("SENSITIVE_budget_statistics")
    if stats:
        lines.append(
            f"SENSITIVE budget consumption over {stats['device_epochs']} requested device-epochs: "
            f"average {stats['average_epsilon']:.4f}, maximum {stats['maximum_epsilon']:.4f}"
        )
    return lines + common.output_lines(summary)


def main(argv: list[str] | None = None) -> int:
    return common.cli_main(argv, parse_job, run, report_lines)


if __name__ == "__main__":
    common.run_imported("pipelines.measurement")
