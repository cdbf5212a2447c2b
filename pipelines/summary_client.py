"""The summary-report clients: ARA sources and triggers, or PAA ad events, in; aggregatable reports out.

    python -m pipelines.summary_client ara --sources PATH --triggers PATH --output DIR [--l0 20] [--l1 65536]
        [--public-key LOCATION [--key-id ID]] [--seed N] [--streaming [--allowed-lateness-seconds S]]
        [--shards 64] [--format avro|jsonl|pb] [Beam options]
    python -m pipelines.summary_client paa --events PATH --output DIR [--reach-value 32768] [the same options]

Simulates every device's browser: ``ara`` runs ARA-SR-Client (Ghazi et al. Alg. 2: last-touch attribution with
priorities, per-source budgets L0 and L1), ``paa`` runs PAA-SR-Client (Alg. 3: the reach-counting shared-storage
function, budgets per (device, reporting origin, 10-minute window)). Every trigger (ARA) or ad event (PAA)
sends exactly one report, null or not, padded to 20 contributions. Writes ``DIR/reports-*.avro``
(``AggregatableReport``, what ``python -m pipelines.aggregate`` reads: clear-text CBOR payloads, or HPKE-encrypted
with ``--public-key``), ``DIR/dead_letters-*.jsonl`` and ``DIR/summary.json``; prints counts and paths.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import apache_beam as beam

from pipelines import common, release, topics
from pipelines.noise import noise_source
from pipelines.options.run import RunOptions, add_run_options, run_options
from schemas.aggregatable import decode_payload, parse_key_file
from schemas.codecs import ARA_SOURCE, ARA_TRIGGER, PAA_EVENT
from schemas.messages import avro_single_object
from schemas.option_values import POSITIVE_INTEGER, location
from transforms.core.io import DEAD_LETTERS, INPUT_FILES, ReadEvents, WriteRecords, flatten_reads
from transforms.core.secrets import SecretUnavailable, read_secret
from transforms.summary_reports.clients import (
    METRICS_NAMESPACE,
    REPORTS,
    ClientInput,
    SummaryReportsBatch,
    SummaryReportsStreaming,
)
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L0, DEFAULT_L1
from transforms.summary_reports.mechanisms.ara_client import AraSummaryClient
from transforms.summary_reports.mechanisms.contributions import ContributionLimits, SummaryClient
from transforms.summary_reports.mechanisms.paa_client import DEFAULT_REACH_VALUE, PaaSummaryClient, ReachCounting

OUTPUT_PREFIXES = ("reports",)
ALGORITHMS = {"ara": "ARA-SR-Client (Ghazi et al. Alg. 2)", "paa": "PAA-SR-Client (Ghazi et al. Alg. 3)"}
GUARANTEES = {
    "ara": "with the Aggregation Service (Ghazi et al. Alg. 1) and its per-report budget, the summary reports are "
    "(eps*, delta*)-DP per source (Cor. 4.4): a source contributes at most L0 non-zero values summing to at most L1",
    "paa": "with the Aggregation Service (Ghazi et al. Alg. 1) and its per-report budget, the summary reports are "
    "(eps*, delta*)-DP per (device, reporting origin, 10-minute window) (Cor. 4.6): each such unit contributes at "
    "most L0 non-zero values summing to at most L1; no per-device guarantee over several windows is claimed",
}


@dataclass(frozen=True)
class ClientJob:
    """Everything a run needs besides Beam's own options."""

    client_name: str  # "ara" or "paa"
    inputs: tuple[ClientInput, ...]
    run: RunOptions
    limits: ContributionLimits
    reach_value: int | None  # PAA only
    public_key_file: str | None
    public_key: tuple[str, bytes] | None  # (key id, raw X25519 public key)

    def client(self) -> SummaryClient:
        if self.client_name == "ara":
            return AraSummaryClient(self.limits)
        return PaaSummaryClient(ReachCounting(self.reach_value), self.limits)


def _add_common(parser: common.CliParser, unit: str) -> None:
    budget = parser.add_argument_group("budgets (Alg. 2 and 3 Params)")
    budget.add_argument("--l0", type=POSITIVE_INTEGER, default=DEFAULT_L0,
                        help=f"Lambda_0: non-zero contributions per {unit} (default {DEFAULT_L0})")
    budget.add_argument("--l1", type=POSITIVE_INTEGER, default=DEFAULT_L1,
                        help=f"Lambda_1: sum of contributed values per {unit} (default {DEFAULT_L1})")
    run = parser.add_argument_group("run")
    run.add_argument("--public-key", metavar="LOCATION", type=location,
                     help="encrypt payloads (HPKE) to the key file ({\"keys\": [{\"id\", \"key\"}]}) at this location: "
                     "a path, a Beam file system URL (gs://...) or env:NAME")
    run.add_argument("--key-id", help="the key of --public-key to use when it holds several")
    add_run_options(run, seed_help="seeded report ids and delays for simulation and tests")


