"""What each kind of event field accepts (the ``(kind)`` option of each field of ``schemas/proto/events.proto``),
in the two forms the readers use:

* the field-by-field check (``convert_fields``), which turns a decoded value into the row's value or names the
  first problem as the dead-letter reason (the reasons are listed in ``schemas.codecs``);
* the fast path (``fast_validator``): for each event type, one generated function that recognises the common,
  valid form of every field at once and builds the row, or returns None to ask the field-by-field check. It
  gives the same row as the field-by-field check for everything it accepts.

Kinds: ``string`` (required, not blank), ``text`` (a string, missing = ""), ``strings`` (a list of non-blank
strings, missing = ()), ``timestamp_micros``, ``amount`` (a finite number >= 0), ``request`` (a nested attribution
request); for the summary-report clients ``int64`` (missing = 0), ``expiry`` (seconds, missing = 30 days,
clamped to [1, 30] days), ``aggregation_keys``, ``trigger_data`` and ``aggregatable_values`` (lists of nested
records) and ``api``; for the event-level clients ``expiry_unclamped``, ``optional_int64``, ``nonnegative_int64``,
``positive_int64`` and ``trigger_specs``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, NamedTuple, TypeGuard, overload

from schemas.limits import MAX_AGGREGATABLE_VALUE, MAX_AGGREGATION_ENTRIES, MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS
from schemas.rows import (
    API_PROTECTED_AUDIENCE,
    API_SHARED_STORAGE,
    ATTRIBUTION_LOGICS,
    MAX_DIMENSION,
    NORMS,
    AggregatableTriggerData,
    AggregatableValue,
    AggregationKey,
    AttributionRequest,
    TriggerSpec,
)
from schemas.time_units import MAX_EVENT_TIME_MICROS

PAA_APIS = (API_SHARED_STORAGE, API_PROTECTED_AUDIENCE)
_INT64 = 2**63
_HEX_KEY = re.compile(r"0[xX][0-9a-fA-F]{1,32}")  # a 128-bit key as ARA writes it: "0x159"


@dataclass(frozen=True)
class FieldSpec:
    """One field of an event: its name and kind (the kinds are listed above)."""

    name: str
    kind: str


def _name(value: Any) -> TypeGuard[str]:
    """The fast path's test for a required identifier: non-blank ASCII text."""
    return type(value) is str and value.isascii() and bool(value) and not value.isspace()


def _names(values: Any) -> bool:
    """The fast path's test for an optional list of identifiers (missing = ())."""
    return values is None or values == () or (type(values) is list and all(_name(value) for value in values))


# ------------------------------------------------------------------------------------------------------------
# The fast path (``EventSpec.accept``), generated for each event type from its fields' kinds: the common case of
# ``validate`` unrolled into one function, since validation runs once per input record and the generic loop costs
# as much as Avro decoding. For each flat kind: a test of the raw value ``v`` that holds for common valid values
# (ASCII identifiers, in-range integers) and the expression of the row's value; anything else (or any detail a
# test does not cover) goes to the field-by-field path, which gives the reason. A nested kind has a function
# (``_FAST_NESTED``) that returns the row's value or ``_SLOW``. Both paths give the same row for what the fast
# path accepts (tested field by field in tests/schemas).

_FAST_FLAT = {
    "string": ("type(v) is str and v.isascii() and v and not v.isspace()", "v"),
    "text": ("v is None or (type(v) is str and v.isascii())", 'v or ""'),
    "strings": ("v is None or v == () or (type(v) is list and (not v or all(_name(x) for x in v)))", "tuple(v or ())"),
    "timestamp_micros": ("type(v) is int and 0 <= v < MAX_EVENT_TIME_MICROS", "v"),
    "amount": ("type(v) is float and 0 <= v < math.inf", "v"),
    "int64": ("v is None or (type(v) is int and -_INT64 <= v < _INT64)", "v or 0"),
    "optional_int64": ("v is None or (type(v) is int and -_INT64 <= v < _INT64)", "v"),
    "nonnegative_int64": ("type(v) is int and 0 <= v < _INT64", "v"),
    "positive_int64": ("v is None or (type(v) is int and 1 <= v < _INT64)", "1 if v is None else v"),
    "expiry": ("v is None or (type(v) is int and MIN_EXPIRY_SECONDS <= v <= MAX_EXPIRY_SECONDS)",
               "MAX_EXPIRY_SECONDS if v is None else v"),
    "expiry_unclamped": ("v is None or (type(v) is int and -_INT64 <= v < _INT64)", "MAX_EXPIRY_SECONDS if v is None else v"),
    "api": ("v in PAA_APIS", "v"),
}
_SLOW = object()  # a nested fast function's "not on the fast path"


