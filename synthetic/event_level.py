"""Synthetic ARA event-level sources and triggers: ``python -m pipelines.generate event-level --output DIR``.

The input of the event-level pipeline (ARA-Event-Client, Ghazi et al. Sec. 2.2 Alg. 4, with randomized response,
Alg. 8): devices that see ads (sources) of a few advertisers and sometimes convert on their sites (triggers),
written as ``DIR/sources-SSSSS-of-NNNNN.<ext>`` and ``DIR/triggers-SSSSS-of-NNNNN.<ext>`` (Avro with
``schemas/avro/event_level_source.avsc`` / ``event_level_trigger.avsc``, JSON Lines with the same fields, or
varint-length-delimited protobuf ``EventLevelSource`` / ``EventLevelTrigger``)
and ``DIR/generation.json`` (parameters, model constants, counts).

The model
---------
Times are UTC microseconds in ``[start, start + days)``; ``start`` defaults to 2024-01-01T00:00:00Z.

* **Advertisers.** ``EL_ADVERTISERS`` = 6 shops ``https://shop-A.example`` (the destinations), with popularity
  proportional to ``1 / (A + 1)``. Shop ``A`` works with the ad-tech ``https://adtech-(A mod 2).example`` (the
  reporting origin of its sources and triggers) and sells 4 of the 8 categories of the catalogue
  ``EL_CATALOGUE``: ``2A, ..., 2A + 3`` mod 8.
* **Campaigns.** Each advertiser runs 4 campaigns, ``g = 4 A + c``; a campaign's filter data (srcFilt) is 1 to
  3 of its advertiser's categories (drawn once per seed).
* **Sources** (ad impressions). A device sees ``Poisson(EL_SOURCES_PER_DAY * days)`` ads (2 a day) at
  uniform times, each of an advertiser drawn by popularity and one of its campaigns, uniformly. 10 % are
  clicks (``--navigation-share F``, default ``EL_CLICK_SHARE`` = 0.1; 1 makes every source a click, 0 none):
  **navigation** sources (priority 100, expiry null: 30 days); the rest are views: **event** sources
  (priority 0, expiry 7 days), so a click wins attribution over later views.
  ``--devices N`` sets the number of devices (Poisson sources each); ``--sources N`` writes exactly N sources
  over ``ceil(N / (2 * days))`` devices (the same model conditioned on the total: each source goes to a
  uniform device of its chunk).
* **Configurations.** Most sources (about 90 %) use the **default configuration**: ``max_event_level_reports``,
  ``trigger_data_matching`` and ``trigger_specs`` null (navigation: 3 reports, trigger data 0..7, windows
  2 d / 7 d / expiry, buckets 1, 2, 3; event: 1 report, trigger data 0..1, one window at the expiry). Two
  kinds of custom trigger specs (``EL_CUSTOM_SPECS``), all within ARA's information-gain limits at epsilon 14:

  - ``fast`` (campaign 3 of shop 2, about 3.4 % of the sources): earlier windows. Navigation: 2 reports,
    trigger data 0..3, windows 1 d / 3 d / 7 d, buckets 1, 2 (|O| = 91); event: 2 reports, trigger data 0..1,
    windows 1 d / 7 d, buckets 1, 2 (|O| = 15). Modulus matching.
  - ``value`` (every campaign of shop 5, about 6.8 % of the sources): summary buckets over purchase values,
    exact matching on trigger data 0 (purchases; other conversions are ignored). Navigation: 4 reports,
    windows 7 d / 30 d, buckets 1, 5, 10, 20 (|O| = 15); event: 2 reports, window 7 d, buckets 5, 20 (|O| = 3).

  ``--default-configs`` turns both off: every source uses the default configuration (the three fields null).
  The triggers stay the same records (same ids, times, destinations, filters and trigger data, the random
  draws unchanged) except that the purchases of shop 5 carry no value (null, i.e. 1): the default
  configurations count triggers, and a value of up to 20 would cross all of a default source's summary buckets
  at once.
* **Triggers** (conversions). Within its attribution window (the source's expiry), a view converts with
  probability 1 % to 3 % depending on its shop (``EL_VIEW_CONVERSION``: 1.0, 1.4, ..., 3.0 % for shops 0..5,
  about 1.6 % over the popularity mix), a click with 5 % (``EL_CLICK_CONVERSION``). A converting ad leads to
  ``1 + Poisson(0.3)`` triggers (a purchase after an add-to-cart, say), each after a delay drawn from an
  exponential of mean 2 days truncated to the window (conversions after the end of the data are dropped). A
  trigger is at the ad's shop and ad-tech, in a category of the campaign's filter data with probability 0.9,
  else of any category the shop sells; its filters (trigFilt) are ``[category]``. Besides, every device makes
  ``Poisson(0.01 * days)`` organic conversions (no ad behind them: a shop by popularity, a uniform category and
  time), attributed only if a matching ad happens to precede them.
* **Trigger data and values.** ``trigger_data`` is the conversion type, 0..7 (``EL_CONVERSION_TYPES``:
  purchase, add-to-cart, checkout, sign-up, lead, page-view, download, subscribe, with probabilities
  ``EL_CONVERSION_WEIGHTS``); event sources see it modulo 2. ``value`` is null (1) except for the purchases of
  shop 5 (the ``value`` configurations), which carry ``ceil(price / 10)`` in 1..20, the price lognormal (median
  $40, sigma 0.8) capped at $200 (with ``--default-configs`` every value is null, see above).

Expected counts: 2 sources per device and day; about 2.5 triggers from ads and 0.5 organic ones per 100
sources (a 30-day default run), i.e. about 3 triggers per 100 sources. Clicks convert more often and have
longer windows, so ``--navigation-share 1`` gives about 6 triggers from ads per 100 sources.

Ids: devices ``device-N`` (zero padded to the digits of the device count), sources ``sN-K`` and triggers
``tN-K`` (device N's K-th). Devices are generated in chunks of ``EL_CHUNK_DEVICES`` (1,000), each from its own
random stream (``files.stream``), so the valid records do not depend on the format, the shards or
``--bad-fraction``; a chunk's records are written device by device, each device's in time order. ``--shards N``
splits the chunks into N consecutive ranges per file kind (more shards than chunks leave some files empty).
Memory is one chunk whatever the size; progress goes to stderr; 1,000,000 sources take about 15 s in Avro.
``--bad-fraction F`` adds corrupted copies of valid records (see ``files.BadRecords``: empty device ids,
negative and absurd timestamps; for JSON Lines also missing device ids, string timestamps and truncated lines;
for protobuf also missing timestamps and unparsable messages) so that ``bad / (valid + bad)`` is F in each file
kind. ``--navigation-share F`` and ``--default-configs`` (see the model) draw no extra random numbers whatever
their values: a seed's random streams stay the same, so with ``--default-configs`` the records change only where
the model says, and with F = 0.1 (the default) the files are exactly those of a run without the option. The same
seed gives the same files byte for byte.
"""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from schemas.codecs import FORMATS
from schemas.formats import load_avro_schema
from schemas.option_values import PROBABILITY, SEED, Integer
from schemas.proto import events_pb2
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_SECOND, SECONDS_PER_DAY, iso_micros
from synthetic import files as datafiles

