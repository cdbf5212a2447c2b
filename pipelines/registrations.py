"""Attribution Reporting registration logs in, the reports browsers send out:
``python -m pipelines.registrations --registrations PATH --output DIR [--seed N] [Beam options]``.

    python -m pipelines.generate ara --registrations --output data/ara
    python -m pipelines.registrations --registrations 'data/ara/registrations-*.jsonl' --output out/registrations
    python -m pipelines.aggregate --reports 'out/registrations/aggregatable_reports-*.avro' ...

Reads registration logs (JSON Lines, one request per line, in the form of Chrome's interop suite:
``schemas/registration_log.py``; written by ``python -m pipelines.generate ara --registrations`` or converted from
real browser logs), parses every ``Attribution-Reporting-Register-Source`` / ``-Trigger`` header as the
specification does (``schemas/registration_headers.py``: an invalid header is a dead letter with the
specification's failure reason), and replays each device's registrations in time order through the attribution
storage with the event-level and aggregatable clients in their specification modes (``pipelines/ara_browser.py``):

* each source draws its randomized response (Alg. 8 of Ghazi et al.; eps from the source, at most 14), so its
  event-level reports are eps-DP; a source above the channel-capacity limit is a dead letter
  ``source_channel_capacity_limit`` (``source_trigger_state_cardinality_limit`` above 2^32 - 1 outputs);
* aggregatable reports get a delay uniform in [10, 60] minutes and null reports at the specification's rates.
* a log's delivery entries (``{"device_id", "timestamp", "connection": false}`` / ``true``, ``"navigation": true``:
  ``schemas/registration_log.py``) are the device's connectivity: a report due while its device is offline is
  retried 5 and 15 minutes later, and one that never finds it online is not sent
  (``transforms/core/mechanisms/report_delivery.py``); the event-level records carry the time a report is sent,
  and ``summary.json`` counts the reports sent late and never sent (``counts.report_delivery``).

Randomness is secure by default, seeded with ``--seed`` (simulation and tests); a log's own
``randomized_response`` / ``null_aggregatable_reports_days`` fields (the interop suite's fixed choices, for
``python -m pipelines.interop``) are ignored here. Batch only.

Writes ``DIR/event_level_reports-*.jsonl`` (report URL, time and body, as the interop suite writes them),
``DIR/aggregatable_reports-*.avro`` (``AggregatableReport`` with clear-text CBOR payloads, what
``python -m pipelines.aggregate`` reads), ``DIR/debug_reports-*.jsonl`` (the verbose debug reports the
registrations asked for, ``pipelines/ara_debug_reports.py``, the debug copies of reports with both debug keys, and
the aggregatable debug reports, ``pipelines/ara_aggregatable_debug.py``),
``DIR/dead_letters-*.jsonl``, ``DIR/input_files-*.jsonl`` and
``DIR/summary.json``; prints counts and paths.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam
import orjson
from apache_beam.io import fileio
from apache_beam.metrics import Metrics

from pipelines import common, release, topics
from pipelines.ara_browser import MICROS_PER_MILLI, BrowserConfig, event_level_client, replay_device, report_record
from pipelines.ara_debug_reports import header_error_report
from pipelines.noise import noise_source
from pipelines.options.run import RunOptions, add_run_options, run_options
from schemas.codecs import UNREADABLE_FILE, read_json_lines
from schemas.option_values import location
from schemas.registration_log import DeliveryChange, ParsedRegistration, RegistrationFailure, parse_entry
from schemas.registrations import SourceRegistration
from schemas.rows import API_ATTRIBUTION_REPORTING, DeadLetter
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, InputFileReport, WriteRecords
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.mechanisms.ara_spec import SpecEventReport
from transforms.event_level.mechanisms.config import ConfigurationError
from transforms.summary_reports.mechanisms.ara_spec import SpecAggregatableReport
from transforms.summary_reports.mechanisms.contributions import ClientReport, report_id
from transforms.summary_reports.report_records import report_record_of

METRICS_NAMESPACE = "pmbeam.registrations"
EVENT_LEVEL, AGGREGATABLE, DEBUG = "event_level_reports", "aggregatable_reports", "debug_reports"
OUTPUT_PREFIXES = (EVENT_LEVEL, AGGREGATABLE, DEBUG)
# a source the browser refuses, under Chrome's names for it (its verbose debug report types)
REFUSAL_REASONS = {"information_gain_too_high": "source_channel_capacity_limit",
                   "too_many_states": "source_trigger_state_cardinality_limit",
                   "max_event_states_exceeded": "source_max_event_states_limit",
                   "scopes_channel_capacity_exceeded": "source_scopes_channel_capacity_limit"}
ALGORITHM = ("the Attribution Reporting specification's attribution (Chrome's behaviour): event-level reports with "
             "randomized response (Ghazi et al. Alg. 8), aggregatable reports within a 65,536 budget per source")


@dataclass(frozen=True)
class RegistrationsJob:
    """Everything a run needs besides Beam's own options."""

    registrations: str
    run: RunOptions
    config: BrowserConfig


