"""The PATCG-like dataset (Cookie Monster paper Sec. 8.1, 8.3): ``python -m pipelines.generate patcg-like --output DIR``.

Seed 003 Sec. 8.3 evaluates on the synthetic PATCG dataset: 24M conversions of one
advertiser, 16M users, about 1 % of the conversions attributable to an
impression, 3.2 impressions per user shown ads, 1.5 conversions per converting
user, and the conversion attribute ``conv_attribute_2`` (uniform on 0..9) used
as the product, queried 8 times each (80 queries). The paper's artifact keeps
only the devices that convert, caps values at 15 and runs PATCG with a 7-day
attribution window. This module writes a dataset with those statistics, at
``--scale`` times the paper's size, as impressions and conversions files in the
formats of the ``microbenchmark`` generator (``pipelines/generate.py``):
``DIR/impressions-SSSSS-of-NNNNN.<ext>``, ``DIR/conversions-SSSSS-of-NNNNN.<ext>``
and ``DIR/generation.json`` (parameters, model constants, stats).

The model
---------
Times are UTC microseconds; ``start`` defaults to 2024-01-01T00:00:00Z and
day ``d`` means ``start + d * 86,400 s``.

* **Users.** ``U = round(16,000,000 * scale)`` devices ``device-NNN`` (zero
  padded to the digits of ``U``). Every one of them converts: the dataset keeps
  converters only, as the artifact's preprocessing does.
* **Conversions.** User ``u`` has ``1 + Poisson(0.5)`` conversions (mean 1.5;
  about ``24M * scale`` in all), each at a uniform microsecond of the 120-day
  conversion period ``[day 30, day 150)`` (``PATCG_LEAD_DAYS = 30`` days of
  impressions come first, so every window of up to 30 days is fully covered).
  Each conversion has an attribute ``a`` uniform on 0..9 (``conv_attribute_2``):
  product ``product-a``, query key ``attribute=a``. Its value is
  ``round(lognormal(mean=1.5, sigma=0.8), 2)`` clipped to ``[0.01, 15]`` (the
  cap ``Delta = 15`` of the artifact's ``cap_value``; about 6.5 % of the values
  hit it; mean about 5.7).
* **Requests.** Every conversion asks for a report of advertiser and querier
  ``advertiser.example``: campaigns ``[patcg-ads]``, last touch, window
  ``--window-days`` days (default 7, the artifact's PATCG runs), dimension 1,
  report and query global sensitivity 15, L1, and
  ``requested_epsilon = Delta ln(1/beta) / (alpha * S)`` with ``Delta = 15``,
  ``alpha = 0.05``, ``beta = 0.01`` and the artifact's expected batch sum
  ``S = B c~ = 2000``: 0.690776, the same at every scale (so the per-device
  budget dynamics do not depend on ``--scale``; Cookie Monster paper Sec. 8.1's formula).
* **Impressions.** Each user is shown ads with probability ``p`` (independently
  of its conversions); such a user has ``1 + Poisson(2.2)`` impressions (mean
  3.2) at uniform microseconds of ``[day 0, day 150)``, all of campaign
  ``patcg-ads`` of ``advertiser.example`` on ``publisher.example`` (no product,
  no filter key).
* **The attributable share.** ``p`` is set so that the *expected* share of
  conversions with at least one impression of the same device in the window
  ``[t - W days, t]`` is exactly ``PATCG_ATTRIBUTABLE = 1 %``. With ``L = 150``
  days of impressions and ``n = 1 + N`` impressions, ``N ~ Poisson(lambda = 2.2)``,
  independent of the conversion time ``t``, the window covers ``c(t) = min(W, t)``
  days of ``[0, L)`` (``t`` in days from ``start``; ``c = W`` whenever ``W <= 30``),
  so an impressed user's conversion is missed with probability
  ``E[(1 - c/L)^n] = (1 - c/L) exp(-lambda c / L)``. Averaging
  ``h(c) = 1 - (1 - c/L) exp(-lambda c/L)`` over ``t`` uniform on ``[30, 150)``
  (in closed form, ``patcg_hit_probability``) gives ``P_hit(W)``, and
  ``p = 0.01 / P_hit(W)``: for ``W = 7``, ``P_hit = 0.1397`` and ``p = 0.0716``
  (about 3.7M impressions at full scale); for ``W = 30``, ``p = 0.0206``. The
  realised share is measured exactly while generating (``attributable_fraction``).
* **Queries.** ``B = floor(min_a (conversions with attribute a) / 8)``: every
  key gets 8 full batches of ``B`` reports in time order (about 300,000 at full
  scale; the paper's batches are 280,000 to 303,009), leftovers stay
  incomplete; 80 queries.

Files and memory
----------------
Users are generated in fixed chunks of ``PATCG_CHUNK_USERS`` consecutive users,
each chunk from its own random streams (``files.stream``: one for the counts,
one for times, attributes and values), so the records do not depend on the
format or the number of files. A first pass draws only the counts (cheap) to
know the totals, hence the id widths and the number of files. The second pass
generates each chunk's rows vectorised, measures the attributable conversions
(a ``searchsorted`` of each conversion into its device's sorted impressions),
writes the chunk's impressions (user by user, each user's in time order, ids
``imp-N`` in file order) and appends its conversions to one of ``K`` temporary
*time buckets* (equal slices of the conversion period, ``K = ceil(conversions
/ 1M)``) as packed binary rows (15 bytes a conversion). Then each bucket is
read back, sorted by time (stable: ties keep user order) and written as one
conversions file, ids ``conv-N`` in time order. Memory is one chunk plus one
bucket (about a million conversions) whatever ``--scale``; the buckets take
about 360 MB of disk at full scale, in a temporary directory inside ``DIR``
removed at the end. Impression files are ranges of chunks of about a million
impressions each. The same seed gives the same files byte for byte (Avro sync
marker from the seed).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from schemas.formats import load_avro_schema
from schemas.option_values import Integer, Real
from schemas.time_units import MAX_EVENT_TIME_MICROS, MICROS_PER_DAY, iso_micros
from synthetic import files as datafiles

DATASET = "patcg-like"

# Model constants (Cookie Monster paper Sec. 8.3 and the paper's artifact; recorded in generation.json).
PATCG_USERS = 16_000_000  # users at scale 1, all converting
PATCG_CONVERSIONS = 24_000_000  # the paper's conversions (expected here: 1.5 per user)
PATCG_EXTRA_CONVERSIONS = 0.5  # conversions per user = 1 + Poisson(0.5)
PATCG_LEAD_DAYS = 30  # impressions start this many days before the conversion period
PATCG_CONVERSION_DAYS = 120  # the conversion period: [start + 30 d, start + 150 d)
PATCG_IMPRESSION_DAYS = PATCG_LEAD_DAYS + PATCG_CONVERSION_DAYS  # impressions over [start, start + 150 d)
PATCG_EXTRA_IMPRESSIONS = 2.2  # impressions per user shown ads = 1 + Poisson(2.2), mean 3.2
PATCG_ATTRIBUTABLE = 0.01  # expected share of conversions with an impression in the window
PATCG_ATTRIBUTES = 10  # conv_attribute_2 uniform on 0..9: the product and query key
PATCG_BATCHES_PER_KEY = 8  # queries per key (80 in all)
PATCG_VALUE_MEAN_LOG, PATCG_VALUE_SIGMA = 1.5, 0.8  # value = round(lognormal(1.5, 0.8), 2) ...
PATCG_VALUE_MIN, PATCG_VALUE_CAP = 0.01, 15.0  # ... clipped to [0.01, 15]; Delta = 15 (artifact's cap_value)
PATCG_ALPHA, PATCG_BETA = 0.05, 0.01
PATCG_EXPECTED_BATCH_SUM = 2000.0  # B c~ of the artifact's accuracy target
PATCG_EPSILON = PATCG_VALUE_CAP * math.log(1 / PATCG_BETA) / (PATCG_ALPHA * PATCG_EXPECTED_BATCH_SUM)  # 0.690776
PATCG_WINDOW_DAYS = 7  # the artifact's PATCG runs
PATCG_LOGIC = "last_touch"
PATCG_ADVERTISER = "advertiser.example"  # also the querier
PATCG_PUBLISHER = "publisher.example"
PATCG_CAMPAIGN = "patcg-ads"
PATCG_START = "2024-01-01T00:00:00Z"
PATCG_CHUNK_USERS = 50_000  # users generated at once, each chunk with its own random streams
PATCG_RECORDS_PER_SHARD = 1_000_000  # about this many records per file
PATCG_MIN_USERS = 1000  # fewer users cannot fill 80 batches reliably
_BUCKET_ROW = np.dtype([("time", "<i8"), ("user", "<u4"), ("attribute", "u1"), ("cents", "<u2")])  # packed: 15 bytes


@dataclass(frozen=True)
class PatcgStats:
    """What ``generate_patcg`` wrote (Cookie Monster paper Sec. 8.3): ``users`` converting devices, ``impressed_users`` of
    them shown ``impressions`` impressions, ``conversions`` conversions (``conversions_by_attribute`` per value
    of ``conv_attribute_2``), of which ``attributable_conversions`` have an impression of the same device in
    the ``window_days``-day window before them; ``queries`` batches of ``batch_size`` reports each requesting
    ``epsilon``."""

    users: int
    impressed_users: int
    impressions: int
    conversions: int
    batch_size: int
    epsilon: float
    queries: int
    window_days: int
    attributable_conversions: int
    attributable_fraction: float
    impressions_per_impressed_user: float
    conversions_per_user: float
    impressed_fraction: float
    conversions_by_attribute: list[int] = field(default_factory=list)
    impression_files: list[str] = field(default_factory=list)
    conversion_files: list[str] = field(default_factory=list)


def _window_integral(a: float, b: float, lam: float, length: float) -> float:
    """``integral_a^b h(c) dc`` for ``h(c) = 1 - (1 - c/L) exp(-lam c/L)`` (days)."""
    def antiderivative(c: float) -> float:  # of (1 - c/L) exp(-lam c/L) dc
        x = c / length
        return length * math.exp(-lam * x) * ((x - 1) / lam + 1 / lam ** 2)

    return (b - a) - (antiderivative(b) - antiderivative(a))


def patcg_hit_probability(window_days: float) -> float:
    """The probability that a conversion of a user shown ads has one of its impressions in the window
    ``[t - W days, t]`` (Cookie Monster paper Sec. 8.3's 1 % attribution rate is ``p`` times this; see the module docstring):
    the mean over ``t`` uniform on the conversion period of ``1 - (1 - c/L) exp(-lambda c/L)``,
    ``c = min(W, t)`` the days of impressions the window covers, ``L = 150``, ``lambda = 2.2``."""
    lam, length = PATCG_EXTRA_IMPRESSIONS, float(PATCG_IMPRESSION_DAYS)
    lo, hi = float(PATCG_LEAD_DAYS), float(PATCG_IMPRESSION_DAYS)
    w = min(float(window_days), length)
    total = 0.0
    if w > lo:  # windows reaching before the data's start: c = t for t < W
        total += _window_integral(lo, min(w, hi), lam, length)
    covered = max(0.0, hi - max(w, lo))  # t in [max(W, 30), 150): c = W
    if covered:
        h = 1.0 - (1.0 - w / length) * math.exp(-lam * w / length)
        total += covered * h
    return total / (hi - lo)


def patcg_impressed_probability(window_days: float) -> float:
    """``p``, the share of users shown ads, such that the expected attributable share of conversions is
    ``PATCG_ATTRIBUTABLE`` (1 %, Cookie Monster paper Sec. 8.3) for the ``window_days``-day window."""
    return PATCG_ATTRIBUTABLE / patcg_hit_probability(window_days)


def patcg_users(scale: float) -> int:
    """The number of (converting) users at ``scale``: ``round(16M * scale)`` (Cookie Monster paper Sec. 8.3)."""
    return int(round(PATCG_USERS * scale))


def _chunk_counts(seq: np.random.SeedSequence, chunk: int, n_users: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Conversions and impressions of each user of ``chunk`` (0 impressions for users not shown ads)."""
    rng = datafiles.stream(seq, chunk)
    conversions = 1 + rng.poisson(PATCG_EXTRA_CONVERSIONS, size=n_users)
    impressed = rng.random(n_users) < p
    impressions = np.where(impressed, 1 + rng.poisson(PATCG_EXTRA_IMPRESSIONS, size=n_users), 0)
    return conversions.astype(np.int64), impressions.astype(np.int64)


def _values_cents(rng: np.random.Generator, n: int) -> np.ndarray:
    """``round(clip(lognormal(1.5, 0.8), 0.01, 15), 2)`` in cents (``cents / 100.0`` is the rounded float)."""
    raw = rng.lognormal(PATCG_VALUE_MEAN_LOG, PATCG_VALUE_SIGMA, size=n)
    cents = np.rint(raw * 100.0)
    return np.clip(cents, round(PATCG_VALUE_MIN * 100), round(PATCG_VALUE_CAP * 100)).astype(np.uint16)


def patcg_request(attribute: int, window_days: int) -> dict:
    """The attribution request of a conversion with ``conv_attribute_2 = attribute`` (Avro form; Cookie Monster paper
    Sec. 8.1's scenario with the artifact's PATCG parameters)."""
    return datafiles.last_touch_request(window_days, [PATCG_CAMPAIGN], f"product-{attribute}", PATCG_EPSILON, PATCG_VALUE_CAP,
                              f"attribute={attribute}")


def generate_patcg(out_dir: str | os.PathLike, *, scale: float = 0.01, seed: int = 0, fmt: str = "avro",
                   window_days: int = PATCG_WINDOW_DAYS, start: str | int = PATCG_START,
                   progress: bool = True, sidecars: bool = False, event_files: bool = True) -> PatcgStats:
    """Write the PATCG-like dataset of Cookie Monster paper Sec. 8.3 (model: the module docstring) at ``scale`` times the
    paper's size to ``out_dir``; return what was written. ``start`` is an ISO 8601 date(-time) or epoch
    microseconds. With ``sidecars`` (Avro only), every file also gets its column side-car
    (``files.ColumnSidecar``, for the evaluation); with ``event_files=False`` as well, only the side-cars are
    written. Raises ``ValueError`` for a bad option (the message names it)."""
    datafiles.check_format_and_scale(fmt, scale)
    users = patcg_users(scale)
    if users < PATCG_MIN_USERS:
        raise ValueError(f"--scale {scale} gives {users:,} users; at least {PATCG_MIN_USERS:,} are needed for 80 "
                         f"batches (scale >= {PATCG_MIN_USERS / PATCG_USERS:g})")
    if users >= 2 ** 32:
        raise ValueError(f"--scale {scale} gives {users:,} users; at most {2 ** 32 - 1:,} are supported")
    window_days = datafiles.check_integer("--window-days", window_days, 1, PATCG_IMPRESSION_DAYS)
    window_days = int(window_days)
    start_micros = datafiles.start_micros_of(start)
    end_micros = start_micros + PATCG_IMPRESSION_DAYS * MICROS_PER_DAY
    if start_micros < 0 or end_micros > MAX_EVENT_TIME_MICROS:
        raise ValueError("the data's 150 days must lie between 1970-01-01 and 2100-01-01 (UTC)")
    conv_lo = start_micros + PATCG_LEAD_DAYS * MICROS_PER_DAY
    conv_span = PATCG_CONVERSION_DAYS * MICROS_PER_DAY
    window_micros = window_days * MICROS_PER_DAY
    imp_span = PATCG_IMPRESSION_DAYS * MICROS_PER_DAY  # also the per-user stride of the sort keys
    p_impressed = patcg_impressed_probability(window_days)

    out = datafiles.prepare_output(out_dir)
    (count_seq, row_seq, _), sync_marker = datafiles.seed_streams(seed, 3)
    log = datafiles.Progress(DATASET, progress)
    chunks = -(-users // PATCG_CHUNK_USERS)

    def chunk_users(c: int) -> tuple[int, int]:
        return c * PATCG_CHUNK_USERS, min(users, (c + 1) * PATCG_CHUNK_USERS)

    # Pass 1: the counts only, for the totals (id widths, number of files).
    chunk_conversions = np.zeros(chunks, dtype=np.int64)
    chunk_impressions = np.zeros(chunks, dtype=np.int64)
    impressed_users = 0
    for c in range(chunks):
        lo, hi = chunk_users(c)
        conv_counts, imp_counts = _chunk_counts(count_seq, c, hi - lo, p_impressed)
        chunk_conversions[c], chunk_impressions[c] = conv_counts.sum(), imp_counts.sum()
        impressed_users += int(np.count_nonzero(imp_counts))
    total_conversions, total_impressions = int(chunk_conversions.sum()), int(chunk_impressions.sum())
    conv_shards = max(1, -(-total_conversions // PATCG_RECORDS_PER_SHARD))
    imp_shards = max(1, min(chunks, -(-total_impressions // PATCG_RECORDS_PER_SHARD)))
    log(f"{users:,} users, {total_conversions:,} conversions, {total_impressions:,} impressions "
        f"({impressed_users:,} users shown ads, p = {p_impressed:.6f}); generating", force=True)

    device_width, imp_width, conv_width = len(str(users)), len(str(total_impressions)), len(str(total_conversions))
    requests = [patcg_request(a, window_days) for a in range(PATCG_ATTRIBUTES)]
    encoder = datafiles.RequestEncoder(requests)
    products = [f"product-{a}" for a in range(PATCG_ATTRIBUTES)]
    by_attribute = np.zeros(PATCG_ATTRIBUTES, dtype=np.int64)
    attributable = 0
    written = {"impressions": 0, "conversions": 0, "users": 0}

    with tempfile.TemporaryDirectory(prefix=".patcg-buckets-", dir=out) as tmp:
        bucket_paths = [Path(tmp) / f"bucket-{b:05d}.bin" for b in range(conv_shards)]
        with contextlib.ExitStack() as files:
            buckets = [files.enter_context(open(path, "wb")) for path in bucket_paths]

            def generate_chunk(c: int) -> list:
                """Chunk ``c``: its impressions encoded (returned) and its conversions appended to the buckets."""
                nonlocal attributable
                lo, hi = chunk_users(c)
                conv_counts, imp_counts = _chunk_counts(count_seq, c, hi - lo, p_impressed)
                rng = datafiles.stream(row_seq, c)
                n_conv, n_imp = int(conv_counts.sum()), int(imp_counts.sum())
                conv_user = np.repeat(np.arange(hi - lo, dtype=np.int64), conv_counts)
                conv_time = rng.integers(conv_lo, conv_lo + conv_span, size=n_conv, dtype=np.int64)
                attribute = rng.integers(0, PATCG_ATTRIBUTES, size=n_conv).astype(np.uint8)
                cents = _values_cents(rng, n_conv)
                imp_user = np.repeat(np.arange(hi - lo, dtype=np.int64), imp_counts)
                imp_offset = rng.integers(0, imp_span, size=n_imp, dtype=np.int64)
                imp_key = np.sort(imp_user * imp_span + imp_offset)  # user by user, each in time order
                imp_user, imp_offset = imp_key // imp_span, imp_key % imp_span

                # attributable: the device's last impression at or before t is at or after t - window
                conv_key = conv_user * imp_span + (conv_time - start_micros)
                last = np.searchsorted(imp_key, conv_key, side="right") - 1
                safe = np.maximum(last, 0)
                hit = (last >= 0) & (imp_user[safe] == conv_user) & (imp_offset[safe] >= conv_key % imp_span - window_micros)
                attributable += int(np.count_nonzero(hit))
                by_attribute[:] += np.bincount(attribute, minlength=PATCG_ATTRIBUTES)

                rows = np.empty(n_conv, dtype=_BUCKET_ROW)
                rows["time"], rows["user"], rows["attribute"], rows["cents"] = conv_time, conv_user + lo, attribute, cents
                bucket = (conv_time - conv_lo) * conv_shards // conv_span
                for b in np.unique(bucket).tolist():
                    rows[bucket == b].tofile(buckets[b])

                names = [f"device-{u:0{device_width}d}" for u in range(lo, hi)]
                first = written["impressions"]
                records = datafiles.encode_impressions(
                    fmt, [names[u] for u in imp_user.tolist()], (imp_offset + start_micros).tolist(),
                    [f"imp-{n:0{imp_width}d}" for n in range(first, first + n_imp)], publisher=PATCG_PUBLISHER,
                    advertiser=PATCG_ADVERTISER, campaign=PATCG_CAMPAIGN, product="")
                written["impressions"] += n_imp
                written["conversions"] += n_conv
                written["users"] += hi - lo
                log(f"{written['users']:,} / {users:,} users ({100 * written['users'] / users:.0f}%): "
                    f"{written['conversions']:,} conversions, {written['impressions']:,} impressions")
                return records

            def shard_chunks(s: int) -> Iterator[list]:
                for c in range(s * chunks // imp_shards, (s + 1) * chunks // imp_shards):
                    yield generate_chunk(c)

            imp_schema = load_avro_schema("impression") if fmt == "avro" else None
            impression_paths = datafiles.shard_paths(out, "impressions", imp_shards, fmt)
            for s, path in enumerate(impression_paths):
                datafiles.write_file(path, fmt, imp_schema, sync_marker, shard_chunks(s), sidecars, event_files)

        # Pass 2: each time bucket sorted and written as one conversions file, ids in time order.
        conv_schema = load_avro_schema("conversion") if fmt == "avro" else None
        conversion_paths = datafiles.shard_paths(out, "conversions", conv_shards, fmt)
        first_id = 0
        for b, path in enumerate(conversion_paths):
            rows = np.fromfile(bucket_paths[b], dtype=_BUCKET_ROW)
            bucket_paths[b].unlink()
            rows = rows[np.argsort(rows["time"], kind="stable")]

            def bucket_chunks(rows: np.ndarray = rows, first_id: int = first_id) -> Iterator[list]:
                step = 100_000
                for i in range(0, rows.size, step):
                    part = rows[i:i + step]
                    attributes = part["attribute"].tolist()
                    yield encoder.encode(
                        fmt, [f"device-{u:0{device_width}d}" for u in part["user"].tolist()], part["time"].tolist(),
                        [f"conv-{n:0{conv_width}d}" for n in range(first_id + i, first_id + i + part.size)],
                        PATCG_ADVERTISER, (part["cents"] / 100.0).tolist(), [products[a] for a in attributes],
                        attributes)

            datafiles.write_file(path, fmt, conv_schema, sync_marker, bucket_chunks(), sidecars, event_files)
            first_id += rows.size
            log(f"conversions file {b + 1} / {conv_shards} written ({first_id:,} conversions)")
    assert written["conversions"] == total_conversions == first_id and written["impressions"] == total_impressions

    batch_size = int(by_attribute.min()) // PATCG_BATCHES_PER_KEY
    if batch_size < 1:
        raise ValueError(f"--scale {scale} is too small: an attribute has {int(by_attribute.min())} conversions, "
                         f"fewer than {PATCG_BATCHES_PER_KEY} batches of 1")
    stats = PatcgStats(
        users=users, impressed_users=impressed_users, impressions=total_impressions, conversions=total_conversions,
        batch_size=batch_size, epsilon=PATCG_EPSILON, queries=PATCG_ATTRIBUTES * PATCG_BATCHES_PER_KEY,
        window_days=window_days, attributable_conversions=attributable,
        attributable_fraction=attributable / total_conversions,
        impressions_per_impressed_user=total_impressions / max(impressed_users, 1),
        conversions_per_user=total_conversions / users, impressed_fraction=impressed_users / users,
        conversions_by_attribute=by_attribute.tolist(),
        impression_files=[str(path) for path in impression_paths],
        conversion_files=[str(path) for path in conversion_paths],
    )
    parameters = {"scale": scale, "seed": seed, "format": fmt, "window_days": window_days,
                  "start": iso_micros(start_micros), "start_micros": start_micros}
    datafiles.write_generation_json(out, DATASET, parameters, patcg_model(window_days), stats)
    return stats


def patcg_model(window_days: int = PATCG_WINDOW_DAYS) -> dict:
    """The model constants (for ``generation.json``; Cookie Monster paper Sec. 8.1, 8.3)."""
    return {
        "users": "round(16,000,000 * scale), all converting", "users_at_scale_1": PATCG_USERS,
        "paper_conversions": PATCG_CONVERSIONS, "conversions_per_user": f"1 + Poisson({PATCG_EXTRA_CONVERSIONS})",
        "lead_days": PATCG_LEAD_DAYS, "conversion_days": [PATCG_LEAD_DAYS, PATCG_IMPRESSION_DAYS],
        "impression_days": [0, PATCG_IMPRESSION_DAYS],
        "impressions_per_impressed_user": f"1 + Poisson({PATCG_EXTRA_IMPRESSIONS})",
        "attributable_target": PATCG_ATTRIBUTABLE, "hit_probability": patcg_hit_probability(window_days),
        "impressed_probability": patcg_impressed_probability(window_days),
        "impressed_probability_rule": "attributable_target / hit_probability(window_days)",
        "attributes": PATCG_ATTRIBUTES, "product": "product-<attribute>", "query_key": "attribute=<attribute>",
        "batches_per_key": PATCG_BATCHES_PER_KEY,
        "batch_size_rule": "floor(min over attributes of conversions / batches_per_key)",
        "value": f"round(lognormal({PATCG_VALUE_MEAN_LOG}, {PATCG_VALUE_SIGMA}), 2) clipped to "
                 f"[{PATCG_VALUE_MIN}, {PATCG_VALUE_CAP}]",
        "advertiser_site": PATCG_ADVERTISER, "querier_site": PATCG_ADVERTISER, "publisher_site": PATCG_PUBLISHER,
        "campaign_id": PATCG_CAMPAIGN, "window_days": window_days, "logic": PATCG_LOGIC, "dimension": 1,
        "report_global_sensitivity": PATCG_VALUE_CAP, "query_global_sensitivity": PATCG_VALUE_CAP, "norm": "L1",
        "alpha": PATCG_ALPHA, "beta": PATCG_BETA, "expected_batch_sum": PATCG_EXPECTED_BATCH_SUM,
        "epsilon": "sensitivity * ln(1 / beta) / (alpha * expected_batch_sum)", "epsilon_value": PATCG_EPSILON,
        "chunk_users": PATCG_CHUNK_USERS, "records_per_file": PATCG_RECORDS_PER_SHARD,
    }


# --------------------------------------------------------------------------- CLI (registered by pipelines.generate)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pipelines.generate patcg-like`` (Cookie Monster paper Sec. 8.3)."""
    datafiles.add_common_arguments(parser, PATCG_START, f"start of the impressions, YYYY-MM-DD (00:00 UTC) or ISO 8601; "
                                              f"conversions begin {PATCG_LEAD_DAYS} days later")
    parser.add_argument("--scale", type=Real(0, low_open=True), default=0.01,
                        help="fraction of the paper's size: round(16M * scale) users, about 24M * scale conversions "
                             "(default 0.01)")
    parser.add_argument("--window-days", type=Integer(1, PATCG_IMPRESSION_DAYS), default=PATCG_WINDOW_DAYS,
                        help=f"attribution window of the requests, in days, 1 to {PATCG_IMPRESSION_DAYS}; the share "
                             f"of users shown ads is set so that 1 %% of the conversions are attributable in it "
                             f"(default {PATCG_WINDOW_DAYS})")


def run_cli(args: argparse.Namespace) -> int:
    """Generate from parsed options and print the summary (``ValueError`` / ``OSError`` go to the caller)."""
    began = time.monotonic()
    stats = generate_patcg(args.output, scale=args.scale, seed=args.seed, fmt=args.format, window_days=args.window_days,
                           start=args.start, progress=not args.quiet)
    print(f"generate {DATASET}: wrote {stats.users:,} users, {stats.conversions:,} conversions "
          f"({stats.conversions_per_user:.3f} per user) and {stats.impressions:,} impressions "
          f"({stats.impressed_users:,} users shown ads, {stats.impressions_per_impressed_user:.3f} each) "
          f"in {time.monotonic() - began:.1f} s")
    print(f"  attributable: {stats.attributable_fraction:.3%} of the conversions have an impression in the "
          f"{stats.window_days}-day window")
    print(f"  queries: {stats.queries} ({PATCG_ATTRIBUTES} keys x {PATCG_BATCHES_PER_KEY} batches of "
          f"{stats.batch_size:,} reports), epsilon {stats.epsilon:.6g}")
    print(f"  conversions by attribute: {', '.join(f'{n:,}' for n in stats.conversions_by_attribute)}")
    datafiles.print_outputs(stats, args.output)
    return 0

