"""The k-anonymity server job: join events in, differentially private k-anonymity verdicts out (k-anonymity note).

    python -m pipelines.kanon --input PATH --output DIR [--window-hours 168] [--k 50]
        [--epsilon 3 --delta 1e-5 | --noise-epsilon E --noise-delta D] [--emit changes|all]
        [--seed N] [--streaming] [--allowed-lateness-seconds S] [Beam options]

Writes ``DIR/verdicts-*.jsonl`` (or ``.avro``), ``DIR/dead_letters-*.jsonl``
and ``DIR/summary.json`` (parameters, noise source, privacy guarantee and
counts), and prints the same in a few lines.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from fractions import Fraction
from operator import attrgetter

import apache_beam as beam

from pipelines import common, release, topics
from pipelines.kanon_privacy import add_privacy_arguments, describe, draw_from_args
from pipelines.kanon_privacy import report_lines as privacy_lines
from pipelines.noise import noise_source
from pipelines.options.run import RunOptions, add_run_options, run_options
from schemas.codecs import JOIN_EVENT
from schemas.messages import MessageEncoder
from schemas.option_values import POSITIVE_INTEGER, location
from schemas.time_units import MICROS_PER_HOUR, iso_micros
from transforms.core.bus.endpoints import is_bus
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, CountDeadLetters, ReadEvents, WriteRecords
from transforms.core.io import METRICS_NAMESPACE as IO_NAMESPACE
from transforms.core.mechanisms.time_steps import hour_step
from transforms.kanon.join_fold import GroupJoinsByGroup
from transforms.kanon.mechanisms.above_threshold import AboveThreshold, AboveThresholdWithPeriodicRestart
from transforms.kanon.mechanisms.accounting import DrawParameters
from transforms.kanon.mechanisms.group_replay import EMIT_MODES, KAnonParameters
from transforms.kanon.verdicts import METRICS_NAMESPACE as KANON_NAMESPACE
from transforms.kanon.verdicts import KAnonymityVerdicts, VerdictsFromGroupJoins

DEFAULT_EPSILON = Fraction(3)
DEFAULT_DELTA = Fraction(1, 100_000)
OUTPUT_PREFIXES = ("verdicts",)


@dataclass(frozen=True)
class KAnonJob:
    """Everything a run needs besides Beam's own options."""

    input: str
    run: RunOptions
    output_format: str
    window_steps: int
    k: int
    draw: DrawParameters
    emit: str

    def parameters(self) -> KAnonParameters:
        noise = self.draw.noise()
        at = AboveThreshold(k=self.k, window_steps=self.window_steps, threshold_noise=noise, step_noise=noise)
        return KAnonParameters(mechanism=AboveThresholdWithPeriodicRestart(at), emit=self.emit)


def build_parser() -> argparse.ArgumentParser:
    parser = common.CliParser(
        beam_options=True,
        prog="python -m pipelines.kanon",
        description="Differentially private k-anonymity verdicts per interest group and hour "
        "(AboveThresholdWithPeriodicRestart, k-anonymity note). Beam's own options are passed to Beam.",
    )
    parser.add_argument(
        "--input", required=True, type=location, help="file or glob of join events (Avro, JSON Lines, length-delimited protobuf)"
    )
    parser.add_argument("--output-format", choices=("jsonl", "avro"), default="jsonl", help="verdict file format (default jsonl)")
    parser.add_argument("--k", type=POSITIVE_INTEGER, default=50, help="k-anonymity threshold (default 50)")
    add_privacy_arguments(parser)  # --epsilon/--delta (default 3 and 1e-5) or --noise-epsilon/--noise-delta; --window-hours
    parser.add_argument(
        "--emit",
        choices=EMIT_MODES,
        default="changes",
        help="changes: a record when a verdict changes (default); all: every step with users in the window",
    )
    add_run_options(parser, seed_help="seeded noise for simulation and tests", lateness_default=3600,
                    lateness_help="streaming: how late a join may arrive after its hour ends", shards=False)
    return parser


def parse_job(argv: list[str] | None) -> tuple[KAnonJob, list[str]]:
    """The job and the remaining (Beam) arguments; CliError for bad or inconsistent options."""
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    if all(value is None for value in (args.epsilon, args.delta, args.noise_epsilon, args.noise_delta)):
        args.epsilon, args.delta = DEFAULT_EPSILON, DEFAULT_DELTA
    draw = draw_from_args(args)
    job = KAnonJob(
        input=args.input,
        run=run_options(args, (args.input,)),
        output_format=args.output_format,
        window_steps=args.window_hours,
        k=args.k,
        draw=draw,
        emit=args.emit,
    )
    try:
        job.parameters()
    except ValueError as error:
        raise common.CliError(str(error)) from None
    return job, beam_args


