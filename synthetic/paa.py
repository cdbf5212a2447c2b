"""Synthetic Private Aggregation ad events: ``python -m pipelines.generate paa --output DIR``.

The input of ``python -m pipelines.summary_client paa`` (PAA-SR-Client with the reach-counting shared-storage
function, Ghazi et al. Alg. 3): ad views on devices, written as ``DIR/events-SSSSS-of-NNNNN.<ext>`` (Avro with
``schemas/avro/paa_event.avsc``, JSON Lines or delimited protobuf), the output domain of every campaign's
bucket, ``DIR/domain.avro`` (``paa_client.campaign_bucket`` of ``transforms.summary_reports.mechanisms``, for
``python -m pipelines.aggregate --domain``), and ``DIR/generation.json`` (parameters, model constants, counts).

The model
---------
Times are UTC microseconds in ``[start, start + days)``; ``start`` defaults to 2024-01-01T00:00:00Z.

* **Campaigns.** Two ad-techs ``https://adtech-O.example`` (the reporting origins) run 20 campaigns each,
  ``campaign-O-C``; a campaign's popularity is proportional to ``1 / (C + 1)`` within its ad-tech.
* **Targeting.** Each device is in the audience of ``1 + Poisson(3)`` campaigns (about 4), drawn without
  replacement by popularity over both ad-techs. Every ad it is shown is of one of them, uniformly, so the same
  campaigns come back (frequency): only a campaign's first view on the device counts for reach.
* **Sessions.** A device browses ``Poisson(1.5)`` sessions a day (uniform start times); a session shows
  ``1 + Poisson(3)`` ads (about 4), at uniform times within 20 minutes of its start, so several ads often fall
  in one 10-minute window and the per-window budgets matter (with the default reach value L1 / 2, only two
  first views per ad-tech and window can be reported).
* **API.** 70 % of the events come from Shared Storage worklets (``shared-storage``), 30 % from Protected
  Audience auctions (``protected-audience``).

Ids: devices ``device-N`` (zero padded to the digits of ``--devices``), events ``eN-K`` (device N's K-th).
Devices are generated in chunks of ``PAA_CHUNK_DEVICES``, each from its own random stream, written device by
device, each device's events in time order; ``--shards N`` splits the devices into N consecutive ranges. Memory
is one chunk; progress goes to stderr. ``--bad-fraction F`` adds corrupted copies of valid events (see
``files.BadRecords``; also unknown APIs). The same seed gives the same files byte for byte.
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
from schemas.option_values import Integer
from schemas.proto import events_pb2
from schemas.rows import API_PROTECTED_AUDIENCE, API_SHARED_STORAGE
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_MINUTE, iso_micros
from synthetic import files as datafiles
from transforms.summary_reports.mechanisms.paa_client import campaign_bucket

DATASET = "paa"

# Model constants (recorded in generation.json).
PAA_AD_TECHS = 2
PAA_CAMPAIGNS_PER_AD_TECH = 20
PAA_EXTRA_CAMPAIGNS = 3.0  # a device's audience: 1 + Poisson(3) campaigns
PAA_SESSIONS_PER_DAY = 1.5
PAA_EXTRA_VIEWS = 3.0  # ads per session: 1 + Poisson(3)
PAA_SESSION_MINUTES = 20
PAA_PROTECTED_AUDIENCE_SHARE = 0.3
PAA_START = "2024-01-01T00:00:00Z"
PAA_CHUNK_DEVICES = 5_000
PAA_MAX_DEVICES = 100_000_000


@dataclass(frozen=True)
class PaaStats:
    """What ``generate_paa`` wrote: valid ``events`` and ``bad_events`` (by the reason they read back with)."""

    devices: int
    events: int
    bad_events: int
    bad_by_reason: dict
    domain_buckets: int
    event_files: list[str] = field(default_factory=list)
    domain_files: list[str] = field(default_factory=list)


def paa_campaigns() -> list[tuple[str, str]]:
    """Every (reporting origin, campaign id)."""
    return [(f"https://adtech-{o}.example", f"campaign-{o}-{c}")
            for o in range(PAA_AD_TECHS) for c in range(PAA_CAMPAIGNS_PER_AD_TECH)]


def _popularity() -> np.ndarray:
    weights = np.tile(1.0 / np.arange(1, PAA_CAMPAIGNS_PER_AD_TECH + 1), PAA_AD_TECHS)
    return weights / weights.sum()


def _chunk(seq: np.random.SeedSequence, chunk: int, lo: int, hi: int, *, days: int, start: int,
           width: int) -> list[dict]:
    """The events (Avro form) of devices ``[lo, hi)``, device by device, each in time order."""
    rng = datafiles.stream(seq, chunk)
    campaigns, weights = paa_campaigns(), _popularity()
    events = []
    for d in range(lo, hi):
        audience = rng.choice(len(campaigns), size=min(len(campaigns), 1 + int(rng.poisson(PAA_EXTRA_CAMPAIGNS))),
                              replace=False, p=weights)
        sessions = int(rng.poisson(PAA_SESSIONS_PER_DAY * days))
        starts = start + rng.integers(0, days * MICROS_PER_DAY, size=sessions, dtype=np.int64)
        views = 1 + rng.poisson(PAA_EXTRA_VIEWS, size=sessions)
        times = np.repeat(starts, views) + rng.integers(0, PAA_SESSION_MINUTES * MICROS_PER_MINUTE, size=int(views.sum()))
        times = np.sort(times[times < start + days * MICROS_PER_DAY])
        chosen = audience[rng.integers(0, len(audience), size=times.size)]
        api = np.where(rng.random(times.size) < PAA_PROTECTED_AUDIENCE_SHARE, API_PROTECTED_AUDIENCE, API_SHARED_STORAGE)
        device = f"device-{d:0{width}d}"
        for k, (t, c, a) in enumerate(zip(times.tolist(), chosen.tolist(), api.tolist(), strict=True)):
            origin, campaign = campaigns[c]
            events.append({"device_id": device, "event_time_micros": t, "event_id": f"e{d}-{k}",
                           "reporting_origin": origin, "api": a, "campaign_id": campaign})
    return events


def generate_paa(out_dir: str | os.PathLike, *, devices: int = 5_000, days: int = 7, start: str | int = PAA_START,
                 seed: int = 0, fmt: str = "avro", shards: int = 1, bad_fraction: float = 0.0,
                 progress: bool = True) -> PaaStats:
    """Write the dataset of the module docstring to ``out_dir`` and return what was written. ``start`` is an ISO
    8601 date(-time) or epoch microseconds. Raises ``ValueError`` for a bad option (the message names it)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    devices = datafiles.check_integer("--devices", devices, 1, PAA_MAX_DEVICES)
    days = datafiles.check_integer("--days", days, 1, 3650)
    shards = datafiles.check_integer("--shards", shards, 1, 10_000)
    if not 0 <= bad_fraction < 1:
        raise ValueError(f"--bad-fraction must be in [0, 1), got {bad_fraction}")
    start_micros = datafiles.time_span_start(start, days)

    out = datafiles.prepare_output(out_dir, ("events",))
    (row_seq, bad_seq, _), sync_marker = datafiles.seed_streams(seed, 3)
    log = datafiles.Progress(DATASET, progress)
    width = len(str(devices - 1))
    written = {"events": 0}
    bad = datafiles.BadRecords(fmt, events_pb2.PaaEvent, "event_id", bad_fraction, np.random.default_rng(bad_seq),
                     {"unknown_api": (lambda r: r.update(api="fledge"), "unknown_api:api")})

    def records(shard: int) -> Iterator[list]:
        for c, lo, hi in datafiles.chunk_ranges(devices, PAA_CHUNK_DEVICES, shard, shards):
            rows = _chunk(row_seq, c, lo, hi, days=days, start=start_micros, width=width)
            written["events"] += len(rows)
            records = [datafiles.encode_record(fmt, events_pb2.PaaEvent, row) for row in rows]
            yield bad.add(records, lambda i, rows=rows: {**rows[i]})
            log(f"{hi:,} / {devices:,} devices ({written['events']:,} events)")

    paths = datafiles.shard_paths(out, "events", shards, fmt)
    schema = load_avro_schema("paa_event") if fmt == "avro" else None
    for s, path in enumerate(paths):
        datafiles.write_file(path, fmt, schema, sync_marker, records(s))
    domain = [campaign_bucket(campaign) for _, campaign in paa_campaigns()]
    domain_path = datafiles.write_domain(out / "domain.avro", domain, sync_marker)
    stats = PaaStats(devices=devices, events=written["events"], bad_events=bad.written,
                     bad_by_reason=dict(sorted(bad.by_reason.items())), domain_buckets=len(set(domain)),
                     event_files=[str(path) for path in paths], domain_files=[str(domain_path)])
    parameters = {"devices": devices, "days": days, "seed": seed, "format": fmt, "shards": shards,
                  "bad_fraction": bad_fraction, "start": iso_micros(start_micros), "start_micros": start_micros}
    datafiles.write_generation_json(out, DATASET, parameters, paa_model(), stats)
    return stats


