"""The command-line options several pipelines share, declared once (DESIGN.md, "Command-line conventions").

``add_run_options`` declares, and ``run_options`` reads and checks, what every event pipeline has: the output
directory, the input format, the largest share of dead letters a run accepts, the seed (seeded randomness for
simulation and tests; secure by default), the
streaming recipe with its allowed lateness, and the device shards of the batch path. ``RunOptions`` carries them
into a job, with the few values derived from them that every pipeline needs.
"""
from __future__ import annotations

import argparse
import secrets
from dataclasses import dataclass, field

from pipelines.common import CliError, add_alias
from schemas.codecs import FORMATS
from schemas.option_values import NONNEGATIVE_INTEGER, POSITIVE_INTEGER, POSITIVE_REAL, PROBABILITY, SEED, location
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.bus.endpoints import EndpointError, is_bus, parse_kafka_config
from transforms.core.bus.kafka_stream import EMIT_SECONDS
from transforms.core.device_shards import DEFAULT_SHARDS
from transforms.core.durable.sqlite_store import sqlite_path
from transforms.core.durable.store import DEFAULT_STORE, STORE_ENVIRONMENT, StoreUnavailable, default_store
from transforms.core.noise_key import KEY_ENVIRONMENT, KeyLocation, resolve_key
from transforms.core.private_files import ACCEPT_OPTION, SharedFile, check_private
from transforms.core.secrets import SecretUnavailable
from transforms.core.urls import redact_url

OUTPUT_HELP = "output directory (local path or a Beam filesystem URL)"
DEFAULT_MAX_ERROR_FRACTION = 0.1  # DESIGN.md, "Command-line conventions"


@dataclass(frozen=True)
class RunOptions:
    """Where a run writes, how it reads, which randomness it uses and which recipe (batch or streaming) it runs."""

    output: str
    input_format: str | None
    seed: int | None
    streaming: bool
    allowed_lateness_seconds: int
    shards: int
    max_error_fraction: float = DEFAULT_MAX_ERROR_FRACTION
    output_topic: str | None = None  # a kafka:// topic that also receives the released records
    dead_letter_topic: str | None = None  # a kafka:// topic that also receives the dead letters
    kafka_config: tuple[tuple[str, str], ...] = ()  # librdkafka properties of --kafka-config
    progress_seconds: float = 5.0  # at most one progress line this often
    expansion_service: str | None = None  # HOST:PORT of a Kafka expansion service (kafka:// on other runners)
    timestamp_attribute: str | None = None  # pubsub://: the message attribute with the record's event time
    id_attribute: str | None = None  # pubsub://: the message attribute Pub/Sub deduplicates by
    state_store: str = DEFAULT_STORE  # where a local streaming job from topics keeps its state ("none": in memory)
    job_id: str | None = None  # the job whose state a run restores and continues (default: pipeline@group)
    snapshot_seconds: float = EMIT_SECONDS  # a live topic moves the watermark (a firing, a snapshot) at most this often
    noise_key: KeyLocation | None = None  # where the key every secure noise value is derived from is (never the key)
    state_key: KeyLocation | None = None  # the key of the state store's encryption (default: the noise key)
    accept_shared: bool = False  # open stores and keys that group or others may read (--accept-shared-files)
    metrics_port: int | None = None  # serve the run's Prometheus metrics on 127.0.0.1:PORT (a local streaming run)
    # this run's own nonce: the noise of a run that continues no durable job is derived from it (a new run, new noise)
    run_nonce: bytes = field(default_factory=lambda: secrets.token_bytes(16))

    @property
    def sealing_key(self) -> KeyLocation | None:
        """The key the state store is encrypted with: ``--state-key``, else the noise key."""
        return self.state_key or self.noise_key

    @property
    def noise_source(self) -> str:
        """``seeded`` or ``secure``: recorded in every summary (DESIGN.md, "Two kinds of randomness")."""
        return "seeded" if self.seed is not None else "secure"

    @property
    def lateness_micros(self) -> int:
        return self.allowed_lateness_seconds * MICROS_PER_SECOND

    @property
    def output_shards(self) -> int:
        """Shards per output: one file on the streaming DirectRunner (it would write one per bundle), else the
        runner's choice."""
        return 1 if self.streaming else 0

    def parameters(self) -> dict:
        """The summary's record of these options."""
        return {
            "output": self.output,
            "noise_source": self.noise_source,
            "seed": self.seed,
            "streaming": self.streaming,
            "allowed_lateness_seconds": self.allowed_lateness_seconds,
            "max_error_fraction": self.max_error_fraction,
            "output_topic": self.output_topic,
            "dead_letter_topic": self.dead_letter_topic,
            "state_store": redact_url(self.state_store),
            "job_id": self.job_id,
            "snapshot_seconds": self.snapshot_seconds,
            "noise_key": None if self.noise_key is None else {"location": self.noise_key.location,
                                                              "key_id": self.noise_key.key_id},
            "state_key_id": None if self.sealing_key is None else self.sealing_key.key_id,
        }


