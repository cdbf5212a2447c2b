"""Beam wiring of the Aggregation Service (Ghazi et al. Alg. 1, the service half of Alg. 6).

    report files ─ ParseReports (one call per file: Avro records, shared_info validated, payloads decrypted,
        then decoded a batch at a time) ─► (report shard, packed ReportColumns)
        ─ GroupByKey ─► SumShard: duplicate report ids dropped (the first by file path and position kept),
        contributions summed per bucket ─► (bucket shard, packed KeyedSums)
    per-file and per-shard counts ─ CombineGlobally ─┐
    budget unit groups ───────────── CombineGlobally ─┴─► Charge (one call: the error threshold, then the
                                                          ledger, all or nothing) ─► receipt
    domain files ─ ParseDomain ─► (bucket shard, packed keys)
    sums + domain ─ GroupByKey ─► Release (the receipt as a side input: nothing is drawn or written unless it
                                  says the budget was charged) ─► one summary-report file per bucket shard

Elements are fat (a file's, a shard's worth), so Beam's per-element cost is paid per shard, not per report
(DESIGN.md, "Performance shape"), and contributions travel as numpy columns. Nothing is order dependent:
duplicates keep the report that comes first by (file path, record position), and the noise of a seeded run is
keyed by (job id, bucket shard).
"""
from __future__ import annotations

import base64
import json
import logging
import pickle
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
from apache_beam.io import fileio

from schemas.aggregatable import (
    BUCKET_BYTES,
    PayloadDecrypter,
    PayloadLimits,
    ReportError,
    bucket_from_bytes,
    decode_payloads,
    minimal_bucket_bytes,
    parse_key_file,
    parse_shared_info,
    report_fields,
)
from schemas.avro_files import open_avro
from schemas.codecs import FILE_FAILURES, MALFORMED_AVRO
from schemas.rows import DeadLetter
from schemas.time_units import SECONDS_PER_DAY
from transforms.core.io import DEAD_LETTERS, write_shard_file
from transforms.core.mechanisms.budget_units import epsilon_units
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.noise_key import KeyLocation
from transforms.core.secrets import SecretUnavailable, read_secret
from transforms.summary_reports.ledger import Ledger, LedgerError, LedgerLimits, open_ledger
from transforms.summary_reports.mechanisms.aggregation import (
    AggregationParams,
    KeyedSums,
    Outcomes,
    aggregate,
    budget_units,
    keys_of,
    report_hour,
    report_identity,
)

REPORT_SHARDS = 16
BUCKET_SHARD_BITS = 4
BUCKET_SHARDS = 1 << BUCKET_SHARD_BITS
DECODE_BATCH = 65_536  # reports decoded together (bounds a file's memory)
MAX_REPORT_AGE_SECONDS = 90 * SECONDS_PER_DAY
STATS, GROUPS, WRITTEN = "stats", "groups", "written"
DUPLICATE, NOT_DEBUG = "duplicate_report_id", "not_debug_report"
# Reasons that are not errors of the reports (they do not count towards the job's error threshold).
NOT_ERRORS = (DUPLICATE, NOT_DEBUG)
SUMMARY_PREFIX, DEBUG_PREFIX = "summary_report", "debug_summary_report"
_SUMS, _DOMAIN = 0, 1
_log = logging.getLogger("pmbeam.aggregation")  # progress lines, level INFO


@dataclass(frozen=True)
class AggregationJob:
    """Everything a run needs that the workers see (picklable)."""

    params: AggregationParams
    job_id: str
    filtering_ids: tuple[int, ...] = (0,)
    ledger_url: str | None = None  # None: a debug run, which charges no budget
    limits: LedgerLimits | None = None
    # where the workers read the key file of the HPKE private keys (transforms.core.secrets): never the keys
    # themselves, which would travel in the job's serialised graph; None: clear-text payloads
    private_key: str | None = None
    # where the noise key is (transforms.core.noise_key): a charged job's noise is derived from it, the job id and
    # the nonce of its first charge; None: no secure release (seeded, debug or local-test runs)
    noise_key: KeyLocation | None = None
    now_seconds: int = 0  # reports scheduled before now - 90 days are too old
    max_error_fraction: float = 0.10  # of the reports read (DESIGN.md, "Command-line conventions")
    debug: bool = False  # only debug-mode reports; a debug output; no ledger
    local_test: bool = False  # the service's local testing mode: nothing private, no ledger
    noise: bool = True
    payload_limits: PayloadLimits = PayloadLimits()  # a report over them is a dead letter


