"""File formats and helpers shared by the dataset generators (``pipelines.generate`` and ``datasets``).

Impressions and conversions are written as the readers of ``schemas/codecs.py`` read them: Avro container
files with the schemas ``schemas/avro/impression.avsc`` / ``conversion.avsc`` (the default), JSON Lines, or
varint-length-delimited protobuf messages (``schemas/proto/events.proto``), in shards
``DIR/<kind>-SSSSS-of-NNNNN.<ext>`` with ``DIR/generation.json`` beside them. Records are handled in their
Avro form (a dict per record, optional fields ``None``); the fast encoders below write the same records
without building a dict per record for JSON Lines and protobuf.

Randomness for simulation is seeded and vectorised (DESIGN.md "Two kinds of randomness"): ``stream`` gives
independent PCG64 streams keyed by integers (a chunk number, an advertiser), so what a chunk draws does not
depend on how many chunks or shards there are. Avro files get a sync marker derived from the seed, so a seed
gives the same files byte for byte.

This module does not import ``pipelines.generate`` (which imports it).
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
from google.protobuf.internal.encoder import _VarintBytes

from schemas.codecs import FORMATS, encode_delimited
from schemas.formats import load_avro_schema
from schemas.option_values import SEED, Integer, Real
from schemas.proto import events_pb2
from schemas.time_units import MAX_EVENT_TIME_MICROS, MICROS_PER_DAY, MICROS_PER_SECOND, parse_start

PROGRESS_SECONDS = 3.0  # at most one progress line on stderr this often
EXTENSIONS = {fmt: fmt for fmt in FORMATS}  # file extension of each format
# The domains of the options most generators share (the ranges their generate_* functions check).
DAYS = Integer(1, 3650)
SHARDS = Integer(1, 10_000)
BAD_FRACTION = Real(0, 1, high_open=True)


def stream(seq: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """An independent PCG64 stream for the child ``key`` of ``seq`` (what ``seq.spawn`` would give, without state)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, *key))))


def seed_streams(seed: int, count: int, marker: int = -1) -> tuple[list[np.random.SeedSequence], bytes]:
    """A generator's ``count`` independent seed sequences, spawned from ``seed`` (one per role: model, rows, bad
    records, ...), and the Avro sync marker: 16 bytes drawn from the sequence at index ``marker`` (the last by
    default), so a seed gives the same files byte for byte."""
    seqs = np.random.SeedSequence(seed).spawn(count)
    return seqs, np.random.default_rng(seqs[marker]).bytes(16)