def build_parser() -> common.CliParser:
    parser = common.CliParser(
        beam_options=True,
        prog="python -m pipelines.summary_client",
        description="The browser clients that send aggregatable reports (Ghazi et al. Sec. 2.1), simulated per device.",
    )
    sub = parser.add_subparsers(dest="client", required=True, metavar="CLIENT")
    ara = sub.add_parser("ara", beam_options=True, help="ARA-SR-Client (Alg. 2): sources and triggers in, one report per trigger",
                         description="ARA-SR-Client (Ghazi et al. Alg. 2): sources and triggers in, one report per trigger.")
    ara.add_argument("--sources", required=True, type=location,
                     help="file or glob of ARA sources (Avro, JSON Lines, delimited protobuf)")
    ara.add_argument("--triggers", required=True, type=location, help="file or glob of ARA triggers")
    _add_common(ara, "source")
    paa = sub.add_parser("paa", beam_options=True, help="PAA-SR-Client (Alg. 3): ad events in, one report per event",
                         description="PAA-SR-Client (Ghazi et al. Alg. 3) with the reach-counting shared-storage function: "
                         "ad events in, one report per event.")
    paa.add_argument("--events", required=True, type=location, help="file or glob of PAA ad events")
    paa.add_argument("--reach-value", type=POSITIVE_INTEGER, default=DEFAULT_REACH_VALUE,
                     help=f"value of a campaign's first sighting on a device, in [1, L1] (default {DEFAULT_REACH_VALUE})")
    _add_common(paa, "(device, reporting origin, 10-minute window)")
    return parser


def _public_key(path: str | None, key_id: str | None) -> tuple[str, bytes] | None:
    if path is None:
        if key_id is not None:
            raise common.CliError("--key-id needs --public-key")
        return None
    try:  # a public key, read from any location a secret may be at (a path, a Beam file system URL, env:NAME)
        keys = parse_key_file(read_secret(path), repr(path))
    except (SecretUnavailable, ValueError) as error:
        raise common.CliError(f"public key: {error}") from None
    if key_id is None:
        if len(keys) != 1:
            raise common.CliError(f"key file {path!r} holds {len(keys)} keys: choose one with --key-id")
        key_id = next(iter(keys))
    if key_id not in keys:
        raise common.CliError(f"key file {path!r} has no key {key_id!r}")
    return key_id, keys[key_id]


def parse_job(argv: list[str] | None) -> tuple[ClientJob, list[str]]:
    """The job and the remaining (Beam) arguments; CliError for bad or inconsistent options."""
    args, beam_args = build_parser().parse_known_args(argv)
    if args.client == "ara":
        inputs = (ClientInput(args.sources, ARA_SOURCE, False), ClientInput(args.triggers, ARA_TRIGGER, True))
        reach_value = None
    else:
        inputs = (ClientInput(args.events, PAA_EVENT, True),)
        reach_value = args.reach_value
        if not 1 <= reach_value <= args.l1:
            raise common.CliError(f"--reach-value must be in [1, --l1 = {args.l1}], got {reach_value}")
    job = ClientJob(
        client_name=args.client,
        inputs=inputs,
        run=run_options(args, tuple(item.pattern for item in inputs)),
        limits=ContributionLimits(args.l0, args.l1),
        reach_value=reach_value,
        public_key_file=args.public_key,
        public_key=_public_key(args.public_key, args.key_id),
    )
    return job, beam_args