def read_private_keys(location: str) -> dict[str, bytes]:
    """The private keys (id -> raw X25519 key) of the key file at ``location``; ``SecretUnavailable`` naming the
    location (never the keys) when it cannot be read or is not a key file."""
    try:
        return parse_key_file(read_secret(location), repr(location))
    except (SecretUnavailable, ValueError) as error:
        raise SecretUnavailable(f"private keys: {error}") from None


def make_decrypter(job: AggregationJob) -> PayloadDecrypter | None:
    """The payload decrypter of a job with ``private_key``, its keys read here and now (on a worker, at setup)."""
    return None if job.private_key is None else PayloadDecrypter(read_private_keys(job.private_key))


def _noise_key_of(job: AggregationJob) -> KeyLocation:
    """The noise key of a charged job (the ledger records its id with the charge)."""
    if job.noise_key is None:
        raise ValueError(f"job {job.job_id!r}: a charged job needs its noise key (AggregationJob.noise_key)")
    return job.noise_key


def _open_ledger(job: AggregationJob) -> Ledger:
    """The ledger of a charged job (``ledger_url`` set, and ``limits`` with it)."""
    if job.ledger_url is None or job.limits is None:
        raise ValueError(f"job {job.job_id!r}: charging needs both a ledger_url and the ledger's limits")
    return open_ledger(job.ledger_url, job.limits)


@dataclass
class ReportColumns:
    """Valid reports of one file that belong to one report shard, column by column: enough to deduplicate, sum,
    charge and dead-letter them. Report i holds contributions ``ends[i - 1]:ends[i]`` (of the requested
    filtering ids) and has the budget unit group ``(identities[identity[i]], hours[i])``."""

    path: str
    report_ids: list[str]
    positions: np.ndarray  # int64, record positions in the file
    identities: list[tuple]  # the file's distinct ``report_identity`` values (a few)
    identity: np.ndarray  # int64
    hours: np.ndarray  # int64
    ends: np.ndarray  # int64
    high: np.ndarray  # uint64
    low: np.ndarray  # uint64
    values: np.ndarray  # uint64


def _pack(value) -> bytes:
    """One pickled blob: Beam moves and sizes it as one object, however many reports it holds."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


_unpack = pickle.loads


def report_shard(report_id: str) -> int:
    return zlib.crc32(report_id.encode("ascii")) % REPORT_SHARDS


def bucket_shards(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The bucket shard of each key: the top bits of a multiplicative hash of both words, so structured keys
    (campaign bits high, value bits low) still spread over every shard."""
    with np.errstate(over="ignore"):
        mixed = (high ^ low) * np.uint64(0x9E3779B97F4A7C15)
    return (mixed >> np.uint64(64 - BUCKET_SHARD_BITS)).astype(np.int64)


def _raw_report(record) -> str:
    """A report as dead-letter text: its fields as JSON, the payload in base64."""
    if type(record) is not dict:
        return repr(record)[:10_000]
    return json.dumps({name: base64.b64encode(v).decode() if isinstance(v, bytes) else v for name, v in record.items()},
                      default=repr)


def _avro_records(handle, path: str) -> Iterator:
    """The records of an Avro file; a corrupt header or block, or a writer schema or block ``open_avro`` refuses, ends
    the file with one ``malformed_avro`` dead letter."""
    index = 0
    try:
        for record in open_avro(handle):
            yield record
            index += 1
    except Exception as error:  # noqa: BLE001 - fastavro raises many types for corrupt input
        yield DeadLetter(f"{type(error).__name__}: {error}", MALFORMED_AVRO, f"{path}#{index}")


