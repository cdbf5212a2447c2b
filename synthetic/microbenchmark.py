"""The synthetic microbenchmark of Cookie Monster (Cookie Monster paper Sec. 8.1-8.2):
``python -m pipelines.generate microbenchmark --knob1 K1 --knob2 K2 --output DIR`` writes impressions and
conversions with their attribution requests, ``DIR/impressions-SSSSS-of-NNNNN.<ext>`` and
``DIR/conversions-SSSSS-of-NNNNN.<ext>``, plus ``DIR/generation.json``.

The ``microbenchmark`` model
----------------------------
One advertiser, ``nike.example``, also the querier, sells ``--products`` (10)
products ``product-0`` ... ``product-9`` over ``--days`` (120) days from
``--start`` (2024-01-01T00:00:00Z). Each product is queried twice, with
batches of ``B = --batch-size`` (2000) reports: ``2 B`` conversions a product,
40,000 in all (20 queries).

* ``knob1`` is the fraction of the users that take part in each query: there
  are ``ceil(B / knob1)`` users ``device-NNN`` (zero padded to the number of
  digits of the user count). For each product and each of its two *schedules*
  (batches), ``B`` distinct users are drawn without replacement, independently
  per schedule and product. The product's ``2 B`` conversion times are drawn
  uniformly (and distinct) in ``[start + 31 days, start + days)`` and sorted;
  the first ``B`` go to schedule 0's users, the next ``B`` to schedule 1's, so
  cutting the product's reports into batches of ``B`` in conversion-time order
  gives exactly the schedules, and no user is twice in a batch.
* ``knob2`` is the number of impressions per user per day: every user has
  ``ceil(knob2 * days)`` impressions at uniform times in ``[start, start + days)``,
  all for ``nike.example``, campaign ``campaign-all`` (relevant to every query),
  on ``news.example``, with no product and no filter key.

(``ceil`` forgives float rounding: ``0.1 * 120`` is 12, not 13.) Every
conversion has value 5 (the cap) and the attribution request: 30-day window,
campaigns ``[campaign-all]``, ``last_touch``, dimension 1, report and query
global sensitivity 5, L1, query key ``product=product-P`` and the epsilon of
the accuracy target of Sec. 8.1, ``eps = Delta ln(1/beta) / (alpha B c~)`` with
``Delta = c~ = 5``, ``alpha = 0.05``, ``beta = 0.01`` (0.0461 for ``B = 2000``).

Conversions are written in time order to one file, with ids ``conv-N`` in that
order. Impressions are written user by user (each user's in time order), ids
``imp-N`` in file order (ids zero padded to the digits of their count), to
``--shards`` files of consecutive users (default: about a million impressions
a file). They are generated in fixed chunks of users, each with its own random
stream, so the valid records do not depend on the format, the number of
shards or ``--bad-fraction``; memory does not grow with the number of users.
Bad records (``--bad-fraction F``) are corrupted copies of valid ones (ids
``imp-bad-N`` / ``conv-bad-N``) inserted at random positions so that
``bad / (valid + bad)`` is about ``F`` in each file kind; see
``MICRO_BAD_KINDS`` for the kinds per format and the reason each reads back as.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from schemas.codecs import FORMATS, encode_delimited
from schemas.formats import load_avro_schema
from schemas.option_values import POSITIVE_INTEGER, Integer, Real
from schemas.proto import events_pb2
from schemas.time_units import MAX_EVENT_TIME_MICROS, MICROS_PER_DAY, parse_start
from schemas.time_units import iso_micros as _iso_micros
from synthetic.files import (
    EXTENSIONS,
    PROGRESS_SECONDS,
    BadRecords,
    add_bad_fraction_argument,
    add_common_arguments,
    last_touch_request,
    prepare_output,
    seed_streams,
    write_generation_json,
)
from synthetic.files import encode_record as _encode_record
from synthetic.files import stream as _stream
from synthetic.files import write_file as _write_file

DATASET = "microbenchmark"

# Model constants (Cookie Monster paper Sec. 8.1-8.2; recorded in generation.json).
MICRO_ADVERTISER = "nike.example"  # also the querier
MICRO_PUBLISHER = "news.example"
MICRO_CAMPAIGN = "campaign-all"
MICRO_VALUE = 5.0  # every conversion at the cap: Delta = c~ = 5
MICRO_WINDOW_DAYS = 30
MICRO_LOGIC = "last_touch"
MICRO_CONVERSION_FIRST_DAY = 31  # conversions in [start + 31 days, start + days)
MICRO_SCHEDULES = 2  # queries (batches of B reports) per product
MICRO_ALPHA = 0.05
MICRO_BETA = 0.01
MICRO_BATCH_SIZE = 2000
MICRO_PRODUCTS = 10
MICRO_DAYS = 120
MICRO_START = "2024-01-01T00:00:00Z"
MICRO_IMPRESSIONS_PER_SHARD = 1_000_000  # default shard size of the impressions
MICRO_CHUNK_IMPRESSIONS = 100_000  # impressions generated and written at once (a fixed chunk of users)

# Bad-record kinds each format can express, for each file kind, with the reason a reader gives them.
MICRO_BAD_KINDS = {
    "impressions": {
        "avro": ("empty_device", "empty_advertiser", "negative_time", "absurd_time", "empty_filter_key"),
        "jsonl": ("missing_device", "empty_device", "empty_advertiser", "negative_time", "absurd_time",
                  "empty_filter_key", "string_time", "broken_json"),
        "pb": ("empty_device", "empty_advertiser", "negative_time", "absurd_time", "empty_filter_key",
               "missing_time", "garbage"),
    },
    "conversions": {
        "avro": ("empty_device", "negative_time", "negative_value", "unknown_logic", "nonpositive_epsilon",
                 "report_above_query"),
        "jsonl": ("missing_device", "empty_device", "negative_time", "negative_value", "unknown_logic",
                  "nonpositive_epsilon", "report_above_query", "missing_request", "broken_json"),
        "pb": ("empty_device", "negative_time", "negative_value", "unknown_logic", "nonpositive_epsilon",
               "report_above_query", "missing_value", "garbage"),
    },
}
# The microbenchmark's own corruptions (files.BadRecords makes the others): a kind to (corrupt a valid record in
# its Avro form in place, the reason the readers give it).
_MICRO_EXTRA_BAD = {
    "empty_advertiser": (lambda r: r.update(advertiser_site=""), "empty_field:advertiser_site"),
    "empty_filter_key": (lambda r: r.update(filter_keys=[""]), "empty_field:filter_keys"),
    "negative_value": (lambda r: r.update(value=-MICRO_VALUE), "negative_value:value"),
    "unknown_logic": (lambda r: r["attribution_request"].update(logic="most_touch"), "unknown_logic"),
    "nonpositive_epsilon": (lambda r: r["attribution_request"].update(
        requested_epsilon=-r["attribution_request"]["requested_epsilon"]), "nonpositive:requested_epsilon"),
    "report_above_query": (lambda r: r["attribution_request"].update(
        report_global_sensitivity=2 * r["attribution_request"]["query_global_sensitivity"]),
        "report_sensitivity_above_query"),
    "missing_request": (lambda r: r.pop("attribution_request"), "missing_field:attribution_request"),
    "missing_value": (lambda r: r.pop("value"), "missing_field:value"),
}


@dataclass(frozen=True)
class MicrobenchmarkStats:
    """What ``generate_microbenchmark`` wrote: ``users`` users with ``impressions_per_user`` impressions each
    (``impressions`` valid impressions), ``conversions`` valid conversions in ``queries`` batches of
    ``batch_size``, each requesting ``epsilon``; ``bad_impressions`` / ``bad_conversions`` malformed records,
    their reasons counted per file kind in ``bad_by_reason``."""

    users: int
    impressions_per_user: int
    impressions: int
    conversions: int
    queries: int
    batch_size: int
    epsilon: float
    bad_impressions: int
    bad_conversions: int
    impression_files: list[str]
    conversion_files: list[str]
    bad_by_reason: dict[str, dict[str, int]] = field(default_factory=dict)


class MicroConversions(NamedTuple):
    """The valid conversions, in time order (ties: product): parallel arrays."""

    product: np.ndarray
    schedule: np.ndarray  # 0 or 1: the batch of the product the conversion is in
    user: np.ndarray
    time: np.ndarray


def _tolerant_ceil(value: float) -> int:
    """``ceil`` that forgives float rounding just above an integer (``0.1 * 120`` is 12.000000000000002)."""
    return math.ceil(value - 1e-9 * max(1.0, abs(value)))


def micro_users(batch_size: int, knob1: float) -> int:
    """The number of users: ``ceil(B / knob1)``."""
    return _tolerant_ceil(batch_size / knob1)


def micro_impressions_per_user(knob2: float, days: int) -> int:
    """Impressions of every user: ``ceil(knob2 * days)``."""
    return _tolerant_ceil(knob2 * days)


def micro_epsilon(batch_size: int) -> float:
    """The requested epsilon, ``Delta ln(1/beta) / (alpha B c~)`` with ``Delta = c~ = 5`` (as
    ``transforms.budgeting.mechanisms.queries.AccuracyTarget.epsilon`` computes it)."""
    return MICRO_VALUE * math.log(1 / MICRO_BETA) / (MICRO_ALPHA * batch_size * MICRO_VALUE)


def micro_conversions(rng: np.random.Generator, *, users: int, batch_size: int, products: int, days: int,
                      start_micros: int) -> MicroConversions:
    """The conversions of the model: per product, two schedules of ``batch_size`` distinct users each, matched in
    draw order with the product's sorted, distinct times (schedule 0 the earlier half)."""
    lo = start_micros + MICRO_CONVERSION_FIRST_DAY * MICROS_PER_DAY
    hi = start_micros + days * MICROS_PER_DAY
    per_product = MICRO_SCHEDULES * batch_size
    parts: list[tuple[np.ndarray, ...]] = []
    for p in range(products):
        chosen = [rng.choice(users, size=batch_size, replace=False) for _ in range(MICRO_SCHEDULES)]
        while True:  # distinct times, so that the batches in time order are exactly the schedules
            times = np.sort(rng.integers(lo, hi, size=per_product, dtype=np.int64))
            if per_product < 2 or np.all(times[1:] > times[:-1]):
                break
        parts.append((np.full(per_product, p, dtype=np.int64),
                      np.repeat(np.arange(MICRO_SCHEDULES, dtype=np.int64), batch_size),
                      np.concatenate(chosen).astype(np.int64), times))
    product, schedule, user, time_ = (np.concatenate(column) for column in zip(*parts, strict=True))
    order = np.lexsort((product, time_))
    return MicroConversions(product[order], schedule[order], user[order], time_[order])