DATASET = "event-level"

SOURCE_MESSAGE, TRIGGER_MESSAGE = events_pb2.EventLevelSource, events_pb2.EventLevelTrigger

# Model constants (recorded in generation.json).
EL_ADVERTISERS = 6
EL_CATALOGUE = ("sneakers", "sandals", "boots", "shirts", "pants", "jackets", "bags", "hats")
EL_CATEGORIES_PER_ADVERTISER = 4
EL_CAMPAIGNS_PER_ADVERTISER = 4
EL_AD_TECHS = 2
EL_SOURCES_PER_DAY = 2.0
EL_CLICK_SHARE = 0.10  # navigation sources
EL_VIEW_CONVERSION = tuple(round(0.01 + 0.004 * a, 4) for a in range(EL_ADVERTISERS))  # 1 % .. 3 % by shop
EL_CLICK_CONVERSION = 0.05
EL_EXTRA_CONVERSIONS = 0.3  # a converting ad leads to 1 + Poisson(this) triggers
EL_CONVERSION_DELAY_DAYS = 2.0  # mean of the exponential delay, truncated to the attribution window
EL_ORGANIC_PER_DAY = 0.01  # conversions without an ad, per device and day
EL_IN_FILTER_SHARE = 0.9
EL_CLICK_PRIORITY = 100
EL_VIEW_EXPIRY_SECONDS = 7 * SECONDS_PER_DAY
EL_CLICK_EXPIRY_SECONDS = 30 * SECONDS_PER_DAY  # written as null (the default)
EL_CONVERSION_TYPES = ("purchase", "add-to-cart", "checkout", "sign-up", "lead", "page-view", "download", "subscribe")
EL_CONVERSION_WEIGHTS = (0.35, 0.20, 0.10, 0.10, 0.10, 0.10, 0.03, 0.02)
EL_VALUE_ADVERTISERS = (5,)  # their campaigns use the "value" specs and their purchases carry values
EL_FAST_CAMPAIGNS = (2 * EL_CAMPAIGNS_PER_ADVERTISER + 3,)  # campaign 3 of shop 2 uses the "fast" specs
EL_PRICE_MEDIAN, EL_PRICE_SIGMA, EL_PRICE_CAP = 40.0, 0.8, 200.0
EL_DOLLARS_PER_VALUE = 10.0
EL_MAX_VALUE = 20
EL_START = "2024-01-01T00:00:00Z"
EL_CHUNK_DEVICES = 1_000
EL_MAX_DEVICES = 100_000_000
EL_MAX_SOURCES = 2_000_000_000