class _Batch:
    """Reports of one file whose shared_info passed, waiting for their payloads to be decoded together."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.positions: list[int] = []
        self.report_ids: list[str] = []
        self.identity: list[int] = []
        self.hours: list[int] = []
        self.payloads: list[bytes] = []  # clear text


class _ParseReportsFn(beam.DoFn):
    """One report file: records validated up to their payloads, payloads decoded a batch at a time, reports
    routed by report id."""

    def __init__(self, job: AggregationJob) -> None:
        self._job = job

    def setup(self) -> None:
        self._decrypter = make_decrypter(self._job)  # the keys are read here, on the worker (never pickled)

    def process(self, readable: fileio.ReadableFile):
        path = readable.metadata.path
        decrypter, job = self._decrypter, self._job
        oldest = job.now_seconds - MAX_REPORT_AGE_SECONDS
        identities: dict[tuple, int] = {}  # the file's distinct report identities, numbered
        stats: Counter = Counter()
        batch = _Batch()
        position = -1
        with readable.open() as handle:
            for position, record in enumerate(_avro_records(handle, path)):
                if isinstance(record, DeadLetter):
                    stats["dead_lettered:" + record.reason] += 1
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, record)
                    continue
                try:
                    payload, key_id, text = report_fields(record)
                    info = parse_shared_info(text)
                    if info.scheduled_report_time < oldest:
                        raise ReportError("report_too_old")
                    if job.debug and not info.debug_mode:
                        raise ReportError(NOT_DEBUG)
                    if decrypter is not None:
                        payload = decrypter.decrypt(payload, text, key_id)
                except ReportError as error:
                    stats["dead_lettered:" + error.reason] += 1
                    letter = DeadLetter(_raw_report(record), error.reason, f"{path}#{position}")
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
                    continue
                identity = report_identity(info)
                batch.records.append(record)
                batch.positions.append(position)
                batch.report_ids.append(info.report_id)
                batch.identity.append(identities.setdefault(identity, len(identities)))
                batch.hours.append(report_hour(info))
                batch.payloads.append(payload)
                if len(batch.payloads) == DECODE_BATCH:
                    yield from self._route(path, batch, list(identities), stats)
                    batch = _Batch()
                    _log.info("%s: %d reports read", path, position + 1)
        yield from self._route(path, batch, list(identities), stats)
        stats["read"] = position + 1
        _log.info("%s: %d reports read, %d dead letters", path, position + 1, sum(
            count for name, count in stats.items() if name.startswith("dead_lettered:")))
        yield beam.pvalue.TaggedOutput(STATS, dict(stats))

    def _route(self, path: str, batch: _Batch, identities: list[tuple], stats: Counter):
        """Decode a batch's payloads, dead-letter the bad ones, and send the rest to their report shards."""
        if not batch.payloads:
            return
        decoded = decode_payloads(batch.payloads, self._job.payload_limits)
        for index, reason in sorted(decoded.errors.items()):
            stats["dead_lettered:" + reason] += 1
            letter = DeadLetter(_raw_report(batch.records[index]), reason, f"{path}#{batch.positions[index]}")
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
        wanted = np.isin(decoded.filtering_ids, np.asarray(self._job.filtering_ids, dtype=np.uint64))
        stats["contributions_other_filtering_ids"] += int(wanted.size - wanted.sum())
        owner, high, low, values = decoded.owner[wanted], decoded.high[wanted], decoded.low[wanted], decoded.values[wanted]
        shards = np.fromiter(map(report_shard, batch.report_ids), np.int64, len(batch.report_ids))
        shards[list(decoded.errors)] = -1
        # Reports (and their contributions, which follow them) ordered by shard, then cut at the shard borders.
        order = np.argsort(shards, kind="stable")
        by_shard = np.searchsorted(shards[order], np.arange(-1, REPORT_SHARDS + 1))
        contribution_order = np.argsort(shards[owner], kind="stable")
        owner, high, low, values = (column[contribution_order] for column in (owner, high, low, values))
        contribution_by_shard = np.searchsorted(shards[owner], np.arange(-1, REPORT_SHARDS + 1))
        positions, identity, hours = (np.asarray(column, np.int64) for column in (batch.positions, batch.identity, batch.hours))
        for shard in range(REPORT_SHARDS):
            reports = order[by_shard[shard + 1]:by_shard[shard + 2]]
            if not reports.size:
                continue
            mine = slice(contribution_by_shard[shard + 1], contribution_by_shard[shard + 2])
            counts = np.bincount(np.searchsorted(reports, owner[mine]), minlength=reports.size)
            columns = ReportColumns(
                path=path,
                report_ids=[batch.report_ids[i] for i in reports.tolist()],
                positions=positions[reports],
                identities=identities,
                identity=identity[reports],
                hours=hours[reports],
                ends=np.cumsum(counts),
                high=high[mine],
                low=low[mine],
                values=values[mine],
            )
            yield shard, _pack(columns)


