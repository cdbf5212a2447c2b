"""Synthetic Attribution Reporting sources and triggers: ``python -m pipelines.generate ara --output DIR``.

The input of ``python -m pipelines.summary_client ara`` (ARA-SR-Client, Ghazi et al. Alg. 2): devices that see ads
(sources) of a few advertisers and sometimes buy on their sites (triggers), written as
``DIR/sources-SSSSS-of-NNNNN.<ext>`` and ``DIR/triggers-SSSSS-of-NNNNN.<ext>`` (Avro with
``schemas/avro/ara_source.avsc`` / ``ara_trigger.avsc``, JSON Lines or delimited protobuf), the output domain
of every bucket a report can hold, ``DIR/domain.avro`` (for ``python -m pipelines.aggregate --domain``), and
``DIR/generation.json`` (parameters, model constants, counts). With ``--registrations`` it also writes the same
sources and triggers as Attribution Reporting registration logs, ``DIR/registrations-SSSSS-of-NNNNN.jsonl`` (see
"Registration logs" below), for ``python -m pipelines.registrations`` and real browsers' logs alike.

The model
---------
Times are UTC microseconds in ``[start, start + days)``; ``start`` defaults to 2024-01-01T00:00:00Z.

* **Advertisers.** ``ARA_ADVERTISERS`` = 6 shops ``https://shop-A.example``, with popularity proportional to
  ``1 / (A + 1)`` (a few big advertisers, a tail of small ones). Shop ``A`` works with the ad-tech
  ``https://adtech-(A mod 2).example`` (the reporting origin of its sources and triggers) and sells 4 of the 8
  categories of the product catalogue ``ARA_CATALOGUE`` (sneakers, sandals, boots, shirts, pants, jackets,
  bags, hats): categories ``2A, ..., 2A + 3`` mod 8.
* **Campaigns.** Each advertiser runs 4 campaigns, numbered ``g = 4 A + c`` overall. A campaign's filter data
  (srcFilt) is 1 to 3 of its advertiser's categories (drawn once per seed). Its sources carry two named keys:
  ``purchaseCount`` = ``1 << 120 | g << 64`` and ``purchaseValue`` = ``2 << 120 | g << 64``.
* **Sources** (ad impressions). A device sees ``Poisson(impressions_per_day * days)`` ads (default 2 a day),
  at uniform times; each is of an advertiser drawn by popularity and one of its campaigns, uniformly. 10 % are
  clicks (``priority`` 100, expiry unset: 30 days), the rest views (``priority`` 0, expiry 7 days), so a click
  wins attribution over later views, as ARA ad-techs configure it.
* **Triggers** (purchases). A view leads to a purchase with probability 1 %, a click with 5 % (about 1.4 % of
  the sources overall, the usual range of display-ad conversion rates), after an exponential delay of mean 2
  days (purchases after the end of the data are dropped). The purchase is at the ad's advertiser, of a
  category from the campaign's filter data with probability 0.8, else of any category the advertiser sells.
  Besides, every device makes ``Poisson(0.01 * days)`` organic purchases (no ad behind them: an advertiser by
  popularity, a uniform category, a uniform time): their triggers are attributed only if a matching ad
  happens to precede them, and otherwise send null reports.
* **A trigger** has filters ``[category]`` (trigFilt), one key piece ``1 + category index`` for both source
  keys, and values ``purchaseCount`` = 16384 (L1 / 4) and ``purchaseValue`` = ``ceil(price * 16384 / 500)``,
  the price lognormal (median $40, sigma 0.8) capped at $500. So a purchase takes at most half the
  per-source contribution budget L1 = 65536 and a source pays for at least two purchases, the kind of scaling
  an ad-tech chooses for ARA.
* **Registration logs** (``--registrations``): one line per source or trigger, a ``schemas/registration_log.py``
  entry with ``device_id``, ``timestamp`` (``event_time_micros // 1000``, a string) and one response from
  ``reporting_origin + "/register-source"`` (or ``"/register-trigger"``), its header JSON given as a value:

  - a source is requested by the publisher ``https://publisher-(g mod ARA_PUBLISHERS).example`` (g its campaign,
    ``ARA_PUBLISHERS`` = 3), ``Attribution-Reporting-Eligible`` ``navigation-source`` for a click, else
    ``event-source``; its header has ``destination``, ``source_event_id`` = ``N * 2**32 + K`` (source ``sN-K``),
    ``priority``, ``expiry`` (views only), ``filter_data`` ``{"category": srcFilt}`` and ``aggregation_keys``
    ``{name: key}``, all numbers as base-10 strings;
  - a trigger is requested by its shop (``context_origin`` the destination, no eligibility header); its header
    has ``filters`` ``{"category": [category]}``, ``event_trigger_data`` ``[{"trigger_data": category index}]``,
    ``aggregatable_trigger_data`` (the key piece and both source keys) and ``aggregatable_values`` ``{name: value}``;
  - a device's lines follow its sources and triggers merged by time (sources first at equal times), devices in
    order; bad records (``--bad-fraction``) are only in the sources and triggers files, never in the log.

Ids: devices ``device-N`` (zero padded to the digits of ``--devices``), sources ``sN-K`` and triggers ``tN-K``
(device N's K-th). Devices are generated in chunks of ``ARA_CHUNK_DEVICES``, each from its own random stream
(``files.stream``), so the valid records do not depend on the format, the shards or ``--bad-fraction``; a chunk's
records are written device by device, each device's in time order. ``--shards N`` splits the devices into N
consecutive ranges per file kind. Memory is one chunk whatever the size; progress goes to stderr.
``--bad-fraction F`` adds corrupted copies of valid records (see ``files.BadRecords``; sources also get
invalid keys, triggers values above 65536). The same seed gives the same files byte for byte.
"""
from __future__ import annotations

