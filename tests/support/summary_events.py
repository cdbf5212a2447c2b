"""Hand-built ARA sources and triggers and PAA events for the summary-client tests, and writers of their files."""
from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

from schemas.limits import MAX_EXPIRY_SECONDS
from schemas.rows import (
    AggregatableTriggerData,
    AggregatableValue,
    AggregationKey,
    AraSource,
    AraTrigger,
    PaaEvent,
)
from transforms.core.mechanisms.noise import SeededSource

ORIGIN = "https://adtech.test"
SHOP = "https://shop.test"
MINUTE = 60 * 1_000_000
DAY = 24 * 60 * MINUTE
T0 = 1_699_999_800 * 1_000_000  # 2023-11-14T22:10:00Z, a multiple of 10 minutes


def source(device: str, minute: float, source_id: str, keys: dict[str, int] | None = None, *, priority: int = 0,
           filters: Iterable[str] = (), expiry_days: float = 30, destination: str = SHOP,
           origin: str = ORIGIN) -> AraSource:
    keys = {"count": 0x1 << 64, "value": 0x2 << 64} if keys is None else keys
    return AraSource(device, T0 + int(minute * MINUTE), source_id, origin, destination,
                     min(int(expiry_days * 86_400), MAX_EXPIRY_SECONDS), priority, tuple(filters),
                     tuple(AggregationKey(name, key) for name, key in keys.items()))


def trigger(device: str, minute: float, trigger_id: str, values: dict[str, int] | None = None, *,
            pieces: Iterable[tuple[int, Iterable[str]]] = ((0x5, ("count", "value")),), filters: Iterable[str] = (),
            destination: str = SHOP, origin: str = ORIGIN) -> AraTrigger:
    values = {"count": 1000, "value": 3000} if values is None else values
    return AraTrigger(device, T0 + int(minute * MINUTE), trigger_id, origin, destination, tuple(filters),
                      tuple(AggregatableTriggerData(piece, tuple(names)) for piece, names in pieces),
                      tuple(AggregatableValue(name, value) for name, value in values.items()))


def paa_event(device: str, minute: float, event_id: str, campaign: str, *, origin: str = ORIGIN,
              api: str = "shared-storage") -> PaaEvent:
    return PaaEvent(device, T0 + int(minute * MINUTE), event_id, origin, api, campaign)


def record_of(row: AraSource | AraTrigger | PaaEvent) -> dict:
    """A row in its wire form (Avro, JSON Lines and protobuf share it): keys as "0x..." strings."""
    record = row._asdict()
    if type(row) is AraSource:
        record["filter_data"] = list(row.filter_data)
        record["aggregation_keys"] = [{"name": key.name, "key": hex(key.key)} for key in row.aggregation_keys]
    elif type(row) is AraTrigger:
        record["filters"] = list(row.filters)
        record["aggregatable_trigger_data"] = [{"key_piece": hex(piece.key_piece), "source_keys": list(piece.source_keys)}
                                               for piece in row.aggregatable_trigger_data]
        record["aggregatable_values"] = [value._asdict() for value in row.aggregatable_values]
    return record


def write_jsonl(path: Path, rows: Iterable) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(record_of(row)) + "\n")
    return str(path)


def random_ara(seed: int, devices: int = 8) -> list[AraSource | AraTrigger]:
    """Devices with random sources (two destinations, priorities, filters, expiries) and triggers, some at the
    same time as a source, several per source so that budgets run out."""
    rng = random.Random(seed)
    rows: list = []
    for d in range(devices):
        device = f"dev{d}"
        for s in range(rng.randint(1, 6)):
            rows.append(source(device, rng.randrange(0, 3 * 24 * 60, 7), f"s{d}-{s}",
                               {"count": rng.randrange(1, 2**20) << 64, "value": rng.randrange(1, 2**20) << 64},
                               priority=rng.choice([0, 0, 5]), filters=rng.sample(["a", "b", "c"], rng.randint(0, 2)),
                               expiry_days=rng.choice([1, 2, 30]), destination=rng.choice([SHOP, "https://other.test"])))
        for t in range(rng.randint(1, 8)):
            minute = rng.choice([rows[-1].event_time_micros // MINUTE - T0 // MINUTE, rng.randrange(0, 4 * 24 * 60)])
            rows.append(trigger(device, minute, f"t{d}-{t}", {"count": rng.choice([0, 20000]), "value": rng.randrange(0, 40000)},
                                filters=rng.sample(["a", "b", "c"], rng.randint(0, 1)),
                                destination=rng.choice([SHOP, "https://other.test"])))
    return rows


def random_paa(seed: int, devices: int = 8) -> list[PaaEvent]:
    """Devices with bursts of ad events over a few campaigns and two reporting origins."""
    rng = random.Random(seed)
    rows = []
    for d in range(devices):
        for e in range(rng.randint(1, 12)):
            rows.append(paa_event(f"dev{d}", rng.randrange(0, 120, 3), f"e{d}-{e}", rng.choice("pqrs"),
                                  origin=rng.choice([ORIGIN, "https://other-adtech.test"])))
    return rows


def refusals(client, events) -> list[bool]:
    """Whether each report of ``client`` (ARA or PAA) replaying ``events`` on one device was made null by its
    budget (the client's ``refused`` count, report by report)."""
    out = []
    for _ in client.replay("dev", sorted(events, key=client.order), client.new_state(), SeededSource(1)):
        out.append(client.refused == 1)
        client.refused = 0
    return out