def add_run_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    seed_help: str,
    lateness_default: int = 0,
    lateness_help: str = "streaming: how late an event may arrive behind the watermark",
    shards: bool = True,
) -> None:
    """``--output``, ``--max-error-fraction``, ``--format`` (of the input files; ``--input-format`` is its
    deprecated spelling), ``--seed``, ``--streaming``, ``--allowed-lateness-seconds`` and (with ``shards``)
    ``--shards``; the topic options ``--output-topic``, ``--dead-letter-topic`` and ``--kafka-config``."""
    parser.add_argument("--output", required=True, type=location, help=OUTPUT_HELP)
    parser.add_argument("--max-error-fraction", type=PROBABILITY, default=DEFAULT_MAX_ERROR_FRACTION,
                        help="fail the run, releasing nothing, when more than this share of the records read are dead "
                        f"letters (default {DEFAULT_MAX_ERROR_FRACTION:g}); a truncated or unreadable file, or an input "
                        "without a valid record, always fails it")
    parser.add_argument("--format", dest="input_format", choices=FORMATS,
                        help="format of the input event files, as the generators write them (default: from each "
                        "file's extension)")
    add_alias(parser, "--input-format", "--format")
    parser.add_argument("--seed", type=SEED, help=f"{seed_help} (default: secure OS randomness)")
    parser.add_argument("--streaming", action="store_true", help="use the streaming recipe (stateful DoFns, event-time timers)")
    parser.add_argument("--allowed-lateness-seconds", type=NONNEGATIVE_INTEGER, default=lateness_default,
                        help=f"{lateness_help} (default {lateness_default})")
    parser.add_argument("--output-topic", metavar="URI",
                        help="also send the released records to this topic (kafka://HOST:PORT/TOPIC or "
                        "pubsub://projects/P/topics/T), each with a key and a stable id")
    parser.add_argument("--dead-letter-topic", metavar="URI", help="also send the dead letters to this topic")
    parser.add_argument("--progress-seconds", type=POSITIVE_REAL, default=5.0,
                        help="print a progress line (events read and per second, watermark, dead letters, outputs "
                        "written) at most this often (default 5)")
    parser.add_argument("--expansion-service", metavar="HOST:PORT",
                        help="kafka:// on Dataflow, Flink or a portable runner: the Kafka expansion service Beam's "
                        "Java KafkaIO is built through (default on the cluster of make flink-up: its own; docs/flink.md)")
    parser.add_argument("--timestamp-attribute", metavar="NAME",
                        help="pubsub://: the message attribute holding the record's event time")
    parser.add_argument("--id-attribute", metavar="NAME",
                        help="pubsub://: the message attribute Pub/Sub deduplicates redelivered messages by")
    parser.add_argument("--kafka-config", metavar="KEY=VALUE", action="append", default=[],
                        help="a librdkafka property for every kafka:// input and output (security.protocol, "
                        "sasl.mechanism...); repeat it for several; it wins over the URI's query parameters")
    parser.add_argument("--state-store", metavar="URI", default=default_store(),
                        help="streaming from topics on the local runner: where the job keeps its state and the input "
                        "offsets it reflects, so that a restart after a crash continues it (sqlite:///PATH or a path, "
                        "postgresql://USER@HOST:PORT/DB; none: in memory, lost with the process; default "
                        f"${STORE_ENVIRONMENT} or {DEFAULT_STORE}). Dataflow and Flink keep the state themselves")
    parser.add_argument("--job-id", metavar="ID",
                        help="the job a streaming run continues: its state in --state-store is restored and its topics "
                        "are read on from where that state stands; a second run of a running job id is refused "
                        "(default: PIPELINE@GROUP, the pipeline and the consumer group of its first topic)")
    parser.add_argument("--snapshot-seconds", type=POSITIVE_REAL, default=EMIT_SECONDS, metavar="S",
                        help="streaming from topics on the local runner: move the watermark of a live topic at most every "
                        "S seconds, and so fire the stateful steps and write their snapshot at most that often "
                        f"(default {EMIT_SECONDS:g}; larger: fewer snapshots, verdicts and reports later)")
    parser.add_argument("--metrics-port", type=NONNEGATIVE_INTEGER, metavar="PORT",
                        help="streaming from topics on the local runner: serve the run's Prometheus metrics on "
                        "http://127.0.0.1:PORT/metrics (0: a free port, printed); on Flink and Dataflow the same "
                        "counters are the runner's Beam metrics (docs/operations.md)")
    add_key_options(parser)
    if shards:
        parser.add_argument("--shards", type=POSITIVE_INTEGER, default=DEFAULT_SHARDS,
                            help=f"batch: device shards replayed per element (default {DEFAULT_SHARDS})")