def chunk_ranges(total: int, size: int, shard: int = 0, shards: int = 1) -> Iterator[tuple[int, int, int]]:
    """``(chunk, lo, hi)`` for the chunks ``[lo, hi)`` of ``size`` items of ``range(total)`` that shard ``shard``
    of ``shards`` holds: the shards split the chunks into consecutive ranges (more shards than chunks leave some
    empty)."""
    chunks = -(-total // size)
    for c in range(shard * chunks // shards, (shard + 1) * chunks // shards):
        yield c, c * size, min(total, (c + 1) * size)


def time_span_start(start: str | int, days: int) -> int:
    """``start`` as epoch microseconds (``start_micros_of``), with the ``days`` after it inside the range the
    event readers accept; a ``ValueError`` otherwise."""
    start_micros = start_micros_of(start)
    if start_micros < 0 or start_micros + days * MICROS_PER_DAY > MAX_EVENT_TIME_MICROS:
        raise ValueError("the data's days must lie between 1970-01-01 and 2100-01-01 (UTC)")
    return start_micros


def start_micros_of(start: str | int) -> int:
    """``start`` as epoch microseconds: an int is taken as is, a string goes through ``parse_start`` (a
    ``ValueError`` names the bad value)."""
    if isinstance(start, (int, np.integer)) and not isinstance(start, bool):
        return int(start)
    try:
        return parse_start(str(start))
    except ValueError:
        raise ValueError(f"--start must be a date YYYY-MM-DD or an ISO 8601 date-time, got {start!r}") from None


def without_none(record: dict) -> dict:
    """The record without its unset (None) fields, nested requests included (for JSON Lines and protobuf)."""
    return {key: without_none(value) if isinstance(value, dict) else value
            for key, value in record.items() if value is not None}


def encode_record(fmt: str, message: type, record: dict) -> Any:
    """One record (a dict of the Avro form) in ``fmt``: a dict for Avro, a line for jsonl, delimited bytes for pb."""
    if fmt == "avro":
        return record
    if fmt == "jsonl":
        return json.dumps(without_none(record)) + "\n"
    return encode_delimited(message(**without_none(record)))


def write_file(path: Path, fmt: str, schema: dict | None, sync_marker: bytes, chunks: Iterable[list],
               sidecar: bool = False, event_file: bool = True) -> None:
    """Write encoded records, chunk by chunk, to one file of ``fmt`` (for Avro, with one ``fastavro.writer`` call
    that pulls the chunks). With ``sidecar`` (Avro only), also the file's column side-car (``ColumnSidecar``);
    with ``event_file=False``, only the side-car (the evaluation's datasets: encoding Avro is most of the cost
    of generating them)."""
    columns = None
    if sidecar:
        if fmt != "avro":
            raise ValueError("column side-cars are written for Avro files only")
        columns = ColumnSidecar(schema)
        chunks = map(columns.add, chunks)
    elif not event_file:
        raise ValueError("a file is written as events, as a column side-car, or both")
    if not event_file:
        for _ in chunks:
            pass
    else:
        with open(path, "wb") as handle:
            if fmt == "avro":
                fastavro.writer(handle, schema, itertools.chain.from_iterable(chunks), sync_marker=sync_marker)
            elif fmt == "jsonl":
                for chunk in chunks:
                    handle.write("".join(chunk).encode("utf-8"))
            else:
                for chunk in chunks:
                    handle.write(b"".join(chunk))
    if columns is not None:
        columns.save(path)


SIDECAR_DIR = "columns"  # beside the event files: DIR/columns/<event file name>.npz


def sidecar_path(path: str | Path) -> Path:
    """Where the column side-car of the event file ``path`` is kept."""
    path = Path(path)
    return path.parent / SIDECAR_DIR / f"{path.name}.npz"


class ColumnSidecar:
    """The columns of the (valid, generated) records written to one Avro event file, saved beside it so that the
    evaluation can load a generated dataset without decoding and validating every record again
    (``evaluation.data``): device and event ids (UTF-8 bytes), times, values (conversions), and each record's
    *kind*, an index into one sample record per distinct combination of the other fields (for conversions:
    advertiser, querier, product and the request; for impressions: publisher, advertiser, campaign, product,
    filter keys), kept Avro-encoded with the file's schema. The reader decodes and validates each sample as it
    would the file's records, and uses the side-car only while the event file has the size and modification time
    it had when the side-car was written, or, for a side-car written alone, while there is no event file."""

    def __init__(self, schema: dict | None) -> None:
        self.schema = fastavro.parse_schema(schema)
        self.devices: list[str] = []
        self.times: list[int] = []
        self.ids: list[str] = []
        self.values: list[float] = []
        self.kinds: list[int] = []
        self.samples: list[dict] = []
        self._index: dict[tuple, int] = {}

    def add(self, records: list) -> list:
        """Take the columns of ``records`` (Avro form); return them unchanged for the writer."""
        index, samples, kinds = self._index, self.samples, self.kinds
        for record in records:
            request = record.get("attribution_request")
            if request is not None:  # a conversion: requests are shared dicts, one per query key
                self.ids.append(record["conversion_id"])
                self.values.append(record["value"])
                key: tuple = (record["advertiser_site"], record["querier_site"], record["product_id"], id(request))
            else:
                self.ids.append(record["impression_id"])
                key = (record["publisher_site"], record["advertiser_site"], record["campaign_id"],
                       record["product_id"], tuple(record["filter_keys"] or ()))
            kind = index.get(key)
            if kind is None:
                kind = index[key] = len(samples)
                samples.append(record)
            kinds.append(kind)
            self.devices.append(record["device_id"])
            self.times.append(record["event_time_micros"])
        return records

    def save(self, path: Path) -> Path:
        """Write the side-car of the event file ``path``, just written or (when it does not exist) not written at
        all: the side-car then stands alone, and says so (``written`` is [-1, -1])."""
        target = sidecar_path(path)
        target.parent.mkdir(exist_ok=True)
        written = [path.stat().st_size, path.stat().st_mtime_ns] if path.exists() else [-1, -1]
        encoded = []
        for sample in self.samples:
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, self.schema, sample)
            encoded.append(buffer.getvalue())
        with open(target, "wb") as handle:
            np.savez(handle, device=np.array([d.encode("utf-8") for d in self.devices], dtype=np.bytes_),
                     time=np.array(self.times, dtype=np.int64),
                     event_id=np.array([i.encode("utf-8") for i in self.ids], dtype=np.bytes_),
                     value=np.array(self.values, dtype=np.float64), kind=np.array(self.kinds, dtype=np.int64),
                     samples=np.frombuffer(b"".join(encoded), dtype=np.uint8),
                     sample_ends=np.cumsum([len(b) for b in encoded], dtype=np.int64),
                     written=np.array(written, dtype=np.int64))
        return target


def shard_paths(out: Path, kind: str, shards: int, fmt: str) -> list[Path]:
    """``out/<kind>-SSSSS-of-NNNNN.<ext>`` for every shard."""
    return [out / f"{kind}-{s:05d}-of-{shards:05d}.{EXTENSIONS[fmt]}" for s in range(shards)]


def prepare_output(out_dir: str | Path, kinds: Sequence[str] = ("impressions", "conversions")) -> Path:
    """Create ``out_dir`` and remove an earlier run's shards of ``kinds`` (file name prefixes) from it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for pattern in (f"{kind}-*-of-*.*" for kind in kinds):
        for stale in out.glob(pattern):
            if stale.suffix.lstrip(".") in EXTENSIONS.values():
                stale.unlink()
        for stale in (out / SIDECAR_DIR).glob(f"{pattern}.npz"):
            stale.unlink()
    return out


def write_generation_json(out: Path, dataset: str, parameters: dict, model: dict, stats: Any) -> Path:
    """``out/generation.json``: the dataset name, parameters, model constants and stats (a dataclass whose
    ``*_files`` fields, ``impression_files`` and ``conversion_files`` for instance, are recorded by file name)."""
    recorded = dataclasses.asdict(stats)
    for name, paths in recorded.items():
        if name.endswith("_files"):
            recorded[name] = [Path(path).name for path in paths]
    path = out / "generation.json"
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"dataset": dataset, "parameters": parameters, "model": model, "stats": recorded}, handle, indent=2)
        handle.write("\n")
    return path


def _column(value: str | Sequence[str], length: int) -> Iterable[str]:
    """``value`` as a column of ``length``: one string repeated, or the column itself."""
    return itertools.repeat(value, length) if isinstance(value, str) else value


def encode_impressions(fmt: str, devices: Sequence[str], times: Sequence[int], ids: Sequence[str], *,
                       publisher: str | Sequence[str], advertiser: str | Sequence[str], campaign: str | Sequence[str],
                       product: str | Sequence[str], intermediary: str = "", callers: Sequence[str] = ()) -> list:
    """Valid impressions without filter keys, as parallel columns (``publisher``, ``advertiser``, ``campaign`` and
    ``product`` either one string for all or a column), encoded for ``fmt``: the records ``encode_record`` would
    give, without a dict per record for jsonl and pb. With ``intermediary`` or ``callers``, every impression also
    carries the W3C Attribution API's ``intermediary_site`` and ``conversion_callers``. Names must be plain ASCII
    (no quote or backslash): they are the generators' own ids."""
    n = len(devices)
    columns = zip(devices, times, ids, _column(publisher, n), _column(advertiser, n), _column(campaign, n),
                  _column(product, n), strict=True)
    api = {"intermediary_site": intermediary, "conversion_callers": list(callers)} if intermediary or callers else {}
    if fmt == "avro":
        keys: list = []  # shared: the writer only reads it
        return [{"device_id": d, "event_time_micros": t, "impression_id": i, "publisher_site": s,
                 "advertiser_site": a, "campaign_id": c, "product_id": p, "filter_keys": keys, **api}
                for d, t, i, s, a, c, p in columns]
    if fmt == "jsonl":
        tail = "".join(f", {json.dumps(name)}: {json.dumps(value)}" for name, value in api.items())
        return [f'{{"device_id": "{d}", "event_time_micros": {t}, "impression_id": "{i}", "publisher_site": '
                f'"{s}", "advertiser_site": "{a}", "campaign_id": "{c}", "product_id": "{p}", '
                f'"filter_keys": []{tail}}}\n' for d, t, i, s, a, c, p in columns]
    message = events_pb2.Impression
    return [encode_delimited(message(device_id=d, event_time_micros=t, impression_id=i, publisher_site=s,
                                     advertiser_site=a, campaign_id=c, product_id=p, **api))
            for d, t, i, s, a, c, p in columns]


class RequestEncoder:
    """Conversions whose attribution requests come from a small set (one per query key), encoded fast.

    ``requests`` are the requests in Avro form (dicts, shared by the records: the Avro writer only reads them);
    a conversion names its request by index. For jsonl the request's JSON is made once; for pb the serialised
    request field is made once and appended to the other fields' bytes (the request is the last field of
    ``Conversion``, so the bytes are those ``SerializeToString`` gives for the whole message)."""

    def __init__(self, requests: Sequence[dict]):
        self.requests = list(requests)
        self.json = [json.dumps(without_none(request)) for request in self.requests]
        self.proto = [events_pb2.Conversion(attribution_request=without_none(request)).SerializeToString()
                      for request in self.requests]

    def encode(self, fmt: str, devices: Sequence[str], times: Sequence[int], ids: Sequence[str],
               advertiser: str | Sequence[str], values: Sequence[float], products: Sequence[str],
               request_index: Sequence[int]) -> list:
        """The conversions (parallel columns; ``querier_site`` is the advertiser) encoded for ``fmt``."""
        columns = zip(devices, times, ids, _column(advertiser, len(devices)), values, products, request_index, strict=True)
        if fmt == "avro":
            requests = self.requests
            return [{"device_id": d, "event_time_micros": t, "conversion_id": i, "advertiser_site": a,
                     "querier_site": a, "value": v, "product_id": p, "attribution_request": requests[r]}
                    for d, t, i, a, v, p, r in columns]
        if fmt == "jsonl":
            texts = self.json
            return [f'{{"device_id": "{d}", "event_time_micros": {t}, "conversion_id": "{i}", "advertiser_site": '
                    f'"{a}", "querier_site": "{a}", "value": {v!r}, "product_id": "{p}", '
                    f'"attribution_request": {texts[r]}}}\n' for d, t, i, a, v, p, r in columns]
        message, tails, out = events_pb2.Conversion, self.proto, []
        for d, t, i, a, v, p, r in columns:
            payload = message(device_id=d, event_time_micros=t, conversion_id=i, advertiser_site=a, querier_site=a,
                              value=v, product_id=p).SerializeToString() + tails[r]
            out.append(encode_delimited_bytes(payload))
        return out


def encode_delimited_bytes(payload: bytes) -> bytes:
    """A serialised message with its varint length prefix (what ``encode_delimited`` writes)."""
    return _VarintBytes(len(payload)) + payload


class Progress:
    """Progress lines on stderr, ``generate <dataset>: [elapsed] text``, at most every ``PROGRESS_SECONDS``
    (``force`` prints regardless); nothing when disabled."""

    def __init__(self, dataset: str, enabled: bool, every: float = PROGRESS_SECONDS):
        self.dataset, self.enabled, self.every = dataset, enabled, every
        self.began = self.last = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def __call__(self, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if force or now - self.last >= self.every:
            self.last = now
            print(f"generate {self.dataset}: [{now - self.began:.1f} s] {text}", file=sys.stderr, flush=True)


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    """``--output DIR``, the output directory. ``parser`` is a ``pipelines.common.CliParser`` (the sub-parsers of
    ``pipelines.generate``): the old spelling ``--out`` is still read, with a deprecation warning, for one release."""
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_alias("--out", "--output")


def add_start_argument(parser: argparse.ArgumentParser, default: str, help_text: str) -> None:
    """``--start``, the start of the data (``default`` if not given). ``parser`` is a ``pipelines.common.CliParser``:
    the old spelling ``--start-date`` is still read, with a deprecation warning, for one release."""
    parser.add_argument("--start", default=default, help=f"{help_text} (default {default})")
    parser.add_alias("--start-date", "--start")


def add_common_arguments(parser: argparse.ArgumentParser, start_default: str, start_help: str) -> None:
    """The options every evaluation dataset has: ``--output``, ``--seed``, ``--format``, ``--start``, ``--quiet``."""
    add_output_argument(parser)
    parser.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    parser.add_argument("--format", choices=FORMATS, default="avro", help="file format (default avro)")
    add_start_argument(parser, start_default, start_help)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def add_bad_fraction_argument(parser: argparse.ArgumentParser) -> None:
    """``--bad-fraction``: the share of written records that are malformed copies of valid ones."""
    parser.add_argument("--bad-fraction", type=BAD_FRACTION, default=0.0,
                        help="fraction of written records that are malformed, in [0, 1) (default 0)")


def print_outputs(stats: Any, out_dir: str) -> None:
    """The closing lines of a generator's summary: its files (every ``<kind>_files`` field of ``stats``, printed
    as ``<kind>s``) and ``generation.json``."""
    for name, paths in dataclasses.asdict(stats).items():
        if name.endswith("_files"):
            print(f"  {name.removesuffix('_files')}s: {', '.join(paths)}")
    print(f"  summary: {Path(out_dir) / 'generation.json'}")


def check_format_and_scale(fmt: str, scale: float) -> None:
    """ValueError unless ``fmt`` is a known format and ``scale`` a finite positive number."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"--scale must be a positive number, got {scale}")


def check_integer(option: str, value: object, low: int, high: int) -> int:
    """``value`` as an int when it is an integer (not a bool) in ``[low, high]``; ValueError naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{option} must be an integer in [{low}, {high}], got {value}")
    return int(value)


def last_touch_request(window_days: int, campaign_ids: list, product_id: str, epsilon: float, cap: float,
                       query_key: str) -> dict:
    """The attribution request (Avro form) of the Cookie Monster paper Sec. 8.1 scenario: last touch over ``window_days``,
    one bucket (m = 1), report and query global sensitivity ``cap`` in L1, the querier's ``epsilon``."""
    return {
        "window_days": window_days, "first_epoch": None, "last_epoch": None, "campaign_ids": campaign_ids,
        "product_id": product_id, "filter_keys": [], "logic": "last_touch", "last_n": None, "dimension": 1,
        "requested_epsilon": epsilon, "report_global_sensitivity": cap, "query_global_sensitivity": cap,
        "norm": "L1", "query_key": query_key,
    }


def garbage_delimited(rng: np.random.Generator) -> bytes:
    """A length-prefixed protobuf message that never parses: field 1 (length-delimited) claiming 100 bytes,
    followed by fewer. The prefix is right, so a reader carries on with the next message."""
    payload = b"\x0a\x64" + rng.integers(0, 256, size=int(rng.integers(0, 40)), dtype=np.uint8).tobytes()
    return _VarintBytes(len(payload)) + payload


def interleave(records: list, bad: list, rng: np.random.Generator) -> list:
    """``records`` with ``bad`` inserted at random positions (the order of each kept)."""
    slots = np.zeros(len(records) + len(bad), dtype=bool)
    slots[rng.choice(len(records) + len(bad), size=len(bad), replace=False)] = True
    valid_iter, bad_iter = iter(records), iter(bad)
    return [next(bad_iter) if is_bad else next(valid_iter) for is_bad in slots.tolist()]


# Corruptions every event type can take, by format, and the reason the readers of schemas/codecs.py give them.
COMMON_BAD_KINDS = {
    "avro": ("empty_device", "negative_time", "absurd_time"),
    "jsonl": ("empty_device", "negative_time", "absurd_time", "missing_device", "string_time", "broken_json"),
    "pb": ("empty_device", "negative_time", "absurd_time", "missing_time", "garbage"),
}
COMMON_BAD_REASONS = {
    "empty_device": "empty_field:device_id", "negative_time": "negative_timestamp:event_time_micros",
    "absurd_time": "absurd_timestamp:event_time_micros", "missing_device": "missing_field:device_id",
    "string_time": "wrong_type:event_time_micros", "broken_json": "malformed_json",
    "missing_time": "missing_field:event_time_micros", "garbage": "malformed_protobuf",
}
YEAR_2200_MICROS = 7_258_118_400 * MICROS_PER_SECOND  # 2200-01-01T00:00:00Z


class BadRecords:
    """Corrupted copies of valid records mixed into one file kind's records at random positions, keeping
    ``bad / (valid + bad)`` at ``fraction`` as records go by (generators' ``--bad-fraction``).

    The kinds are ``COMMON_BAD_KINDS[fmt]`` plus ``extra``: a kind to (corrupt a copy of a valid record in its
    Avro form in place, the reason the readers give it); ``kinds`` chooses them (and their order) instead. Bad
    records get the ids ``<id_prefix><n>``. ``by_reason`` counts what was written."""

    def __init__(self, fmt: str, message: type, id_field: str, fraction: float, rng: np.random.Generator,
                 extra: dict[str, tuple[Callable[[dict], None], str]] | None = None, *,
                 kinds: Sequence[str] | None = None, id_prefix: str = "bad-") -> None:
        self.fmt, self.message, self.id_field, self.id_prefix, self.rng = fmt, message, id_field, id_prefix, rng
        self.extra = dict(extra or {})
        self.kinds = (*COMMON_BAD_KINDS[fmt], *self.extra) if kinds is None else tuple(kinds)
        self.ratio = fraction / (1.0 - fraction)
        self.valid = self.written = 0
        self.by_reason: dict[str, int] = {}

    def _corrupt(self, kind: str, record: dict) -> Any:
        """``record`` corrupted as ``kind`` and encoded for the format."""
        rng = self.rng
        if kind in self.extra:
            self.extra[kind][0](record)
        elif kind == "empty_device":
            record["device_id"] = ""
        elif kind == "negative_time":
            record["event_time_micros"] = -int(rng.integers(1, MICROS_PER_DAY * 365))
        elif kind == "absurd_time":
            record["event_time_micros"] = YEAR_2200_MICROS + int(rng.integers(0, MICROS_PER_DAY * 365))
        elif kind == "missing_device":
            del record["device_id"]
        elif kind == "string_time":
            record["event_time_micros"] = str(record["event_time_micros"])
        elif kind == "missing_time":
            del record["event_time_micros"]
        elif kind == "broken_json":
            line = json.dumps(without_none(record))
            return line[:int(rng.integers(1, len(line) - 1))] + "\n"
        else:  # "garbage"
            return garbage_delimited(rng)
        return encode_record(self.fmt, self.message, record)

    def add(self, records: list, valid: Callable[[int], dict]) -> list:
        """``records`` (encoded) with bad records mixed in; ``valid(i)`` is a fresh copy of valid record ``i`` in
        Avro form."""
        n = len(records)
        self.valid += n
        n_bad = int(math.floor(self.ratio * self.valid + 0.5)) - self.written if n else 0
        if n_bad <= 0:
            return records
        bad = []
        for index, k in zip(self.rng.integers(0, n, size=n_bad).tolist(),
                            self.rng.integers(0, len(self.kinds), size=n_bad).tolist(), strict=True):
            kind, record = self.kinds[k], valid(index)
            record[self.id_field] = f"{self.id_prefix}{self.written + len(bad)}"
            bad.append(self._corrupt(kind, record))
            reason = self.extra[kind][1] if kind in self.extra else COMMON_BAD_REASONS[kind]
            self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
        self.written += n_bad
        return interleave(records, bad, self.rng)


def write_domain(path: Path, buckets: Iterable[int], sync_marker: bytes) -> Path:
    """An output domain for ``python -m pipelines.aggregate --domain``: Avro ``AggregationBucket`` records of the
    buckets, sorted, 16-byte big-endian; ``sync_marker`` the generator's (so the same seed writes the same bytes)."""
    schema = load_avro_schema("aggregation_bucket")
    with open(path, "wb") as handle:
        fastavro.writer(handle, schema, [{"bucket": bucket.to_bytes(16, "big")} for bucket in sorted(set(buckets))],
                        sync_marker=sync_marker)
    return path


def merged_counts(*counts: dict[str, int]) -> dict[str, int]:
    """Counts per key added up over several dicts, sorted by key (bad records by reason over file kinds)."""
    merged: dict[str, int] = {}
    for part in counts:
        for key, count in part.items():
            merged[key] = merged.get(key, 0) + count
    return dict(sorted(merged.items()))
