"""Hand-built event-level sources and triggers (Ghazi et al. Sec. 2.2) for the event-level tests, and file writers."""
from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

import fastavro

from schemas.codecs import encode_delimited
from schemas.formats import load_avro_schema
from schemas.proto import events_pb2
from schemas.rows import EventLevelSource, EventLevelTrigger, TriggerSpec
from transforms.event_level.mechanisms.client import EventLevelClient, EventSource, EventTrigger
from transforms.event_level.mechanisms.devices import source_config

ORIGIN = "https://adtech.test"
SHOP = "https://shop.test"
MINUTE = 60 * 1_000_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
T0 = 1_699_999_800 * 1_000_000  # 2023-11-14T22:10:00Z


def source(device: str, hours: float, source_id: str, source_type: str = "navigation", *, expiry_days: int = 30,
           priority: int = 0, filters: Iterable[str] = (), max_reports: int | None = None, matching: str = "",
           specs: Iterable[TriggerSpec] | None = None, destination: str = SHOP, origin: str = ORIGIN) -> EventLevelSource:
    return EventLevelSource(device, T0 + int(hours * HOUR), source_id, origin, destination, source_type,
                            expiry_days * 86_400, priority, tuple(filters), max_reports, matching,
                            None if specs is None else tuple(specs))


def trigger(device: str, hours: float, trigger_id: str, data: int = 0, value: int = 1, *, filters: Iterable[str] = (),
            destination: str = SHOP, origin: str = ORIGIN) -> EventLevelTrigger:
    return EventLevelTrigger(device, T0 + int(hours * HOUR), trigger_id, origin, destination, tuple(filters), data, value)


def hand_built() -> list:
    """Three devices: navigation sources with the defaults (windows at 2, 7 and 30 days), an event source, one with
    two custom specs (exact matching, summary buckets on summed values, a 1-day window), priorities, filters,
    another destination, a source that expires before its trigger, and triggers at window ends."""
    custom = (TriggerSpec((3, 9), (DAY // 1_000_000, 3 * DAY // 1_000_000), (2, 5, 10)), TriggerSpec((4,), (), ()))
    return [
        source("d1", 0, "nav-a", filters=("shoes",)),
        source("d1", 1, "nav-b", priority=5),
        trigger("d1", 2, "t1", data=3),
        trigger("d1", 30, "t2", data=10, filters=("shoes",)),
        trigger("d1", 48, "t3", data=1),  # exactly at nav-a's first window end: falls in the next window
        trigger("d1", 49, "t4", data=2),
        source("d1", 50, "ev-c", "event", expiry_days=2),
        trigger("d1", 51, "t5", data=1, destination="https://other.test"),
        trigger("d1", 60, "t6", data=1),
        source("d2", 0, "custom", max_reports=4, matching="exact", specs=custom, expiry_days=10),
        trigger("d2", 1, "u1", data=3, value=3),
        trigger("d2", 2, "u2", data=9, value=4),
        trigger("d2", 30, "u3", data=3, value=4),
        trigger("d2", 40, "u4", data=7, value=9),  # not listed (exact): ignored
        trigger("d2", 41, "u5", data=4, value=2),
        source("d3", 0, "short", "event", expiry_days=1),
        trigger("d3", 30, "v1", data=0),  # after the expiry: not attributed
        source("d3", 31, "nav-d"),
        trigger("d3", 32, "v2", data=7),
        trigger("d4", 5, "w1", data=1),  # a device without sources
    ]


def random_events(seed: int, devices: int = 6, per_device: int = 8) -> list:
    """Random sources (navigation and event) and triggers over a few days, for batch-against-streaming checks."""
    rng = random.Random(seed)
    rows = []
    for d in range(devices):
        device = f"r{d}"
        for i in range(per_device):
            hours = rng.uniform(0, 24 * 10)
            if rng.random() < 0.35:
                kind = rng.choice(("navigation", "event"))
                rows.append(source(device, hours, f"s{i}", kind, expiry_days=rng.choice((1, 3, 10, 30)),
                                   priority=rng.choice((0, 0, 1))))
            else:
                rows.append(trigger(device, hours, f"t{i}", data=rng.randrange(10), value=rng.choice((1, 1, 2))))
    return rows


def record_of(row: EventLevelSource | EventLevelTrigger) -> dict:
    """A row in its Avro / JSON form (trigger specs as records, lists for lists)."""
    record = row._asdict()
    if type(row) is EventLevelSource:
        record["filter_data"] = list(row.filter_data)
        record["trigger_specs"] = None if row.trigger_specs is None else [
            {"trigger_data": list(spec.trigger_data), "window_ends_seconds": list(spec.window_ends_seconds),
             "summary_buckets": list(spec.summary_buckets)} for spec in row.trigger_specs
        ]
    else:
        record["filters"] = list(row.filters)
    return record


def write_jsonl(path: Path, rows: Iterable, extra_lines: Iterable[str] = ()) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(record_of(row)) + "\n")
        for line in extra_lines:
            handle.write(line + "\n")
    return str(path)


def write_avro(path: Path, rows: Iterable, schema: str) -> str:
    with open(path, "wb") as handle:
        fastavro.writer(handle, load_avro_schema(schema), [record_of(row) for row in rows])
    return str(path)


def write_pb(path: Path, rows: Iterable) -> str:
    messages = []
    for row in rows:
        record = {key: value for key, value in record_of(row).items() if value is not None}
        message = events_pb2.EventLevelSource if type(row) is EventLevelSource else events_pb2.EventLevelTrigger
        messages.append(encode_delimited(message(**record)))
    Path(path).write_bytes(b"".join(messages))
    return str(path)


def per_device(rows: Iterable) -> dict[str, list]:
    """Rows grouped by device id, in their order."""
    devices: dict[str, list] = {}
    for row in rows:
        devices.setdefault(row.device_id, []).append(row)
    return devices


def split(rows: Iterable) -> tuple[list, list]:
    rows = list(rows)
    return [r for r in rows if type(r) is EventLevelSource], [r for r in rows if type(r) is EventLevelTrigger]


def client_replay(rows) -> list[tuple]:
    """The mechanism's own noiseless client on one device's rows (ids are unique within a device here)."""
    meta = {}
    events = []
    for row in rows:
        if type(row) is EventLevelSource:
            meta[row.source_id] = row
            events.append(EventSource(row.source_id, row.destination, row.event_time_micros, source_config(row),
                                      row.filter_data, row.priority, row.reporting_origin))
        else:
            events.append(EventTrigger(row.trigger_id, row.destination, row.event_time_micros, row.trigger_data,
                                       row.value, row.filters, row.reporting_origin))
    return [(r.source_id, meta[r.source_id].reporting_origin, meta[r.source_id].destination, r.trigger_data,
             r.window_index, r.summary_bucket, r.report_time_micros, r.randomized_trigger_rate)
            for r in EventLevelClient().replay(events)]