def _micro_request(product: str, epsilon: float) -> dict:
    return last_touch_request(MICRO_WINDOW_DAYS, [MICRO_CAMPAIGN], "", epsilon, MICRO_VALUE, f"product={product}")


def _micro_conversion_record(device: str, time_micros: int, conversion_id: str, product: str, request: dict) -> dict:
    return {
        "device_id": device, "event_time_micros": time_micros, "conversion_id": conversion_id,
        "advertiser_site": MICRO_ADVERTISER, "querier_site": MICRO_ADVERTISER, "value": MICRO_VALUE,
        "product_id": product, "attribution_request": dict(request),
    }


def _micro_impression_record(device: str, time_micros: int, impression_id: str) -> dict:
    return {
        "device_id": device, "event_time_micros": time_micros, "impression_id": impression_id,
        "publisher_site": MICRO_PUBLISHER, "advertiser_site": MICRO_ADVERTISER, "campaign_id": MICRO_CAMPAIGN,
        "product_id": "", "filter_keys": [],
    }


def _micro_bad_records(fmt: str, file_kind: str, fraction: float, rng: np.random.Generator) -> BadRecords:
    """The bad records of one file kind (``impressions`` or ``conversions``): ``MICRO_BAD_KINDS``, ids
    ``imp-bad-N`` / ``conv-bad-N``."""
    impressions = file_kind == "impressions"
    return BadRecords(fmt, events_pb2.Impression if impressions else events_pb2.Conversion,
                      "impression_id" if impressions else "conversion_id", fraction, rng, _MICRO_EXTRA_BAD,
                      kinds=MICRO_BAD_KINDS[file_kind][fmt], id_prefix="imp-bad-" if impressions else "conv-bad-")