_DAY = SECONDS_PER_DAY
# Custom configurations: kind -> source type -> (max_event_level_reports, trigger_data_matching, trigger_specs).
EL_CUSTOM_SPECS = {
    "fast": {
        "navigation": (2, "modulus", [{"trigger_data": [0, 1, 2, 3], "window_ends_seconds": [_DAY, 3 * _DAY, 7 * _DAY],
                                       "summary_buckets": [1, 2]}]),
        "event": (2, "modulus", [{"trigger_data": [0, 1], "window_ends_seconds": [_DAY, 7 * _DAY],
                                  "summary_buckets": [1, 2]}]),
    },
    "value": {
        "navigation": (4, "exact", [{"trigger_data": [0], "window_ends_seconds": [7 * _DAY, 30 * _DAY],
                                     "summary_buckets": [1, 5, 10, 20]}]),
        "event": (2, "exact", [{"trigger_data": [0], "window_ends_seconds": [7 * _DAY], "summary_buckets": [5, 20]}]),
    },
}


@dataclass(frozen=True)
class EventLevelStats:
    """What ``generate_event_level`` wrote: valid ``sources`` (``navigation`` of them clicks, ``custom_specs``
    with custom trigger specs) and ``triggers`` (``organic_triggers`` without an ad behind), the ads that
    converted (``converted_views`` / ``converted_clicks``, counted before conversions past the end of the data
    are dropped), bad records per kind and by the reason they read back with, and the files."""

    devices: int
    sources: int
    navigation: int
    custom_specs: int
    triggers: int
    organic_triggers: int
    converted_views: int
    converted_clicks: int
    bad_sources: int
    bad_triggers: int
    bad_by_reason: dict
    source_files: list[str] = field(default_factory=list)
    trigger_files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Model:
    """The advertisers and campaigns of one seed."""

    categories: np.ndarray  # (advertisers, 4): catalogue indices each advertiser sells
    filters: tuple  # per campaign g: its filter data (category names)
    filter_index: np.ndarray  # (campaigns, 3): catalogue indices of the filter data, padded by repetition
    filter_size: np.ndarray  # per campaign: 1..3
    configs: tuple  # per campaign g and click (0/1): (max reports, matching, specs) or None (defaults)
    weights: np.ndarray  # advertiser popularity


def _site(advertiser: int) -> str:
    return f"https://shop-{advertiser}.example"


