"""The report collector: aggregatable reports from a topic into the Aggregation Service's batch layout.

    python -m pipelines.collect_reports --input kafka://HOST:PORT/TOPIC[?group=G&stop=end] --output DIR
        [--allowed-lateness-seconds 3600] [--kafka-config KEY=VALUE ...] [--progress-seconds 5]

Reads the reports the summary-report clients send to a topic (``pipelines.summary_client --output-topic``: Avro
single-object messages of ``{payload, key_id, shared_info}``) and writes, for each reporting origin and hour of
scheduled report time, ``DIR/<origin host>/<YYYY-MM-DDTHH>/reports.avro``, once the latest scheduled report time
seen has passed the hour's end plus the allowed lateness (``transforms.summary_reports.collector``): each file is
written whole (a temporary file renamed), then recorded in ``DIR/manifest.jsonl`` (origin, hour, path, reports),
then the offsets up to the oldest report still held in an open hour are committed, so nothing is lost or written
twice by a crash. Late reports, duplicates (by report id) and messages that are not reports go to
``DIR/dead_letters.jsonl`` with their reason. ``pipelines.aggregate --reports 'DIR/<origin host>/*/reports.avro'``
then batches them as the service would. SIGINT or SIGTERM (or ``stop=end``) closes every open hour, commits and
exits 0 with ``DIR/summary.json``.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

from pipelines import common
from schemas.messages import decode_avro_message
from schemas.option_values import NONNEGATIVE_INTEGER, POSITIVE_REAL
from schemas.rows import DeadLetter
from transforms.core.bus.consumer import assigned_consumer, read_to_end
from transforms.core.bus.endpoints import EndpointError, KafkaTopic, parse_endpoint, parse_kafka_config
from transforms.core.io import write_shard_file
from transforms.core.progress import ProgressLine
from transforms.summary_reports.collector import SECONDS_PER_HOUR, OpenHour, ReportBatches

SCHEMA = "aggregatable_report"


def build_parser() -> argparse.ArgumentParser:
    parser = common.CliParser(prog="python -m pipelines.collect_reports", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="the topic of aggregatable reports (kafka://HOST:PORT/TOPIC)")
    parser.add_argument("--output", required=True, help="the batch layout's root directory")
    parser.add_argument("--allowed-lateness-seconds", type=NONNEGATIVE_INTEGER, default=3600,
                        help="how long after an hour's end its reports are still accepted (default 3600)")
    parser.add_argument("--progress-seconds", type=POSITIVE_REAL, default=5.0,
                        help="at most one progress line this often (default 5)")
    parser.add_argument("--kafka-config", metavar="KEY=VALUE", action="append", default=[],
                        help="a librdkafka property (repeat for several)")
    return parser


def _topic(args: argparse.Namespace) -> KafkaTopic:
    try:
        topic = parse_endpoint(args.input, parse_kafka_config(args.kafka_config))
    except EndpointError as error:
        raise common.CliError(str(error)) from None
    if not isinstance(topic, KafkaTopic):
        raise common.CliError("--input: the collector reads kafka:// topics")
    return topic


def _hour_folder(output: Path, hour: OpenHour) -> Path:
    host = urlsplit(hour.origin).netloc or hour.origin
    stamp = datetime.fromtimestamp(hour.hour * SECONDS_PER_HOUR, tz=timezone.utc).strftime("%Y-%m-%dT%H")
    return output / host.replace(":", "_") / stamp


def _close(output: Path, hours: list[OpenHour], manifest) -> int:
    """Write each hour's reports as one Avro file and record it in the manifest; the reports written."""
    written = 0
    for hour in hours:
        folder = _hour_folder(output, hour)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "reports.avro"
        if path.exists():  # an hour reopened by reports that came after it was closed in an earlier run
            path = folder / f"reports-{int(time.time() * 1000)}.avro"
        write_shard_file(str(path), hour.records, "avro", SCHEMA)
        manifest.write(json.dumps({"origin": hour.origin, "hour": hour.hour * SECONDS_PER_HOUR,
                                   "path": str(path), "reports": len(hour.records)}) + "\n")
        manifest.flush()
        written += len(hour.records)
    return written