def add_key_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, state: bool = True) -> None:
    """``--noise-key``, ``--state-key`` (with ``state``) and ``--accept-shared-files`` (docs/security.md)."""
    parser.add_argument("--noise-key", metavar="LOCATION",
                        help="the key every secure noise value is derived from (HKDF over the job and the step; no "
                        "store keeps a seed): a file readable by its owner only, env:NAME, or a Beam file system URL "
                        f"(default ${KEY_ENVIRONMENT}, else ~/.config/pm-beam/noise.key, created 0600 on first use)")
    if state:
        parser.add_argument("--state-key", metavar="LOCATION",
                            help="the key the state store's rows are encrypted with (AES-GCM), as --noise-key "
                            "(default: the noise key)")
    parser.add_argument(ACCEPT_OPTION, dest="accept_shared", action="store_true",
                        help="open a ledger, state store or key file that group or others may read (refused by "
                        "default: chmod 600 it)")


def key_location(location: str | None, accept_shared: bool, option: str = "--noise-key") -> KeyLocation:
    """A key option's ``KeyLocation``, its key read and checked now (the default key created on first use); a
    ``CliError`` naming the option when it cannot be read."""
    try:
        return resolve_key(location, accept_shared)
    except (SecretUnavailable, OSError) as error:
        raise CliError(f"{option}: {error}") from None


def check_store_file(uri: str, accept_shared: bool) -> None:
    """A ``CliError`` (exit 2) when the SQLite state store ``uri`` names exists readable by group or others."""
    if uri == "none" or uri.startswith(("postgresql://", "postgres://")):
        return
    try:
        check_private(sqlite_path(uri)[0], "the state store", accept_shared)
    except (SharedFile, StoreUnavailable) as error:
        raise CliError(str(error)) from None


def run_options(args: argparse.Namespace, inputs: tuple[str, ...] = ()) -> RunOptions:
    """The ``RunOptions`` of parsed arguments (each value was checked against its domain when parsed); a job
    with a topic among its ``inputs`` runs the streaming recipe."""
    shards = getattr(args, "shards", DEFAULT_SHARDS)
    try:
        kafka_config = parse_kafka_config(args.kafka_config)
    except EndpointError as error:
        raise CliError(str(error)) from None
    for option, uri in (("--output-topic", args.output_topic), ("--dead-letter-topic", args.dead_letter_topic)):
        if uri is not None and not is_bus(uri):
            raise CliError(f"{option} takes kafka://HOST:PORT/TOPIC or pubsub://projects/P/topics/T, got {uri!r}")
    streaming = args.streaming or any(is_bus(name) for name in inputs)
    if args.metrics_port is not None and not any(is_bus(name) for name in inputs):
        raise CliError("--metrics-port serves the metrics of a run reading topics (kafka://): these inputs are files")
    check_store_file(args.state_store, args.accept_shared)
    return RunOptions(args.output, args.input_format, args.seed, streaming, args.allowed_lateness_seconds, shards,
                      args.max_error_fraction, args.output_topic, args.dead_letter_topic, kafka_config,
                      args.progress_seconds, args.expansion_service, args.timestamp_attribute, args.id_attribute,
                      args.state_store, args.job_id, args.snapshot_seconds,
                      noise_key=key_location(args.noise_key, args.accept_shared),
                      state_key=None if args.state_key is None else key_location(args.state_key, args.accept_shared,
                                                                                 "--state-key"),
                      accept_shared=args.accept_shared, metrics_port=args.metrics_port)
