"""A record's own identity, for deduplication (an at-least-once bus may deliver it twice): the id its producer
gave it, within its device. A join has no id of its own, and a repeated (group, user, time) is the same join."""
from __future__ import annotations

from collections.abc import Callable, Hashable
from operator import attrgetter
from typing import Any


def _device_id(field: str) -> Callable[[Any], Hashable]:
    return attrgetter("device_id", field)


RECORD_IDS: dict[str, Callable[[Any], Hashable]] = {  # by event spec name (schemas.codecs)
    "join_event": attrgetter("interest_group", "user_id", "event_time_micros"),
    "impression": _device_id("impression_id"),
    "conversion": _device_id("conversion_id"),
    "ara_source": _device_id("source_id"),
    "ara_trigger": _device_id("trigger_id"),
    "paa_event": _device_id("event_id"),
    "event_level_source": _device_id("source_id"),
    "event_level_trigger": _device_id("trigger_id"),
}
_BY_ROW_TYPE = {
    "JoinEvent": RECORD_IDS["join_event"], "Impression": RECORD_IDS["impression"],
    "Conversion": RECORD_IDS["conversion"], "AraSource": RECORD_IDS["ara_source"],
    "AraTrigger": RECORD_IDS["ara_trigger"], "PaaEvent": RECORD_IDS["paa_event"],
    "EventLevelSource": RECORD_IDS["event_level_source"], "EventLevelTrigger": RECORD_IDS["event_level_trigger"],
}


def row_id(row: Any) -> Hashable:
    """The identity of an event row (``schemas.rows``), by its type."""
    return _BY_ROW_TYPE[type(row).__name__](row)
