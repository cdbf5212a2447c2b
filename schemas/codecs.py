"""Decoding and validating events from Avro, JSON Lines and length-delimited protobuf.

Every decoder yields, for each input record, either a valid typed row or a
``DeadLetter`` carrying the raw input (as text) and a reason, never raises on
bad data: a pipeline reading a file of mixed quality keeps the good records,
sends the rest to the dead-letter sink, and ``read == parsed + dead_lettered``.

Reasons (stable strings, counted per reason in every run's summary):
``malformed_json``, ``malformed_avro``, ``malformed_protobuf``,
``not_an_object``, ``missing_field:<name>``, ``empty_field:<name>``,
``invalid_text:<name>`` (not Unicode text, e.g. a lone surrogate), ``wrong_type:<name>``, ``negative_timestamp:<name>``,
``absurd_timestamp:<name>``; for conversions and their attribution requests also ``negative_value:<name>``,
``non_finite:<name>``, ``nonpositive:<name>`` (epsilon, sensitivities, window, n), ``report_sensitivity_above_query``,
``unknown_logic``, ``unknown_norm``, ``dimension_out_of_range``, ``incomplete_epochs`` (one of first/last epoch),
``reversed_epochs``; for the summary-report clients' events (ARA sources and triggers, PAA events) also
``invalid_key:<name>`` (not "0x" and 1 to 32 hex digits), ``duplicate_name:<name>``, ``too_many:<name>`` (more
than 20 entries), ``out_of_range:<name>``, ``nonpositive:expiry_seconds``, ``value_too_large:<name>`` (above
65536) and ``unknown_api:api``; for the event-level sources and triggers (seed 000 Sec. 2.2) also
``negative_value:trigger_data`` and ``nonpositive:value`` (the configuration of an event-level source is judged
by the pipeline, with ``transforms.event_level.mechanisms.config``'s ``ConfigurationError`` reasons).
"""
from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import IO, Any, Callable, Iterator, Mapping, NamedTuple, Union

import fastavro
from google.protobuf.internal.decoder import _DecodeVarint
from google.protobuf.internal.encoder import _VarintBytes
from google.protobuf.message import DecodeError, Message

from schemas.limits import MAX_AGGREGATABLE_VALUE, MAX_AGGREGATION_ENTRIES, MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS
from schemas.proto import events_pb2
from schemas.rows import (
    API_PROTECTED_AUDIENCE,
    API_SHARED_STORAGE,
    ATTRIBUTION_LOGICS,
    MAX_DIMENSION,
    NORMS,
    AggregatableTriggerData,
    AggregatableValue,
    AggregationKey,
    AraSource,
    AraTrigger,
    AttributionRequest,
    Conversion,
    DeadLetter,
    EventLevelSource,
    EventLevelTrigger,
    Impression,
    JoinEvent,
    PaaEvent,
    TriggerSpec,
)
from schemas.time_units import MAX_EVENT_TIME_MICROS

PAA_APIS = (API_SHARED_STORAGE, API_PROTECTED_AUDIENCE)
_INT64 = 2**63
_HEX_KEY = re.compile(r"0[xX][0-9a-fA-F]{1,32}")  # a 128-bit key as ARA writes it: "0x159"

FORMATS = ("avro", "jsonl", "pb")
_EXTENSIONS = {".avro": "avro", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".pb": "pb", ".binpb": "pb"}


@dataclass(frozen=True)
class FieldSpec:
    """One field of an event: its name and kind.

    Kinds: ``string`` (required, not blank), ``text`` (a string, missing = ""),
    ``strings`` (a list of non-blank strings, missing = ()), ``timestamp_micros``,
    ``amount`` (a finite number >= 0), ``request`` (a nested attribution request); for the summary-report
    clients ``int64`` (missing = 0), ``expiry`` (seconds, missing = 30 days, clamped to [1, 30] days),
    ``aggregation_keys``, ``trigger_data`` and ``aggregatable_values`` (lists of nested records) and ``api``.
    """

    name: str
    kind: str


@dataclass(frozen=True)
class EventSpec:
    """How to turn a decoded mapping into a typed row, for one event type."""

    name: str
    row_type: type
    proto_type: type
    avro_schema: str
    fields: tuple[FieldSpec, ...]
    # The common case of ``validate`` unrolled for this type (a row, or None to ask ``validate`` for the
    # reason): validation runs once per input record, and the generic loop costs as much as Avro decoding.
    accept: Callable[[dict], NamedTuple | None] | None = None

    def __reduce__(self):
        """Pickle by name: generated protobuf classes cannot be pickled by value (Beam ships DoFns pickled)."""
        return (event_spec, (self.name,))


def _accept_join_event(record: dict) -> JoinEvent | None:
    group, user, time = record.get("interest_group"), record.get("user_id"), record.get("event_time_micros")
    if (
        type(group) is str and group.isascii() and group and not group.isspace()
        and type(user) is str and user.isascii() and user and not user.isspace()
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
    ):
        return JoinEvent(group, user, time)
    return None