class _SumShardFn(beam.DoFn):
    """One report shard: the first report of each report id kept (by file path, then position), contributions
    summed per bucket and split by bucket shard."""

    def process(self, element):
        _, packed = element
        chunks: list[ReportColumns] = sorted((_unpack(chunk) for chunk in packed), key=lambda c: c.path)
        first: dict[str, tuple[str, int]] = {}
        for chunk in chunks:
            for report_id, position in zip(chunk.report_ids, chunk.positions.tolist(), strict=True):
                seen = first.get(report_id)
                if seen is None or (chunk.path, position) < seen:
                    first[report_id] = (chunk.path, position)
        duplicates = sum(len(chunk.report_ids) for chunk in chunks) - len(first)
        stats: Counter = Counter()
        groups: set[tuple] = set()
        high, low, values = [], [], []
        for chunk in chunks:
            keep = np.ones(len(chunk.report_ids), bool)
            if duplicates:
                for index, (report_id, position) in enumerate(zip(chunk.report_ids, chunk.positions.tolist(), strict=True)):
                    if first[report_id] != (chunk.path, position):
                        keep[index] = False
                        stats["dead_lettered:" + DUPLICATE] += 1
                        raw = json.dumps({"report_id": report_id, "kept": "{}#{}".format(*first[report_id])})
                        letter = DeadLetter(raw, DUPLICATE, f"{chunk.path}#{position}")
                        yield beam.pvalue.TaggedOutput(DEAD_LETTERS, letter)
            counts = np.diff(chunk.ends, prepend=0)
            contributions = np.repeat(keep, counts)
            stats["aggregated_reports"] += int(keep.sum())
            stats["contributions"] += int(contributions.sum())
            pairs = np.unique((chunk.identity[keep] << 32) | chunk.hours[keep]).tolist()  # hours < 2^32
            groups.update((chunk.identities[pair >> 32], pair & 0xFFFFFFFF) for pair in pairs)
            high.append(chunk.high[contributions])
            low.append(chunk.low[contributions])
            values.append(chunk.values[contributions])
        sums = KeyedSums.of(np.concatenate(high), np.concatenate(low), np.concatenate(values))
        shard_of = bucket_shards(sums.high, sums.low)
        for shard in np.unique(shard_of).tolist():
            mine = shard_of == shard
            yield shard, (_SUMS, _pack(KeyedSums(*(column[mine] for column in sums))))
        yield beam.pvalue.TaggedOutput(GROUPS, _pack(groups))
        yield beam.pvalue.TaggedOutput(STATS, dict(stats))


class _ParseDomainFn(beam.DoFn):
    """One domain file (Avro ``AggregationBucket`` records, or text with one bucket per line, decimal or 0x-hex),
    as (high, low) key columns per bucket shard."""

    def process(self, readable: fileio.ReadableFile):
        path = readable.metadata.path
        full: list[bytes] = []  # 16-byte buckets, the usual form, converted together
        buckets: list[int] = []
        with readable.open() as handle:
            records = _avro_records(handle, path) if path.endswith(".avro") else _text_lines(handle)
            for position, record in enumerate(records):
                if isinstance(record, DeadLetter):
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, record)
                    continue
                raw = record.get("bucket") if type(record) is dict else None
                if type(raw) is bytes and len(raw) == BUCKET_BYTES:
                    full.append(raw)
                    continue
                try:
                    buckets.append(_domain_bucket(record))
                except ReportError as error:
                    text = _raw_report(record) if type(record) is dict else str(record)
                    yield beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(text, error.reason, f"{path}#{position}"))
        words = np.frombuffer(b"".join(full), ">u8").reshape(len(full), 2).astype(np.uint64)
        others = keys_of(buckets)
        high, low = np.concatenate([words[:, 0], others[0]]), np.concatenate([words[:, 1], others[1]])
        shard_of = bucket_shards(high, low)
        for shard in np.unique(shard_of).tolist():
            mine = shard_of == shard
            yield shard, (_DOMAIN, _pack((high[mine], low[mine])))