def _ad_tech(advertiser: int) -> str:
    return f"https://adtech-{advertiser % EL_AD_TECHS}.example"


def _campaign_kind(campaign: int) -> str | None:
    if campaign // EL_CAMPAIGNS_PER_ADVERTISER in EL_VALUE_ADVERTISERS:
        return "value"
    return "fast" if campaign in EL_FAST_CAMPAIGNS else None


def _model(rng: np.random.Generator, default_configs: bool = False) -> _Model:
    categories = np.array([[(2 * a + j) % len(EL_CATALOGUE) for j in range(EL_CATEGORIES_PER_ADVERTISER)]
                           for a in range(EL_ADVERTISERS)])
    filters, index, size, configs = [], [], [], []
    for a in range(EL_ADVERTISERS):
        for c in range(EL_CAMPAIGNS_PER_ADVERTISER):
            chosen = sorted(rng.choice(categories[a], size=int(rng.integers(1, 4)), replace=False).tolist())
            filters.append([EL_CATALOGUE[i] for i in chosen])
            index.append([chosen[j % len(chosen)] for j in range(3)])
            size.append(len(chosen))
            kind = None if default_configs else _campaign_kind(a * EL_CAMPAIGNS_PER_ADVERTISER + c)
            configs.append((None, None) if kind is None else
                           (EL_CUSTOM_SPECS[kind]["event"], EL_CUSTOM_SPECS[kind]["navigation"]))
    weights = 1.0 / np.arange(1, EL_ADVERTISERS + 1)
    return _Model(categories, tuple(filters), np.array(index), np.array(size), tuple(configs), weights / weights.sum())


@dataclass(frozen=True)
class _Chunk:
    """The events of devices ``[lo, hi)`` as columns: sources sorted by (device, time), triggers likewise."""

    lo: int
    hi: int
    device: np.ndarray
    times: np.ndarray
    advertiser: np.ndarray
    campaign: np.ndarray
    click: np.ndarray
    trigger_device: np.ndarray
    trigger_times: np.ndarray
    trigger_advertiser: np.ndarray
    trigger_category: np.ndarray
    trigger_data: np.ndarray
    trigger_value: np.ndarray  # 0: null
    organic: int
    converted_views: int
    converted_clicks: int


def _truncated_delays(rng: np.random.Generator, windows: np.ndarray) -> np.ndarray:
    """Exponential delays of mean ``EL_CONVERSION_DELAY_DAYS`` conditioned to be below ``windows`` (microseconds)."""
    mean = EL_CONVERSION_DELAY_DAYS * MICROS_PER_DAY
    mass = -np.expm1(-windows / mean)  # P(delay < window)
    delays = -mean * np.log1p(-rng.random(windows.size) * mass)
    return np.minimum(delays.astype(np.int64), windows - 1)