class _ParseLogFn(beam.DoFn):
    """One log file: (device, parsed registration) per registration the browser accepts, a dead letter per one it
    drops (a line that is not JSON counts as one), and the file's input report."""

    def __init__(self, config: BrowserConfig) -> None:
        self._config = config

    def setup(self) -> None:
        self._event_level = event_level_client(self._config)

    def _refused(self, result: ParsedRegistration | RegistrationFailure | DeliveryChange) -> tuple[str, str] | None:
        """(reason, detail) when the browser drops the registration: a header it cannot parse, a source configuration
        above the channel-capacity limit."""
        if isinstance(result, DeliveryChange):  # the device's connectivity or a navigation: nothing to check
            return None
        if isinstance(result, RegistrationFailure):
            return result.reason, result.detail
        if isinstance(result.registration, SourceRegistration):
            try:
                self._event_level.check(result.registration)
            except ConfigurationError as error:
                return REFUSAL_REASONS.get(error.reason, error.reason), str(error)
        return None

    def process(self, readable: fileio.ReadableFile):
        path = readable.metadata.path
        parsed = dead = 0
        try:
            with readable.open() as handle:
                for item in read_json_lines(handle, path, orjson.loads):  # as Chrome's parser: no NaN, no Infinity
                    if isinstance(item, DeadLetter):
                        dead += 1
                        yield beam.pvalue.TaggedOutput(DEAD_LETTERS, item)
                        continue
                    where, line, entry = item
                    for index, result in enumerate(parse_entry(entry, self._config.aggregation_coordinator_origins)):
                        refused = self._refused(result)
                        if refused is None:
                            parsed += 1
                            # the line, not the parsed record, crosses the shuffle: a third of the memory
                            yield result.device_id, (line, index)
                        else:
                            dead += 1
                            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(
                                raw=line, reason=refused[0], source=f"{where} ({refused[1]})"))
                            if isinstance(result, RegistrationFailure) and result.header_error_report is not None:
                                report = header_error_report(result.header_error_report,
                                                             (result.time_millis or 0) * MICROS_PER_MILLI)
                                yield beam.pvalue.TaggedOutput(DEBUG, report.record())
        except (OSError, EOFError) as error:  # an unreadable or truncated compressed file
            dead += 1
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(
                raw=f"{type(error).__name__}: {error}", reason=UNREADABLE_FILE, source=path))
            yield beam.pvalue.TaggedOutput(INPUT_FILES, InputFileReport(path, parsed + dead, parsed, dead, UNREADABLE_FILE))
            return
        yield beam.pvalue.TaggedOutput(INPUT_FILES, InputFileReport(path, parsed + dead, parsed, dead, None))


def client_report(report: SpecAggregatableReport, source: RandomSource, key: tuple) -> ClientReport:
    """An aggregatable report in the Aggregation Service's form (a fresh report id; a null report has no
    contribution, the payload is padded either way)."""
    return ClientReport(
        API_ATTRIBUTION_REPORTING, report_id(source, key),
        report.reporting_origin, report.attribution_destination, report.report_time_micros // 1_000_000,
        () if report.is_null else report.contributions, report.filtering_id_max_bytes,
    )


