"""Fuzzing the Attribution Reporting registration path: the header parser (``schemas/registration_headers.py``), the
log entry parser (``schemas/registration_log.py``), the registration job's checks of what it accepts
(``pipelines/registrations.py``) and the browser's replay of it (``pipelines/ara_browser.py``).

Property (DESIGN.md, "Rules that hold everywhere"): whatever a log holds, each response is a parsed registration or
a failure with a reason, the job's check of a parsed one names a reason or none, and the registrations it accepts
replay without an error; nothing raises. Inputs: valid source and trigger headers (every field the parser reads:
destination limit priorities, attribution scopes, named budgets, aggregatable debug reporting and filtering ids
among them) with fields replaced by hostile JSON values (numbers of thousands of digits, 2^64, NaN, nested values,
surrogates), removed or added, at the top level, inside their dictionaries and inside their lists; hostile log
entries, delivery entries (connection, navigation) among them; and log files of random and mutated lines.

Examples: 150 to 200 per test, about 10 s on one core for the file.
"""
from __future__ import annotations

import io
import json
import math

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.ara_browser import BrowserConfig, replay_device
from pipelines.registrations import _ParseLogFn
from schemas.codecs import read_json_lines
from schemas.registration_log import DeliveryChange, ParsedRegistration, RegistrationFailure, parse_entry
from schemas.rows import DeadLetter
from tests.support.hostile_inputs import FUZZ, JSON_VALUES, TEXT, mutations

CONFIG = BrowserConfig()
COORDINATORS = CONFIG.aggregation_coordinator_origins

SOURCE = {
    "destination": ["https://shop.example", "https://other.example"], "source_event_id": "123", "priority": "-5",
    "expiry": "864000", "event_report_windows": {"start_time": 0, "end_times": [3600, 86400]},
    "aggregatable_report_window": "86400", "filter_data": {"category": ["shoes"], "_lookback_window": 3600},
    "aggregation_keys": {"count": "0x159", "value": "0x5"}, "debug_key": "7", "debug_reporting": True,
    "trigger_data": [0, 1, 2], "max_event_level_reports": 2, "event_level_epsilon": 10,
    "trigger_data_matching": "modulus",
    "aggregatable_debug_reporting": {"budget": 1000, "key_piece": "0x1", "debug_data": [
        {"types": ["source-success", "unspecified"], "key_piece": "0x2", "value": 10}]},
    "attribution_scopes": {"limit": 3, "values": ["a"], "max_event_states": 3}, "named_budgets": {"b": 100},
    "destination_limit_priority": "3",
}
TRIGGER = {
    "event_trigger_data": [{"trigger_data": "1", "priority": "2", "value": 3, "deduplication_key": "4",
                            "filters": {"category": ["shoes"]}, "not_filters": [{"x": ["y"]}]}],
    "aggregatable_trigger_data": [{"key_piece": "0x400", "source_keys": ["count", "value"],
                                   "filters": {"category": ["shoes"]}}],
    "aggregatable_values": [{"values": {"count": 1, "value": {"value": 7, "filtering_id": "1"}},
                             "filters": {"category": ["shoes"]}}],
    "aggregatable_deduplication_keys": [{"deduplication_key": "9"}], "filters": {"category": ["shoes"]},
    "not_filters": {"category": ["hats"]}, "debug_key": "11", "debug_reporting": True,
    "aggregation_coordinator_origin": COORDINATORS[0], "aggregatable_source_registration_time": "exclude",
    "trigger_context_id": "ctx", "aggregatable_filtering_id_max_bytes": 1, "attribution_scopes": ["a"],
    "named_budgets": [{"name": "b", "filters": {"category": ["shoes"]}}],
    "aggregatable_debug_reporting": {"key_piece": "0x1", "debug_data": [
        {"types": ["trigger-no-matching-source"], "key_piece": "0x2", "value": 10}]},
}
SOURCE_HEADER, TRIGGER_HEADER = "Attribution-Reporting-Register-Source", "Attribution-Reporting-Register-Trigger"

# numbers as the headers write them, at and past every limit, and long enough for Python's int() to refuse them
DIGIT_STRINGS = st.sampled_from(["9" * 5_000, "-" + "9" * 5_000, "0" * 5_000 + "1", "18446744073709551616",
                                 "18446744073709551615", "9223372036854775808", "-9223372036854775809", "00", "-0",
                                 "1e3", "0x10", " 1", "１"]) | st.from_regex(r"-?[0-9]{1,25}", fullmatch=True)
HOSTILE = JSON_VALUES | DIGIT_STRINGS | st.sampled_from([2**64, 2**70, 1e308, -1e308, math.nan, math.inf, 1.5])


