"""Synthetic input data for the pipelines.

``python -m pipelines.generate kanon --out DIR [options]`` writes interest-group
*join events* (``Join(u, t)`` of seed 004 Sec. 2.1) for the k-anonymity server,
as sharded Avro, JSON Lines or length-delimited protobuf files
``DIR/joins-SSSSS-of-NNNNN.<ext>`` plus ``DIR/generation.json`` (parameters,
model constants and counts).

``python -m pipelines.generate microbenchmark --knob1 K1 --knob2 K2 --out DIR``
writes the synthetic microbenchmark of seed 003 (Cookie Monster) Sec. 8.1-8.2:
impressions and conversions with their attribution requests,
``DIR/impressions-SSSSS-of-NNNNN.<ext>`` and ``DIR/conversions-SSSSS-of-NNNNN.<ext>``
plus ``DIR/generation.json`` (model below, after the ``kanon`` one).

``python -m pipelines.generate patcg-like --out DIR [--scale S]`` and
``python -m pipelines.generate criteo-like --out DIR [--scale S] [--augment X]``
write the realistic datasets of seed 003 Sec. 8.3 and 8.4 in the same formats;
their models are documented in ``pipelines/datasets/patcg.py`` and
``pipelines/datasets/criteo.py`` (the file helpers all generators share are in
``pipelines/datasets/files.py``).

``python -m pipelines.generate ara --out DIR`` and ``python -m pipelines.generate paa --out DIR`` write the
inputs of the summary-report clients (``python -m pipelines.summary_client``, seed 000 Alg. 2 and 3): ARA
sources and triggers, and Private Aggregation ad events; their models are documented in
``pipelines/datasets/ara.py`` and ``pipelines/datasets/paa.py``. ``python -m pipelines.generate reports --out DIR``
writes aggregatable reports and an output domain directly, for the Aggregation Service
(``python -m pipelines.aggregate``; model in ``pipelines/datasets/reports.py``).
``python -m pipelines.generate event-level --out DIR [--sources N | --devices N]`` writes ARA sources and
triggers for event-level reports (model in ``pipelines/datasets/event_level.py``).

The ``kanon`` model
-------------------
The time range is ``--days`` whole days from ``--start`` (midnight UTC), cut
into calendar weeks counted from the start (the last one may be partial).
Every interest group ``g`` has a *weekly level* ``L_g``, the number of distinct
users that join it in a full week, in one of three classes:

* ``band`` (about 10 % of the groups): ``L_g`` uniform on the integers of
  ``[k - 10, k + 10]``; each week's count is ``L_g`` plus a jitter of at most
  +-3, kept inside the band. These are the groups whose verdict is decided by
  the noise (seed 004 Sec. 5). If the band alone would take more than
  ``MAX_BAND_SHARE`` of the join budget, fewer groups are put in the band.
* ``large`` (a few, at most 5 %): ``L_g`` log-uniform on ``[4k, 40k]``
  (hundreds to thousands of users a week for ``k = 50``). Their number is
  chosen so that their levels stay in that range while taking what is left of
  the join budget, then their levels are rescaled so that the expected total
  matches ``--joins`` exactly.
* ``small`` (the rest, most groups): ``L_g`` lognormal (sigma 1) with its
  median set so that the small groups take ``SMALL_SHARE`` of the budget left
  after the band, truncated at ``k / 2``: far below ``k``. Their weekly count
  is Poisson with mean ``L_g`` (and many have empty weeks).
  The large groups' count is Poisson too.

Each group has a *pool* of ``ceil(L_g * f)`` users, ``f`` uniform on
``[1.5, 3]``, drawn without replacement from the ``--users`` population with a
skew toward low ids (``floor(users * U ** 1.6)``, so some users are in many
groups); each week the active users are a uniform sample of the pool, so users
recur from week to week. Each active user joins a geometric number of times
that week (``P(n) = p (1 - p)^(n - 1)``, ``p = 0.65``, mean about 1.54); each
join falls on a uniform day of the week, at an hour of day drawn from a smooth
day/night curve ``1 + 0.75 cos(2 pi (h + 0.5 - 20) / 24)`` (peak around 20:00
UTC, trough around 08:00 UTC), at a uniform microsecond within the hour.
Timestamps are UTC microseconds since the Unix epoch and lie in
``[start, start + days)``. The expected number of valid joins equals
``--joins`` (the realised count is within a few percent for a few thousand
joins, a fraction of a percent for a million), unless ``--users`` is too small
for the pools (then a warning on stderr gives the expected shortfall).
Groups with tiny levels may have no join at all in the range.

Group ids are ``https://dsp-D.example/ig/NNNNNN`` (D a random DSP in 0..7,
NNNNNN the group number), user ids ``uNNNNNNN`` (7 digits or more).

Bad records (``--bad-fraction F``) are written *in addition* to the valid
joins, at random positions, so that ``bad / (valid + bad)`` is ``F``. Each is a
corrupted copy of a valid join, of a kind the format can express, and is named
by the reason the readers of ``schemas/codecs.py`` give it:

* all formats: empty user id, empty interest group (pb, Avro), negative
  timestamp, timestamp in the year 2200;
* JSON Lines also: a missing field, a string timestamp (``wrong_type``) and a
  truncated line (``malformed_json``);
* protobuf also: a missing timestamp and a garbage message that is still
  length-prefixed, so reading carries on (``malformed_protobuf``).

Output is deterministic: the same parameters and seed give the same files
byte for byte (Avro files use a sync marker derived from the seed). The valid
joins do not depend on the format, the number of shards or the bad fraction.
Memory does not grow with ``--joins``: the per-group state (levels and pools)
is kept, joins are generated week by week for chunks of groups (vectorised
with numpy), sorted by time within the chunk and written at once, records
going round-robin to the shards.

The ``microbenchmark`` model
----------------------------
One advertiser, ``nike.example``, also the querier, sells ``--products`` (10)
products ``product-0`` ... ``product-9`` over ``--days`` (120) days from
``--start-date`` (2024-01-01T00:00:00Z). Each product is queried twice, with
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
import datetime as dt
import functools
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np

from pipelines.datasets import ara, criteo, event_level, paa, patcg, reports
from pipelines.datasets.files import (
    EXTENSIONS,
    PROGRESS_SECONDS,
    YEAR_2200_MICROS,
    BadRecords,
    last_touch_request,
    parse_start,
    prepare_output,
    seed_streams,
    write_generation_json,
)
from pipelines.datasets.files import encode_record as _encode_record
from pipelines.datasets.files import garbage_delimited as _garbage_delimited
from pipelines.datasets.files import interleave as _interleave
from pipelines.datasets.files import iso_micros as _iso_micros
from pipelines.datasets.files import stream as _stream
from pipelines.datasets.files import write_file as _write_file
from schemas import events_pb2
from schemas.codecs import FORMATS, encode_delimited
from schemas.formats import load_avro_schema
from schemas.time_units import MAX_EVENT_TIME_MICROS, MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_SECOND

# Model constants (recorded in generation.json).
JOIN_GEOMETRIC_P = 0.65  # joins per active user per week ~ Geometric(p) on {1, 2, ...}
BAND_FRACTION = 0.10  # nominal share of groups whose weekly level is in [k - 10, k + 10]
BAND_HALF_WIDTH = 10
BAND_WEEKLY_JITTER = 3
MAX_BAND_SHARE = 0.6  # at most this share of the join budget goes to the band
MAX_LARGE_FRACTION = 0.05
LARGE_LEVEL_RANGE = (4.0, 40.0)  # large levels log-uniform on [4k, 40k] before the final rescale
SMALL_SHARE = 0.3  # share of the non-band budget that the small groups take
SMALL_SIGMA = 1.0
POOL_FACTOR_RANGE = (1.5, 3.0)
USER_SKEW = 1.6
DAILY_PEAK_HOUR = 20
DAILY_AMPLITUDE = 0.75
NUM_DSPS = 8
CHUNK_JOINS = 100_000  # expected joins generated and written at once


# Bad-record kinds each format can express (see the module docstring).
BAD_KINDS = {
    "avro": ("empty_user", "empty_group", "negative_time", "absurd_time"),
    "jsonl": ("missing_field", "empty_user", "negative_time", "absurd_time", "string_time", "broken_json"),
    "pb": ("missing_time", "empty_user", "empty_group", "negative_time", "absurd_time", "garbage"),
}
JSON_FIELDS = ("interest_group", "user_id", "event_time_micros")


@dataclass(frozen=True)
class GenerationStats:
    """What a generator wrote.

    ``joins_written`` valid joins and ``bad_written`` malformed records (so the
    readers give ``joins_written`` rows and ``bad_written`` dead letters, with
    reasons counted in ``bad_by_reason``), in ``files``. ``groups_by_class``
    counts the groups of each class (``small``, ``band``, ``large``),
    ``expected_joins`` is the model's expectation of ``joins_written``.
    """

    joins_written: int
    bad_written: int
    files: list[str]
    groups_by_class: dict[str, int]
    bad_by_reason: dict[str, int] = field(default_factory=dict)
    expected_joins: float = 0.0


def hour_weights() -> np.ndarray:
    """Probability of each UTC hour of day: a smooth day/night curve peaking at ``DAILY_PEAK_HOUR``."""
    hours = np.arange(24) + 0.5
    weights = 1.0 + DAILY_AMPLITUDE * np.cos(2 * np.pi * (hours - DAILY_PEAK_HOUR) / 24)
    return weights / weights.sum()


def midnight_utc_micros(day: str) -> int:
    """``YYYY-MM-DD`` as microseconds since the epoch at 00:00 UTC."""
    date = dt.date.fromisoformat(day)
    return int(dt.datetime(date.year, date.month, date.day, tzinfo=dt.timezone.utc).timestamp()) * MICROS_PER_SECOND


# --------------------------------------------------------------------------- model


@dataclass
class _Groups:
    """Per-group state of the kanon model (kept for the whole run; no joins)."""

    names: list[str]
    cls: np.ndarray  # 0 small, 1 band, 2 large
    level: np.ndarray  # float weekly level
    band_level: np.ndarray  # int, meaningful for band groups
    pool_offsets: np.ndarray  # int64, len groups + 1
    pool_users: np.ndarray  # int64 user indices, concatenated pools
    expected_joins: float


CLASS_NAMES = ("small", "band", "large")


def _draw_pool(rng: np.random.Generator, users: int, size: int) -> np.ndarray:
    """``size`` distinct user indices in ``[0, users)``, skewed toward low ids, in draw order."""
    if size >= users:
        return rng.permutation(users)
    if size * 4 > users:
        return rng.choice(users, size=size, replace=False)
    chosen = np.empty(0, dtype=np.int64)
    while chosen.size < size:
        need = size - chosen.size
        candidates = np.floor(users * rng.random(int(need * 1.3) + 8) ** USER_SKEW).astype(np.int64)
        merged = np.concatenate([chosen, candidates])
        _, first = np.unique(merged, return_index=True)
        chosen = merged[np.sort(first)][:size]
    return chosen


def _scaled_to_total(shape: np.ndarray, target: float, cap: float) -> np.ndarray:
    """``min(shape * scale, cap)`` with the scale that makes it sum to ``target`` (as far as the cap allows)."""
    scale = target / shape.sum() if shape.sum() > 0 else 0.0
    for _ in range(20):  # the cut makes the scale a fixed point; a few rounds settle it
        got = np.minimum(shape * scale, cap).sum()
        if got <= 0 or abs(got - target) <= 1e-9 * target or np.all(shape * scale >= cap):
            break
        scale *= target / got
    return np.minimum(shape * scale, cap)


def _build_groups(rng: np.random.Generator, *, groups: int, users: int, joins: int, days: int, k: int) -> _Groups:
    weeks = math.ceil(days / 7)
    week_fracs = np.array([min(7, days - 7 * w) / 7 for w in range(weeks)])
    total_weeks = float(week_fracs.sum())  # days / 7
    mean_joins = 1.0 / JOIN_GEOMETRIC_P
    budget = joins / mean_joins  # expected user-weeks (distinct user x week) to reach the join target

    order = rng.permutation(groups)
    band_lo, band_hi = max(1, k - BAND_HALF_WIDTH), k + BAND_HALF_WIDTH
    band_mean_uw = (band_lo + band_hi) / 2 * total_weeks
    n_band = int(round(BAND_FRACTION * groups))
    n_band = min(n_band, int(MAX_BAND_SHARE * budget / band_mean_uw)) if band_mean_uw > 0 else 0
    n_band = max(0, min(n_band, groups))
    band_level = np.zeros(groups, dtype=np.int64)
    cls = np.zeros(groups, dtype=np.int8)
    band_ids = order[:n_band]
    cls[band_ids] = 1
    band_level[band_ids] = rng.integers(band_lo, band_hi + 1, size=n_band)
    band_uw = float(band_level.sum()) * total_weeks
    remaining = max(0.0, budget - band_uw)

    lo, hi = LARGE_LEVEL_RANGE[0] * k, LARGE_LEVEL_RANGE[1] * k
    large_mean_uw = (hi - lo) / math.log(hi / lo) * total_weeks
    rest = groups - n_band
    n_large = int(round((1 - SMALL_SHARE) * remaining / large_mean_uw))
    n_large = min(max(n_large, 1 if rest >= 2 and remaining > 0 else 0), max(1, int(MAX_LARGE_FRACTION * groups)), rest)
    large_ids = order[n_band:n_band + n_large]
    small_ids = order[n_band + n_large:]
    cls[large_ids] = 2

    level = band_level.astype(np.float64)
    # Small groups: lognormal shape, median scaled to take SMALL_SHARE of the remaining budget, cut at k / 2.
    cap = max(1.0, k / 2)
    small_share = SMALL_SHARE if n_large else 1.0
    if small_ids.size:
        shape = np.exp(SMALL_SIGMA * rng.standard_normal(small_ids.size))
        target = small_share * remaining / total_weeks
        level[small_ids] = _scaled_to_total(shape, target, cap)
    small_uw = float(level[small_ids].sum()) * total_weeks
    if large_ids.size:
        shape = np.exp(rng.uniform(math.log(lo), math.log(hi), size=large_ids.size))
        target = max(0.0, budget - band_uw - small_uw) / total_weeks
        large_cap = users / POOL_FACTOR_RANGE[0]
        level[large_ids] = _scaled_to_total(shape, target, large_cap)
    level = np.minimum(level, users)

    factors = rng.uniform(*POOL_FACTOR_RANGE, size=groups)
    pool_sizes = np.minimum(np.ceil(np.maximum(level, 1.0) * factors), users).astype(np.int64)
    pool_sizes = np.where(cls == 1, np.maximum(pool_sizes, np.minimum(band_hi, users)), pool_sizes)
    offsets = np.zeros(groups + 1, dtype=np.int64)
    np.cumsum(pool_sizes, out=offsets[1:])
    pool_users = np.empty(int(offsets[-1]), dtype=np.int64)
    for g in range(groups):
        pool_users[offsets[g]:offsets[g + 1]] = _draw_pool(rng, users, int(pool_sizes[g]))

    dsps = rng.integers(0, NUM_DSPS, size=groups)
    names = [f"https://dsp-{d}.example/ig/{g:06d}" for g, d in enumerate(dsps.tolist())]
    expected = float(np.minimum(level, pool_sizes).sum()) * total_weeks * mean_joins
    return _Groups(names, cls, level, band_level, offsets, pool_users, expected)


def _weekly_active(rng: np.random.Generator, g: _Groups, lo: int, hi: int, frac: float, k: int) -> np.ndarray:
    """Distinct active users this week for groups ``[lo, hi)``."""
    cls = g.cls[lo:hi]
    pool = g.pool_offsets[lo + 1:hi + 1] - g.pool_offsets[lo:hi]
    active = rng.poisson(g.level[lo:hi] * frac)
    jitter = rng.integers(-BAND_WEEKLY_JITTER, BAND_WEEKLY_JITTER + 1, size=hi - lo)
    band_lo, band_hi = max(1, k - BAND_HALF_WIDTH), k + BAND_HALF_WIDTH
    band = np.clip(g.band_level[lo:hi] + jitter, band_lo, band_hi)
    band = np.rint(band * frac).astype(np.int64)
    active = np.where(cls == 1, band, active)
    return np.minimum(active, pool)


def _generate_chunk(rng: np.random.Generator, g: _Groups, lo: int, hi: int, *, week: int, week_days: int,
                    start_micros: int, k: int, hours_p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group index, user index, time) of the joins of groups ``[lo, hi)`` in ``week``, sorted by time."""
    active = _weekly_active(rng, g, lo, hi, week_days / 7, k)
    base = g.pool_offsets[lo]
    pool = g.pool_users[base:g.pool_offsets[hi]]
    local_offsets = g.pool_offsets[lo:hi + 1] - base
    sizes = np.diff(local_offsets)
    local_group = np.repeat(np.arange(hi - lo), sizes)
    # A random order inside each pool: sort by group + uniform key; the first `active` of each group are active.
    order = np.argsort(local_group + rng.random(pool.size))
    rank = np.arange(pool.size) - local_offsets[local_group]  # local_group is already sorted
    chosen = order[rank < active[local_group]]
    users = pool[chosen]
    groups = local_group[chosen] + lo
    counts = rng.geometric(JOIN_GEOMETRIC_P, size=users.size)
    users = np.repeat(users, counts)
    groups = np.repeat(groups, counts)
    n = users.size
    day = rng.integers(0, week_days, size=n) + 7 * week
    hour = rng.choice(24, size=n, p=hours_p)
    within = rng.integers(0, MICROS_PER_HOUR, size=n)
    times = start_micros + day * MICROS_PER_DAY + hour * MICROS_PER_HOUR + within
    by_time = np.argsort(times, kind="stable")
    return groups[by_time], users[by_time], times[by_time]


