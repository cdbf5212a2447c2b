"""Hand-built impressions and conversions for the measurement tests, and a JSON Lines writer for them."""
from __future__ import annotations

import json
import random
from pathlib import Path

from schemas.codecs import row_to_dict
from schemas.rows import AttributionRequest, Conversion, Impression
from schemas.time_units import MICROS_PER_DAY

ADVERTISER = "nike.example"


def impression(device: str, day: float, impression_id: str, campaign: str = "a1", product: str = "shoe") -> Impression:
    return Impression(device, int(day * MICROS_PER_DAY), impression_id, "news.example", ADVERTISER, campaign, product, ())


def request(**fields) -> AttributionRequest:
    """A request with the codec's defaults (last touch, m = 1, L1, 30-day window unless given)."""
    defaults = dict(
        window_days=None, first_epoch=None, last_epoch=None, campaign_ids=("a1", "a2"), product_id="shoe",
        filter_keys=(), logic="last_touch", last_n=1, dimension=2, requested_epsilon=0.5,
        report_global_sensitivity=100.0, query_global_sensitivity=100.0, norm="L1", query_key="q",
    )
    defaults.update(fields)
    return AttributionRequest(**defaults)


def conversion(device: str, day: float, conversion_id: str, value: float, req: AttributionRequest) -> Conversion:
    return Conversion(device, int(day * MICROS_PER_DAY), conversion_id, ADVERTISER, ADVERTISER, value, "shoe", req)


def nike_example() -> tuple[list[Impression], list[Conversion]]:
    """Seed 003 Sec. 3.2 as a pipeline input (7-day epochs from the Unix epoch).

    ann: I1 (campaign a1) in epoch 0 and I2 (a2) in epoch 1. Her conversion c0 on day 2 reads only epoch 0
    (value 100 of 100, epsilon 1): the single-epoch loss is 1 and exhausts that filter. c1 on day 22
    (epoch 3) asks for epochs 0..3, last 2 impressions, value 70 of report sensitivity 70 and query
    sensitivity 100, epsilon 0.5: epoch 0 cannot pay 0.35 and is dropped, epoch 1 pays 0.35, epochs 2 and 3
    have no relevant impression and pay nothing; the report is [0, 70]. bob converts without impressions.
    """
    impressions = [impression("ann", 1, "I1", "a1"), impression("ann", 8, "I2", "a2")]
    conversions = [
        conversion("ann", 2, "c0", 100.0, request(first_epoch=0, last_epoch=0, requested_epsilon=1.0)),
        conversion(
            "ann", 22, "c1", 70.0,
            request(first_epoch=0, last_epoch=3, logic="last_n", last_n=2, report_global_sensitivity=70.0),
        ),
        conversion("bob", 23, "c2", 40.0, request()),
    ]
    return impressions, conversions


def random_population(seed: int, devices: int = 12, days: int = 60) -> tuple[list[Impression], list[Conversion]]:
    """Devices with random impressions over two campaigns and random conversions with varied requests."""
    rng = random.Random(seed)
    impressions, conversions = [], []
    for d in range(devices):
        device = f"dev{d:02d}"
        for i in range(rng.randrange(0, 8)):
            impressions.append(impression(device, rng.uniform(0, days), f"i{d}-{i}", rng.choice(("a1", "a2"))))
        for c in range(rng.randrange(0, 4)):
            req = request(
                window_days=rng.choice((None, 7, 30)),
                logic=rng.choice(("last_touch", "first_touch", "equal_credit", "last_n")),
                last_n=rng.choice((1, 2)),
                requested_epsilon=rng.choice((0.2, 0.45)),
                report_global_sensitivity=rng.choice((50.0, 100.0)),
                query_key=rng.choice(("q1", "q2")),
            )
            conversions.append(conversion(device, rng.uniform(20, days), f"c{d}-{c}", rng.choice((10.0, 60.0)), req))
    return impressions, conversions


def write_jsonl(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(row_to_dict(row)) + "\n" for row in rows))
    return str(path)