def _encode_impressions(fmt: str, devices: list[str], times: list[int], ids: list[str]) -> list:
    """Valid impressions (parallel lists) encoded for ``fmt``, fast: no per-record dict for jsonl and pb."""
    if fmt == "avro":
        keys: list = []  # shared: the writer only reads it
        return [{"device_id": d, "event_time_micros": t, "impression_id": i, "publisher_site": MICRO_PUBLISHER,
                 "advertiser_site": MICRO_ADVERTISER, "campaign_id": MICRO_CAMPAIGN, "product_id": "",
                 "filter_keys": keys} for d, t, i in zip(devices, times, ids, strict=True)]
    if fmt == "jsonl":
        tail = (f', "publisher_site": "{MICRO_PUBLISHER}", "advertiser_site": "{MICRO_ADVERTISER}", '
                f'"campaign_id": "{MICRO_CAMPAIGN}", "product_id": "", "filter_keys": []}}\n')
        return [f'{{"device_id": "{d}", "event_time_micros": {t}, "impression_id": "{i}"{tail}'
                for d, t, i in zip(devices, times, ids, strict=True)]
    message = events_pb2.Impression
    return [encode_delimited(message(device_id=d, event_time_micros=t, impression_id=i, publisher_site=MICRO_PUBLISHER,
                                     advertiser_site=MICRO_ADVERTISER, campaign_id=MICRO_CAMPAIGN))
            for d, t, i in zip(devices, times, ids, strict=True)]