def _chunk(model: _Model, seq: np.random.SeedSequence, chunk: int, lo: int, hi: int, total: int | None, *,
           days: int, start: int, navigation_share: float = EL_CLICK_SHARE, values: bool = True) -> _Chunk:
    """Devices ``[lo, hi)`` with ``total`` sources (None: Poisson per device); ``values`` False: every trigger
    value null (the prices are drawn all the same, so the other columns do not change)."""
    rng = datafiles.stream(seq, chunk)
    span = days * MICROS_PER_DAY
    end = start + span
    n = hi - lo
    if total is None:
        total = int(rng.poisson(EL_SOURCES_PER_DAY * days * n))
    device = rng.integers(0, n, size=total)
    times = start + rng.integers(0, span, size=total, dtype=np.int64)
    advertiser = rng.choice(EL_ADVERTISERS, size=total, p=model.weights)
    campaign = advertiser * EL_CAMPAIGNS_PER_ADVERTISER + rng.integers(0, EL_CAMPAIGNS_PER_ADVERTISER, size=total)
    click = rng.random(total) < navigation_share
    order = np.lexsort((times, device))  # device by device, in time order
    device, times, advertiser, campaign, click = device[order], times[order], advertiser[order], campaign[order], click[order]

    # Conversions driven by ads: which ads convert, how many triggers each, when, what.
    rate = np.where(click, EL_CLICK_CONVERSION, np.asarray(EL_VIEW_CONVERSION)[advertiser])
    converts = np.flatnonzero(rng.random(total) < rate)
    repeats = 1 + rng.poisson(EL_EXTRA_CONVERSIONS, size=converts.size)
    ad = np.repeat(converts, repeats)
    windows = np.where(click[ad], EL_CLICK_EXPIRY_SECONDS, EL_VIEW_EXPIRY_SECONDS).astype(np.int64) * MICROS_PER_SECOND
    t_times = times[ad] + _truncated_delays(rng, windows)
    in_filter = rng.random(ad.size) < EL_IN_FILTER_SHARE
    pick = rng.random(ad.size)
    g = campaign[ad]
    from_filter = model.filter_index[g, (pick * model.filter_size[g]).astype(np.int64)]
    from_shop = model.categories[advertiser[ad], (pick * EL_CATEGORIES_PER_ADVERTISER).astype(np.int64)]
    t_category = np.where(in_filter, from_filter, from_shop)
    t_device, t_advertiser = device[ad], advertiser[ad]

    # Organic conversions.
    organic_counts = rng.poisson(EL_ORGANIC_PER_DAY * days, size=n)
    organic = int(organic_counts.sum())
    o_advertiser = rng.choice(EL_ADVERTISERS, size=organic, p=model.weights)
    o_category = model.categories[o_advertiser, rng.integers(0, EL_CATEGORIES_PER_ADVERTISER, size=organic)]
    o_times = start + rng.integers(0, span, size=organic, dtype=np.int64)
    o_device = np.repeat(np.arange(n), organic_counts)

    t_device = np.concatenate([t_device, o_device])
    t_times = np.concatenate([t_times, o_times])
    t_advertiser = np.concatenate([t_advertiser, o_advertiser])
    t_category = np.concatenate([t_category, o_category])
    t_data = rng.choice(len(EL_CONVERSION_TYPES), size=t_device.size, p=EL_CONVERSION_WEIGHTS)
    prices = np.minimum(np.exp(np.log(EL_PRICE_MEDIAN) + EL_PRICE_SIGMA * rng.standard_normal(t_device.size)), EL_PRICE_CAP)
    valued = (t_data == 0) & np.isin(t_advertiser, EL_VALUE_ADVERTISERS) & values
    t_value = np.where(valued, np.clip(np.ceil(prices / EL_DOLLARS_PER_VALUE), 1, EL_MAX_VALUE), 0).astype(np.int64)
    keep = t_times < end
    t_order = np.lexsort((t_times, t_device))
    t_order = t_order[keep[t_order]]
    return _Chunk(lo, hi, device, times, advertiser, campaign, click, t_device[t_order], t_times[t_order],
                  t_advertiser[t_order], t_category[t_order], t_data[t_order], t_value[t_order],
                  int(np.count_nonzero(t_order >= ad.size)), int(np.count_nonzero(~click[converts])),
                  int(np.count_nonzero(click[converts])))


def _sequence(device: np.ndarray) -> np.ndarray:
    """K for each row of a device-sorted column: the row is its device's K-th."""
    if device.size == 0:
        return device
    starts = np.flatnonzero(np.r_[True, device[1:] != device[:-1]])
    lengths = np.diff(np.r_[starts, device.size])
    return np.arange(device.size) - np.repeat(starts, lengths)


