"""Beam wiring of the Aggregation Service (seed 000 Alg. 1, the service half of Alg. 6).

    report files ─ ParseReports (one call per file: Avro records, shared_info validated, payloads decrypted
        and decoded) ─► (report shard, packed [ReportEntry]) ─ GroupByKey ─► SumShard: duplicate report ids
        dropped (the first by file and position kept), contributions of the requested filtering ids summed
        ─► (bucket shard, packed {bucket: sum})
    per-file and per-shard counts ─ CombineGlobally ─┐
    budget unit groups ───────────── CombineGlobally ─┴─► Charge (one call: the error threshold, then the ledger,
                                                          all or nothing) ─► receipt
    domain files ─ ParseDomain ─► (bucket shard, packed [bucket])
    sums + domain ─ GroupByKey ─► Release (receipt as side input: nothing is drawn or released unless the
                                  receipt says the budget was charged) ─► facts (and debug rows)

Elements are fat (a file's or a shard's worth), so Beam's per-element cost is paid per shard, not per report
(DESIGN.md, "Performance shape"). Nothing here is order dependent: duplicates keep the report that comes first
by (file path, record position), and the noise of a seeded run is keyed by (job id, bucket shard).
"""
from __future__ import annotations

import base64
import json
import pickle
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import apache_beam as beam
import fastavro
from apache_beam.io import fileio

from schemas.aggregatable import (
    PayloadDecrypter,
    ReportError,
    bucket_from_bytes,
    decode_payload,
    parse_shared_info,
)
from schemas.rows import DeadLetter
from transforms.io import DEAD_LETTERS
from transforms.ledger import LedgerError, LedgerLimits, open_ledger
from transforms.mechanisms.aggregation import AggregationParams, aggregate, budget_units, report_unit_group
from transforms.mechanisms.noise import RandomSource
from transforms.mechanisms.privacy_filter import epsilon_units

REPORT_SHARDS = 16
BUCKET_SHARDS = 16
MAX_REPORT_AGE_SECONDS = 90 * 24 * 3600
STATS, GROUPS = "stats", "groups"
DUPLICATE, NOT_DEBUG = "duplicate_report_id", "not_debug_report"
# Reasons that are not errors of the reports (they do not count towards the job's error threshold).
NOT_ERRORS = (DUPLICATE, NOT_DEBUG)
_SUMS, _DOMAIN = 0, 1


@dataclass(frozen=True)
class AggregationJob:
    """Everything a run needs that the workers see (picklable)."""

    params: AggregationParams
    job_id: str
    filtering_ids: tuple[int, ...] = (0,)
    ledger_url: str | None = None  # None: a debug run, which charges no budget
    limits: LedgerLimits | None = None
    private_keys: dict = field(default_factory=dict)  # key id -> raw X25519 private key; empty: clear-text payloads
    now_seconds: int = 0  # reports scheduled before now - 90 days are too old
    error_threshold: float = 0.10
    debug: bool = False  # only debug-mode reports; a debug output; no ledger
    noise: bool = True


class ReportColumns:
    """The valid reports of one file that belong to one report shard, column by column: enough to deduplicate,
    sum, charge and dead-letter them. Columns of ints and strings pickle far faster than a tuple per report, and
    a report's budget unit group is the same tuple object as its neighbours', which pickle stores once."""

    __slots__ = ("path", "report_ids", "positions", "groups", "ends", "buckets", "values")

    def __init__(self, path: str) -> None:
        self.path = path
        self.report_ids: list[str] = []
        self.positions: list[int] = []
        self.groups: list[tuple] = []  # ``report_unit_group`` of each report
        self.ends: list[int] = []  # report i holds contributions ends[i - 1]:ends[i]
        self.buckets: list[int] = []
        self.values: list[int] = []

    def add(self, report_id: str, position: int, group: tuple, contributions: list[tuple[int, int]]) -> None:
        self.report_ids.append(report_id)
        self.positions.append(position)
        self.groups.append(group)
        for bucket, value in contributions:
            self.buckets.append(bucket)
            self.values.append(value)
        self.ends.append(len(self.buckets))

    def rows(self) -> Iterator[tuple[str, tuple[str, int], tuple, int, int]]:
        """(report id, (path, position), group, first contribution, end of its contributions) per report."""
        start = 0
        for report_id, position, group, end in zip(self.report_ids, self.positions, self.groups, self.ends):
            yield report_id, (self.path, position), group, start, end
            start = end

    def __getstate__(self):
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)