def generate_microbenchmark(out_dir: str | os.PathLike, *, knob1: float, knob2: float,
                            batch_size: int = MICRO_BATCH_SIZE, products: int = MICRO_PRODUCTS, days: int = MICRO_DAYS,
                            start_micros: int = parse_start(MICRO_START), seed: int = 0, fmt: str = "avro",
                            shards: int | None = None, bad_fraction: float = 0.0,
                            progress: bool = True, sidecars: bool = False, event_files: bool = True) -> MicrobenchmarkStats:
    """Write the microbenchmark dataset (the model of the module docstring) to ``out_dir``; return what was
    written. ``shards`` is the number of impression files (None: about a million impressions each). With
    ``sidecars`` (Avro only), every file also gets its column side-car (``files.ColumnSidecar``, for the
    evaluation); with ``event_files=False`` as well, only the side-cars are written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not (math.isfinite(knob1) and 0.0 < knob1 <= 1.0):
        raise ValueError(f"--knob1 (the fraction of users in each query) must be in (0, 1], got {knob1}")
    if not (math.isfinite(knob2) and knob2 > 0.0):
        raise ValueError(f"--knob2 (impressions per user per day) must be > 0, got {knob2}")
    for name, value, minimum in (("batch-size", batch_size, 1), ("products", products, 1),
                                 ("days", days, MICRO_CONVERSION_FIRST_DAY + 1), ("shards", shards, 1)):
        if value is not None and value < minimum:
            raise ValueError(f"--{name} must be at least {minimum}, got {value}")
    if not 0.0 <= bad_fraction < 1.0:
        raise ValueError(f"--bad-fraction must be in [0, 1), got {bad_fraction}")
    if sidecars and bad_fraction:
        raise ValueError("column side-cars describe valid records only: no --bad-fraction with them")
    end_micros = start_micros + days * MICROS_PER_DAY
    if start_micros < 0 or end_micros > MAX_EVENT_TIME_MICROS:
        raise ValueError("the days must lie between 1970-01-01 and 2100-01-01 (UTC)")

    users = micro_users(batch_size, knob1)
    per_user = micro_impressions_per_user(knob2, days)
    total_impressions = users * per_user
    if shards is None:
        shards = max(1, math.ceil(total_impressions / MICRO_IMPRESSIONS_PER_SHARD))
    epsilon = micro_epsilon(batch_size)

    out = prepare_output(out_dir)  # removes an earlier run's impression and conversion files
    (conv_seq, imp_seq, bad_seq, _), sync_marker = seed_streams(seed, 4)
    bad_rng = np.random.default_rng(bad_seq)
    ext = EXTENSIONS[fmt]
    device_width = len(str(users))
    log = (lambda text: print(f"generate microbenchmark: {text}", file=sys.stderr, flush=True)) if progress else None
    began = time.monotonic()

    # Conversions: small (2 B per product), generated at once.
    conversions = micro_conversions(np.random.Generator(np.random.PCG64(conv_seq)), users=users,
                                    batch_size=batch_size, products=products, days=days, start_micros=start_micros)
    n_conv = int(conversions.time.size)
    product_names = [f"product-{p}" for p in range(products)]
    requests = [_micro_request(name, epsilon) for name in product_names]
    conv_width = len(str(n_conv))
    conv_rows = list(zip(conversions.product.tolist(), conversions.user.tolist(), conversions.time.tolist(), strict=True))

    def conversion(i: int) -> dict:
        p, u, t = conv_rows[i]
        return _micro_conversion_record(f"device-{u:0{device_width}d}", t, f"conv-{i:0{conv_width}d}",
                                        product_names[p], requests[p])

    conv_records = [_encode_record(fmt, events_pb2.Conversion, conversion(i)) for i in range(n_conv)]
    conv_bad = _micro_bad_records(fmt, "conversions", bad_fraction, bad_rng)
    conv_records = conv_bad.add(conv_records, conversion)
    conversion_paths = [out / f"conversions-00000-of-00001.{ext}"]
    _write_file(conversion_paths[0], fmt, load_avro_schema("conversion") if fmt == "avro" else None, sync_marker,
                [conv_records], sidecars, event_files)
    if log:
        log(f"{n_conv:,} conversions for {products} products x {MICRO_SCHEDULES} batches of {batch_size:,} "
            f"({users:,} users); writing {total_impressions:,} impressions to {shards} file(s)")

    # Impressions: fixed chunks of consecutive users, each chunk its own stream; shards are ranges of users.
    chunk_users = max(1, MICRO_CHUNK_IMPRESSIONS // per_user)
    imp_width = len(str(total_impressions))
    imp_bad = _micro_bad_records(fmt, "impressions", bad_fraction, bad_rng)
    schema = load_avro_schema("impression") if fmt == "avro" else None
    impression_paths = [out / f"impressions-{s:05d}-of-{shards:05d}.{ext}" for s in range(shards)]
    written = 0
    last_report = time.monotonic()

    def shard_chunks(first: int, stop: int) -> Iterator[list]:
        nonlocal written, last_report
        for chunk in range(first // chunk_users, -(-stop // chunk_users)):
            lo, hi = chunk * chunk_users, min(users, (chunk + 1) * chunk_users)
            times = _stream(imp_seq, chunk).integers(start_micros, end_micros, size=(hi - lo, per_user),
                                                     dtype=np.int64)
            times.sort(axis=1)
            a, b = max(lo, first), min(hi, stop)
            names = [f"device-{u:0{device_width}d}" for u in range(a, b)]
            devices = [name for name in names for _ in range(per_user)]
            ids = [f"imp-{n:0{imp_width}d}" for n in range(a * per_user, b * per_user)]
            flat = times[a - lo:b - lo].ravel().tolist()
            records = _encode_impressions(fmt, devices, flat, ids)
            if bad_fraction:
                records = imp_bad.add(records, lambda i, devices=devices, flat=flat, ids=ids:
                                      _micro_impression_record(devices[i], flat[i], ids[i]))
            written += len(flat)
            yield records
            now = time.monotonic()
            if log and now - last_report >= PROGRESS_SECONDS:
                last_report = now
                log(f"{written:,} / {total_impressions:,} impressions ({100 * written / total_impressions:.0f}%), "
                    f"{written / max(now - began, 1e-9):,.0f} impressions/s")

    for s, path in enumerate(impression_paths):
        _write_file(path, fmt, schema, sync_marker, shard_chunks(s * users // shards, (s + 1) * users // shards),
                    sidecars, event_files)

    stats = MicrobenchmarkStats(
        users=users, impressions_per_user=per_user, impressions=written, conversions=n_conv,
        queries=products * MICRO_SCHEDULES, batch_size=batch_size, epsilon=epsilon,
        bad_impressions=imp_bad.written, bad_conversions=conv_bad.written,
        impression_files=[str(path) for path in impression_paths],
        conversion_files=[str(path) for path in conversion_paths],
        bad_by_reason={"impressions": dict(sorted(imp_bad.by_reason.items())),
                        "conversions": dict(sorted(conv_bad.by_reason.items()))},
    )
    parameters = {
        "knob1": knob1, "knob2": knob2, "batch_size": batch_size, "products": products, "days": days,
        "start": _iso_micros(start_micros), "start_micros": start_micros, "seed": seed, "format": fmt,
        "shards": shards, "bad_fraction": bad_fraction,
    }
    model = {
        "advertiser_site": MICRO_ADVERTISER, "querier_site": MICRO_ADVERTISER, "publisher_site": MICRO_PUBLISHER,
        "campaign_id": MICRO_CAMPAIGN, "products": product_names, "schedules_per_product": MICRO_SCHEDULES,
        "users": "ceil(batch_size / knob1)", "impressions_per_user": "ceil(knob2 * days)",
        "impression_days": [0, days], "conversion_days": [MICRO_CONVERSION_FIRST_DAY, days],
        "conversion_value": MICRO_VALUE, "window_days": MICRO_WINDOW_DAYS, "logic": MICRO_LOGIC, "dimension": 1,
        "report_global_sensitivity": MICRO_VALUE, "query_global_sensitivity": MICRO_VALUE, "norm": "L1",
        "alpha": MICRO_ALPHA, "beta": MICRO_BETA, "expected_value": MICRO_VALUE,
        "epsilon": "sensitivity * ln(1 / beta) / (alpha * batch_size * expected_value)",
    }
    write_generation_json(out, "microbenchmark", parameters, model, stats)
    return stats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pipelines.generate microbenchmark``."""
    parser.add_argument("--knob1", type=Real(0, 1, low_open=True), required=True,
                        help="fraction of the users taking part in each query, in (0, 1]: users = ceil(B / knob1)")
    parser.add_argument("--knob2", type=Real(0, low_open=True), required=True,
                        help="impressions per user per day, > 0: each user has ceil(knob2 * days) impressions")
    add_common_arguments(parser, MICRO_START, "start of the first day, YYYY-MM-DD (00:00 UTC) or ISO 8601")
    parser.add_argument("--shards", type=POSITIVE_INTEGER, default=None,
                        help="number of impression files (default: about a million impressions each); "
                             "conversions go to one file")
    parser.add_argument("--batch-size", type=POSITIVE_INTEGER, default=MICRO_BATCH_SIZE,
                        help=f"reports per query batch B (default {MICRO_BATCH_SIZE})")
    parser.add_argument("--products", type=POSITIVE_INTEGER, default=MICRO_PRODUCTS,
                        help=f"number of products, each queried twice (default {MICRO_PRODUCTS})")
    parser.add_argument("--days", type=Integer(MICRO_CONVERSION_FIRST_DAY + 1), default=MICRO_DAYS,
                        help=f"number of days, more than {MICRO_CONVERSION_FIRST_DAY} (default {MICRO_DAYS})")
    add_bad_fraction_argument(parser)