def paa_model() -> dict:
    """The model constants (for ``generation.json``)."""
    return {
        "campaigns": [{"reporting_origin": origin, "campaign_id": campaign, "bucket": hex(campaign_bucket(campaign))}
                      for origin, campaign in paa_campaigns()],
        "popularity": "1 / (C + 1) within each ad-tech",
        "audience": f"1 + Poisson({PAA_EXTRA_CAMPAIGNS}) campaigns per device, by popularity, without replacement",
        "sessions_per_day": f"Poisson({PAA_SESSIONS_PER_DAY})", "views_per_session": f"1 + Poisson({PAA_EXTRA_VIEWS})",
        "session_minutes": PAA_SESSION_MINUTES, "protected_audience_share": PAA_PROTECTED_AUDIENCE_SHARE,
        "chunk_devices": PAA_CHUNK_DEVICES,
    }


# --------------------------------------------------------------------------- CLI (registered by pipelines.generate)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pipelines.generate paa``."""
    datafiles.add_common_arguments(parser, PAA_START, "start of the data, YYYY-MM-DD (00:00 UTC) or ISO 8601")
    parser.add_argument("--devices", type=Integer(1, PAA_MAX_DEVICES), default=5_000, help="number of devices (default 5000)")
    parser.add_argument("--days", type=datafiles.DAYS, default=7, help="number of days (default 7)")
    parser.add_argument("--shards", type=datafiles.SHARDS, default=1, help="number of files (default 1)")
    datafiles.add_bad_fraction_argument(parser)


def run_cli(args: argparse.Namespace) -> int:
    """Generate from parsed options and print the summary (``ValueError`` / ``OSError`` go to the caller)."""
    began = time.monotonic()
    stats = generate_paa(args.output, devices=args.devices, days=args.days, start=args.start, seed=args.seed,
                         fmt=args.format, shards=args.shards, bad_fraction=args.bad_fraction, progress=not args.quiet)
    print(f"generate {DATASET}: wrote {stats.devices:,} devices, {stats.events:,} events, {stats.bad_events:,} bad "
          f"records, in {time.monotonic() - began:.1f} s")
    print(f"  domain: {stats.domain_buckets:,} campaign buckets")
    datafiles.print_outputs(stats, args.output)
    return 0