def _pack(value) -> bytes:
    """One pickled blob: Beam moves and sizes it as one object, however many reports it holds."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


_unpack = pickle.loads


def report_shard(report_id: str) -> int:
    return zlib.crc32(report_id.encode("ascii")) % REPORT_SHARDS


def bucket_shard(bucket: int) -> int:
    return bucket % BUCKET_SHARDS


def _raw_report(record) -> str:
    """A report as dead-letter text: its fields as JSON, the payload in base64."""
    if type(record) is not dict:
        return repr(record)[:10_000]
    return json.dumps({name: base64.b64encode(v).decode() if isinstance(v, bytes) else v for name, v in record.items()},
                      default=repr)


class _ParseReportsFn(beam.DoFn):
    """One report file: every record validated up to its payload and routed to the shard of its report id."""

    def __init__(self, job: AggregationJob) -> None:
        self._job = job

    def setup(self) -> None:
        self._decrypter = PayloadDecrypter(self._job.private_keys) if self._job.private_keys else None

    def process(self, readable: fileio.ReadableFile):
        path = readable.metadata.path
        decrypter = self._decrypter
        job = self._job
        oldest = job.now_seconds - MAX_REPORT_AGE_SECONDS
        wanted = frozenset(job.filtering_ids)
        shards: dict[int, ReportColumns] = {}
        groups: dict[tuple, tuple] = {}  # one tuple object per group, so pickling stores it once
        stats: Counter = Counter()
        with readable.open() as handle:
            for position, record in enumerate(_avro_records(handle, path)):
                stats["read"] += 1
                if isinstance(record, DeadLetter):
                    stats["dead_lettered:" + record.reason] += 1
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, record)
                    continue
                try:
                    payload, key_id, text = _report_fields(record)
                    info = parse_shared_info(text)
                    if info.scheduled_report_time < oldest:
                        raise ReportError("report_too_old")
                    if job.debug and not info.debug_mode:
                        raise ReportError(NOT_DEBUG)
                    contributions = decode_payload(payload if decrypter is None else decrypter.decrypt(payload, text, key_id))
                except ReportError as error:
                    stats["dead_lettered:" + error.reason] += 1
                    letter = DeadLetter(_raw_report(record), error.reason, f"{path}#{position}")
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
                    continue
                group = report_unit_group(info)
                group = groups.setdefault(group, group)
                kept = [(bucket, value) for bucket, value, filtering_id in contributions if filtering_id in wanted]
                stats["contributions_other_filtering_ids"] += len(contributions) - len(kept)
                shard = report_shard(info.report_id)
                columns = shards.get(shard)
                if columns is None:
                    columns = shards[shard] = ReportColumns(path)
                columns.add(info.report_id, position, group, kept)
        for shard, columns in shards.items():
            yield shard, _pack(columns)
        yield beam.pvalue.TaggedOutput(STATS, dict(stats))


def _avro_records(handle, path: str) -> Iterator:
    """The records of an Avro file; a corrupt header or block ends the file with one ``malformed_avro`` dead letter."""
    index = 0
    try:
        for record in fastavro.reader(handle):
            yield record
            index += 1
    except Exception as error:  # noqa: BLE001 - fastavro raises many types for corrupt input
        yield DeadLetter(f"{type(error).__name__}: {error}", "malformed_avro", f"{path}#{index}")


def _report_fields(record) -> tuple[bytes, str, str]:
    if type(record) is not dict:
        raise ReportError("malformed_report")
    payload, key_id, text = record.get("payload"), record.get("key_id", ""), record.get("shared_info")
    if type(payload) is not bytes:
        raise ReportError("missing_field:payload" if payload is None else "invalid_field:payload")
    if type(text) is not str:
        raise ReportError("missing_field:shared_info" if text is None else "invalid_field:shared_info")
    if type(key_id) is not str:
        raise ReportError("invalid_field:key_id")
    return payload, key_id, text


class _SumShardFn(beam.DoFn):
    """One report shard: the first report of each report id kept (by file path, then position), contributions
    summed per bucket."""

    def process(self, element):
        _, packed = element
        chunks: list[ReportColumns] = [_unpack(chunk) for chunk in packed]
        first: dict[str, tuple[str, int]] = {}
        for chunk in chunks:
            for report_id, place, _, _, _ in chunk.rows():
                seen = first.get(report_id)
                if seen is None or place < seen:
                    first[report_id] = place
        sums: dict[int, int] = {}
        groups: set[tuple] = set()
        stats: Counter = Counter()
        for chunk in chunks:
            buckets, values = chunk.buckets, chunk.values
            for report_id, place, group, start, end in chunk.rows():
                if first[report_id] != place:
                    stats["dead_lettered:" + DUPLICATE] += 1
                    kept = "{}#{}".format(*first[report_id])
                    raw = json.dumps({"report_id": report_id, "kept": kept})
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(raw, DUPLICATE, "{}#{}".format(*place)))
                    continue
                stats["aggregated_reports"] += 1
                stats["contributions"] += end - start
                groups.add(group)
                for index in range(start, end):
                    sums[buckets[index]] = sums.get(buckets[index], 0) + values[index]
        by_shard: dict[int, dict[int, int]] = {}
        for bucket, total in sums.items():
            by_shard.setdefault(bucket_shard(bucket), {})[bucket] = total
        for shard, part in by_shard.items():
            yield shard, (_SUMS, _pack(part))
        yield beam.pvalue.TaggedOutput(GROUPS, _pack(groups))
        yield beam.pvalue.TaggedOutput(STATS, dict(stats))


class _ParseDomainFn(beam.DoFn):
    """One domain file (Avro ``AggregationBucket`` records, or text with one bucket per line, decimal or 0x-hex)."""

    def process(self, readable: fileio.ReadableFile):
        path = readable.metadata.path
        shards: dict[int, list[int]] = {}
        with readable.open() as handle:
            records = _avro_records(handle, path) if path.endswith(".avro") else _text_lines(handle, path)
            for position, record in enumerate(records):
                if isinstance(record, DeadLetter):
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, record)
                    continue
                try:
                    bucket = _domain_bucket(record)
                except ReportError as error:
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(_raw_report(record) if type(record) is dict
                                                                             else str(record), error.reason,
                                                                             f"{path}#{position}"))
                    continue
                shards.setdefault(bucket_shard(bucket), []).append(bucket)
        for shard, buckets in shards.items():
            yield shard, (_DOMAIN, _pack(buckets))


def _text_lines(handle, path: str) -> Iterator[str]:
    for line in handle:
        text = line.decode("utf-8", errors="replace").strip()
        if text:
            yield text


def _domain_bucket(record) -> int:
    if type(record) is dict:
        return bucket_from_bytes(record.get("bucket"))
    try:
        bucket = int(record, 16) if record.lower().startswith("0x") else int(record, 10)
    except ValueError:
        raise ReportError("malformed_bucket") from None
    if not 0 <= bucket < 2**128:
        raise ReportError("malformed_bucket")
    return bucket


def _merge_stats(stats: Iterable[dict]) -> dict:
    total: Counter = Counter()
    for part in stats:
        total.update(part)
    return dict(total)


def _union(packed_groups: Iterable[bytes]) -> bytes:
    """The union of packed sets, packed (a side input of one blob is cheap for the runner to size)."""
    merged: set = set()
    for part in packed_groups:
        merged |= _unpack(part)
    return _pack(merged)


def error_count(stats: dict) -> int:
    """Dead letters that are errors of the reports (duplicates and non-debug reports of a debug run are not)."""
    return sum(count for name, count in stats.items()
               if name.startswith("dead_lettered:") and name.split(":", 1)[1] not in NOT_ERRORS)


def charge(job: AggregationJob, stats: dict, groups: set) -> dict:
    """The receipt of a job: the error threshold checked first, then the ledger charged (all or nothing).

    ``status`` is ``ok`` (``charge``: ``charged``, ``already_charged`` or ``none`` for a debug run) or
    ``failed`` with a ``code`` and a ``message``; nothing is released unless it is ``ok``.
    """
    errors, read = error_count(stats), stats.get("read", 0)
    receipt = {"job_id": job.job_id, "stats": stats, "errors": errors}
    if read and errors > job.error_threshold * read:
        return dict(receipt, status="failed", code="REPORTS_WITH_ERRORS_EXCEEDED_THRESHOLD",
                    message=f"{errors} of {read} reports have errors ({errors / read:.1%}), more than the threshold "
                            f"{job.error_threshold:.1%}; no budget was spent")
    if job.ledger_url is None:
        return dict(receipt, status="ok", charge="none", units=0)
    units = budget_units(groups, job.filtering_ids)
    try:
        with open_ledger(job.ledger_url, job.limits) as ledger:
            outcome = ledger.charge(job.job_id, epsilon_units(job.params.epsilon, "up"), units)
    except LedgerError as error:
        details = {name: value for name, value in vars(error).items() if isinstance(value, (int, str, tuple, list))}
        return dict(receipt, status="failed", code=error.code, message=str(error), details=details)
    return dict(receipt, status="ok", charge=outcome.status, units=outcome.units)


class _ReleaseFn(beam.DoFn):
    """One bucket shard: Alg. 1's noisy summation, drawn only after the receipt says the budget was charged."""

    def __init__(self, job: AggregationJob, source: RandomSource) -> None:
        self._job = job
        self._source = source

    def process(self, element, receipt):
        if receipt["status"] != "ok":
            return
        shard, parts = element
        sums: dict[int, int] = {}
        domain: list[int] = []
        for kind, packed in parts:
            if kind == _SUMS:
                for bucket, total in _unpack(packed).items():
                    sums[bucket] = sums.get(bucket, 0) + total
            else:
                domain.extend(_unpack(packed))
        source = self._source.keyed_child(("aggregation", self._job.job_id, shard)) if self._job.noise else None
        yield from aggregate(self._job.params, sums, domain, source)