JOIN_EVENT = EventSpec(
    name="join_event",
    row_type=JoinEvent,
    proto_type=events_pb2.JoinEvent,
    avro_schema="join_event",
    fields=(
        FieldSpec("interest_group", "string"),
        FieldSpec("user_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
    ),
    accept=_accept_join_event,
)


def _name(value: Any) -> bool:
    """The fast path's test for a required identifier: non-blank ASCII text."""
    return type(value) is str and value.isascii() and bool(value) and not value.isspace()


def _accept_impression(record: dict) -> Impression | None:
    get = record.get
    device, time, impression = get("device_id"), get("event_time_micros"), get("impression_id")
    advertiser, publisher, campaign = get("advertiser_site"), get("publisher_site", ""), get("campaign_id", "")
    product, keys = get("product_id", ""), get("filter_keys", ())
    if (
        type(device) is str and device.isascii() and device and not device.isspace()
        and type(impression) is str and impression.isascii() and impression and not impression.isspace()
        and type(advertiser) is str and advertiser.isascii() and advertiser and not advertiser.isspace()
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
        and type(publisher) is str and publisher.isascii()
        and type(campaign) is str and campaign.isascii()
        and type(product) is str and product.isascii()
        and (keys == () or (type(keys) is list and (not keys or all(_name(key) for key in keys))))
    ):
        return Impression(device, time, impression, publisher, advertiser, campaign, product, tuple(keys))
    return None


def _accept_conversion(record: dict) -> Conversion | None:
    """The common case of a conversion: every identifier ASCII text, the request's numbers of the right types
    and in range, its choices known; anything else goes through the field-by-field path for its reason."""
    get = record.get
    device, time, conversion = get("device_id"), get("event_time_micros"), get("conversion_id")
    advertiser, querier, value = get("advertiser_site"), get("querier_site"), get("value")
    product, request = get("product_id", ""), get("attribution_request")
    if not (
        _name(device) and _name(conversion) and _name(advertiser) and _name(querier)
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
        and type(value) is float and 0 <= value < math.inf
        and type(product) is str and product.isascii()
        and type(request) is dict
    ):
        return None
    get = request.get
    window, first, last, n, dimension = get("window_days"), get("first_epoch"), get("last_epoch"), get("last_n"), get("dimension")
    epsilon, report, query = get("requested_epsilon"), get("report_global_sensitivity"), get("query_global_sensitivity")
    campaigns, keys = get("campaign_ids", ()), get("filter_keys", ())
    selected, logic, norm, key = get("product_id", ""), get("logic", ""), get("norm", ""), get("query_key", "")
    if not (type(selected) is str and type(logic) is str and type(norm) is str and type(key) is str):
        return None
    selected, logic, norm = selected or product, logic or "last_touch", norm or "L1"
    dimension = 1 if dimension is None else dimension
    if not (
        (window is None or (type(window) is int and window >= 1))
        and first is None and last is None
        and (campaigns == () or (type(campaigns) is list and all(_name(c) for c in campaigns)))
        and (keys == () or (type(keys) is list and all(_name(k) for k in keys)))
        and selected.isascii() and key.isascii()
        and logic in ATTRIBUTION_LOGICS and norm in NORMS
        and (n is None if logic != "last_n" else type(n) is int and n >= 1)
        and type(dimension) is int and max(1, len(campaigns)) <= dimension <= MAX_DIMENSION
        and (epsilon is None or (type(epsilon) is float and 0 < epsilon < math.inf))
        and type(report) is float and type(query) is float and 0 < report <= query < math.inf
    ):
        return None
    return Conversion(
        device, time, conversion, advertiser, querier, value, product,
        AttributionRequest(
            window, None, None, tuple(campaigns), selected, tuple(keys), logic, n or 1, dimension, epsilon, report, query,
            norm, key or f"product={selected}",
        ),
    )


IMPRESSION = EventSpec(
    name="impression",
    row_type=Impression,
    proto_type=events_pb2.Impression,
    avro_schema="impression",
    fields=(
        FieldSpec("device_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
        FieldSpec("impression_id", "string"),
        FieldSpec("publisher_site", "text"),
        FieldSpec("advertiser_site", "string"),
        FieldSpec("campaign_id", "text"),
        FieldSpec("product_id", "text"),
        FieldSpec("filter_keys", "strings"),
    ),
    accept=_accept_impression,
)

CONVERSION = EventSpec(
    name="conversion",
    row_type=Conversion,
    proto_type=events_pb2.Conversion,
    avro_schema="conversion",
    fields=(
        FieldSpec("device_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
        FieldSpec("conversion_id", "string"),
        FieldSpec("advertiser_site", "string"),
        FieldSpec("querier_site", "string"),
        FieldSpec("value", "amount"),
        FieldSpec("product_id", "text"),
        FieldSpec("attribution_request", "request"),
    ),
    accept=_accept_conversion,
)

def _names(values: Any) -> bool:
    """The fast path's test for an optional list of identifiers (missing = ())."""
    return values == () or (type(values) is list and all(_name(value) for value in values))


def _fast_key(text: Any) -> int | None:
    """A key in ARA's hex form on the fast path, or None."""
    return int(text, 16) if type(text) is str and _HEX_KEY.fullmatch(text) else None


def _fast_items(items: Any) -> list | None:
    """An optional list of at most 20 nested records (Avro records or JSON objects) on the fast path, or None."""
    if items == ():
        return []
    if type(items) is list and len(items) <= MAX_AGGREGATION_ENTRIES and all(type(item) is dict for item in items):
        return items
    return None


def _accept_ara_source(record: dict) -> AraSource | None:
    get = record.get
    device, time, source, origin = get("device_id"), get("event_time_micros"), get("source_id"), get("reporting_origin")
    destination, expiry, priority, filters = get("destination"), get("expiry_seconds"), get("priority"), get("filter_data", ())
    items = _fast_items(get("aggregation_keys", ()))
    if not (
        _name(device) and _name(source) and _name(origin) and _name(destination)
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
        and (expiry is None or (type(expiry) is int and MIN_EXPIRY_SECONDS <= expiry <= MAX_EXPIRY_SECONDS))
        and (priority is None or (type(priority) is int and -_INT64 <= priority < _INT64))
        and _names(filters) and items is not None
    ):
        return None
    keys = []
    for item in items:
        name, key = item.get("name"), _fast_key(item.get("key"))
        if not _name(name) or key is None:
            return None
        keys.append(AggregationKey(name, key))
    if len({key.name for key in keys}) != len(keys):
        return None
    return AraSource(
        device, time, source, origin, destination, MAX_EXPIRY_SECONDS if expiry is None else expiry, priority or 0,
        tuple(filters), tuple(keys),
    )


def _accept_ara_trigger(record: dict) -> AraTrigger | None:
    get = record.get
    device, time, trigger, origin = get("device_id"), get("event_time_micros"), get("trigger_id"), get("reporting_origin")
    destination, filters = get("destination"), get("filters", ())
    pieces, values = _fast_items(get("aggregatable_trigger_data", ())), _fast_items(get("aggregatable_values", ()))
    if not (
        _name(device) and _name(trigger) and _name(origin) and _name(destination)
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
        and _names(filters) and pieces is not None and values is not None
    ):
        return None
    data = []
    for item in pieces:
        piece, source_keys = _fast_key(item.get("key_piece")), item.get("source_keys", ())
        if piece is None or not _names(source_keys):
            return None
        data.append(AggregatableTriggerData(piece, tuple(source_keys)))
    amounts = []
    for item in values:
        name, value = item.get("name"), item.get("value")
        if not (_name(name) and type(value) is int and 0 <= value <= MAX_AGGREGATABLE_VALUE):
            return None
        amounts.append(AggregatableValue(name, value))
    if len({value.name for value in amounts}) != len(amounts):
        return None
    return AraTrigger(device, time, trigger, origin, destination, tuple(filters), tuple(data), tuple(amounts))


def _accept_paa_event(record: dict) -> PaaEvent | None:
    get = record.get
    device, time, event, origin = get("device_id"), get("event_time_micros"), get("event_id"), get("reporting_origin")
    api, campaign = get("api"), get("campaign_id")
    if (
        _name(device) and _name(event) and _name(origin) and _name(campaign) and api in PAA_APIS
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
    ):
        return PaaEvent(device, time, event, origin, api, campaign)
    return None


ARA_SOURCE = EventSpec(
    name="ara_source",
    row_type=AraSource,
    proto_type=events_pb2.AraSource,
    avro_schema="ara_source",
    fields=(
        FieldSpec("device_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
        FieldSpec("source_id", "string"),
        FieldSpec("reporting_origin", "string"),
        FieldSpec("destination", "string"),
        FieldSpec("expiry_seconds", "expiry"),
        FieldSpec("priority", "int64"),
        FieldSpec("filter_data", "strings"),
        FieldSpec("aggregation_keys", "aggregation_keys"),
    ),
    accept=_accept_ara_source,
)

ARA_TRIGGER = EventSpec(
    name="ara_trigger",
    row_type=AraTrigger,
    proto_type=events_pb2.AraTrigger,
    avro_schema="ara_trigger",
    fields=(
        FieldSpec("device_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
        FieldSpec("trigger_id", "string"),
        FieldSpec("reporting_origin", "string"),
        FieldSpec("destination", "string"),
        FieldSpec("filters", "strings"),
        FieldSpec("aggregatable_trigger_data", "trigger_data"),
        FieldSpec("aggregatable_values", "aggregatable_values"),
    ),
    accept=_accept_ara_trigger,
)

PAA_EVENT = EventSpec(
    name="paa_event",
    row_type=PaaEvent,
    proto_type=events_pb2.PaaEvent,
    avro_schema="paa_event",
    fields=(
        FieldSpec("device_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
        FieldSpec("event_id", "string"),
        FieldSpec("reporting_origin", "string"),
        FieldSpec("api", "api"),
        FieldSpec("campaign_id", "string"),
    ),
    accept=_accept_paa_event,
)

def _int_list(values: Any) -> tuple | None:
    """An optional list of 64-bit integers on the fast path (missing = ()), or None."""
    if values == () or values is None:
        return ()
    if type(values) is list and all(type(value) is int and -_INT64 <= value < _INT64 for value in values):
        return tuple(values)
    return None


def _fast_trigger_specs(specs: Any) -> tuple | None | bool:
    """An event-level source's trigger specs on the fast path: None (missing or empty: the defaults), a tuple of
    ``TriggerSpec``, or False (ask ``validate``)."""
    if specs is None or specs == () or specs == []:
        return None
    if type(specs) is not list:
        return False
    out = []
    for item in specs:
        if type(item) is not dict:
            return False
        data, ends = _int_list(item.get("trigger_data")), _int_list(item.get("window_ends_seconds"))
        buckets = _int_list(item.get("summary_buckets"))
        if data is None or ends is None or buckets is None:
            return False
        out.append(TriggerSpec(data, ends, buckets))
    return tuple(out)


def _accept_event_level_source(record: dict) -> EventLevelSource | None:
    get = record.get
    device, time, source, origin = get("device_id"), get("event_time_micros"), get("source_id"), get("reporting_origin")
    destination, kind, expiry, priority = get("destination"), get("source_type"), get("expiry_seconds"), get("priority")
    filters, reports, matching = get("filter_data", ()), get("max_event_level_reports"), get("trigger_data_matching")
    specs = _fast_trigger_specs(get("trigger_specs"))
    if not (
        _name(device) and _name(source) and _name(origin) and _name(destination) and _name(kind)
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
        and (expiry is None or (type(expiry) is int and -_INT64 <= expiry < _INT64))
        and (priority is None or (type(priority) is int and -_INT64 <= priority < _INT64))
        and (reports is None or (type(reports) is int and -_INT64 <= reports < _INT64))
        and (matching is None or (type(matching) is str and matching.isascii()))
        and _names(filters) and specs is not False
    ):
        return None
    return EventLevelSource(
        device, time, source, origin, destination, kind, MAX_EXPIRY_SECONDS if expiry is None else expiry,
        priority or 0, tuple(filters), reports, matching or "", specs,
    )


def _accept_event_level_trigger(record: dict) -> EventLevelTrigger | None:
    get = record.get
    device, time, trigger, origin = get("device_id"), get("event_time_micros"), get("trigger_id"), get("reporting_origin")
    destination, filters, data, value = get("destination"), get("filters", ()), get("trigger_data"), get("value")
    if (
        _name(device) and _name(trigger) and _name(origin) and _name(destination)
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
        and _names(filters)
        and type(data) is int and 0 <= data < _INT64
        and (value is None or (type(value) is int and 1 <= value < _INT64))
    ):
        return EventLevelTrigger(device, time, trigger, origin, destination, tuple(filters), data, 1 if value is None else value)
    return None


EVENT_LEVEL_SOURCE = EventSpec(
    name="event_level_source",
    row_type=EventLevelSource,
    proto_type=events_pb2.EventLevelSource,
    avro_schema="event_level_source",
    fields=(
        FieldSpec("device_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
        FieldSpec("source_id", "string"),
        FieldSpec("reporting_origin", "string"),
        FieldSpec("destination", "string"),
        FieldSpec("source_type", "string"),
        FieldSpec("expiry_seconds", "expiry_unclamped"),
        FieldSpec("priority", "int64"),
        FieldSpec("filter_data", "strings"),
        FieldSpec("max_event_level_reports", "optional_int64"),
        FieldSpec("trigger_data_matching", "text"),
        FieldSpec("trigger_specs", "trigger_specs"),
    ),
    accept=_accept_event_level_source,
)

EVENT_LEVEL_TRIGGER = EventSpec(
    name="event_level_trigger",
    row_type=EventLevelTrigger,
    proto_type=events_pb2.EventLevelTrigger,
    avro_schema="event_level_trigger",
    fields=(
        FieldSpec("device_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
        FieldSpec("trigger_id", "string"),
        FieldSpec("reporting_origin", "string"),
        FieldSpec("destination", "string"),
        FieldSpec("filters", "strings"),
        FieldSpec("trigger_data", "nonnegative_int64"),
        FieldSpec("value", "positive_int64"),
    ),
    accept=_accept_event_level_trigger,
)

EVENT_SPECS = {
    spec.name: spec
    for spec in (JOIN_EVENT, IMPRESSION, CONVERSION, ARA_SOURCE, ARA_TRIGGER, PAA_EVENT, EVENT_LEVEL_SOURCE,
                 EVENT_LEVEL_TRIGGER)
}


def event_spec(name: str) -> EventSpec:
    """The registered event type called ``name``."""
    return EVENT_SPECS[name]


Parsed = Union[NamedTuple, DeadLetter]


def format_of(path: str, override: str | None = None) -> str:
    """The file format: ``override`` if given, else from the extension (``.avro``, ``.jsonl``, ``.pb``)."""
    if override:
        if override not in FORMATS:
            raise ValueError(f"unknown format {override!r}; expected one of {', '.join(FORMATS)}")
        return override
    name = path.lower()
    for suffix in (".gz", ".bz2", ".deflate", ".zst"):
        name = name.removesuffix(suffix)
    for extension, fmt in _EXTENSIONS.items():
        if name.endswith(extension):
            return fmt
    raise ValueError(f"cannot tell the format of {path!r} from its extension; pass it explicitly ({', '.join(FORMATS)})")


class _Invalid(Exception):
    """A field that cannot be used; ``args[0]`` is the dead-letter reason."""


def _string(name: str, value: Any) -> str:
    """``value`` as a required, non-blank Unicode string."""
    if value is None:
        raise _Invalid(f"missing_field:{name}")
    return _text(name, value, blank_reason=f"empty_field:{name}")


def _text(name: str, value: Any, blank_reason: str | None = None) -> str:
    """``value`` as Unicode text (missing = ""); with ``blank_reason``, blank text is refused with it."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise _Invalid(f"wrong_type:{name}")
    if blank_reason is not None and (not value or value.isspace()):
        raise _Invalid(blank_reason)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (JSON "\ud800"): not Unicode text
            raise _Invalid(f"invalid_text:{name}") from None
    return value


def _strings(name: str, value: Any) -> tuple:
    """A list of non-blank strings (missing = ())."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise _Invalid(f"wrong_type:{name}")
    return tuple(_text(name, item, blank_reason=f"empty_field:{name}") for item in value)


def _timestamp(name: str, value: Any) -> int:
    if value is None:
        raise _Invalid(f"missing_field:{name}")
    if isinstance(value, datetime) and value.tzinfo is not None:
        value = _datetime_micros(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"wrong_type:{name}")
    if value < 0:
        raise _Invalid(f"negative_timestamp:{name}")
    if value >= MAX_EVENT_TIME_MICROS:
        raise _Invalid(f"absurd_timestamp:{name}")
    return value


def _number(name: str, value: Any, optional: bool = False) -> float | None:
    """A finite number as a float (ints accepted, bools not)."""
    if value is None:
        if optional:
            return None
        raise _Invalid(f"missing_field:{name}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"wrong_type:{name}")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond the double range
        raise _Invalid(f"non_finite:{name}") from None
    if not math.isfinite(value):
        raise _Invalid(f"non_finite:{name}")
    return value


def _amount(name: str, value: Any) -> float:
    """A finite number >= 0 (a conversion value)."""
    value = _number(name, value)
    if value < 0:
        raise _Invalid(f"negative_value:{name}")
    return value


def _positive(name: str, value: Any, optional: bool = False) -> float | None:
    """A finite number > 0 (an epsilon, a sensitivity)."""
    value = _number(name, value, optional)
    if value is not None and value <= 0:
        raise _Invalid(f"nonpositive:{name}")
    return value


def _integer(name: str, value: Any, minimum: int | None = None) -> int | None:
    """An optional integer (missing = None), at least ``minimum`` when given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"wrong_type:{name}")
    if minimum is not None and value < minimum:
        raise _Invalid(f"nonpositive:{name}")
    return value


def _request(value: Any, conversion_product_id: str) -> AttributionRequest:
    """An attribution request (seed 003 Code Listing 1) with its defaults: window = the job's, logic
    ``last_touch``, m = 1, norm L1, selecting by the conversion's product when no campaign is listed, query key
    ``product=<product>``."""
    if value is None:
        raise _Invalid("missing_field:attribution_request")
    if not isinstance(value, Mapping):
        raise _Invalid("wrong_type:attribution_request")
    window_days = _integer("window_days", value.get("window_days"), minimum=1)
    first_epoch, last_epoch = _integer("first_epoch", value.get("first_epoch")), _integer("last_epoch", value.get("last_epoch"))
    if (first_epoch is None) != (last_epoch is None):
        raise _Invalid("incomplete_epochs")
    if first_epoch is not None and last_epoch < first_epoch:
        raise _Invalid("reversed_epochs")
    campaign_ids = _strings("campaign_ids", value.get("campaign_ids"))
    product_id = _text("product_id", value.get("product_id")) or conversion_product_id
    logic = _text("logic", value.get("logic")) or "last_touch"
    if logic not in ATTRIBUTION_LOGICS:
        raise _Invalid("unknown_logic")
    last_n = _integer("last_n", value.get("last_n"), minimum=1)
    if logic == "last_n" and last_n is None:
        raise _Invalid("missing_field:last_n")
    dimension = _integer("dimension", value.get("dimension"))
    dimension = 1 if dimension is None else dimension
    if not max(1, len(campaign_ids)) <= dimension <= MAX_DIMENSION:
        raise _Invalid("dimension_out_of_range")
    report_sensitivity = _positive("report_global_sensitivity", value.get("report_global_sensitivity"))
    query_sensitivity = _positive("query_global_sensitivity", value.get("query_global_sensitivity"))
    if report_sensitivity > query_sensitivity:
        raise _Invalid("report_sensitivity_above_query")
    norm = _text("norm", value.get("norm")) or "L1"
    if norm not in NORMS:
        raise _Invalid("unknown_norm")
    return AttributionRequest(
        window_days=window_days,
        first_epoch=first_epoch,
        last_epoch=last_epoch,
        campaign_ids=campaign_ids,
        product_id=product_id,
        filter_keys=_strings("filter_keys", value.get("filter_keys")),
        logic=logic,
        last_n=last_n or 1,
        dimension=dimension,
        requested_epsilon=_positive("requested_epsilon", value.get("requested_epsilon"), optional=True),
        report_global_sensitivity=report_sensitivity,
        query_global_sensitivity=query_sensitivity,
        norm=norm,
        query_key=_text("query_key", value.get("query_key")) or f"product={product_id}",
    )


def _int64(name: str, value: Any, default: int = 0) -> int:
    """An optional signed 64-bit integer (missing = ``default``)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"wrong_type:{name}")
    if not -_INT64 <= value < _INT64:
        raise _Invalid(f"out_of_range:{name}")
    return value


def _expiry(name: str, value: Any) -> int:
    """A source's expiry in seconds: missing = 30 days; > 0, clamped to [1 day, 30 days] as browsers clamp it."""
    value = _int64(name, value, MAX_EXPIRY_SECONDS)
    if value <= 0:
        raise _Invalid(f"nonpositive:{name}")
    return min(max(value, MIN_EXPIRY_SECONDS), MAX_EXPIRY_SECONDS)


def _key(name: str, value: Any) -> int:
    """A 128-bit key written as ARA writes it: "0x" and 1 to 32 hexadecimal digits."""
    if value is None:
        raise _Invalid(f"missing_field:{name}")
    if not isinstance(value, str):
        raise _Invalid(f"wrong_type:{name}")
    if not _HEX_KEY.fullmatch(value):
        raise _Invalid(f"invalid_key:{name}")
    return int(value, 16)


def _records(name: str, value: Any, inner: str | None = None) -> list:
    """An optional list (missing = []) of at most 20 nested records. With ``inner``, JSON may also write ARA's
    ``{name: x}`` object, read as the records ``{"name": name, inner: x}``."""
    if value is None:
        return []
    if inner is not None and isinstance(value, Mapping):
        value = [{"name": key, inner: item} for key, item in value.items()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(i, Mapping) for i in value):
        raise _Invalid(f"wrong_type:{name}")
    if len(value) > MAX_AGGREGATION_ENTRIES:
        raise _Invalid(f"too_many:{name}")
    return value


def _distinct(name: str, rows: tuple) -> tuple:
    """Named rows whose names are distinct."""
    if len({row.name for row in rows}) != len(rows):
        raise _Invalid(f"duplicate_name:{name}")
    return rows


def _aggregation_keys(name: str, value: Any) -> tuple:
    """An ARA source's named source keys (srcKey of seed 000 Alg. 2)."""
    return _distinct(name, tuple(
        AggregationKey(_string(f"{name}.name", item.get("name")), _key(f"{name}.key", item.get("key")))
        for item in _records(name, value, inner="key")
    ))


def _trigger_data(name: str, value: Any) -> tuple:
    """An ARA trigger's key pieces (trigKey of seed 000 Alg. 2), each with the source keys it is OR-ed into."""
    return tuple(
        AggregatableTriggerData(_key(f"{name}.key_piece", item.get("key_piece")),
                                _strings(f"{name}.source_keys", item.get("source_keys")))
        for item in _records(name, value)
    )


def _value(name: str, value: Any) -> int:
    """One aggregatable value: an integer in [0, 65536]."""
    if value is None:
        raise _Invalid(f"missing_field:{name}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"wrong_type:{name}")
    if value < 0:
        raise _Invalid(f"negative_value:{name}")
    if value > MAX_AGGREGATABLE_VALUE:
        raise _Invalid(f"value_too_large:{name}")
    return value


def _aggregatable_values(name: str, value: Any) -> tuple:
    """An ARA trigger's value per named source key (trigValue of seed 000 Alg. 2)."""
    return _distinct(name, tuple(
        AggregatableValue(_string(f"{name}.name", item.get("name")), _value(f"{name}.value", item.get("value")))
        for item in _records(name, value, inner="value")
    ))


def _api(name: str, value: Any) -> str:
    """The API a Private Aggregation event comes from: ``shared-storage`` or ``protected-audience``."""
    value = _string(name, value)
    if value not in PAA_APIS:
        raise _Invalid(f"unknown_api:{name}")
    return value


def _expiry_unclamped(name: str, value: Any) -> int:
    """An event-level source's expiry in seconds (missing = 30 days), not clamped: the event-level configuration
    refuses one outside [1 day, 30 days] (``expiry_out_of_range``)."""
    return _int64(name, value, MAX_EXPIRY_SECONDS)


def _optional_int64(name: str, value: Any) -> int | None:
    """An optional signed 64-bit integer (missing = None)."""
    return None if value is None else _int64(name, value)


def _nonnegative_int64(name: str, value: Any) -> int:
    """A required signed 64-bit integer >= 0 (an event-level trigger's data)."""
    if value is None:
        raise _Invalid(f"missing_field:{name}")
    value = _int64(name, value)
    if value < 0:
        raise _Invalid(f"negative_value:{name}")
    return value


def _positive_int64(name: str, value: Any) -> int:
    """An optional signed 64-bit integer >= 1 (missing = 1: an event-level trigger's value)."""
    value = _int64(name, value, 1)
    if value < 1:
        raise _Invalid(f"nonpositive:{name}")
    return value


def _int64s(name: str, value: Any) -> tuple:
    """An optional list of signed 64-bit integers (missing = ())."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise _Invalid(f"wrong_type:{name}")
    return tuple(_int64(name, item) for item in value)


def _trigger_specs(name: str, value: Any) -> tuple | None:
    """An event-level source's trigger specs: None when missing or empty (the source type's defaults)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(i, Mapping) for i in value):
        raise _Invalid(f"wrong_type:{name}")
    if not value:
        return None
    return tuple(
        TriggerSpec(*(_int64s(f"{name}.{field}", item.get(field)) for field in TriggerSpec._fields)) for item in value
    )


_CONVERTERS: dict[str, Callable[[str, Any], Any]] = {
    "string": _string,
    "text": _text,
    "strings": _strings,
    "timestamp_micros": _timestamp,
    "amount": _amount,
    "int64": _int64,
    "expiry": _expiry,
    "aggregation_keys": _aggregation_keys,
    "trigger_data": _trigger_data,
    "aggregatable_values": _aggregatable_values,
    "api": _api,
    "expiry_unclamped": _expiry_unclamped,
    "optional_int64": _optional_int64,
    "nonnegative_int64": _nonnegative_int64,
    "positive_int64": _positive_int64,
    "trigger_specs": _trigger_specs,
}
# kinds that are repeated messages
_MESSAGE_LISTS = ("aggregation_keys", "trigger_data", "aggregatable_values", "trigger_specs")


def validate(spec: EventSpec, record: Any) -> NamedTuple | str:
    """The typed row for a decoded ``record`` (a mapping), or the reason it is invalid.

    The common case goes through the spec's unrolled ``accept``, since this
    runs once per input record; anything it does not accept (or every record
    of a spec without one) is converted field by field, which gives the
    precise reason of the first bad field.
    """
    if type(record) is not dict:
        if not isinstance(record, Mapping):
            return "not_an_object"
    elif spec.accept is not None:
        row = spec.accept(record)
        if row is not None:
            return row
    values: dict[str, Any] = {}
    try:
        for field in spec.fields:
            raw = record.get(field.name)
            if field.kind == "request":
                values[field.name] = _request(raw, values.get("product_id", ""))
            else:
                values[field.name] = _CONVERTERS[field.kind](field.name, raw)
    except _Invalid as invalid:
        return invalid.args[0]
    return spec.row_type(**values)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _datetime_micros(value: datetime) -> int:
    """An aware datetime (Avro's ``timestamp-micros`` / ``timestamp-millis`` logical types decode to these) as
    integer microseconds since the Unix epoch, exactly. A naive datetime is ambiguous and stays ``wrong_type``."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def _parsed(spec: EventSpec, record: Any, raw: Callable[[], str], source: str) -> Parsed:
    row = validate(spec, record)
    if isinstance(row, str):
        return DeadLetter(raw=raw(), reason=row, source=source)
    return row


def _json_text(record: Any) -> str:
    return json.dumps(record, default=lambda v: base64.b64encode(v).decode() if isinstance(v, bytes) else repr(v))


def parse_json_line(spec: EventSpec, line: str, source: str) -> Parsed:
    """One JSON Lines record: a JSON object with the event's fields."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: pathologically nested input
        return DeadLetter(raw=line, reason="malformed_json", source=source)
    return _parsed(spec, record, lambda: line, source)


def read_jsonl(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every non-blank line of a JSON Lines file; undecodable bytes are a ``malformed_json`` dead letter."""
    for number, line_bytes in enumerate(handle, start=1):
        try:
            # utf-8-sig on the first line: a byte-order mark some editors write is not part of the record
            line = line_bytes.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            yield DeadLetter(raw=base64.b64encode(line_bytes).decode(), reason="malformed_json", source=f"{source}:{number}")
            continue
        if line.strip():
            yield parse_json_line(spec, line, f"{source}:{number}")


def avro_record(spec: EventSpec, record: Any, source: str, index: int) -> Parsed:
    """The row of the decoded Avro record at ``index`` of the file ``source``, or its dead letter."""
    row = validate(spec, record)
    if type(row) is str:
        return DeadLetter(raw=_json_text(record), reason=row, source=f"{source}#{index}")
    return row


def read_avro(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every record of an Avro container file.

    Fields are read by name whatever the writer schema, so files written with
    extra fields, or with a field of the wrong type, still decode and the
    record is judged by ``validate``. A corrupt block (bad header, sync marker
    or codec data) ends the file with one ``malformed_avro`` dead letter
    naming the position, since Avro cannot resynchronise inside a block.
    """
    accept = spec.accept or (lambda record: None)
    index = 0
    try:
        records = fastavro.reader(handle)
    except Exception as error:  # noqa: BLE001 - fastavro raises many types for a corrupt header
        yield DeadLetter(raw=f"{type(error).__name__}: {error}", reason="malformed_avro", source=f"{source}#0")
        return
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except Exception as error:  # noqa: BLE001 - fastavro raises many types for corrupt blocks
            yield DeadLetter(raw=f"{type(error).__name__}: {error}", reason="malformed_avro", source=f"{source}#{index}")
            return
        # the unrolled fast path first (this loop runs once per record), ``validate`` for the rest
        row = accept(record) if type(record) is dict else None
        yield avro_record(spec, record, source, index) if row is None else row
        index += 1


def _message_mapping(message: Message) -> dict:
    """The set fields of a nested message (unset optional fields are missing; repeated fields are lists)."""
    return {
        descriptor.name: list(value) if descriptor.is_repeated else value
        for descriptor, value in message.ListFields()
    }


def _proto_mapping(spec: EventSpec, message: Message) -> dict:
    """The message's fields as a mapping; an unset optional field or an empty string counts as missing/empty."""
    record = {}
    for field in spec.fields:
        if field.kind in ("string", "text", "api"):
            record[field.name] = getattr(message, field.name)
        elif field.kind == "strings":
            record[field.name] = list(getattr(message, field.name))
        elif field.kind in _MESSAGE_LISTS:
            record[field.name] = [_message_mapping(item) for item in getattr(message, field.name)]
        elif message.HasField(field.name):
            value = getattr(message, field.name)
            record[field.name] = _message_mapping(value) if field.kind == "request" else value
    return record


def read_delimited_proto(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every message of a file of varint-length-prefixed protobuf messages.

    A message that does not parse is one ``malformed_protobuf`` dead letter and
    reading goes on with the next length prefix; a truncated tail (a length
    running past the end of the file) is one final dead letter.
    """
    data = handle.read()
    position, index = 0, 0
    while position < len(data):
        raw_source = f"{source}@{position}"
        try:
            length, start = _DecodeVarint(data, position)
        except (IndexError, DecodeError):
            yield DeadLetter(raw=base64.b64encode(data[position:]).decode(), reason="malformed_protobuf", source=raw_source)
            return
        end = start + length
        payload = data[start:end]
        if end > len(data):
            yield DeadLetter(raw=base64.b64encode(data[position:]).decode(), reason="malformed_protobuf", source=raw_source)
            return
        message = spec.proto_type()
        try:
            message.ParseFromString(payload)
        except DecodeError:
            yield DeadLetter(raw=base64.b64encode(payload).decode(), reason="malformed_protobuf", source=raw_source)
        else:
            yield _parsed(spec, _proto_mapping(spec, message), lambda: base64.b64encode(payload).decode(), raw_source)
        position, index = end, index + 1


READERS: dict[str, Callable[[EventSpec, IO[bytes], str], Iterator[Parsed]]] = {
    "avro": read_avro,
    "jsonl": read_jsonl,
    "pb": read_delimited_proto,
}


def encode_delimited(message: Message) -> bytes:
    """One varint-length-prefixed protobuf message, as ``read_delimited_proto`` reads it."""
    payload = message.SerializeToString()
    return _VarintBytes(len(payload)) + payload


def row_to_dict(row: NamedTuple) -> dict:
    """A row as a plain dict (for JSON Lines and Avro writers); nested rows become nested dicts."""
    return {name: row_to_dict(value) if hasattr(value, "_asdict") else value for name, value in row._asdict().items()}