def run_cli(args: argparse.Namespace) -> int:
    """Generate from parsed options and print the summary (``ValueError`` / ``OSError`` go to the caller)."""
    try:
        start_micros = parse_start(args.start)
    except ValueError:
        raise ValueError(f"--start must be a date YYYY-MM-DD or an ISO 8601 date-time, got {args.start!r}") from None
    began = time.monotonic()
    stats = generate_microbenchmark(args.output, knob1=args.knob1, knob2=args.knob2, batch_size=args.batch_size,
                                    products=args.products, days=args.days, start_micros=start_micros,
                                    seed=args.seed, fmt=args.format, shards=args.shards,
                                    bad_fraction=args.bad_fraction, progress=not args.quiet)
    elapsed = time.monotonic() - began
    bad = stats.bad_impressions + stats.bad_conversions
    print(f"generate microbenchmark: wrote {stats.users:,} users x {stats.impressions_per_user} = "
          f"{stats.impressions:,} impressions and {stats.conversions:,} conversions ({stats.queries} queries of "
          f"{stats.batch_size:,}, epsilon {stats.epsilon:.6g}), {bad:,} bad records, in {elapsed:.1f} s")
    print(f"  impressions: {', '.join(stats.impression_files)}")
    print(f"  conversions: {', '.join(stats.conversion_files)}")
    print(f"  summary: {Path(args.output) / 'generation.json'}")
    return 0