# --------------------------------------------------------------------------- writers


class _ShardWriter:
    """Writes records of one format to ``shards`` files, round-robin."""

    def __init__(self, out_dir: Path, fmt: str, shards: int, sync_marker: bytes):
        self.fmt = fmt
        self.paths = [out_dir / f"joins-{s:05d}-of-{shards:05d}.{EXTENSIONS[fmt]}" for s in range(shards)]
        self.handles = [open(path, "wb") for path in self.paths]
        self.avro = []
        if fmt == "avro":
            from fastavro.write import Writer

            schema = load_avro_schema("join_event")
            self.avro = [Writer(handle, schema, sync_marker=sync_marker) for handle in self.handles]
        self.next_shard = 0

    def write(self, records: list) -> None:
        """Write valid or bad records, already encoded for the format (dicts for Avro, str for jsonl, bytes for pb)."""
        shards = len(self.paths)
        for offset in range(shards):
            shard = (self.next_shard + offset) % shards
            part = records[offset::shards]
            if not part:
                continue
            if self.fmt == "avro":
                writer = self.avro[shard]
                for record in part:
                    writer.write(record)
            elif self.fmt == "jsonl":
                self.handles[shard].write("".join(part).encode("utf-8"))
            else:
                self.handles[shard].write(b"".join(part))
        self.next_shard = (self.next_shard + len(records)) % shards

    def close(self) -> None:
        for writer in self.avro:
            writer.flush()
        for handle in self.handles:
            handle.close()


