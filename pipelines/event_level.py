"""ARA event-level reports: sources and triggers in, event-level reports with randomized response out.

    python -m pipelines.event_level --sources PATH --triggers PATH --output DIR [--epsilon 14] [--seed N]
        [--streaming [--allowed-lateness-seconds S]] [--shards 64] [--format avro|jsonl|pb]
        [--output-format avro|jsonl] [Beam options]

Simulates every device's browser with ARA-Event-Client (Ghazi et al. Sec. 2.2, Alg. 4): a trigger goes to the
matching source of highest priority, and each window end sends a report per summary bucket crossed, up to the
source's max reports. Each source chooses at registration, with Alg. 8, between its true reports and a uniformly
random output of its configuration's output set O, so its reports are eps-DP (Thm. 5.1). Sources whose
configuration is invalid, or refused at eps (information gain above 11.5 bits for navigation and 6.5 bits for
event sources, or more than 2^32 - 1 states), are dead letters with the reason. Writes
``DIR/reports-*.{avro,jsonl}`` (``EventLevelReport``), ``DIR/dead_letters-*.jsonl`` and ``DIR/summary.json``;
prints the guarantee, counts and paths.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

import apache_beam as beam

from pipelines import common, release, topics
from pipelines.noise import noise_source
from pipelines.options.run import RunOptions, add_run_options, run_options
from schemas.codecs import EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER
from schemas.messages import MessageEncoder
from schemas.option_values import Real, location
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, OUTPUT_FORMATS, WriteRecords
from transforms.event_level.mechanisms.config import INFORMATION_GAIN_LIMITS, MAX_EPSILON, MAX_STATES
from transforms.event_level.mechanisms.devices import SourceCheck
from transforms.event_level.reports import (
    METRICS_NAMESPACE,
    REPORTS,
    EventLevelReportsBatch,
    EventLevelReportsStreaming,
    read_streaming_rows,
)

OUTPUT_PREFIXES = ("reports",)
DEFAULT_EPSILON = 14.0
ALGORITHM = "ARA-Event-Client (Ghazi et al. Alg. 4) with randomized response (Alg. 8)"


def guarantee(epsilon: float) -> str:
    return (
        f"each source's reports are {epsilon:g}-DP (Ghazi et al. Thm. 5.1, via Alg. 8): at registration a source keeps its "
        f"true reports with probability (e^eps - 1) / (e^eps + k - 1), k = |O| of its configuration (rounded down "
        f"to a multiple of 2^-64, which keeps the bound exact), else sends a uniformly random output of O; "
        f"configurations with information gain above {INFORMATION_GAIN_LIMITS['navigation']} bits (navigation) or "
        f"{INFORMATION_GAIN_LIMITS['event']} bits (event) at eps, or with more than {MAX_STATES} states, are refused"
    )


@dataclass(frozen=True)
class EventLevelJob:
    """Everything a run needs besides Beam's own options."""

    sources: str
    triggers: str
    run: RunOptions
    epsilon: float
    output_format: str


def build_parser() -> common.CliParser:
    parser = common.CliParser(
        beam_options=True,
        prog="python -m pipelines.event_level",
        description="ARA event-level reports (Ghazi et al. Sec. 2.2, Alg. 4 and 8), simulated per device.",
    )
    parser.add_argument("--sources", required=True, type=location,
                        help="file or glob of event-level sources (Avro, JSON Lines, delimited protobuf)")
    parser.add_argument("--triggers", required=True, type=location, help="file or glob of event-level triggers")
    parser.add_argument("--epsilon", type=Real(0, float(MAX_EPSILON)), default=DEFAULT_EPSILON,
                        help=f"randomized-response epsilon per source, in [0, {MAX_EPSILON:g}] (default {DEFAULT_EPSILON:g})")
    add_run_options(parser, seed_help="seeded randomized response for simulation and tests")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS[::-1], default="avro",
                        help="report format (default avro: schemas/avro/event_level_report.avsc)")
    return parser


def parse_job(argv: list[str] | None) -> tuple[EventLevelJob, list[str]]:
    """The job and the remaining (Beam) arguments; CliError for bad or inconsistent options."""
    args, beam_args = build_parser().parse_known_args(argv)
    job = EventLevelJob(
        sources=args.sources,
        triggers=args.triggers,
        run=run_options(args, (args.sources, args.triggers)),
        epsilon=args.epsilon,
        output_format=args.output_format,
    )
    return job, beam_args