_HEX_KEY_MATCH = _HEX_KEY.fullmatch


def _fast_key(text: Any) -> int | None:
    """A key in ARA's hex form on the fast path, or None."""
    return int(text, 16) if type(text) is str and _HEX_KEY_MATCH(text) else None


def _fast_records(value: Any, make: Callable[[dict], Any], named: bool) -> tuple | object:
    """An optional list (missing = ()) of at most 20 nested records (Avro records or JSON objects) on the fast
    path, each made by ``make`` (None: leave the record to the slow path); ``named`` ones must have distinct
    names. One loop: the ARA source's two keys cost 2.3 us in three passes (type checks, rows, names), measured."""
    if value is None or value == ():
        return ()
    if type(value) is not list or len(value) > MAX_AGGREGATION_ENTRIES:
        return _SLOW
    rows = []
    for item in value:
        row = make(item) if type(item) is dict else None
        if row is None:
            return _SLOW
        rows.append(row)
    if named and len(rows) > 1 and len({row.name for row in rows}) != len(rows):
        return _SLOW
    return tuple(rows)


def _fast_aggregation_key(item: dict) -> AggregationKey | None:
    name, key = item.get("name"), _fast_key(item.get("key"))
    return AggregationKey(name, key) if _name(name) and key is not None else None


def _fast_trigger_piece(item: dict) -> AggregatableTriggerData | None:
    piece, source_keys = _fast_key(item.get("key_piece")), item.get("source_keys")
    return AggregatableTriggerData(piece, tuple(source_keys or ())) if piece is not None and _names(source_keys) else None


def _fast_aggregatable_value(item: dict) -> AggregatableValue | None:
    name, amount = item.get("name"), item.get("value")
    if _name(name) and type(amount) is int and 0 <= amount <= MAX_AGGREGATABLE_VALUE:
        return AggregatableValue(name, amount)
    return None


def _int_list(values: Any) -> tuple | None:
    """An optional list of 64-bit integers on the fast path (missing = ()), or None."""
    if values == () or values is None:
        return ()
    if type(values) is list and all(type(value) is int and -_INT64 <= value < _INT64 for value in values):
        return tuple(values)
    return None


def _fast_trigger_specs(specs: Any, record: dict) -> tuple | None | object:
    """An event-level source's trigger specs: None (missing or empty: the defaults) or a tuple of ``TriggerSpec``."""
    if specs is None or specs == () or specs == []:
        return None
    if type(specs) is not list:
        return _SLOW
    out = []
    for item in specs:
        if type(item) is not dict:
            return _SLOW
        data, ends = _int_list(item.get("trigger_data")), _int_list(item.get("window_ends_seconds"))
        buckets = _int_list(item.get("summary_buckets"))
        if data is None or ends is None or buckets is None:
            return _SLOW
        out.append(TriggerSpec(data, ends, buckets))
    return tuple(out)


def _fast_request(request: Any, record: dict) -> AttributionRequest | object:
    """A conversion's attribution request in its common form: identifiers ASCII text, numbers of the right types
    and in range, choices known, no explicit epochs (``_request`` gives the reason for anything else)."""
    if type(request) is not dict:
        return _SLOW
    product = record.get("product_id") or ""
    get = request.get
    window, first, last, n, dimension = get("window_days"), get("first_epoch"), get("last_epoch"), get("last_n"), get("dimension")
    epsilon, report, query = get("requested_epsilon"), get("report_global_sensitivity"), get("query_global_sensitivity")
    campaigns, keys = get("campaign_ids", ()), get("filter_keys", ())
    sites, callers = get("impression_sites", ()), get("impression_callers", ())
    selected, logic, norm, key = get("product_id", ""), get("logic", ""), get("norm", ""), get("query_key", "")
    if not (type(selected) is str and type(logic) is str and type(norm) is str and type(key) is str):
        return _SLOW
    selected, logic, norm = selected or product, logic or "last_touch", norm or "L1"
    dimension = 1 if dimension is None else dimension
    if not (
        (window is None or (type(window) is int and window >= 1))
        and first is None and last is None
        and (campaigns == () or (type(campaigns) is list and all(_name(c) for c in campaigns)))
        and (keys == () or (type(keys) is list and all(_name(k) for k in keys)))
        and _names(sites) and _names(callers)
        and selected.isascii() and key.isascii()
        and logic in ATTRIBUTION_LOGICS and norm in NORMS
        and ((n is None and logic != "last_n") or (type(n) is int and n >= 1))
        and type(dimension) is int and max(1, len(campaigns)) <= dimension <= MAX_DIMENSION
        and (epsilon is None or (type(epsilon) is float and 0 < epsilon < math.inf))
        and type(report) is float and type(query) is float and 0 < report <= query < math.inf
    ):
        return _SLOW
    return AttributionRequest(
        window, None, None, tuple(campaigns), selected, tuple(keys), logic, n or 1, dimension, epsilon, report, query,
        norm, key or f"product={selected}", tuple(sites or ()), tuple(callers or ()),
    )