class _ReplayDeviceFn(beam.DoFn):
    """One device's registrations through the browser: event-level report records (main output) and aggregatable
    report records."""

    def __init__(self, config: BrowserConfig, source: RandomSource) -> None:
        self._config, self._source = config, source

    def setup(self) -> None:
        self._devices = Metrics.counter(METRICS_NAMESPACE, "devices")

    def process(self, element) -> Iterator:
        device_id, lines = element
        coordinators = self._config.aggregation_coordinator_origins
        parsed: dict[str, list] = {}  # a line's registrations, parsed again (the same as at reading)
        registrations = [parsed.setdefault(line, parse_entry(orjson.loads(line), coordinators))[index]
                         for line, index in lines]
        source = self._source.keyed_child(("registrations", device_id))
        device = replay_device(registrations, self._config, random_source=source)
        self._devices.inc()
        late = sum(sent > report.report_time_micros for report, sent in zip(device.reports, device.sent_micros,
                                                                             strict=True))
        Metrics.counter(METRICS_NAMESPACE, "delivery.sent_late").inc(late)
        Metrics.counter(METRICS_NAMESPACE, "delivery.never_sent").inc(device.undelivered)
        for _, error in device.refused_sources:  # dropped as the browser drops them (a source storage limit)
            Metrics.counter(METRICS_NAMESPACE, "source_dropped." + getattr(error, "reason", type(error).__name__)).inc()
        for outcomes, prefix in ((device.event_level_outcomes, "event_level."), (device.aggregatable_outcomes, "aggregatable.")):
            for outcome, count in outcomes.items():
                Metrics.counter(METRICS_NAMESPACE, prefix + outcome).inc(count)
        for index, (report, sent) in enumerate(zip(device.reports, device.sent_micros, strict=True)):
            if isinstance(report, SpecEventReport):
                yield report_record(report, sent)
            else:
                yield beam.pvalue.TaggedOutput(AGGREGATABLE, report_record_of(client_report(report, source, (device_id, index))))
        for debug in device.debug_reports:
            yield beam.pvalue.TaggedOutput(DEBUG, debug)


def build_parser() -> common.CliParser:
    parser = common.CliParser(
        beam_options=True,
        prog="python -m pipelines.registrations",
        description="Attribution Reporting registration logs in (header JSON), event-level and aggregatable reports "
                    "out, as the specification attributes them, simulated per device.",
    )
    parser.add_argument("--registrations", required=True, type=location,
                        help="file or glob of registration logs (JSON Lines, schemas/registration_log.py)")
    add_run_options(parser, seed_help="seeded randomized response, delays and null reports for simulation and tests",
                    shards=False)
    return parser


def parse_job(argv: list[str] | None) -> tuple[RegistrationsJob, list[str]]:
    """The job and the remaining (Beam) arguments; CliError for bad or inconsistent options."""
    args, beam_args = build_parser().parse_known_args(argv)
    options = run_options(args, (args.registrations,))
    if options.streaming:
        raise common.CliError("python -m pipelines.registrations runs in batch only (no --streaming, no topic input)")
    if options.output_topic:
        raise common.CliError("python -m pipelines.registrations writes its reports to files, not to --output-topic")
    if options.input_format not in (None, "jsonl"):
        raise common.CliError(f"registration logs are JSON Lines; --format {options.input_format} is not supported")
    common.input_files([args.registrations], "jsonl")  # an InputError (one line, exit 2) when none matches
    return RegistrationsJob(args.registrations, options, BrowserConfig()), beam_args