def _source_records(model: _Model, part: _Chunk, names: list[str]) -> list[dict]:
    lo = part.lo
    origins = [_ad_tech(a) for a in range(EL_ADVERTISERS)]
    sites = [_site(a) for a in range(EL_ADVERTISERS)]
    fields = []  # per (campaign, click): the fields after the ids and time
    for g in range(len(model.filters)):
        a = g // EL_CAMPAIGNS_PER_ADVERTISER
        for is_click in (0, 1):
            custom = model.configs[g][is_click]
            reports, matching, specs = custom if custom is not None else (None, None, None)
            fields.append({
                "reporting_origin": origins[a], "destination": sites[a],
                "source_type": "navigation" if is_click else "event",
                "expiry_seconds": None if is_click else EL_VIEW_EXPIRY_SECONDS,
                "priority": EL_CLICK_PRIORITY if is_click else 0, "filter_data": model.filters[g],
                "max_event_level_reports": reports, "trigger_data_matching": matching, "trigger_specs": specs,
            })
    key = (2 * part.campaign + part.click).tolist()
    return [{"device_id": names[d], "event_time_micros": t, "source_id": f"s{lo + d}-{k}", **fields[f]}
            for d, t, k, f in zip(part.device.tolist(), part.times.tolist(), _sequence(part.device).tolist(), key, strict=True)]


def _trigger_records(part: _Chunk, names: list[str]) -> list[dict]:
    lo = part.lo
    origins = [_ad_tech(a) for a in range(EL_ADVERTISERS)]
    sites = [_site(a) for a in range(EL_ADVERTISERS)]
    filters = [[name] for name in EL_CATALOGUE]
    return [{"device_id": names[d], "event_time_micros": t, "trigger_id": f"t{lo + d}-{k}", "reporting_origin": origins[a],
             "destination": sites[a], "filters": filters[c], "trigger_data": data, "value": value or None}
            for d, t, k, a, c, data, value in zip(
                part.trigger_device.tolist(), part.trigger_times.tolist(), _sequence(part.trigger_device).tolist(),
                part.trigger_advertiser.tolist(), part.trigger_category.tolist(), part.trigger_data.tolist(),
                part.trigger_value.tolist(), strict=True)]