def build(pipeline: beam.Pipeline, job: ClientJob, output: str) -> None:
    """The job's graph: read and validate, replay every device's client, write reports, dead letters and the
    input report to ``output`` (the run's staging directory, ``pipelines.release``)."""
    options = job.run
    client = job.client()
    if options.streaming:
        if topics.all_topics_or_files({item.spec.name: item.pattern for item in job.inputs}):
            # the clients' event rows (event time from the records); dead letters of the topics
            rows, read_dead, input_files = topics.read_topic_rows(pipeline, [
                topics.topic_input(item.spec.name, item.pattern, item.spec, options, "summary_client")
                for item in job.inputs
            ], options)
        else:
            read = [
                pipeline | f"Read_{item.spec.name}" >> ReadEvents(item.pattern, item.spec, options.input_format)
                for item in job.inputs
            ]
            rows, read_dead, input_files = flatten_reads(read)
        replayed = rows | "Clients" >> SummaryReportsStreaming(
            client, noise_source(pipeline, options, "summary-client"), job.public_key, options.lateness_micros,
            topics.durable_step(pipeline, "devices"),  # the job's state store, when it reads topics locally
        )
        dead_letters = (read_dead, replayed[DEAD_LETTERS]) | "FlattenDead" >> beam.Flatten()
    else:
        replayed = pipeline | "Clients" >> SummaryReportsBatch(
            client, job.inputs, noise_source(pipeline, options, "summary-client"), job.public_key,
            options.input_format, options.shards
        )
        dead_letters, input_files = replayed[DEAD_LETTERS], replayed[INPUT_FILES]
    replayed[REPORTS] | "WriteReports" >> WriteRecords(
        f"{output}/reports", "avro", "aggregatable_report", num_shards=options.output_shards
    )
    if options.output_topic:
        # each report as Avro (single-object encoding), keyed by its reporting origin, with its report id
        topics.write_topic(replayed[REPORTS], options.output_topic, options,
                           lambda record: avro_single_object("aggregatable_report", record),
                           lambda record: json.loads(record["shared_info"])["reporting_origin"],
                           lambda record: json.loads(record["shared_info"])["report_id"], "SendReports")
    topics.write_diagnostics(dead_letters, input_files, output, options)


def summarise(job: ClientJob, result, elapsed_seconds: float, input_counts: dict) -> dict:
    """summary.json: parameters, randomness, guarantee, and counts (reports read back from the files)."""
    output = job.run.output
    client_counts = common.counters(result, METRICS_NAMESPACE)
    reports = null_reports = 0
    for report in common.output_records(output, "reports"):  # exact, whatever the runner's counters say
        reports += 1
        if job.public_key is None:
            null_reports += not decode_payload(report["payload"])
    if job.public_key is not None:  # encrypted: the counters (exact in batch)
        null_reports = client_counts.get("null_reports", 0)
    parameters = {
        "client": job.client_name,
        "algorithm": ALGORITHMS[job.client_name],
        **{item.spec.name: item.pattern for item in job.inputs},
        **job.run.parameters(),
        "l0": job.limits.l0,
        "l1": job.limits.l1,
        "payload": "encrypted (HPKE)" if job.public_key else "clear text",
        "public_key_file": job.public_key_file,
        "key_id": job.public_key[0] if job.public_key else None,
    }
    if job.client_name == "paa":
        parameters.update(shared_storage_function="reach counting", reach_value=job.reach_value, window_minutes=10)
    return {
        "pipeline": "summary_client",
        "parameters": parameters,
        "privacy": GUARANTEES[job.client_name],
        "counts": {
            **input_counts,
            "devices_replayed": client_counts.get("devices_replayed"),
            "reports": reports,
            "null_reports": null_reports,
        },
        "counters_note": "Beam counters under-report on the streaming DirectRunner; report counts come from the files "
        "(null reports too, unless the payloads are encrypted)." if job.run.streaming else None,
        "elapsed_seconds": round(elapsed_seconds, 3),
        "outputs": {prefix: common.output_files(output, prefix) for prefix in OUTPUT_PREFIXES} | common.diagnostic_files(output),
    }


def run(job: ClientJob, beam_args: list[str]) -> dict:
    """Runs the job to completion and returns (and writes) its summary."""
    where = topics.inputs_text([item.pattern for item in job.inputs], job.run.input_format)
    common.prepare_output(job.run.output, OUTPUT_PREFIXES)
    print(f"summary client {job.client_name}: {where}, {ALGORITHMS[job.client_name]}, "
          f"L0 = {job.limits.l0}, L1 = {job.limits.l1}", flush=True)
    return release.execute(job, beam_args, build, summarise, name="summary_client", streaming=job.run.streaming,
                           output=job.run.output, max_error_fraction=job.run.max_error_fraction)


def report_lines(job: ClientJob, summary: dict) -> list[str]:
    counts, parameters = summary["counts"], summary["parameters"]
    payload = parameters["payload"] + (f" to key {parameters['key_id']}" if parameters["key_id"] else "")
    return [
        f"{parameters['algorithm']}: {summary['privacy']}",
        f"report ids and delays: {parameters['noise_source']}; payloads: {payload}",
        f"read {counts['read']}, parsed {counts['parsed']}, {common.dead_letters_text(counts)}",
        f"reports {counts['reports']} (null {counts['null_reports']})",
        *common.output_lines(summary),
    ]


def main(argv: list[str] | None = None) -> int:
    return common.cli_main(argv, parse_job, run, report_lines)


if __name__ == "__main__":
    common.run_imported("pipelines.summary_client")