import argparse
import heapq
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from schemas.codecs import FORMATS
from schemas.formats import load_avro_schema
from schemas.limits import MAX_AGGREGATABLE_VALUE
from schemas.option_values import Integer, Real
from schemas.proto import events_pb2
from schemas.time_units import MICROS_PER_DAY, SECONDS_PER_DAY, iso_micros
from synthetic import files as datafiles

DATASET = "ara"

# Model constants (recorded in generation.json).
ARA_ADVERTISERS = 6
ARA_CATALOGUE = ("sneakers", "sandals", "boots", "shirts", "pants", "jackets", "bags", "hats")
ARA_CATEGORIES_PER_ADVERTISER = 4
ARA_CAMPAIGNS_PER_ADVERTISER = 4
ARA_AD_TECHS = 2
ARA_PUBLISHERS = 3  # registration logs: a source's publisher is publisher-(campaign mod 3)
ARA_SOURCE_EVENT_ID_SHIFT = 32  # registration logs: source sN-K has source_event_id N << 32 | K
ARA_IMPRESSIONS_PER_DAY = 2.0
ARA_CLICK_SHARE = 0.10
ARA_VIEW_CONVERSION, ARA_CLICK_CONVERSION = 0.01, 0.05
ARA_CONVERSION_DELAY_DAYS = 2.0  # mean of the exponential delay from ad to purchase
ARA_ORGANIC_PER_DAY = 0.01  # purchases without an ad, per device and day
ARA_IN_FILTER_SHARE = 0.8  # share of ad-driven purchases in a category of the campaign's filter data
ARA_VIEW_EXPIRY_SECONDS = 7 * SECONDS_PER_DAY
ARA_CLICK_PRIORITY = 100
ARA_COUNT_VALUE = 16_384  # L1 / 4
ARA_PRICE_MEDIAN, ARA_PRICE_SIGMA, ARA_PRICE_CAP = 40.0, 0.8, 500.0
ARA_VALUE_PER_DOLLAR = ARA_COUNT_VALUE / ARA_PRICE_CAP  # the capped price is worth L1 / 4
ARA_KEY_NAMES = ("purchaseCount", "purchaseValue")
ARA_START = "2024-01-01T00:00:00Z"
ARA_CHUNK_DEVICES = 5_000
ARA_MAX_DEVICES = 100_000_000