def generate_event_level(out_dir: str | os.PathLike, *, devices: int | None = None, sources: int | None = None,
                         days: int = 30, start: str | int = EL_START, seed: int = 0, fmt: str = "avro",
                         shards: int = 1, bad_fraction: float = 0.0, navigation_share: float = EL_CLICK_SHARE,
                         default_configs: bool = False, progress: bool = True) -> EventLevelStats:
    """Write the dataset of the module docstring to ``out_dir`` and return what was written: ``devices`` devices
    (default 5,000) or exactly ``sources`` sources (not both). ``start`` is an ISO 8601 date(-time) or epoch
    microseconds; ``navigation_share`` the probability that a source is a click (in [0, 1]); ``default_configs``
    True gives every source the default configuration (and every trigger a null value). Raises ``ValueError`` for
    a bad option (the message names it)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    days = datafiles.check_integer("--days", days, 1, 3650)
    if devices is not None and sources is not None:
        raise ValueError("give --devices or --sources, not both")
    if sources is not None:
        sources = datafiles.check_integer("--sources", sources, 1, EL_MAX_SOURCES)
        devices = max(1, -(-sources // round(EL_SOURCES_PER_DAY * days)))
    devices = datafiles.check_integer("--devices", 5_000 if devices is None else devices, 1, EL_MAX_DEVICES)
    shards = datafiles.check_integer("--shards", shards, 1, 10_000)
    if not (isinstance(bad_fraction, (int, float)) and 0 <= bad_fraction < 1):
        raise ValueError(f"--bad-fraction must be in [0, 1), got {bad_fraction}")
    if isinstance(navigation_share, bool) or not (isinstance(navigation_share, (int, float))
                                                  and 0 <= navigation_share <= 1):
        raise ValueError(f"--navigation-share must be a number in [0, 1], got {navigation_share}")
    navigation_share = float(navigation_share)
    default_configs = bool(default_configs)
    start_micros = datafiles.time_span_start(start, days)

    out = datafiles.prepare_output(out_dir, ("sources", "triggers"))
    (model_seq, row_seq, bad_seq, _), sync_marker = datafiles.seed_streams(seed, 4)
    model = _model(np.random.default_rng(model_seq), default_configs)
    log = datafiles.Progress(DATASET, progress)
    width = len(str(devices - 1))
    totals = {"sources": 0, "navigation": 0, "custom": 0, "triggers": 0, "organic": 0, "views": 0, "clicks": 0}
    custom = np.array([[config is not None for config in pair] for pair in model.configs])
    bad = {kind: datafiles.BadRecords(fmt, message, id_field, bad_fraction, datafiles.stream(bad_seq, index))
           for index, (kind, message, id_field) in enumerate((("sources", SOURCE_MESSAGE, "source_id"),
                                                               ("triggers", TRIGGER_MESSAGE, "trigger_id")))}

    def records(kind: str, shard: int) -> Iterator[list]:
        """The encoded records of ``kind`` for the chunks of ``shard`` (each chunk's columns are drawn for each
        kind: that is cheap next to the encoding, and memory stays one chunk)."""
        message = SOURCE_MESSAGE if kind == "sources" else TRIGGER_MESSAGE
        for c, lo, hi in datafiles.chunk_ranges(devices, EL_CHUNK_DEVICES, shard, shards):
            total = None if sources is None else sources * hi // devices - sources * lo // devices
            part = _chunk(model, row_seq, c, lo, hi, total, days=days, start=start_micros,
                          navigation_share=navigation_share, values=not default_configs)
            names = [f"device-{d:0{width}d}" for d in range(lo, hi)]
            if kind == "sources":
                rows = _source_records(model, part, names)
                totals["sources"] += len(rows)
                totals["navigation"] += int(part.click.sum())
                totals["custom"] += int(custom[part.campaign, part.click.astype(np.int64)].sum())
                totals["views"] += part.converted_views
                totals["clicks"] += part.converted_clicks
            else:
                rows = _trigger_records(part, names)
                totals["triggers"] += len(rows)
                totals["organic"] += part.organic
            encoded = rows if fmt == "avro" else [datafiles.encode_record(fmt, message, row) for row in rows]
            yield bad[kind].add(encoded, lambda i, rows=rows: {**rows[i]})
            log(f"{kind}: {hi:,} / {devices:,} devices ({totals[kind]:,} {kind})")

    written = {}
    for kind, schema in (("sources", "event_level_source"), ("triggers", "event_level_trigger")):
        paths = datafiles.shard_paths(out, kind, shards, fmt)
        for s, path in enumerate(paths):
            datafiles.write_file(path, fmt, load_avro_schema(schema) if fmt == "avro" else None, sync_marker, records(kind, s))
        written[kind] = [str(path) for path in paths]
    log(f"wrote {totals['sources']:,} sources and {totals['triggers']:,} triggers", force=True)
    stats = EventLevelStats(
        devices=devices, sources=totals["sources"], navigation=totals["navigation"], custom_specs=totals["custom"],
        triggers=totals["triggers"], organic_triggers=totals["organic"], converted_views=totals["views"],
        converted_clicks=totals["clicks"], bad_sources=bad["sources"].written, bad_triggers=bad["triggers"].written,
        bad_by_reason=datafiles.merged_counts(bad["sources"].by_reason, bad["triggers"].by_reason),
        source_files=written["sources"], trigger_files=written["triggers"],
    )
    parameters = {"devices": devices, "sources": sources, "days": days, "seed": seed, "format": fmt, "shards": shards,
                  "bad_fraction": bad_fraction, "start": iso_micros(start_micros), "start_micros": start_micros,
                  "navigation_share": navigation_share, "default_configs": default_configs}
    datafiles.write_generation_json(out, DATASET, parameters, event_level_model(model, navigation_share, default_configs), stats)
    return stats


def event_level_model(model: _Model, navigation_share: float = EL_CLICK_SHARE, default_configs: bool = False) -> dict:
    """The model constants (for ``generation.json``), with the options that change them."""
    value = (f"purchases of shops {list(EL_VALUE_ADVERTISERS)}: ceil(price / {EL_DOLLARS_PER_VALUE}) in "
             f"[1, {EL_MAX_VALUE}], price lognormal (median {EL_PRICE_MEDIAN}, sigma {EL_PRICE_SIGMA}) capped at "
             f"{EL_PRICE_CAP}; otherwise null (1)")
    return {
        "advertisers": [{"site": _site(a), "reporting_origin": _ad_tech(a),
                         "categories": [EL_CATALOGUE[i] for i in model.categories[a].tolist()],
                         "popularity": round(float(model.weights[a]), 6),
                         "view_conversion": EL_VIEW_CONVERSION[a]} for a in range(EL_ADVERTISERS)],
        "campaigns": [{"campaign": g, "filter_data": list(model.filters[g]),
                       "trigger_specs": "default" if default_configs else _campaign_kind(g) or "default"}
                      for g in range(len(model.filters))],
        "custom_specs": EL_CUSTOM_SPECS,
        "sources": f"Poisson({EL_SOURCES_PER_DAY} * days) per device, uniform times",
        "navigation_share": navigation_share, "navigation_priority": EL_CLICK_PRIORITY,
        "navigation_expiry_seconds": None, "event_expiry_seconds": EL_VIEW_EXPIRY_SECONDS,
        "conversion_probability": {"view": list(EL_VIEW_CONVERSION), "click": EL_CLICK_CONVERSION},
        "triggers_per_conversion": f"1 + Poisson({EL_EXTRA_CONVERSIONS})",
        "conversion_delay": f"exponential, mean {EL_CONVERSION_DELAY_DAYS} days, truncated to the expiry",
        "organic_conversions_per_device_day": EL_ORGANIC_PER_DAY, "in_filter_share": EL_IN_FILTER_SHARE,
        "trigger_data": dict(zip(EL_CONVERSION_TYPES, EL_CONVERSION_WEIGHTS, strict=True)),
        "value": "null (1): default configurations only" if default_configs else value,
        "chunk_devices": EL_CHUNK_DEVICES,
    }


# --------------------------------------------------------------------------- CLI (registered by pipelines.generate)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pipelines.generate event-level``."""
    datafiles.add_output_argument(parser)
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument("--sources", type=Integer(1, EL_MAX_SOURCES),
                       help=f"exactly this many sources, over ceil(N / ({EL_SOURCES_PER_DAY:g} * days)) devices")
    scale.add_argument("--devices", type=Integer(1, EL_MAX_DEVICES),
                       help="number of devices, Poisson sources each (default 5000)")
    parser.add_argument("--days", type=datafiles.DAYS, default=30, help="number of days (default 30)")
    parser.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    parser.add_argument("--format", choices=FORMATS, default="avro", help="file format (default avro)")
    parser.add_argument("--shards", type=datafiles.SHARDS, default=1, help="files per kind (default 1)")
    datafiles.add_bad_fraction_argument(parser)
    parser.add_argument("--navigation-share", type=PROBABILITY, default=EL_CLICK_SHARE, metavar="F",
                        help=f"fraction of sources that are clicks (navigation sources), in [0, 1] "
                             f"(default {EL_CLICK_SHARE:g})")
    parser.add_argument("--default-configs", action="store_true",
                        help="every source uses ARA's default configuration (no custom trigger specs; trigger "
                             "values null)")
    datafiles.add_start_argument(parser, EL_START, "start of the data, YYYY-MM-DD (00:00 UTC) or ISO 8601")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run_cli(args: argparse.Namespace) -> int:
    """Generate from parsed options and print the summary (``ValueError`` / ``OSError`` go to the caller)."""
    began = time.monotonic()
    stats = generate_event_level(args.output, devices=args.devices, sources=args.sources, days=args.days,
                                 start=args.start, seed=args.seed, fmt=args.format, shards=args.shards,
                                 bad_fraction=args.bad_fraction, navigation_share=args.navigation_share,
                                 default_configs=args.default_configs, progress=not args.quiet)
    print(f"generate {DATASET}: wrote {stats.devices:,} devices, {stats.sources:,} sources ({stats.navigation:,} "
          f"navigation, {stats.custom_specs:,} with custom trigger specs) and {stats.triggers:,} triggers "
          f"({stats.organic_triggers:,} organic), {stats.bad_sources + stats.bad_triggers:,} bad records, "
          f"in {time.monotonic() - began:.1f} s")
    datafiles.print_outputs(stats, args.output)
    return 0