def _text_lines(handle) -> Iterator[str]:
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


def input_failure(job: AggregationJob, stats: dict) -> tuple[str, str] | None:
    """``(code, message)`` when the input fails the job, checked once every report was read and before any
    budget is spent: a report file truncated, corrupt or unreadable (half a file is not an answer), no valid
    report, or more reports with errors than ``max_error_fraction`` of those read."""
    broken = sorted(name.split(":", 1)[1] for name in stats
                    if name.startswith("dead_lettered:") and name.split(":", 1)[1] in FILE_FAILURES)
    if broken:
        return ("INPUT_FILE_BROKEN", f"a report file is truncated, corrupt or unreadable ({', '.join(broken)}; see the "
                                     "dead letters): replace it and run again")
    errors, read = error_count(stats), stats.get("read", 0)
    if not stats.get("aggregated_reports", 0):
        return "NO_VALID_REPORTS", f"none of the {read} reports read can be aggregated (see the dead letters)"
    if errors > job.max_error_fraction * read:
        return ("REPORTS_WITH_ERRORS_EXCEEDED_THRESHOLD", f"{errors} of {read} reports have errors "
                f"({errors / read:.1%}), more than --max-error-fraction {job.max_error_fraction:g}")
    return None


def charge(job: AggregationJob, stats: dict, groups: set) -> dict:
    """The receipt of a job: its input judged first (``input_failure``), then the ledger charged (all or
    nothing).

    ``status`` is ``ok`` (``charge``: ``charged``, ``already_charged`` or ``none`` for a debug run) or
    ``failed`` with a ``code`` and a ``message``; nothing is released unless it is ``ok``.
    """
    receipt = {"job_id": job.job_id, "stats": stats, "errors": error_count(stats)}
    failure = input_failure(job, stats)
    if failure is not None:
        code, message = failure
        return dict(receipt, status="failed", code=code, message=f"{message}; no budget was spent")
    if job.ledger_url is None:
        return dict(receipt, status="ok", charge="none", units=0)
    units = budget_units(groups, job.filtering_ids)
    try:
        with _open_ledger(job) as ledger:
            outcome = ledger.charge(job.job_id, epsilon_units(job.params.epsilon, "up"), units,
                                    _noise_key_of(job).key_id)
    except LedgerError as error:
        details = {name: value for name, value in vars(error).items() if isinstance(value, (int, str, tuple, list))}
        return dict(receipt, status="failed", code=error.code, message=str(error), details=details)
    return dict(receipt, status="ok", charge=outcome.status, units=outcome.units,
                noise_nonce=outcome.noise_nonce.hex())


def fact_records(outcomes: Outcomes, fmt: str) -> list[dict]:
    """``AggregatedFact`` records of the released buckets: minimal big-endian bucket bytes (Avro) or the bucket
    in decimal (JSON)."""
    released = outcomes.released
    buckets = KeyedSums(outcomes.high[released], outcomes.low[released], outcomes.unnoised[released]).buckets()
    return [{"bucket": minimal_bucket_bytes(bucket) if fmt == "avro" else str(bucket), "metric": metric}
            for bucket, metric in zip(buckets, outcomes.metric[released].tolist(), strict=True)]


def debug_records(outcomes: Outcomes, fmt: str) -> list[dict]:
    """Debug rows of every candidate bucket: the unnoised sum, the noise, and where the bucket was found."""
    rows = zip(outcomes.buckets(), outcomes.unnoised.tolist(), outcomes.noise.tolist(), outcomes.in_domain.tolist(),
               outcomes.in_reports.tolist(), strict=True)
    return [{"bucket": minimal_bucket_bytes(bucket) if fmt == "avro" else str(bucket), "unnoised_metric": unnoised,
             "noise": noise, "annotations": [name for name, flag in (("in_domain", d), ("in_reports", r)) if flag]}
            for bucket, unnoised, noise, d, r in rows]