def build(pipeline: beam.Pipeline, job: EventLevelJob, output: str) -> None:
    """The job's graph: read and validate, replay every device's client, write reports, dead letters and the
    input report to ``output`` (the run's staging directory, ``pipelines.release``)."""
    options = job.run
    if options.streaming:
        if topics.all_topics_or_files({"--sources": job.sources, "--triggers": job.triggers}):
            # sources and triggers (event time from the records; sources checked at epsilon); topic dead letters
            rows, read_dead, input_files = topics.read_topic_rows(pipeline, [
                topics.topic_input("sources", job.sources, EVENT_LEVEL_SOURCE, options, "event_level",
                                   check=SourceCheck(job.epsilon)),
                topics.topic_input("triggers", job.triggers, EVENT_LEVEL_TRIGGER, options, "event_level"),
            ], options)
        else:
            rows, read_dead, input_files = read_streaming_rows(
                pipeline, job.sources, job.triggers, job.epsilon, options.input_format
            )
        replayed = rows | "Clients" >> EventLevelReportsStreaming(
            job.epsilon, noise_source(pipeline, options, "event-level"), options.lateness_micros,
            topics.durable_step(pipeline, "devices"),  # the job's state store, when it reads topics locally
        )
        dead_letters = (read_dead, replayed[DEAD_LETTERS]) | "FlattenDead" >> beam.Flatten()
    else:
        replayed = pipeline | "Clients" >> EventLevelReportsBatch(
            job.sources, job.triggers, job.epsilon, noise_source(pipeline, options, "event-level"),
            options.input_format, options.shards
        )
        dead_letters, input_files = replayed[DEAD_LETTERS], replayed[INPUT_FILES]
    replayed[REPORTS] | "WriteReports" >> WriteRecords(
        f"{output}/reports", job.output_format, "event_level_report",
        num_shards=options.output_shards,
    )
    if options.output_topic:
        encoder = MessageEncoder(job.output_format, "event_level_report")
        topics.write_topic(replayed[REPORTS], options.output_topic, options, encoder.encode,
                           attrgetter("reporting_origin"), _report_id, "SendReports")
    topics.write_diagnostics(dead_letters, input_files, output, options)


def _report_id(report) -> str:
    """An event-level report's id: its source, window and content (the report carries no id of its own)."""
    return f"{report.source_id}/{report.window_index}/{report.trigger_data}/{report.summary_bucket}"


def summarise(job: EventLevelJob, result, elapsed_seconds: float, input_counts: dict) -> dict:
    """summary.json: parameters, randomness, guarantee, and counts (reports and dead letters read back from the
    files, so exact on every runner)."""
    output = job.run.output
    client_counts = common.counters(result, METRICS_NAMESPACE)
    reports = common.count_records(output, "reports")
    return {
        "pipeline": "event_level",
        "parameters": {
            "algorithm": ALGORITHM,
            "sources": job.sources,
            "triggers": job.triggers,
            **job.run.parameters(),
            "epsilon": job.epsilon,
            "information_gain_limits_bits": dict(INFORMATION_GAIN_LIMITS),
            "max_states": MAX_STATES,
            "shards": job.run.shards,
            "input_format": job.run.input_format,
            "output_format": job.output_format,
        },
        "privacy": guarantee(job.epsilon),
        "counts": {
            **input_counts,
            "sources": client_counts.get("sources", 0),
            "randomized_sources": client_counts.get("randomized_sources", 0),
            "reports": reports,
        },
        "counters_note": "Beam counters under-report on the streaming DirectRunner (read, parsed, sources, "
        "randomized_sources); reports and dead letters come from the files." if job.run.streaming else None,
        "elapsed_seconds": round(elapsed_seconds, 3),
        "outputs": {prefix: common.output_files(output, prefix) for prefix in OUTPUT_PREFIXES} | common.diagnostic_files(output),
    }


def run(job: EventLevelJob, beam_args: list[str]) -> dict:
    """Runs the job to completion and returns (and writes) its summary."""
    where = topics.inputs_text([job.sources, job.triggers], job.run.input_format)
    common.prepare_output(job.run.output, OUTPUT_PREFIXES)
    print(f"event-level reports: {where}, {ALGORITHM}, epsilon = {job.epsilon:g}", flush=True)
    return release.execute(job, beam_args, build, summarise, name="event_level", streaming=job.run.streaming,
                           output=job.run.output, max_error_fraction=job.run.max_error_fraction)


def report_lines(job: EventLevelJob, summary: dict) -> list[str]:
    counts, parameters = summary["counts"], summary["parameters"]
    seed = f" (seed {parameters['seed']})" if parameters["seed"] is not None else ""
    return [
        f"{parameters['algorithm']}: {summary['privacy']}",
        f"noise source: {parameters['noise_source']}{seed}",
        f"read {counts['read']}, parsed {counts['parsed']}, {common.dead_letters_text(counts)}",
        f"sources {counts['sources']} (randomized {counts['randomized_sources']}), reports {counts['reports']}",
        *common.output_lines(summary),
    ]


def main(argv: list[str] | None = None) -> int:
    return common.cli_main(argv, parse_job, run, report_lines)


if __name__ == "__main__":
    common.run_imported("pipelines.event_level")