def _encode_valid(fmt: str, names: list[str], groups: np.ndarray, users: np.ndarray, times: np.ndarray,
                  width: int) -> list:
    gl, ul, tl = groups.tolist(), users.tolist(), times.tolist()
    if fmt == "jsonl":
        return [f'{{"interest_group": "{names[g]}", "user_id": "u{u:0{width}d}", "event_time_micros": {t}}}\n'
                for g, u, t in zip(gl, ul, tl)]
    if fmt == "avro":
        return [{"interest_group": names[g], "user_id": f"u{u:0{width}d}", "event_time_micros": t}
                for g, u, t in zip(gl, ul, tl)]
    message = events_pb2.JoinEvent
    return [encode_delimited(message(interest_group=names[g], user_id=f"u{u:0{width}d}", event_time_micros=t))
            for g, u, t in zip(gl, ul, tl)]


def _encode_bad(fmt: str, kind: str, group: str, user: str, time_micros: int,
                rng: np.random.Generator) -> tuple[Any, str]:
    """One malformed record of ``kind`` derived from a valid join, and the reason a reader gives it."""
    record: dict[str, Any] = {"interest_group": group, "user_id": user, "event_time_micros": time_micros}
    if kind == "empty_user":
        record["user_id"], reason = "", "empty_field:user_id"
    elif kind == "empty_group":
        record["interest_group"], reason = "", "empty_field:interest_group"
    elif kind == "negative_time":
        record["event_time_micros"] = -int(rng.integers(1, MICROS_PER_DAY * 365))
        reason = "negative_timestamp:event_time_micros"
    elif kind == "absurd_time":
        record["event_time_micros"] = YEAR_2200_MICROS + int(rng.integers(0, MICROS_PER_DAY * 365))
        reason = "absurd_timestamp:event_time_micros"
    elif kind == "missing_field":
        name = JSON_FIELDS[int(rng.integers(len(JSON_FIELDS)))]
        del record[name]
        reason = f"missing_field:{name}"
    elif kind == "missing_time":
        del record["event_time_micros"]
        reason = "missing_field:event_time_micros"
    elif kind == "string_time":
        record["event_time_micros"] = str(time_micros)
        reason = "wrong_type:event_time_micros"
    elif kind == "broken_json":
        line = json.dumps(record)
        return line[:int(rng.integers(1, len(line) - 1))] + "\n", "malformed_json"
    elif kind == "garbage":
        return _garbage_delimited(rng), "malformed_protobuf"
    else:  # pragma: no cover - kinds are fixed above
        raise ValueError(kind)
    if fmt == "jsonl":
        return json.dumps(record) + "\n", reason
    if fmt == "avro":
        return record, reason
    return encode_delimited(events_pb2.JoinEvent(**record)), reason


