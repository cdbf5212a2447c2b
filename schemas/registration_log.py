"""Registration logs: what a browser received, one request per entry, in the form of Chrome's Attribution
Reporting interop suite (``content/test/data/attribution_reporting/interop/README.md``): the request's time and
context, and each response with its ``Attribution-Reporting-Register-Source`` / ``-Register-Trigger`` header.

    {"timestamp": "1643235573000",                     # milliseconds since the Unix epoch, base-10 string
     "registration_request": {"context_origin": "https://publisher.example",
                              "Attribution-Reporting-Eligible": "navigation-source"},   # or event-source, trigger
     "responses": [{"url": "https://adtech.example/register", "debug_permission": false,
                    "timestamp": "1643235573000",      # optional: defaults to the request's
                    "randomized_response": null,       # optional: a source's fixed randomized response
                    "null_aggregatable_reports_days": null,   # optional: a trigger's fixed null-report days
                    "response": {"Attribution-Reporting-Register-Source": {...},
                                 "Attribution-Reporting-Info": "report-header-errors"}}],  # optional
     "device_id": "d42"}                               # optional: whose browser (a log of many devices)

An entry may instead change what the browser's report delivery meets (the interop suite's delivery inputs):
``{"timestamp": "...", "connection": false}`` (the device goes offline; ``true``: back online) or
``{"timestamp": "...", "navigation": true}`` (a navigation commits), with an optional ``device_id``;
``parse_entry`` gives it as a ``DeliveryChange`` (``transforms.core.mechanisms.report_delivery`` says what
these do to the time a report is sent).

The header may be the JSON value itself (as in the interop cases) or its text (as on the wire). The fixed
``randomized_response`` and ``null_aggregatable_reports_days`` are the interop harness's: they are parsed and
carried, and only ``python -m pipelines.interop`` uses them (``pipelines.ara_browser.replay_device``'s
``test_choices``); a pipeline draws its noise whatever a log says. ``parse_entry``
turns one entry into the registrations it makes and, for each response that makes none, a ``RegistrationFailure``
with its reason: a dead letter. Nothing here runs attribution.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from schemas.registration_headers import (
    SOURCE_HEADER,
    TRIGGER_HEADER,
    HeaderError,
    is_trustworthy,
    origin_of,
    parse_decimal,
    parse_source,
    parse_trigger,
    shown,
    site_of,
)
from schemas.registrations import EVENT, NAVIGATION, SourceRegistration, TriggerRegistration

ELIGIBLE_HEADER = "Attribution-Reporting-Eligible"
MICROS_PER_MILLI = 1_000
TRIGGER_ONLY = frozenset({"trigger"})
_ELIGIBILITY = {"navigation-source": NAVIGATION, "event-source": EVENT}


class ParsedRegistration(NamedTuple):
    """A source or trigger a response registered, with the randomness the log fixes for it, if any."""

    registration: SourceRegistration | TriggerRegistration
    device_id: str
    randomized_response: tuple[tuple[int, int], ...] | None = None  # sources: fake (trigger data, window) reports
    null_report_days: tuple[int, ...] | None = None  # triggers: lookback days the null-report rule chose


class DeliveryChange(NamedTuple):
    """A delivery entry: from ``time_millis`` the device is online (``connection`` True) or offline (False), or,
    with ``connection`` None, a navigation committed then."""

    device_id: str
    time_millis: int
    connection: bool | None


class HeaderErrorReport(NamedTuple):
    """What a ``header-parsing-error`` verbose debug report tells the reporting origin of a header it could not
    parse, when the response asked for it (``Attribution-Reporting-Info: report-header-errors``)."""

    reporting_origin: str
    context_site: str
    header: str
    value: str  # the header as received: its text, or its JSON value written compactly with sorted keys


class RegistrationFailure(NamedTuple):
    """A response that registers nothing, and why (a dead letter)."""

    reason: str
    detail: str
    device_id: str
    time_millis: int | None
    header: str | None  # the header name, when the header was the problem
    header_error_report: HeaderErrorReport | None = None


INFO_HEADER = "Attribution-Reporting-Info"
REPORT_HEADER_ERRORS = "report-header-errors"


def _reports_header_errors(info: Any) -> bool:
    """Whether an ``Attribution-Reporting-Info`` value (a structured-header dictionary) has the bare key
    ``report-header-errors``."""
    return isinstance(info, str) and any(item.strip().split(";")[0] == REPORT_HEADER_ERRORS for item in info.split(","))


_INT32 = range(-(2**31), 2**31)


def _as_chrome_value(value: Any) -> Any:
    """A JSON value as Chrome's ``base::Value`` holds it: an integer outside int32 is a double (so it is written
    back as ``4294967296.0``; the interop case ``custom_trigger_data``)."""
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return value if value in _INT32 else float(value)
    if isinstance(value, dict):
        return {key: _as_chrome_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_chrome_value(item) for item in value]
    return value


def _header_text(raw: Any) -> str:
    """The header as a header-parsing-error report gives it: its text, or its JSON value written as Chrome's
    ``JSONWriter`` writes it (compact, keys sorted)."""
    if isinstance(raw, str):
        return raw
    return json.dumps(_as_chrome_value(raw), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_MAX_MILLIS = (1 << 63) // MICROS_PER_MILLI  # times are kept in int64 microseconds


def _millis(value: Any, reason: str) -> int:
    millis = parse_decimal(value)
    if millis is None or millis >= _MAX_MILLIS:
        raise HeaderError(reason, f"expected milliseconds as a base-10 string below {_MAX_MILLIS}, got {shown(value)}")
    return millis


def _eligibility(value: Any) -> frozenset[str]:
    """The registrations a request is eligible for (a structured-header dictionary of bare keys); without the
    header, triggers only."""
    if value is None:
        return TRIGGER_ONLY
    if not isinstance(value, str):
        raise HeaderError("eligibility_invalid", f"{ELIGIBLE_HEADER} must be a string, got {value!r}")
    return _eligibility_of(value)


@functools.lru_cache(maxsize=256)  # a handful of distinct values in any log
def _eligibility_of(value: str) -> frozenset[str]:
    return frozenset(item.strip().split(";")[0] for item in value.split(",") if item.strip())


def _header_value(value: Any) -> Any:
    if isinstance(value, str):
        try:  # orjson, as Chrome's parser: no NaN or Infinity
            return orjson.loads(value)
        except orjson.JSONDecodeError as error:
            raise HeaderError("invalid_json", str(error)) from None
    return value


def _randomized_response(value: Any) -> tuple[tuple[int, int], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(item, dict) and isinstance(item.get("trigger_data"), int) and isinstance(item.get("report_window_index"), int)
        for item in value
    ):
        raise HeaderError("randomized_response_invalid",
                          f"expected a list of {{trigger_data, report_window_index}}, got {value!r}")
    return tuple((item["trigger_data"], item["report_window_index"]) for item in value)


def _null_days(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(day, int) and not isinstance(day, bool) and day >= 0 for day in value):
        raise HeaderError("null_aggregatable_reports_days_invalid", f"expected a list of days >= 0, got {value!r}")
    return tuple(value)


def _delivery_change(entry: dict, device: str) -> DeliveryChange:
    """A delivery entry (a ``connection`` or a ``navigation``, with its time and nothing else to register)."""
    time = _millis(entry.get("timestamp"), "timestamp_invalid")
    if "connection" in entry:
        if "navigation" in entry or not isinstance(entry["connection"], bool):
            raise HeaderError("delivery_entry_invalid", "a connection entry has connection: true or false")
        return DeliveryChange(device, time, entry["connection"])
    if entry["navigation"] is not True:
        raise HeaderError("delivery_entry_invalid", "a navigation entry has navigation: true")
    return DeliveryChange(device, time, None)


def parse_entry(entry: Any, coordinator_origins: Sequence[str]
                ) -> list[ParsedRegistration | RegistrationFailure | DeliveryChange]:
    """The registrations (and failures) of one log entry, in response order, or its delivery change."""
    device = str(entry.get("device_id", "")) if isinstance(entry, dict) else ""
    try:
        if isinstance(entry, dict) and "registration_request" not in entry and (
                "connection" in entry or "navigation" in entry):
            return [_delivery_change(entry, device)]
        if not isinstance(entry, dict) or not isinstance(entry.get("registration_request"), dict):
            raise HeaderError("entry_invalid", "an entry needs a registration_request dictionary")
        request = entry["registration_request"]
        request_time = _millis(entry.get("timestamp"), "timestamp_invalid")
        context_value = request.get("context_origin")
        context = origin_of(context_value) if isinstance(context_value, str) else None
        if context is None:
            raise HeaderError("context_origin_invalid", f"{request.get('context_origin')!r} is not an http(s) origin")
        eligible = _eligibility(request.get(ELIGIBLE_HEADER))
        responses = entry.get("responses")
        if not isinstance(responses, list) or not responses:
            raise HeaderError("entry_invalid", "an entry needs a non-empty list of responses")
    except HeaderError as error:
        return [RegistrationFailure(error.reason, str(error), device, None, None)]
    out: list[ParsedRegistration | RegistrationFailure | DeliveryChange] = []
    scopes_of_navigation: dict[str, tuple[str, ...]] = {}  # reporting origin -> the scope values it fixed
    for response in responses:
        parsed = _parse_response(response, request_time, context, eligible, device, coordinator_origins)
        if request.get("fenced") is True:  # a fenced frame's registrations send no verbose debug report
            parsed = _without_debug_reports(parsed)
        if isinstance(parsed, ParsedRegistration) and isinstance(parsed.registration, SourceRegistration) \
                and parsed.registration.source_type == NAVIGATION:
            parsed = _one_scopes_set_per_navigation(parsed, scopes_of_navigation)
        out.append(parsed)
    return out


def _one_scopes_set_per_navigation(parsed: ParsedRegistration, fixed: dict[str, tuple[str, ...]]
                                   ) -> ParsedRegistration | RegistrationFailure:
    """One set of attribution scope values per reporting origin and navigation (an entry eligible for navigation
    sources is one navigation; its responses, the redirect chain): the first source of a reporting origin fixes
    the set (none: the empty set), and a later source with another set is dropped, with no debug report (Chrome's
    ``AttributionDataHostManagerImpl``; the interop cases ``attribution_scopes_navigation_limit_no_scopes`` and
    ``_with_scopes``)."""
    source = parsed.registration
    assert isinstance(source, SourceRegistration)
    values = () if source.attribution_scopes is None else source.attribution_scopes.values
    first = fixed.setdefault(source.reporting_origin, values)
    if first == values:
        return parsed
    return RegistrationFailure("attribution_scopes_navigation_limit",
                               f"{source.reporting_origin} already registered scopes {list(first)} in this navigation",
                               parsed.device_id, source.time_micros // MICROS_PER_MILLI, SOURCE_HEADER)


def _without_debug_reports(parsed: ParsedRegistration | RegistrationFailure) -> ParsedRegistration | RegistrationFailure:
    """A fenced frame's registration: no verbose debug report, and no aggregatable debug report of its own (a
    source keeps its debug budget and key piece, which its triggers' reports use)."""
    if isinstance(parsed, RegistrationFailure):
        return parsed._replace(header_error_report=None)
    registration = parsed.registration
    config = registration.aggregatable_debug
    quiet = None if config is None or isinstance(registration, TriggerRegistration) \
        else config._replace(data=(), unspecified=None)
    return parsed._replace(registration=registration._replace(debug_reporting=False, aggregatable_debug=quiet))