def build(pipeline: beam.Pipeline, job: RegistrationsJob, output: str) -> None:
    """The job's graph: read and parse, replay every device, write reports, dead letters and the input report to
    ``output`` (the run's staging directory, ``pipelines.release``)."""
    read = (
        pipeline
        | "Match" >> fileio.MatchFiles(job.registrations, empty_match_treatment="DISALLOW")
        | "SpreadFiles" >> beam.Reshuffle()
        | "Open" >> fileio.ReadMatches()
        | "Parse" >> beam.ParDo(_ParseLogFn(job.config))
        .with_outputs(DEAD_LETTERS, INPUT_FILES, DEBUG, main="registrations")
    )
    replayed = (
        read.registrations
        | "GroupDevices" >> beam.GroupByKey()
        | "ReplayDevices" >> beam.ParDo(_ReplayDeviceFn(job.config, noise_source(pipeline, job.run, "registrations")))
        .with_outputs(AGGREGATABLE, DEBUG, main=EVENT_LEVEL)
    )
    replayed[EVENT_LEVEL] | "WriteEventLevel" >> WriteRecords(f"{output}/{EVENT_LEVEL}", "jsonl")
    ((read[DEBUG], replayed[DEBUG]) | "DebugReports" >> beam.Flatten()
     | "WriteDebug" >> WriteRecords(f"{output}/{DEBUG}", "jsonl"))
    replayed[AGGREGATABLE] | "WriteAggregatable" >> WriteRecords(f"{output}/{AGGREGATABLE}", "avro", "aggregatable_report")
    topics.write_diagnostics(read[DEAD_LETTERS], read[INPUT_FILES], output, job.run)


def _outcomes(counters: dict[str, int], prefix: str) -> dict[str, int]:
    """Every trigger's outcome in one client, by the specification's result names."""
    return {name[len(prefix):]: count for name, count in sorted(counters.items()) if name.startswith(prefix)}


def summarise(job: RegistrationsJob, result, elapsed_seconds: float, input_counts: dict) -> dict:
    """summary.json: parameters, randomness, and counts (reports read back from the files, so exact)."""
    output = job.run.output
    outcomes = common.counters(result, METRICS_NAMESPACE)
    return {
        "pipeline": "registrations",
        "parameters": {"algorithm": ALGORITHM, "registrations": job.registrations, **job.run.parameters(),
                       "browser_config": dict(vars(job.config))},
        "privacy": "each source's event-level reports are eps-DP by randomized response (eps from its registration, "
                   "at most 14; Ghazi et al. Thm. 5.1); aggregatable reports are private only once aggregated with noise "
                   "(python -m pipelines.aggregate), with at most 65,536 contributed per source",
        "counts": {
            **input_counts,
            "devices": outcomes.get("devices", 0),
            "event_level_reports": common.count_records(output, EVENT_LEVEL),
            "debug_reports": common.count_records(output, DEBUG),
            "aggregatable_reports": common.count_records(output, AGGREGATABLE),
            "event_level_outcomes": _outcomes(outcomes, "event_level."),
            "aggregatable_outcomes": _outcomes(outcomes, "aggregatable."),
            "sources_dropped": _outcomes(outcomes, "source_dropped."),
            "report_delivery": {"sent_late": outcomes.get("delivery.sent_late", 0),
                                "never_sent": outcomes.get("delivery.never_sent", 0)},
        },
        "elapsed_seconds": round(elapsed_seconds, 3),
        "outputs": {prefix: common.output_files(output, prefix) for prefix in OUTPUT_PREFIXES} | common.diagnostic_files(output),
    }


def run(job: RegistrationsJob, beam_args: list[str]) -> dict:
    """Runs the job to completion and returns (and writes) its summary."""
    common.prepare_output(job.run.output, OUTPUT_PREFIXES)
    print(f"registrations: {job.registrations}, {ALGORITHM}", flush=True)
    return release.execute(job, beam_args, build, summarise, name="registrations", streaming=False,
                           output=job.run.output, max_error_fraction=job.run.max_error_fraction)


def report_lines(job: RegistrationsJob, summary: dict) -> list[str]:
    counts, parameters = summary["counts"], summary["parameters"]
    seed = f" (seed {parameters['seed']})" if parameters["seed"] is not None else ""
    return [
        f"noise source: {parameters['noise_source']}{seed}",
        f"read {counts['read']} registrations, parsed {counts['parsed']}, {common.dead_letters_text(counts)}",
        f"devices {counts['devices']}: event-level reports {counts['event_level_reports']}, "
        f"aggregatable reports {counts['aggregatable_reports']}, debug reports {counts['debug_reports']}",
        *common.output_lines(summary),
    ]


def main(argv: list[str] | None = None) -> int:
    return common.cli_main(argv, parse_job, run, report_lines)


if __name__ == "__main__":
    common.run_imported("pipelines.registrations")