# --------------------------------------------------------------------------- kanon


def generate_kanon(out_dir: str | os.PathLike, *, groups: int = 2000, users: int = 50_000, joins: int = 200_000,
                   days: int = 30, start_micros: int = midnight_utc_micros("2026-01-05"), seed: int = 0,
                   bad_fraction: float = 0.0, fmt: str = "avro", shards: int = 1, k: int = 50,
                   progress: bool = True) -> GenerationStats:
    """Write synthetic join events (the model of the module docstring) to ``out_dir`` and return what was written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    for name, value, minimum in (("groups", groups, 1), ("users", users, 1), ("days", days, 1),
                                 ("shards", shards, 1), ("k", k, 1), ("joins", joins, 0)):
        if value < minimum:
            raise ValueError(f"--{name} must be at least {minimum}, got {value}")
    if not 0.0 <= bad_fraction < 1.0:
        raise ValueError(f"--bad-fraction must be in [0, 1), got {bad_fraction}")
    if start_micros < 0 or start_micros % MICROS_PER_DAY:
        raise ValueError("the start must be a UTC midnight at or after 1970-01-01")

    out = prepare_output(out_dir, ("joins",))  # removes an earlier run's shards, of any count or format
    (setup_seq, joins_seq, bad_seq, _), sync_marker = seed_streams(seed, 4)
    model = _build_groups(np.random.default_rng(setup_seq), groups=groups, users=users, joins=joins, days=days, k=k)
    join_rng = np.random.default_rng(joins_seq)
    bad_rng = np.random.default_rng(bad_seq)
    if model.expected_joins < 0.97 * joins:
        print(f"generate kanon: warning: only about {model.expected_joins:,.0f} of {joins:,} joins fit "
              f"{users:,} users", file=sys.stderr, flush=True)
    width = max(7, len(str(users - 1)))
    hours_p = hour_weights()

    # Chunks of consecutive groups with about CHUNK_JOINS expected joins a week each.
    weekly = np.maximum(model.level, 0.0) / JOIN_GEOMETRIC_P
    cuts = np.searchsorted(np.cumsum(weekly), np.arange(CHUNK_JOINS, weekly.sum() + CHUNK_JOINS, CHUNK_JOINS),
                           side="right")
    bounds = sorted({0, groups, *[int(min(max(c, 1), groups)) for c in cuts]})

    writer = _ShardWriter(out, fmt, shards, sync_marker)
    kinds = BAD_KINDS[fmt]
    bad_ratio = bad_fraction / (1.0 - bad_fraction)
    joins_written = bad_written = 0
    bad_by_reason: dict[str, int] = {}
    began = last_report = time.monotonic()
    try:
        for week in range(math.ceil(days / 7)):
            week_days = min(7, days - 7 * week)
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                gi, ui, ti = _generate_chunk(join_rng, model, lo, hi, week=week, week_days=week_days,
                                             start_micros=start_micros, k=k, hours_p=hours_p)
                records = _encode_valid(fmt, model.names, gi, ui, ti, width)
                n = len(records)
                joins_written += n
                n_bad = int(math.floor(bad_ratio * joins_written + 0.5)) - bad_written if n else 0
                if n_bad > 0:
                    sources = bad_rng.integers(0, n, size=n_bad)
                    chosen = bad_rng.integers(0, len(kinds), size=n_bad)
                    bad = []
                    for src, kind in zip(sources.tolist(), chosen.tolist()):
                        encoded, reason = _encode_bad(fmt, kinds[kind], model.names[int(gi[src])],
                                                      f"u{int(ui[src]):0{width}d}", int(ti[src]), bad_rng)
                        bad.append(encoded)
                        bad_by_reason[reason] = bad_by_reason.get(reason, 0) + 1
                    records = _interleave(records, bad, bad_rng)
                    bad_written += n_bad
                writer.write(records)
                now = time.monotonic()
                if progress and now - last_report >= PROGRESS_SECONDS:
                    last_report = now
                    rate = joins_written / max(now - began, 1e-9)
                    print(f"generate kanon: {joins_written:,} / ~{joins:,} joins "
                          f"({100 * joins_written / max(joins, 1):.0f}%), {rate:,.0f} joins/s",
                          file=sys.stderr, flush=True)
    finally:
        writer.close()

    groups_by_class = {name: int((model.cls == i).sum()) for i, name in enumerate(CLASS_NAMES)}
    stats = GenerationStats(
        joins_written=joins_written,
        bad_written=bad_written,
        files=[str(path) for path in writer.paths],
        groups_by_class=groups_by_class,
        bad_by_reason=dict(sorted(bad_by_reason.items())),
        expected_joins=round(model.expected_joins, 3),
    )
    summary = {
        "dataset": "kanon",
        "parameters": {
            "groups": groups, "users": users, "joins": joins, "days": days,
            "start": dt.datetime.fromtimestamp(start_micros // MICROS_PER_SECOND, dt.timezone.utc).date().isoformat(),
            "start_micros": start_micros, "seed": seed, "bad_fraction": bad_fraction, "format": fmt,
            "shards": shards, "k": k,
        },
        "model": {
            "join_geometric_p": JOIN_GEOMETRIC_P, "band_fraction": BAND_FRACTION,
            "band": [max(1, k - BAND_HALF_WIDTH), k + BAND_HALF_WIDTH],
            "band_weekly_jitter": BAND_WEEKLY_JITTER, "max_band_share": MAX_BAND_SHARE,
            "large_level_range": [LARGE_LEVEL_RANGE[0] * k, LARGE_LEVEL_RANGE[1] * k],
            "small_share": SMALL_SHARE, "small_sigma": SMALL_SIGMA, "small_cap": max(1.0, k / 2),
            "pool_factor_range": list(POOL_FACTOR_RANGE), "user_skew": USER_SKEW,
            "daily_peak_hour_utc": DAILY_PEAK_HOUR, "daily_amplitude": DAILY_AMPLITUDE,
        },
        "stats": {**asdict(stats), "files": [Path(p).name for p in stats.files]},
    }
    with open(out / "generation.json", "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2)
        handle.write("\n")
    return stats


# --------------------------------------------------------------------------- microbenchmark

# Model constants (seed 003 Sec. 8.1-8.2; recorded in generation.json).
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
    product, schedule, user, time_ = (np.concatenate(column) for column in zip(*parts))
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
                 "filter_keys": keys} for d, t, i in zip(devices, times, ids)]
    if fmt == "jsonl":
        tail = (f', "publisher_site": "{MICRO_PUBLISHER}", "advertiser_site": "{MICRO_ADVERTISER}", '
                f'"campaign_id": "{MICRO_CAMPAIGN}", "product_id": "", "filter_keys": []}}\n')
        return [f'{{"device_id": "{d}", "event_time_micros": {t}, "impression_id": "{i}"{tail}'
                for d, t, i in zip(devices, times, ids)]
    message = events_pb2.Impression
    return [encode_delimited(message(device_id=d, event_time_micros=t, impression_id=i, publisher_site=MICRO_PUBLISHER,
                                     advertiser_site=MICRO_ADVERTISER, campaign_id=MICRO_CAMPAIGN))
            for d, t, i in zip(devices, times, ids)]


def generate_microbenchmark(out_dir: str | os.PathLike, *, knob1: float, knob2: float,
                            batch_size: int = MICRO_BATCH_SIZE, products: int = MICRO_PRODUCTS, days: int = MICRO_DAYS,
                            start_micros: int = parse_start(MICRO_START), seed: int = 0, fmt: str = "avro",
                            shards: int | None = None, bad_fraction: float = 0.0,
                            progress: bool = True) -> MicrobenchmarkStats:
    """Write the microbenchmark dataset (the model of the module docstring) to ``out_dir``; return what was
    written. ``shards`` is the number of impression files (None: about a million impressions each)."""
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
    conv_rows = list(zip(conversions.product.tolist(), conversions.user.tolist(), conversions.time.tolist()))

    def conversion(i: int) -> dict:
        p, u, t = conv_rows[i]
        return _micro_conversion_record(f"device-{u:0{device_width}d}", t, f"conv-{i:0{conv_width}d}",
                                        product_names[p], requests[p])

    conv_records = [_encode_record(fmt, events_pb2.Conversion, conversion(i)) for i in range(n_conv)]
    conv_bad = _micro_bad_records(fmt, "conversions", bad_fraction, bad_rng)
    conv_records = conv_bad.add(conv_records, conversion)
    conversion_paths = [out / f"conversions-00000-of-00001.{ext}"]
    _write_file(conversion_paths[0], fmt, load_avro_schema("conversion") if fmt == "avro" else None, sync_marker,
                [conv_records])
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
                records = imp_bad.add(records, lambda i: _micro_impression_record(devices[i], flat[i], ids[i]))
            written += len(flat)
            yield records
            now = time.monotonic()
            if log and now - last_report >= PROGRESS_SECONDS:
                last_report = now
                log(f"{written:,} / {total_impressions:,} impressions ({100 * written / total_impressions:.0f}%), "
                    f"{written / max(now - began, 1e-9):,.0f} impressions/s")

    for s, path in enumerate(impression_paths):
        _write_file(path, fmt, schema, sync_marker, shard_chunks(s * users // shards, (s + 1) * users // shards))

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


# --------------------------------------------------------------------------- CLI


def _fail(dataset: str, message: str, code: int = 2) -> SystemExit:
    """A one-line error on stderr and the SystemExit (status 2, like argparse's) to raise."""
    print(f"generate {dataset}: error: {message}", file=sys.stderr)
    return SystemExit(code)


def _kanon_main(args: argparse.Namespace) -> int:
    try:
        start_micros = midnight_utc_micros(args.start)
    except ValueError:
        raise _fail("kanon", f"--start must be a date YYYY-MM-DD, got {args.start!r}") from None
    began = time.monotonic()
    try:
        stats = generate_kanon(args.out, groups=args.groups, users=args.users, joins=args.joins, days=args.days,
                               start_micros=start_micros, seed=args.seed, bad_fraction=args.bad_fraction,
                               fmt=args.format, shards=args.shards, k=args.k, progress=not args.quiet)
    except (ValueError, OSError) as error:
        raise _fail("kanon", str(error)) from None
    elapsed = time.monotonic() - began
    classes = ", ".join(f"{n} {name}" for name, n in stats.groups_by_class.items())
    print(f"generate kanon: wrote {stats.joins_written:,} joins and {stats.bad_written:,} bad records "
          f"in {elapsed:.1f} s ({stats.joins_written / max(elapsed, 1e-9):,.0f} joins/s)")
    print(f"  groups: {classes}")
    print(f"  files: {', '.join(stats.files)}")
    print(f"  summary: {Path(args.out) / 'generation.json'}")
    return 0


def _micro_main(args: argparse.Namespace) -> int:
    fail = functools.partial(_fail, "microbenchmark")
    try:
        start_micros = parse_start(args.start_date)
    except ValueError:
        raise fail(f"--start-date must be a date YYYY-MM-DD or an ISO 8601 date-time, got {args.start_date!r}")
    began = time.monotonic()
    try:
        stats = generate_microbenchmark(args.out, knob1=args.knob1, knob2=args.knob2, batch_size=args.batch_size,
                                        products=args.products, days=args.days, start_micros=start_micros,
                                        seed=args.seed, fmt=args.format, shards=args.shards,
                                        bad_fraction=args.bad_fraction, progress=not args.quiet)
    except ValueError as error:
        raise fail(str(error))
    except OSError as error:
        raise fail(str(error), code=1)
    elapsed = time.monotonic() - began
    bad = stats.bad_impressions + stats.bad_conversions
    print(f"generate microbenchmark: wrote {stats.users:,} users x {stats.impressions_per_user} = "
          f"{stats.impressions:,} impressions and {stats.conversions:,} conversions ({stats.queries} queries of "
          f"{stats.batch_size:,}, epsilon {stats.epsilon:.6g}), {bad:,} bad records, in {elapsed:.1f} s")
    print(f"  impressions: {', '.join(stats.impression_files)}")
    print(f"  conversions: {', '.join(stats.conversion_files)}")
    print(f"  summary: {Path(args.out) / 'generation.json'}")
    return 0


def _dataset_main(dataset: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a ``pipelines.datasets`` generator's CLI: a bad option (``ValueError``) is a one-line error with
    status 2, an unwritable output (``OSError``) one with status 1."""
    try:
        return run(args)
    except ValueError as error:
        raise _fail(dataset, str(error)) from None
    except OSError as error:
        raise _fail(dataset, str(error), code=1) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipelines.generate", description="Generate synthetic input data.")
    sub = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    kanon = sub.add_parser("kanon", help="interest-group join events for the k-anonymity server",
                           description="Interest-group join events for the k-anonymity server "
                                       "(model: see the docstring of pipelines/generate.py).")
    kanon.add_argument("--out", required=True, help="output directory")
    kanon.add_argument("--groups", type=int, default=2000, help="number of interest groups (default 2000)")
    kanon.add_argument("--users", type=int, default=50_000, help="size of the user population (default 50000)")
    kanon.add_argument("--joins", type=int, default=200_000, help="target number of valid joins (default 200000)")
    kanon.add_argument("--days", type=int, default=30, help="number of days (default 30)")
    kanon.add_argument("--start", default="2026-01-05",
                       help="first day, YYYY-MM-DD, from 00:00 UTC (default 2026-01-05)")
    kanon.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    kanon.add_argument("--bad-fraction", type=float, default=0.0,
                       help="fraction of written records that are malformed, in [0, 1) (default 0)")
    kanon.add_argument("--format", choices=FORMATS, default="avro", help="file format (default avro)")
    kanon.add_argument("--shards", type=int, default=1, help="number of output files (default 1)")
    kanon.add_argument("--k", type=int, default=50,
                       help="k-anonymity threshold the group sizes are shaped around (default 50)")
    kanon.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    kanon.set_defaults(run=_kanon_main)

    micro = sub.add_parser("microbenchmark", help="impressions and conversions of the Cookie Monster microbenchmark",
                           description="Impressions and conversions of the synthetic microbenchmark of seed 003 "
                                       "Sec. 8.1-8.2 (model: see the docstring of pipelines/generate.py).")
    micro.add_argument("--knob1", type=float, required=True,
                       help="fraction of the users taking part in each query, in (0, 1]: users = ceil(B / knob1)")
    micro.add_argument("--knob2", type=float, required=True,
                       help="impressions per user per day, > 0: each user has ceil(knob2 * days) impressions")
    micro.add_argument("--out", required=True, help="output directory")
    micro.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    micro.add_argument("--format", choices=FORMATS, default="avro", help="file format (default avro)")
    micro.add_argument("--shards", type=int, default=None,
                       help="number of impression files (default: about a million impressions each); "
                            "conversions go to one file")
    micro.add_argument("--start-date", default=MICRO_START,
                       help=f"start of the first day, YYYY-MM-DD (00:00 UTC) or ISO 8601 (default {MICRO_START})")
    micro.add_argument("--batch-size", type=int, default=MICRO_BATCH_SIZE,
                       help=f"reports per query batch B (default {MICRO_BATCH_SIZE})")
    micro.add_argument("--products", type=int, default=MICRO_PRODUCTS,
                       help=f"number of products, each queried twice (default {MICRO_PRODUCTS})")
    micro.add_argument("--days", type=int, default=MICRO_DAYS,
                       help=f"number of days, more than {MICRO_CONVERSION_FIRST_DAY} (default {MICRO_DAYS})")
    micro.add_argument("--bad-fraction", type=float, default=0.0,
                       help="fraction of written records that are malformed, in [0, 1) (default 0)")
    micro.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    micro.set_defaults(run=_micro_main)

    for module, name, help_text, description in (
        (patcg, "patcg-like", "impressions and conversions like PATCG's (Cookie Monster Sec. 8.3)",
         "A PATCG-like dataset of seed 003 Sec. 8.3 at --scale times the paper's size (model: see the docstring of "
         "pipelines/datasets/patcg.py)."),
        (criteo, "criteo-like", "impressions and conversions like Criteo's, optionally augmented (Cookie Monster "
         "Sec. 8.4)",
         "A Criteo-like dataset of seed 003 Sec. 8.4 at --scale times the paper's size, with --augment synthetic "
         "impressions per conversion (Criteo++) (model: see the docstring of pipelines/datasets/criteo.py)."),
        (ara, "ara", "ARA sources and triggers for the summary-report client (seed 000 Alg. 2)",
         "Attribution Reporting sources and triggers for python -m pipelines.summary_client ara (model: see the "
         "docstring of pipelines/datasets/ara.py)."),
        (paa, "paa", "Private Aggregation ad events for the summary-report client (seed 000 Alg. 3)",
         "Private Aggregation ad events for python -m pipelines.summary_client paa (model: see the docstring of "
         "pipelines/datasets/paa.py)."),
        (reports, "reports", "aggregatable reports and an output domain for the Aggregation Service (python -m "
         "pipelines.aggregate)",
         "Synthetic aggregatable reports (Avro AggregatableReport) and an output domain (model: see the docstring "
         "of pipelines/datasets/reports.py)."),
        (event_level, "event-level", "ARA sources and triggers for event-level reports (seed 000 Alg. 4 and 8)",
         "Attribution Reporting sources and triggers for event-level reports, default and custom trigger specs "
         "(model: see the docstring of pipelines/datasets/event_level.py)."),
    ):
        dataset_parser = sub.add_parser(name, help=help_text, description=description)
        module.add_arguments(dataset_parser)
        dataset_parser.set_defaults(run=functools.partial(_dataset_main, module.DATASET, module.run_cli))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