@dataclass(frozen=True)
class AraStats:
    """What ``generate_ara`` wrote: valid ``sources`` (``clicks`` of them) and ``triggers`` (``organic_triggers``
    of them without an ad behind), bad records per kind and by the reason they read back with, the number of
    buckets in the domain, the registration-log entries (0 without ``--registrations``) and the files."""

    devices: int
    sources: int
    clicks: int
    triggers: int
    organic_triggers: int
    bad_sources: int
    bad_triggers: int
    bad_by_reason: dict
    domain_buckets: int
    registrations: int = 0  # registration-log entries (``--registrations``)
    source_files: list[str] = field(default_factory=list)
    trigger_files: list[str] = field(default_factory=list)
    domain_files: list[str] = field(default_factory=list)
    registration_files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Model:
    """The advertisers and campaigns of one seed."""

    categories: tuple  # per advertiser: its catalogue indices
    filters: tuple  # per campaign g: its filter data (category names)
    keys: tuple  # per campaign g: its aggregation keys in Avro form
    weights: np.ndarray  # advertiser popularity


def _site(advertiser: int) -> str:
    return f"https://shop-{advertiser}.example"


def _ad_tech(advertiser: int) -> str:
    return f"https://adtech-{advertiser % ARA_AD_TECHS}.example"


def _publisher(campaign: int) -> str:
    return f"https://publisher-{campaign % ARA_PUBLISHERS}.example"


def _key(kind: int, campaign: int, category: int | None = None) -> int:
    """A bucket: key kind (1 count, 2 value) in bits 120-127, campaign in 64-119, ``1 + category`` in 0-15."""
    return kind << 120 | campaign << 64 | (0 if category is None else 1 + category)


def _model(rng: np.random.Generator) -> _Model:
    categories = tuple(tuple((2 * a + j) % len(ARA_CATALOGUE) for j in range(ARA_CATEGORIES_PER_ADVERTISER))
                       for a in range(ARA_ADVERTISERS))
    filters, keys = [], []
    for a in range(ARA_ADVERTISERS):
        for c in range(ARA_CAMPAIGNS_PER_ADVERTISER):
            g = a * ARA_CAMPAIGNS_PER_ADVERTISER + c
            chosen = rng.choice(categories[a], size=int(rng.integers(1, 4)), replace=False)
            filters.append(sorted(ARA_CATALOGUE[i] for i in chosen.tolist()))
            keys.append([{"name": name, "key": hex(_key(kind, g))} for kind, name in enumerate(ARA_KEY_NAMES, start=1)])
    weights = 1.0 / np.arange(1, ARA_ADVERTISERS + 1)
    return _Model(categories, tuple(filters), tuple(keys), weights / weights.sum())


def ara_domain(model: _Model) -> list[int]:
    """Every bucket a report can hold: both keys of every campaign OR-ed with each category its advertiser sells."""
    return [_key(kind, a * ARA_CAMPAIGNS_PER_ADVERTISER + c, category)
            for a in range(ARA_ADVERTISERS) for c in range(ARA_CAMPAIGNS_PER_ADVERTISER)
            for kind in (1, 2) for category in model.categories[a]]


def _trigger_record(device: str, time_micros: int, trigger_id: str, advertiser: int, category: int,
                    price: float) -> dict:
    value = min(MAX_AGGREGATABLE_VALUE, math.ceil(price * ARA_VALUE_PER_DOLLAR))
    return {
        "device_id": device, "event_time_micros": time_micros, "trigger_id": trigger_id,
        "reporting_origin": _ad_tech(advertiser), "destination": _site(advertiser), "filters": [ARA_CATALOGUE[category]],
        "aggregatable_trigger_data": [{"key_piece": hex(1 + category), "source_keys": list(ARA_KEY_NAMES)}],
        "aggregatable_values": [{"name": ARA_KEY_NAMES[0], "value": ARA_COUNT_VALUE},
                                {"name": ARA_KEY_NAMES[1], "value": value}],
    }