@st.composite
def hostile(draw, valid: dict) -> dict:
    """``valid`` with fields replaced, removed or added, at the top level, in its dictionaries and in the
    dictionaries of its lists."""
    header = json.loads(json.dumps(valid))
    for name in draw(st.lists(st.sampled_from(sorted(header)), max_size=3, unique=True)):
        choice = draw(st.integers(0, 2))
        value = header[name]
        if choice == 0:
            header[name] = draw(HOSTILE)
        elif choice == 1:
            del header[name]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            inner = value[0]
            inner[draw(st.sampled_from(sorted(inner)))] = draw(HOSTILE)
        elif isinstance(value, dict) and value:
            inner = value
            key = draw(st.sampled_from(sorted(inner)))
            nested = inner[key]
            if isinstance(nested, list) and nested and isinstance(nested[0], dict) and draw(st.booleans()):
                nested[0][draw(st.sampled_from(sorted(nested[0])))] = draw(HOSTILE)  # debug_data's entries
            else:
                inner[key] = draw(HOSTILE)
    for name in draw(st.lists(TEXT, max_size=2)):
        header[name] = draw(HOSTILE)
    return header


def _entry(time: str, headers: dict, eligible: str | None, context: str = "https://publisher.example") -> dict:
    request: dict = {"context_origin": context}
    if eligible is not None:
        request["Attribution-Reporting-Eligible"] = eligible
    return {"device_id": "d1", "timestamp": time, "registration_request": request,
            "responses": [{"url": "https://adtech.example/register", "response": headers, "debug_permission": True}]}


def _accepted(entries: list) -> list[ParsedRegistration | DeliveryChange]:
    """Every registration of ``entries`` the job accepts, each parsed result and check shaped as documented."""
    check = _ParseLogFn(CONFIG)
    check.setup()
    accepted = []
    for entry in entries:
        for result in parse_entry(entry, COORDINATORS):
            assert isinstance(result, ParsedRegistration | RegistrationFailure | DeliveryChange)
            refused = check._refused(result)
            if isinstance(result, DeliveryChange):
                assert refused is None
                accepted.append(result)
                continue
            if isinstance(result, RegistrationFailure):
                assert refused is not None and type(result.reason) is str and result.reason
                continue
            if refused is None:
                accepted.append(result)
            else:
                assert all(type(part) is str for part in refused)
    return accepted


@settings(FUZZ, max_examples=200)
@given(source=hostile(SOURCE), trigger=hostile(TRIGGER), header_as_text=st.booleans())
def test_hostile_headers_are_parsed_or_refused_and_what_is_accepted_replays(source, trigger, header_as_text):
    """A hostile source then a hostile trigger on its destination, and a valid pair after them."""
    def header(value: dict) -> dict | str:
        return json.dumps(value) if header_as_text else value

    entries = [
        _entry("1000", {SOURCE_HEADER: header(source)}, "navigation-source"),
        _entry("2000", {TRIGGER_HEADER: header(trigger)}, None, context="https://shop.example"),
        _entry("3000", {SOURCE_HEADER: header(SOURCE)}, "event-source"),
        _entry("4000", {TRIGGER_HEADER: header(TRIGGER)}, None, context="https://shop.example"),
    ]
    accepted = _accepted(entries)
    replay_device(accepted, CONFIG)  # the browser's attribution of what the job accepted: no error


DELIVERY_ENTRIES = st.fixed_dictionaries({"timestamp": HOSTILE}, optional={
    "connection": HOSTILE | st.booleans(), "navigation": HOSTILE | st.just(True), "device_id": HOSTILE})


@settings(FUZZ, max_examples=200)
@given(entry=JSON_VALUES | DELIVERY_ENTRIES | st.fixed_dictionaries({
    "device_id": HOSTILE, "timestamp": HOSTILE, "registration_request": HOSTILE | st.just({"context_origin": "https://a.example"}),
    "responses": HOSTILE | st.lists(st.fixed_dictionaries({"url": HOSTILE, "response": HOSTILE,
                                                           "timestamp": HOSTILE}), max_size=2),
}))
def test_hostile_log_entries_are_parsed_or_refused(entry):
    replay_device(_accepted([entry]), CONFIG)


VALID_LINES = [orjson.dumps(_entry("1000", {SOURCE_HEADER: SOURCE}, "navigation-source")),
               orjson.dumps(_entry("2000", {TRIGGER_HEADER: TRIGGER}, None, context="https://shop.example"))]


@settings(FUZZ, max_examples=150)
@given(data=st.one_of(st.binary(max_size=200), st.sampled_from(VALID_LINES).flatmap(mutations),
                      st.lists(st.sampled_from(VALID_LINES).flatmap(mutations), max_size=3).map(b"\n".join)))
def test_a_log_file_of_any_bytes_is_read_line_by_line_into_entries_or_dead_letters(data):
    """The job's reader (``read_json_lines`` with Chrome's JSON: no NaN, no Infinity) over any bytes: one dead
    letter or one entry per line, and every entry parsed or refused."""
    entries = []
    for item in read_json_lines(io.BytesIO(data), "log.jsonl", orjson.loads):
        if isinstance(item, DeadLetter):
            assert type(item.reason) is str and type(item.raw) is str
            continue
        _, line, entry = item
        assert type(line) is str
        entries.append(entry)
    replay_device(_accepted(entries), CONFIG)