class Aggregate(beam.PTransform):
    """Summary reports from aggregatable report files (and an output domain): outputs ``outcomes``
    (``BucketOutcome`` of every candidate key; the released ones are the summary report), ``receipt`` (one dict)
    and ``dead_letters``."""

    def __init__(self, job: AggregationJob, reports: str, domain: str | None, source: RandomSource) -> None:
        super().__init__()
        self._job = job
        self._reports = reports
        self._domain = domain
        self._source = source

    def expand(self, pbegin):
        job = self._job
        parsed = (
            pbegin
            | "MatchReports" >> fileio.MatchFiles(self._reports, empty_match_treatment="DISALLOW")
            | "ReadReports" >> fileio.ReadMatches()
            | "ParseReports" >> beam.ParDo(_ParseReportsFn(job)).with_outputs(DEAD_LETTERS, STATS, main="entries")
        )
        # parsed.entries: (report shard, packed ReportColumns)
        summed = (
            parsed.entries
            | "GroupReports" >> beam.GroupByKey()
            | "SumShards" >> beam.ParDo(_SumShardFn()).with_outputs(DEAD_LETTERS, STATS, GROUPS, main="sums")
        )
        # summed.sums: (bucket shard, (_SUMS, packed {bucket: sum}))
        stats = (
            (parsed[STATS], summed[STATS]) | "AllStats" >> beam.Flatten() | "MergeStats" >> beam.CombineGlobally(_merge_stats)
        )
        groups = summed[GROUPS] | "MergeGroups" >> beam.CombineGlobally(_union)
        receipt = (
            pbegin
            | "Once" >> beam.Create([None])
            | "Charge" >> beam.Map(lambda _, s, g: charge(job, s, _unpack(g)), beam.pvalue.AsSingleton(stats),
                                   beam.pvalue.AsSingleton(groups))
        )
        keyed = [summed.sums]
        dead = [parsed[DEAD_LETTERS], summed[DEAD_LETTERS]]
        if self._domain is not None:
            domain = (
                pbegin
                | "MatchDomain" >> fileio.MatchFiles(self._domain, empty_match_treatment="DISALLOW")
                | "ReadDomain" >> fileio.ReadMatches()
                | "ParseDomain" >> beam.ParDo(_ParseDomainFn()).with_outputs(DEAD_LETTERS, main="buckets")
            )
            keyed.append(domain.buckets)
            dead.append(domain[DEAD_LETTERS])
        outcomes = (
            keyed
            | "AllKeyed" >> beam.Flatten()
            | "GroupBuckets" >> beam.GroupByKey()
            | "Release" >> beam.ParDo(_ReleaseFn(job, self._source), beam.pvalue.AsSingleton(receipt))
        )
        return {
            "outcomes": outcomes,
            "receipt": receipt,
            DEAD_LETTERS: dead | "AllDeadLetters" >> beam.Flatten(),
        }