def _chunk(model: _Model, seq: np.random.SeedSequence, chunk: int, lo: int, hi: int, *, days: int, rate: float,
           start: int, width: int) -> tuple[list[dict], list[dict], int, int, list[int]]:
    """Devices ``[lo, hi)``: their sources and triggers (Avro form, device by device, each in time order), the
    number of clicks and of organic triggers, and each source's campaign."""
    rng = datafiles.stream(seq, chunk)
    span = days * MICROS_PER_DAY
    end = start + span
    n = hi - lo
    counts = rng.poisson(rate * days, size=n)
    total = int(counts.sum())
    device = np.repeat(np.arange(n), counts)
    times = start + rng.integers(0, span, size=total, dtype=np.int64)
    advertiser = rng.choice(ARA_ADVERTISERS, size=total, p=model.weights)
    campaign = advertiser * ARA_CAMPAIGNS_PER_ADVERTISER + rng.integers(0, ARA_CAMPAIGNS_PER_ADVERTISER, size=total)
    click = rng.random(total) < ARA_CLICK_SHARE
    converts = rng.random(total) < np.where(click, ARA_CLICK_CONVERSION, ARA_VIEW_CONVERSION)
    purchase = times + rng.exponential(ARA_CONVERSION_DELAY_DAYS * MICROS_PER_DAY, size=total).astype(np.int64)
    converts &= purchase < end
    order = np.lexsort((times, device))  # device by device, in time order
    device, times, advertiser, campaign, click = device[order], times[order], advertiser[order], campaign[order], click[order]
    converts, purchase = converts[order], purchase[order]

    names = [f"device-{d:0{width}d}" for d in range(lo, hi)]
    sequence = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)  # K: the device's K-th source
    sources = [
        {"device_id": names[d], "event_time_micros": t, "source_id": f"s{lo + d}-{k}", "reporting_origin": _ad_tech(a),
         "destination": _site(a), "expiry_seconds": None if is_click else ARA_VIEW_EXPIRY_SECONDS,
         "priority": ARA_CLICK_PRIORITY if is_click else 0, "filter_data": model.filters[g], "aggregation_keys": model.keys[g]}
        for d, t, k, a, g, is_click in zip(device.tolist(), times.tolist(), sequence.tolist(), advertiser.tolist(),
                                           campaign.tolist(), click.tolist(), strict=True)
    ]

    # Purchases: ad-driven ones, then organic ones; (device, time, advertiser, category)
    driven = np.flatnonzero(converts)
    purchases = []
    for i in driven.tolist():
        a, g = int(advertiser[i]), int(campaign[i])
        pool = [ARA_CATALOGUE.index(name) for name in model.filters[g]] if rng.random() < ARA_IN_FILTER_SHARE \
            else list(model.categories[a])
        purchases.append((int(device[i]), int(purchase[i]), a, pool[int(rng.integers(0, len(pool)))]))
    organic_counts = rng.poisson(ARA_ORGANIC_PER_DAY * days, size=n)
    for d in np.repeat(np.arange(n), organic_counts).tolist():
        a = int(rng.choice(ARA_ADVERTISERS, p=model.weights))
        category = model.categories[a][int(rng.integers(0, ARA_CATEGORIES_PER_ADVERTISER))]
        purchases.append((d, start + int(rng.integers(0, span)), a, category))
    prices = np.minimum(np.exp(np.log(ARA_PRICE_MEDIAN) + ARA_PRICE_SIGMA * rng.standard_normal(len(purchases))), ARA_PRICE_CAP)
    purchases = sorted(zip(purchases, prices.tolist(), strict=True))
    triggers, seen = [], {}
    for (d, t, a, category), price in purchases:
        k = seen[d] = seen.get(d, -1) + 1
        triggers.append(_trigger_record(names[d], t, f"t{lo + d}-{k}", a, category, price))
    return sources, triggers, int(click.sum()), int(organic_counts.sum()), campaign.tolist()