_FAST_NESTED = {
    "request": _fast_request,
    "aggregation_keys": lambda value, record: _fast_records(value, _fast_aggregation_key, named=True),
    "trigger_data": lambda value, record: _fast_records(value, _fast_trigger_piece, named=False),
    "aggregatable_values": lambda value, record: _fast_records(value, _fast_aggregatable_value, named=True),
    "trigger_specs": _fast_trigger_specs,
}


def fast_validator(row_type: type, fields: tuple[FieldSpec, ...]) -> Callable[[dict], NamedTuple | None]:
    """The ``accept`` of an event type: its fields' fast tests in one generated function (see above)."""
    lines = ["def accept(record):"]
    tests, values, nested, functions = [], [], [], {}
    for index, field in enumerate(fields):
        variable = f"v{index}"
        lines.append(f"    {variable} = record.get({field.name!r})")
        if field.kind in _FAST_FLAT:
            test, value = _FAST_FLAT[field.kind]
            tests.append("(" + re.sub(r"\bv\b", variable, test) + ")")
            values.append(re.sub(r"\bv\b", variable, value))
        else:
            nested.append(f"    {variable} = fast_{index}({variable}, record)")
            functions[f"fast_{index}"] = _FAST_NESTED[field.kind]
            nested.append(f"    if {variable} is _SLOW:\n        return None")
            values.append(variable)
    lines.append("    if not (" + "\n            and ".join(tests) + "):\n        return None")
    lines += nested
    lines.append(f"    return row_type({', '.join(values)})")
    namespace = dict(globals(), row_type=row_type, **functions)
    exec("\n".join(lines), namespace)  # noqa: S102 - code built above from the kinds table only
    return namespace["accept"]


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _datetime_micros(value: datetime) -> int:
    """An aware datetime (Avro's ``timestamp-micros`` / ``timestamp-millis`` logical types decode to these) as
    integer microseconds since the Unix epoch, exactly. A naive datetime is ambiguous and stays ``wrong_type``."""
    return (value - _EPOCH) // timedelta(microseconds=1)


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


@overload
def _positive(name: str, value: Any, optional: Literal[False] = False) -> float: ...
@overload
def _positive(name: str, value: Any, optional: bool) -> float | None: ...
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
    """An attribution request (Cookie Monster paper Code Listing 1) with its defaults: window = the job's, logic
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
    if first_epoch is not None and last_epoch is not None and last_epoch < first_epoch:
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
        impression_sites=_strings("impression_sites", value.get("impression_sites")),
        impression_callers=_strings("impression_callers", value.get("impression_callers")),
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


def _records(name: str, value: Any, inner: str | None = None) -> list | tuple:
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


def _named(name: str, value: Any, inner: str, row_type: type, check: Callable[[str, Any], Any]) -> tuple:
    """Records ``{"name": n, inner: x}`` with distinct names, as ``row_type(n, check(x))``."""
    return _distinct(name, tuple(
        row_type(_string(f"{name}.name", item.get("name")), check(f"{name}.{inner}", item.get(inner)))
        for item in _records(name, value, inner=inner)
    ))


def _aggregation_keys(name: str, value: Any) -> tuple:
    """An ARA source's named source keys (srcKey of Ghazi et al. Alg. 2)."""
    return _named(name, value, "key", AggregationKey, _key)


def _trigger_data(name: str, value: Any) -> tuple:
    """An ARA trigger's key pieces (trigKey of Ghazi et al. Alg. 2), each with the source keys it is OR-ed into."""
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
    """An ARA trigger's value per named source key (trigValue of Ghazi et al. Alg. 2)."""
    return _named(name, value, "value", AggregatableValue, _value)


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
MESSAGE_LISTS = ("aggregation_keys", "trigger_data", "aggregatable_values", "trigger_specs")


def convert_fields(row_type: type, fields: tuple[FieldSpec, ...], record: Mapping) -> NamedTuple | str:
    """The ``row_type`` row of ``record``, converted field by field, or the reason of the first bad field."""
    values: dict[str, Any] = {}
    try:
        for field in fields:
            raw = record.get(field.name)
            if field.kind == "request":
                values[field.name] = _request(raw, values.get("product_id", ""))
            else:
                values[field.name] = _CONVERTERS[field.kind](field.name, raw)
    except _Invalid as invalid:
        return invalid.args[0]
    return row_type(**values)