def run(args: argparse.Namespace) -> dict:
    """Collect until stopped (or until the topic's end with ``stop=end``); the summary."""
    try:
        from confluent_kafka import TopicPartition
    except ImportError:
        raise common.CliError("the collector needs confluent-kafka: pip install 'privacy-measurement-beam[kafka]'") from None
    topic = _topic(args)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    try:
        consumer, positions = assigned_consumer(topic, "pm-beam-collect-reports")
    except ValueError as error:
        raise common.CliError(str(error)) from None
    batches = ReportBatches(args.allowed_lateness_seconds)
    stopping = []
    previous = {signum: signal.signal(signum, lambda *_: stopping.append(True)) for signum in (signal.SIGINT, signal.SIGTERM)}
    progress = ProgressLine(args.progress_seconds)
    read = dead = written = files = 0
    dead_by_reason: dict[str, int] = {}
    started = time.monotonic()
    with open(output / "manifest.jsonl", "a") as manifest, open(output / "dead_letters.jsonl", "a") as dead_file:
        def settle(hours: list[OpenHour]) -> None:
            nonlocal written, files
            if hours:
                written += _close(output, hours, manifest)
                files += len(hours)
            offsets = [TopicPartition(topic.topic, p, o) for p, o in batches.committable().items()]
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)

        try:
            while not stopping:
                messages = consumer.consume(10_000, timeout=0.2)
                for message in messages:
                    if message.error() is not None:
                        continue
                    read += 1
                    positions[message.partition()] = message.offset() + 1
                    batches.read(message.partition(), message.offset())
                    where = f"{topic.uri}/{message.partition()}@{message.offset()}"
                    record = decode_avro_message(SCHEMA, message.value() or b"", where)
                    reason = record.reason if type(record) is DeadLetter else batches.add(
                        record, message.partition(), message.offset())
                    if reason is not None:
                        dead += 1
                        dead_by_reason[reason] = dead_by_reason.get(reason, 0) + 1
                        letter = record if type(record) is DeadLetter else DeadLetter(
                            raw=json.dumps({**record, "payload": record["payload"].hex()}), reason=reason, source=where)
                        dead_file.write(json.dumps(letter._asdict()) + "\n")
                settle(batches.due())
                watermark = batches.watermark
                progress({"read": read, "dead_lettered": dead, "lag_micros": 0,
                          "watermark_micros": None if watermark is None else watermark * 1_000_000})
                if not messages and topic.stop == "end" and all(
                        read_to_end(consumer, topic.topic, partition, position) for partition, position in positions.items()):
                    break
            settle(batches.due(everything=True))
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            consumer.close()
    summary = {
        "pipeline": "collect_reports", "status": "ok",
        "parameters": {"input": args.input, "output": str(output),
                       "allowed_lateness_seconds": args.allowed_lateness_seconds},
        "counts": {"read": read, "reports_written": written, "files": files, "dead_lettered": dead,
                   "dead_lettered_by_reason": dead_by_reason},
        "elapsed_seconds": round(time.monotonic() - started, 3),
        "outputs": {"manifest": str(output / "manifest.jsonl"), "dead_letters": str(output / "dead_letters.jsonl")},
    }
    summary["outputs"]["summary"] = common.write_summary(str(output), summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    common.configure_logging()
    try:
        args = build_parser().parse_args(argv)
        summary = run(args)
    except common.InputError as error:
        return common.fail(error)
    counts = summary["counts"]
    print(f"collected {counts['reports_written']:,} reports into {counts['files']:,} hour files; read {counts['read']:,}, "
          f"{common.dead_letters_text(counts)}")
    common.print_lines(common.output_lines(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