def _parse_response(response: Any, request_time: int, context: str, eligible: frozenset[str], device: str,
                    coordinator_origins: Sequence[str]) -> ParsedRegistration | RegistrationFailure:
    time_millis, header_name = None, None
    parsing, reporting, raw = False, None, None  # whether a failure is the header's own, for its debug report
    try:
        if not isinstance(response, dict) or not isinstance(response.get("response"), dict):
            raise HeaderError("response_invalid", "a response needs a 'response' dictionary of headers")
        time_millis = _millis(response["timestamp"], "timestamp_invalid") if "timestamp" in response else request_time
        url = response.get("url")
        reporting = origin_of(url) if isinstance(url, str) else None
        if reporting is None or not is_trustworthy(reporting):
            raise HeaderError("reporting_origin_untrustworthy", f"{url!r} is not a potentially trustworthy URL")
        headers = response["response"]
        has_source, has_trigger = SOURCE_HEADER in headers, TRIGGER_HEADER in headers
        if has_source and has_trigger:
            raise HeaderError("source_and_trigger_headers", "a response registers a source or a trigger, not both")
        if not has_source and not has_trigger:
            raise HeaderError("no_registration_header", f"neither {SOURCE_HEADER} nor {TRIGGER_HEADER}")
        debug = response.get("debug_permission", False) is True
        header_name = SOURCE_HEADER if has_source else TRIGGER_HEADER
        raw, parsing = headers[header_name], True
        value = _header_value(raw)
        parsing = False
        time_micros = time_millis * MICROS_PER_MILLI
        if has_source:
            source_types = [kind for name, kind in _ELIGIBILITY.items() if name in eligible]
            if not source_types:
                raise HeaderError("source_ineligible", f"the request is not eligible for sources ({sorted(eligible)})")
            parsing = True
            return ParsedRegistration(
                parse_source(value, time_micros=time_micros, context_origin=context, reporting_origin=reporting,
                             source_type=source_types[0], debug_permission=debug,
                             coordinator_origins=coordinator_origins),
                device, randomized_response=_randomized_response(response.get("randomized_response")),
            )
        if "trigger" not in eligible:
            raise HeaderError("trigger_ineligible", f"the request is not eligible for triggers ({sorted(eligible)})")
        parsing = True
        return ParsedRegistration(
            parse_trigger(value, time_micros=time_micros, context_origin=context, reporting_origin=reporting,
                          coordinator_origins=coordinator_origins, debug_permission=debug),
            device, null_report_days=_null_days(response.get("null_aggregatable_reports_days")),
        )
    except HeaderError as error:
        report = None
        if parsing and reporting is not None and header_name is not None and _reports_header_errors(
                response["response"].get(INFO_HEADER)):
            report = HeaderErrorReport(reporting, site_of(context), header_name, _header_text(raw))
        return RegistrationFailure(error.reason, str(error), device, time_millis, header_name, report)