class _ReleaseFn(beam.DoFn):
    """One bucket shard: Alg. 1's noisy summation, drawn only after the receipt says the budget was charged;
    writes the shard's summary-report file (and debug file) and yields ``{kind, path, records}`` for each."""

    def __init__(self, job: AggregationJob, source: RandomSource, output: str, fmt: str) -> None:
        self._job = job
        self._source = source
        self._output = output.rstrip("/")
        self._fmt = fmt

    def _noise_source(self, receipt: dict) -> RandomSource:
        """Where this job's noise comes from. Secure and charged: derived from the noise key, the job id and the
        nonce the ledger recorded at the job's first charge (``transforms.core.noise_key``), so a retried bundle or
        a re-run of the job id draws the same noise and writes the same files (never a second noisy answer), and
        the ledger holds nothing the noise could be recomputed from. Seeded: the seeded source, which is as
        reproducible. A debug run (no ledger, nothing charged, SENSITIVE outputs) draws fresh secure noise."""
        job = self._job
        if self._source.kind != "secure" or job.ledger_url is None:
            return self._source
        return _noise_key_of(job).source("aggregation", job.job_id, salt=bytes.fromhex(receipt["noise_nonce"]))

    def process(self, element, receipt):
        if receipt["status"] != "ok":
            return
        shard, parts = element
        sums = [_unpack(packed) for kind, packed in parts if kind == _SUMS]
        domain = [_unpack(packed) for kind, packed in parts if kind == _DOMAIN]
        merged = KeyedSums.of(*(np.concatenate([part[i] for part in sums] or [np.empty(0, np.uint64)]) for i in range(3)))
        keys = (np.concatenate([part[0] for part in domain] or [np.empty(0, np.uint64)]),  # (high, low) words
                np.concatenate([part[1] for part in domain] or [np.empty(0, np.uint64)]))
        job = self._job
        source = self._noise_source(receipt).keyed_child(("aggregation", job.job_id, shard)) if job.noise else None
        outcomes = aggregate(job.params, merged, keys, source)
        extension = "avro" if self._fmt == "avro" else "jsonl"
        name = f"{shard:05d}-of-{BUCKET_SHARDS:05d}.{extension}"
        path = f"{self._output}/{SUMMARY_PREFIX}-{name}"
        facts = fact_records(outcomes, self._fmt)
        write_shard_file(path, facts, self._fmt, "aggregated_fact")
        yield {"kind": SUMMARY_PREFIX, "path": path, "records": len(facts)}
        if job.debug:
            debug_path = f"{self._output}/{DEBUG_PREFIX}-{name}"
            rows = debug_records(outcomes, self._fmt)
            write_shard_file(debug_path, rows, self._fmt, "debug_aggregated_fact")
            yield {"kind": DEBUG_PREFIX, "path": debug_path, "records": len(rows)}


class Aggregate(beam.PTransform):
    """Summary reports from aggregatable report files (and an output domain), written to ``output``: outputs
    ``written`` (``{kind, path, records}`` of every file written), ``receipt`` (one dict) and ``dead_letters``."""

    def __init__(self, job: AggregationJob, reports: str, domain: str | None, source: RandomSource, output: str,
                 fmt: str = "avro") -> None:
        super().__init__()
        self._job = job
        self._reports = reports
        self._domain = domain
        self._source = source
        self._output = output
        self._fmt = fmt

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
        # summed.sums: (bucket shard, (_SUMS, packed KeyedSums))
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
            # domain.buckets: (bucket shard, (_DOMAIN, packed (high, low)))
            keyed.append(domain.buckets)
            dead.append(domain[DEAD_LETTERS])
        written = (
            keyed
            | "AllKeyed" >> beam.Flatten()
            | "GroupBuckets" >> beam.GroupByKey()
            | "Release" >> beam.ParDo(_ReleaseFn(job, self._source, self._output, self._fmt),
                                      beam.pvalue.AsSingleton(receipt))
        )
        return {WRITTEN: written, "receipt": receipt, DEAD_LETTERS: dead | "AllDeadLetters" >> beam.Flatten()}