def _source_entry(row: dict, campaign: int) -> dict:
    """A source row as a registration-log entry (the module docstring's "Registration logs")."""
    device_index, k = row["source_id"][1:].split("-")
    header: dict = {
        "destination": row["destination"],
        "source_event_id": str(int(device_index) << ARA_SOURCE_EVENT_ID_SHIFT | int(k)),
        "priority": str(row["priority"]),
    }
    if row["expiry_seconds"] is not None:
        header["expiry"] = str(row["expiry_seconds"])
    header["filter_data"] = {"category": list(row["filter_data"])}
    header["aggregation_keys"] = {key["name"]: key["key"] for key in row["aggregation_keys"]}
    return {
        "device_id": row["device_id"], "timestamp": str(row["event_time_micros"] // 1000),
        "registration_request": {
            "context_origin": _publisher(campaign),
            "Attribution-Reporting-Eligible": "navigation-source" if row["priority"] == ARA_CLICK_PRIORITY
            else "event-source",
        },
        "responses": [{"url": row["reporting_origin"] + "/register-source",
                       "response": {"Attribution-Reporting-Register-Source": header}}],
    }


def _trigger_entry(row: dict) -> dict:
    """A trigger row as a registration-log entry (the module docstring's "Registration logs")."""
    header = {
        "filters": {"category": list(row["filters"])},
        "event_trigger_data": [{"trigger_data": str(ARA_CATALOGUE.index(row["filters"][0]))}],
        "aggregatable_trigger_data": [{"key_piece": data["key_piece"], "source_keys": list(data["source_keys"])}
                                      for data in row["aggregatable_trigger_data"]],
        "aggregatable_values": {value["name"]: value["value"] for value in row["aggregatable_values"]},
    }
    return {
        "device_id": row["device_id"], "timestamp": str(row["event_time_micros"] // 1000),
        "registration_request": {"context_origin": row["destination"]},
        "responses": [{"url": row["reporting_origin"] + "/register-trigger",
                       "response": {"Attribution-Reporting-Register-Trigger": header}}],
    }


def registration_lines(sources: list[dict], triggers: list[dict], campaigns: list[int]) -> list[bytes]:
    """The registration log of a chunk's rows (``_chunk``'s): one JSON line per source and trigger, device by
    device, each device's merged by time with sources first at equal times."""
    keyed = heapq.merge(
        ((row["device_id"], row["event_time_micros"], 0, i) for i, row in enumerate(sources)),
        ((row["device_id"], row["event_time_micros"], 1, i) for i, row in enumerate(triggers)),
    )
    return [orjson.dumps(_source_entry(sources[i], campaigns[i]) if kind == 0 else _trigger_entry(triggers[i])) + b"\n"
            for _, _, kind, i in keyed]


def generate_ara(out_dir: str | os.PathLike, *, devices: int = 5_000, days: int = 30,
                 impressions_per_day: float = ARA_IMPRESSIONS_PER_DAY, start: str | int = ARA_START, seed: int = 0,
                 fmt: str = "avro", shards: int = 1, bad_fraction: float = 0.0, progress: bool = True,
                 registrations: bool = False) -> AraStats:
    """Write the dataset of the module docstring to ``out_dir`` and return what was written. ``start`` is an ISO
    8601 date(-time) or epoch microseconds; ``registrations`` also writes the registration logs. Raises
    ``ValueError`` for a bad option (the message names it)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    devices = datafiles.check_integer("--devices", devices, 1, ARA_MAX_DEVICES)
    days = datafiles.check_integer("--days", days, 1, 3650)
    shards = datafiles.check_integer("--shards", shards, 1, 10_000)
    if not (isinstance(impressions_per_day, (int, float)) and 0 < impressions_per_day <= 1000):
        raise ValueError(f"--impressions-per-day must be in (0, 1000], got {impressions_per_day}")
    if not 0 <= bad_fraction < 1:
        raise ValueError(f"--bad-fraction must be in [0, 1), got {bad_fraction}")
    start_micros = datafiles.time_span_start(start, days)

    out = datafiles.prepare_output(out_dir, ("sources", "triggers", "registrations"))
    (model_seq, row_seq, bad_seq, _), sync_marker = datafiles.seed_streams(seed, 4)
    model = _model(np.random.default_rng(model_seq))
    log = datafiles.Progress(DATASET, progress)
    width = len(str(devices - 1))
    totals = {"sources": 0, "clicks": 0, "triggers": 0, "organic": 0, "devices": 0, "registrations": 0}
    bad = {kind: datafiles.BadRecords(fmt, message, id_field, bad_fraction, datafiles.stream(bad_seq, index), extra)
           for index, (kind, message, id_field, extra) in enumerate((
               ("sources", events_pb2.AraSource, "source_id",
                {"invalid_key": (lambda r: r.update(aggregation_keys=[{"name": "purchaseCount", "key": "0xZZ"}]),
                                 "invalid_key:aggregation_keys.key")}),
               ("triggers", events_pb2.AraTrigger, "trigger_id",
                {"value_too_large": (lambda r: r.update(aggregatable_values=[{"name": "purchaseCount", "value": 70_000}]),
                                     "value_too_large:aggregatable_values.value")}),
           ))}

    def records(kind: str, shard: int) -> Iterator[list]:
        """The encoded records of ``kind`` for the chunks of ``shard`` (each chunk generated for each kind: the
        generation is cheap next to the encoding, and memory stays one chunk)."""
        message = events_pb2.AraSource if kind == "sources" else events_pb2.AraTrigger
        for c, lo, hi in datafiles.chunk_ranges(devices, ARA_CHUNK_DEVICES, shard, shards):
            sources, triggers, clicks, organic, _ = _chunk(model, row_seq, c, lo, hi, days=days,
                                                           rate=impressions_per_day, start=start_micros, width=width)
            rows = sources if kind == "sources" else triggers
            if kind == "sources":
                totals.update(sources=totals["sources"] + len(sources), clicks=totals["clicks"] + clicks,
                              devices=totals["devices"] + hi - lo)
            else:
                totals.update(triggers=totals["triggers"] + len(triggers), organic=totals["organic"] + organic)
            encoded = [datafiles.encode_record(fmt, message, row) for row in rows]
            yield bad[kind].add(encoded, lambda i, rows=rows: {**rows[i]})
            log(f"{kind}: {hi:,} / {devices:,} devices ({totals[kind]:,} {kind})")

    written = {}
    for kind, schema in (("sources", "ara_source"), ("triggers", "ara_trigger")):
        paths = datafiles.shard_paths(out, kind, shards, fmt)
        for s, path in enumerate(paths):
            datafiles.write_file(path, fmt, load_avro_schema(schema) if fmt == "avro" else None, sync_marker, records(kind, s))
        written[kind] = [str(path) for path in paths]
    written["registrations"] = []
    if registrations:
        for s, path in enumerate(datafiles.shard_paths(out, "registrations", shards, "jsonl")):
            with open(path, "wb") as handle:
                for c, lo, hi in datafiles.chunk_ranges(devices, ARA_CHUNK_DEVICES, s, shards):
                    sources, triggers, _, _, campaigns = _chunk(model, row_seq, c, lo, hi, days=days,
                                                                rate=impressions_per_day, start=start_micros, width=width)
                    lines = registration_lines(sources, triggers, campaigns)
                    handle.write(b"".join(lines))
                    totals["registrations"] += len(lines)
                    log(f"registrations: {hi:,} / {devices:,} devices ({totals['registrations']:,} registrations)")
            written["registrations"].append(str(path))
    domain = ara_domain(model)
    domain_path = datafiles.write_domain(out / "domain.avro", domain, sync_marker)
    stats = AraStats(
        devices=devices, sources=totals["sources"], clicks=totals["clicks"], triggers=totals["triggers"],
        organic_triggers=totals["organic"], bad_sources=bad["sources"].written, bad_triggers=bad["triggers"].written,
        bad_by_reason=datafiles.merged_counts(bad["sources"].by_reason, bad["triggers"].by_reason),
        domain_buckets=len(set(domain)), source_files=written["sources"], trigger_files=written["triggers"],
        domain_files=[str(domain_path)], registrations=totals["registrations"],
        registration_files=written["registrations"],
    )
    parameters = {"devices": devices, "days": days, "impressions_per_day": impressions_per_day, "seed": seed,
                  "format": fmt, "shards": shards, "bad_fraction": bad_fraction, "start": iso_micros(start_micros),
                  "start_micros": start_micros, "registrations": registrations}
    datafiles.write_generation_json(out, DATASET, parameters, ara_model(model), stats)
    return stats


def ara_model(model: _Model) -> dict:
    """The model constants (for ``generation.json``)."""
    return {
        "advertisers": [{"site": _site(a), "reporting_origin": _ad_tech(a),
                         "categories": [ARA_CATALOGUE[i] for i in model.categories[a]],
                         "popularity": round(float(model.weights[a]), 6)} for a in range(ARA_ADVERTISERS)],
        "campaigns": [{"campaign": g, "filter_data": list(model.filters[g]),
                       "aggregation_keys": {key["name"]: key["key"] for key in model.keys[g]}}
                      for g in range(len(model.filters))],
        "impressions": "Poisson(impressions_per_day * days) per device, uniform times",
        "click_share": ARA_CLICK_SHARE, "click_priority": ARA_CLICK_PRIORITY, "click_expiry_seconds": None,
        "view_expiry_seconds": ARA_VIEW_EXPIRY_SECONDS,
        "conversion_probability": {"view": ARA_VIEW_CONVERSION, "click": ARA_CLICK_CONVERSION},
        "conversion_delay": f"exponential, mean {ARA_CONVERSION_DELAY_DAYS} days",
        "organic_purchases_per_device_day": ARA_ORGANIC_PER_DAY, "in_filter_share": ARA_IN_FILTER_SHARE,
        "key_piece": "1 + category index in the catalogue", "count_value": ARA_COUNT_VALUE,
        "price": f"lognormal, median {ARA_PRICE_MEDIAN}, sigma {ARA_PRICE_SIGMA}, capped at {ARA_PRICE_CAP}",
        "value": f"ceil(price * {ARA_VALUE_PER_DOLLAR})", "chunk_devices": ARA_CHUNK_DEVICES,
        "registration_log": {
            "publisher": f"https://publisher-(campaign mod {ARA_PUBLISHERS}).example",
            "source_event_id": f"device index * 2**{ARA_SOURCE_EVENT_ID_SHIFT} + K (source sN-K)",
            "eligible": "navigation-source for clicks, event-source for views",
            "trigger_context_origin": "the trigger's destination",
        },
    }


# --------------------------------------------------------------------------- CLI (registered by pipelines.generate)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pipelines.generate ara``."""
    datafiles.add_common_arguments(parser, ARA_START, "start of the data, YYYY-MM-DD (00:00 UTC) or ISO 8601")
    parser.add_argument("--devices", type=Integer(1, ARA_MAX_DEVICES), default=5_000, help="number of devices (default 5000)")
    parser.add_argument("--days", type=datafiles.DAYS, default=30, help="number of days (default 30)")
    parser.add_argument("--impressions-per-day", type=Real(0, 1000, low_open=True), default=ARA_IMPRESSIONS_PER_DAY,
                        help=f"sources per device and day (default {ARA_IMPRESSIONS_PER_DAY})")
    parser.add_argument("--shards", type=datafiles.SHARDS, default=1, help="files per kind (default 1)")
    datafiles.add_bad_fraction_argument(parser)
    parser.add_argument("--registrations", action="store_true",
                        help="also write the sources and triggers as registration logs, registrations-*.jsonl")


def run_cli(args: argparse.Namespace) -> int:
    """Generate from parsed options and print the summary (``ValueError`` / ``OSError`` go to the caller)."""
    began = time.monotonic()
    stats = generate_ara(args.output, devices=args.devices, days=args.days, impressions_per_day=args.impressions_per_day,
                         start=args.start, seed=args.seed, fmt=args.format, shards=args.shards,
                         bad_fraction=args.bad_fraction, progress=not args.quiet, registrations=args.registrations)
    logged = f", {stats.registrations:,} registrations logged" if args.registrations else ""
    print(f"generate {DATASET}: wrote {stats.devices:,} devices, {stats.sources:,} sources ({stats.clicks:,} clicks) "
          f"and {stats.triggers:,} triggers ({stats.organic_triggers:,} organic), "
          f"{stats.bad_sources + stats.bad_triggers:,} bad records{logged}, in {time.monotonic() - began:.1f} s")
    print(f"  domain: {stats.domain_buckets:,} buckets")
    # the files of every kind written (print_outputs would print an empty line for the log when it is off)
    for kind, paths in (("sources", stats.source_files), ("triggers", stats.trigger_files),
                        ("domains", stats.domain_files), ("registrations", stats.registration_files)):
        if paths:
            print(f"  {kind}: {', '.join(paths)}")
    print(f"  summary: {Path(args.output) / 'generation.json'}")
    return 0

