"""Synthetic aggregatable reports and an output domain, to try and benchmark the Aggregation Service directly.

    python -m pipelines.generate reports --output DIR [--reports 200000] [--contributions 5] [--buckets 100000]
        [--domain-buckets 100000] [--domain-overlap 0.9] [--pad-to 20] [--public-key KEYFILE] [--seed 0]
        [--shards 4] [--bad-fraction 0] [--now SECONDS]

Model (what the ARA and PAA clients send, without simulating devices): a daily batch of one ad-tech (the
reporting origin): every report is an Attribution Reporting report about one of 100 advertiser destinations,
scheduled at a uniform time in the 24 hours before ``--now`` (so a job charges 100 x 24 budget units); it
holds ``--contributions`` contributions to buckets drawn uniformly from
``--buckets`` distinct random 128-bit keys, each of value uniform in [1, L1 / contributions] (so the report
respects L1 = 65536), padded with null contributions to ``--pad-to`` (Chrome pads to 20). The domain holds
``--domain-buckets`` keys: a share ``--domain-overlap`` of them are report buckets, the rest keys no report
holds. ``--bad-fraction`` of the records are broken (a malformed payload, shared_info that is not JSON, or a
duplicate of an earlier report id) so the dead-letter paths are exercised.

Writes ``DIR/reports-SSSSS-of-NNNNN.avro`` (``AggregatableReport``), ``DIR/domain.avro``
(``AggregationBucket``) and ``DIR/generation.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import fastavro
import numpy as np

from schemas.aggregatable import encode_payload, encrypt_payload, read_key_file, report_record, shared_info_json
from schemas.formats import load_avro_schema
from schemas.option_values import NONNEGATIVE_INTEGER, POSITIVE_INTEGER, PROBABILITY, SEED, Integer
from schemas.rows import API_ATTRIBUTION_REPORTING
from schemas.time_units import MAX_EVENT_TIME_MICROS, MICROS_PER_SECOND, SECONDS_PER_HOUR
from synthetic import files as datafiles
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L1

DATASET = "reports"
ORIGINS = 1
DESTINATIONS = 100
HOURS = 24
DEFAULT_NOW = 1_767_225_600  # 2026-01-01T00:00:00Z
# --now: every report is scheduled in the 24 hours before it, at or after 1970 and before 2100 (schemas.time_units)
NOW = Integer(HOURS * SECONDS_PER_HOUR, MAX_EVENT_TIME_MICROS // MICROS_PER_SECOND)
CHUNK = 20_000


@dataclass
class ReportStats:
    reports: int = 0
    contributions: int = 0
    bad_records: int = 0
    domain_buckets: int = 0
    files: tuple = ()


def _keys(rng: np.random.Generator, count: int) -> list[int]:
    """``count`` distinct random 128-bit keys."""
    keys: set[int] = set()
    while len(keys) < count:
        words = rng.integers(0, 2**64, size=(count - len(keys), 2), dtype=np.uint64)
        keys.update((int(hi) << 64) | int(lo) for hi, lo in words)
    return sorted(keys)


def generate_reports(out_dir: str | Path, *, reports: int = 200_000, contributions: int = 5, buckets: int = 100_000,
                     domain_buckets: int = 100_000, domain_overlap: float = 0.9, pad_to: int = 20,
                     public_key: tuple[str, bytes] | None = None, seed: int = 0, shards: int = 4,
                     bad_fraction: float = 0.0, now: int = DEFAULT_NOW, quiet: bool = False) -> ReportStats:
    """Write the dataset (see the module docstring) and return what was written."""
    if reports < 1 or buckets < 1 or shards < 1 or domain_buckets < 0:
        raise ValueError("--reports, --buckets and --shards must be >= 1 and --domain-buckets >= 0")
    if not 1 <= contributions <= pad_to:
        raise ValueError(f"--contributions must be in [1, --pad-to = {pad_to}], got {contributions}")
    if not 0 <= domain_overlap <= 1 or not 0 <= bad_fraction < 1:
        raise ValueError("--domain-overlap must be in [0, 1] and --bad-fraction in [0, 1)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("reports-*-of-*.avro"):
        stale.unlink()
    progress = datafiles.Progress(DATASET, not quiet)
    rng = np.random.default_rng(seed)
    keys = _keys(rng, buckets + domain_buckets)
    report_keys, outside = keys[:buckets], keys[buckets:]
    in_domain = min(buckets, round(domain_buckets * domain_overlap))
    domain = sorted(rng.choice(len(report_keys), size=in_domain, replace=False).tolist())
    domain_keys = [report_keys[i] for i in domain] + outside[: domain_buckets - in_domain]
    stats = ReportStats(domain_buckets=len(domain_keys))
    schema = load_avro_schema("aggregatable_report")
    paths = [out / f"reports-{shard:05d}-of-{shards:05d}.avro" for shard in range(shards)]
    with contextlib.ExitStack() as files:
        handles = [files.enter_context(open(path, "wb")) for path in paths]
        sync_marker = seed.to_bytes(16, "big")
        writers = [fastavro.write.Writer(handle, schema, sync_marker=sync_marker) for handle in handles]
        max_value = DEFAULT_L1 // contributions
        written_ids: list[str] = []
        for first in range(0, reports, CHUNK):
            size = min(CHUNK, reports - first)
            chunk_rng = np.random.default_rng([seed, first])
            bucket_index = chunk_rng.integers(0, buckets, size=(size, contributions))
            values = chunk_rng.integers(1, max_value + 1, size=(size, contributions))
            origin = chunk_rng.integers(0, ORIGINS, size=size)
            destination = chunk_rng.integers(0, DESTINATIONS, size=size)
            scheduled = now - chunk_rng.integers(1, HOURS * SECONDS_PER_HOUR + 1, size=size)
            ids = chunk_rng.integers(0, 2**64, size=(size, 2), dtype=np.uint64)
            broken = chunk_rng.random(size) < bad_fraction
            for i in range(size):
                rid = str(uuid.UUID(int=(int(ids[i, 0]) << 64) | int(ids[i, 1]), version=4))
                kind = int(ids[i, 0] % 3) if broken[i] else -1
                if kind == 2 and written_ids:
                    rid = written_ids[int(ids[i, 1] % len(written_ids))]  # a duplicate report id
                info = shared_info_json(api=API_ATTRIBUTION_REPORTING, report_id=rid,
                                        reporting_origin=f"https://adtech-{origin[i]}.test",
                                        attribution_destination=f"https://shop-{destination[i]}.test",
                                        scheduled_report_time=int(scheduled[i]))
                contributed = (report_keys[b] for b in bucket_index[i])
                payload = encode_payload(zip(contributed, values[i].tolist(), [0] * contributions, strict=True), pad_to=pad_to)
                if public_key is not None:
                    payload = encrypt_payload(payload, info, public_key[1])
                if kind == 0:
                    payload = payload[: len(payload) // 2]
                elif kind == 1:
                    info = info[:-1]
                if broken[i]:
                    stats.bad_records += 1
                else:
                    stats.reports += 1
                    stats.contributions += contributions
                    written_ids.append(rid)
                writers[(first + i) % shards].write(report_record(info, payload, public_key[0] if public_key else ""))
            progress(f"{first + size:,} of {reports:,} reports")
        for writer in writers:
            writer.flush()
    datafiles.write_domain(out / "domain.avro", domain_keys, sync_marker)
    stats.files = tuple(str(path) for path in paths) + (str(out / "domain.avro"),)
    parameters = {"reports": reports, "contributions": contributions, "buckets": buckets, "domain_buckets": domain_buckets,
                  "domain_overlap": domain_overlap, "pad_to": pad_to, "encrypted": public_key is not None, "seed": seed,
                  "shards": shards, "bad_fraction": bad_fraction, "now": now}
    model = {"origins": ORIGINS, "destinations": DESTINATIONS, "hours": HOURS, "l1": DEFAULT_L1}
    with open(out / "generation.json", "w", encoding="utf-8") as handle:
        json.dump({"dataset": DATASET, "parameters": parameters, "model": model, "stats": dataclasses.asdict(stats)},
                  handle, indent=2)
        handle.write("\n")
    return stats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    datafiles.add_output_argument(parser)
    parser.add_argument("--reports", type=POSITIVE_INTEGER, default=200_000,
                        help="reports written, --bad-fraction of them broken (default 200000)")
    parser.add_argument("--contributions", type=POSITIVE_INTEGER, default=5, help="contributions per report (default 5)")
    parser.add_argument("--buckets", type=POSITIVE_INTEGER, default=100_000, help="distinct report buckets (default 100000)")
    parser.add_argument("--domain-buckets", type=NONNEGATIVE_INTEGER, default=100_000,
                        help="buckets in the domain (default 100000)")
    parser.add_argument("--domain-overlap", type=PROBABILITY, default=0.9,
                        help="share of the domain that reports hold (default 0.9)")
    parser.add_argument("--pad-to", type=POSITIVE_INTEGER, default=20,
                        help="contributions per payload after padding (default 20)")
    parser.add_argument("--public-key", help="key file {\"keys\": [{\"id\", \"key\"}]}: encrypt payloads to its first key")
    parser.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    parser.add_argument("--shards", type=POSITIVE_INTEGER, default=4, help="report files (default 4)")
    parser.add_argument("--bad-fraction", type=datafiles.BAD_FRACTION, default=0.0,
                        help="fraction of broken records, in [0, 1) (default 0)")
    parser.add_argument("--now", type=NOW, default=DEFAULT_NOW,
                        help=f"reports are scheduled in the 24 hours before, in seconds (default {DEFAULT_NOW})")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run_cli(args: argparse.Namespace) -> int:
    public_key = None
    if args.public_key:
        public_key = next(iter(read_key_file(args.public_key).items()))
    stats = generate_reports(args.output, reports=args.reports, contributions=args.contributions, buckets=args.buckets,
                             domain_buckets=args.domain_buckets, domain_overlap=args.domain_overlap, pad_to=args.pad_to,
                             public_key=public_key, seed=args.seed, shards=args.shards, bad_fraction=args.bad_fraction,
                             now=args.now, quiet=args.quiet)
    print(f"generate reports: {stats.reports:,} reports ({stats.contributions:,} contributions), "
          f"{stats.bad_records:,} broken records, {stats.domain_buckets:,} domain buckets")
    for path in stats.files:
        print(f"  {path}")
    print(f"  summary: {Path(args.output) / 'generation.json'}")
    return 0