def build(pipeline: beam.Pipeline, job: KAnonJob, output: str) -> None:
    """The job's graph: read and validate, verdicts, write verdicts, dead letters and the input report to
    ``output`` (the run's staging directory, ``pipelines.release``)."""
    parameters, options = job.parameters(), job.run
    if options.streaming:
        if is_bus(job.input):
            # joins: [JoinEvent, ...] (one list per poll of the topic), event time from the records
            topic = topics.read_topics(pipeline, [topics.topic_input("joins", job.input, JOIN_EVENT, options, "kanon")],
                                       options)
            joins, read_dead, input_files = topic["joins"], topic[DEAD_LETTERS], topic[INPUT_FILES]
            durable = topics.durable_step(pipeline, "verdicts")  # the job's state store, on the local runner
        else:
            # read.events: JoinEvent; read.dead_letters: DeadLetter
            read = pipeline | "ReadJoins" >> ReadEvents(job.input, JOIN_EVENT, options.input_format)
            joins, read_dead, input_files = read.events, read.dead_letters, read.input_files
            durable = None
        # kanon["verdicts"]: KAnonVerdict; kanon["dead_letters"]: DeadLetter (joins later than the allowed lateness)
        kanon = joins | "KAnonymity" >> KAnonymityVerdicts(
            parameters,
            noise_source(pipeline, options, "kanon"),
            streaming=True,
            allowed_lateness_micros=options.lateness_micros,
            durable=durable,
        )
        verdicts = kanon["verdicts"]
        dead_letters = (read_dead, kanon["dead_letters"] | "CountLate" >> CountDeadLetters()) | beam.Flatten()
    else:
        # read.events: (group, GroupJoins), folded per file while reading; read.dead_letters: DeadLetter
        read = pipeline | "ReadJoins" >> ReadEvents(job.input, JOIN_EVENT, options.input_format, fold=GroupJoinsByGroup)
        # KAnonVerdict
        verdicts = read.events | "KAnonymity" >> VerdictsFromGroupJoins(parameters, noise_source(pipeline, options, "kanon"))
        dead_letters, input_files = read.dead_letters, read.input_files
    verdicts | "WriteVerdicts" >> WriteRecords(
        f"{output}/verdicts", job.output_format, "kanon_verdict", num_shards=options.output_shards
    )
    if options.output_topic:
        encoder = MessageEncoder(job.output_format, "kanon_verdict")
        topics.write_topic(verdicts, options.output_topic, options, encoder.encode, attrgetter("interest_group"),
                           lambda v: f"{v.interest_group}/{v.step}", "SendVerdicts")
    topics.write_diagnostics(dead_letters, input_files, output, options)


def summarise(job: KAnonJob, result, elapsed_seconds: float, input_counts: dict) -> dict:
    """summary.json: parameters, noise source, guarantee, and counts (read back from the outputs where exact)."""
    output = job.run.output
    kanon_counts = common.counters(result, KANON_NAMESPACE)
    last_event = common.distribution_max(result, IO_NAMESPACE, "event_time_micros")
    last_step = hour_step(last_event) if last_event is not None else None
    latest: dict[str, tuple[int, bool]] = {}
    verdict_files = common.output_files(output, "verdicts")
    records = 0
    for path in verdict_files:
        for verdict in common.read_records(path):
            records += 1
            if last_step is not None and verdict["step"] <= last_step:
                seen = latest.get(verdict["interest_group"])
                if seen is None or verdict["step"] > seen[0]:
                    latest[verdict["interest_group"]] = (verdict["step"], verdict["k_anonymous"])
    return {
        "pipeline": "kanon",
        "parameters": {
            "input": job.input,
            **job.run.parameters(),
            "window_hours": job.window_steps,
            "k": job.k,
            "emit": job.emit,
            "noise": "truncated_laplace",
        },
        "privacy": describe(job.draw, job.window_steps),
        "counts": {
            **input_counts,
            "groups": kanon_counts.get("groups", 0),
            "verdict_records": records,
            "last_step": last_step,
            "groups_k_anonymous_at_last_step": sum(1 for _, anonymous in latest.values() if anonymous),
        },
        "counters_note": common.STREAMING_COUNTERS_NOTE if job.run.streaming else None,
        "elapsed_seconds": round(elapsed_seconds, 3),
        "outputs": {"verdicts": verdict_files, **common.diagnostic_files(output)},
    }


def run(job: KAnonJob, beam_args: list[str]) -> dict:
    """Runs the job to completion and returns (and writes) its summary."""
    where = topics.inputs_text([job.input], job.run.input_format)
    common.prepare_output(job.run.output, OUTPUT_PREFIXES)
    print(f"k-anonymity: {where}, w = {job.window_steps} h, k = {job.k}, emit = {job.emit}", flush=True)
    return release.execute(job, beam_args, build, summarise, name="kanon", streaming=job.run.streaming,
                           output=job.run.output, max_error_fraction=job.run.max_error_fraction)


def _hour_text(step: int | None) -> str:
    """An hour step as its UTC start (``2026-02-04T23:00:00Z``, step 491711), never bare hours since the epoch."""
    return "none" if step is None else f"{iso_micros(step * MICROS_PER_HOUR)}, step {step}"


def report_lines(job: KAnonJob, summary: dict) -> list[str]:
    counts = summary["counts"]
    return [
        *privacy_lines(job.draw, job.window_steps, job.k),
        f"noise source: {summary['parameters']['noise_source']}",
        f"read {counts['read']}, parsed {counts['parsed']}, {common.dead_letters_text(counts)}",
        f"groups {counts['groups']}, verdict records {counts['verdict_records']}, "
        f"k-anonymous at the last hour ({_hour_text(counts['last_step'])}): "
        f"{counts['groups_k_anonymous_at_last_step']}",
        *common.output_lines(summary),
    ]


def main(argv: list[str] | None = None) -> int:
    return common.cli_main(argv, parse_job, run, report_lines)


if __name__ == "__main__":
    common.run_imported("pipelines.kanon")
