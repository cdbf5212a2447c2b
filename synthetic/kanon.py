"""Synthetic interest-group join events for the k-anonymity server (``Join(u, t)`` of k-anonymity note Sec. 2.1):
``python -m pipelines.generate kanon --output DIR [options]`` writes sharded Avro, JSON Lines or length-delimited
protobuf files ``DIR/joins-SSSSS-of-NNNNN.<ext>`` plus ``DIR/generation.json`` (parameters, model constants and
counts).

The ``kanon`` model
-------------------
The time range is ``--days`` whole days from ``--start`` (midnight UTC), cut
into calendar weeks counted from the start (the last one may be partial).
Every interest group ``g`` has a *weekly level* ``L_g``, the number of distinct
users that join it in a full week, in one of three classes:

* ``band`` (about 10 % of the groups): ``L_g`` uniform on the integers of
  ``[k - 10, k + 10]``; each week's count is ``L_g`` plus a jitter of at most
  +-3, kept inside the band. These are the groups whose verdict is decided by
  the noise (k-anonymity note Sec. 5). If the band alone would take more than
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
"""
from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schemas.codecs import FORMATS, encode_delimited
from schemas.formats import load_avro_schema
from schemas.option_values import NONNEGATIVE_INTEGER, POSITIVE_INTEGER, SEED
from schemas.proto import events_pb2
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_SECOND
from synthetic.files import (
    EXTENSIONS,
    PROGRESS_SECONDS,
    YEAR_2200_MICROS,
    add_bad_fraction_argument,
    add_output_argument,
    prepare_output,
    seed_streams,
)
from synthetic.files import garbage_delimited as _garbage_delimited
from synthetic.files import interleave as _interleave

DATASET = "kanon"

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
        # the writer owns its files across write() calls until close(), which its caller calls in a finally
        self.handles = [open(path, "wb") for path in self.paths]  # noqa: SIM115
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
                for g, u, t in zip(gl, ul, tl, strict=True)]
    if fmt == "avro":
        return [{"interest_group": names[g], "user_id": f"u{u:0{width}d}", "event_time_micros": t}
                for g, u, t in zip(gl, ul, tl, strict=True)]
    message = events_pb2.JoinEvent
    return [encode_delimited(message(interest_group=names[g], user_id=f"u{u:0{width}d}", event_time_micros=t))
            for g, u, t in zip(gl, ul, tl, strict=True)]


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
            for lo, hi in itertools.pairwise(bounds):
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
                    for src, kind in zip(sources.tolist(), chosen.tolist(), strict=True):
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pipelines.generate kanon``."""
    add_output_argument(parser)
    parser.add_argument("--groups", type=POSITIVE_INTEGER, default=2000, help="number of interest groups (default 2000)")
    parser.add_argument("--users", type=POSITIVE_INTEGER, default=50_000, help="size of the user population (default 50000)")
    parser.add_argument("--joins", type=NONNEGATIVE_INTEGER, default=200_000,
                        help="target number of valid joins (default 200000)")
    parser.add_argument("--days", type=POSITIVE_INTEGER, default=30, help="number of days (default 30)")
    parser.add_argument("--start", default="2026-01-05",
                        help="first day, YYYY-MM-DD, from 00:00 UTC (default 2026-01-05)")
    parser.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    add_bad_fraction_argument(parser)
    parser.add_argument("--format", choices=FORMATS, default="avro", help="file format (default avro)")
    parser.add_argument("--shards", type=POSITIVE_INTEGER, default=1, help="number of output files (default 1)")
    parser.add_argument("--k", type=POSITIVE_INTEGER, default=50,
                        help="k-anonymity threshold the group sizes are shaped around (default 50)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run_cli(args: argparse.Namespace) -> int:
    """Generate from parsed options and print the summary (``ValueError`` / ``OSError`` go to the caller)."""
    try:
        start_micros = midnight_utc_micros(args.start)
    except ValueError:
        raise ValueError(f"--start must be a date YYYY-MM-DD, got {args.start!r}") from None
    began = time.monotonic()
    stats = generate_kanon(args.output, groups=args.groups, users=args.users, joins=args.joins, days=args.days,
                           start_micros=start_micros, seed=args.seed, bad_fraction=args.bad_fraction,
                           fmt=args.format, shards=args.shards, k=args.k, progress=not args.quiet)
    elapsed = time.monotonic() - began
    classes = ", ".join(f"{n} {name}" for name, n in stats.groups_by_class.items())
    print(f"generate kanon: wrote {stats.joins_written:,} joins and {stats.bad_written:,} bad records "
          f"in {elapsed:.1f} s ({stats.joins_written / max(elapsed, 1e-9):,.0f} joins/s)")
    print(f"  groups: {classes}")
    print(f"  files: {', '.join(stats.files)}")
    print(f"  summary: {Path(args.output) / 'generation.json'}")
    return 0
