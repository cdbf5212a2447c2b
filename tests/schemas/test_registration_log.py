"""``schemas.registration_log.parse_entry``: one entry of a registration log (Chrome's interop-suite form) into
the sources and triggers its responses register, and a ``RegistrationFailure`` with its reason for each response
that registers nothing: eligibility, header text, origins, timestamps, fixed randomness and the fields Chrome ignores."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas import jsonc
from schemas.registration_headers import SOURCE_HEADER, TRIGGER_HEADER
from schemas.registration_log import ParsedRegistration, RegistrationFailure, parse_entry
from schemas.registrations import EVENT, NAVIGATION, SourceRegistration, TriggerRegistration

COORDINATORS = ("https://c1.test", "https://c2.test")
SOURCE = {"destination": "https://destination.test"}
TRIGGER = {"event_trigger_data": [{"trigger_data": "1"}]}
ELIGIBLE = "Attribution-Reporting-Eligible"
PARSE_FAILURES = (Path(__file__).resolve().parent.parent / "conformance" / "attribution_reporting_interop"
                  / "parse_failures.json")
ABSENT = object()


def _response(headers: dict, **fields) -> dict:
    return {"url": "https://reporter.test/register", "response": headers, **fields}


def _entry(*responses: dict, eligible=ABSENT, timestamp="1000", context="https://www.source.test", **fields) -> dict:
    request = {"context_origin": context}
    if eligible is not ABSENT:
        request[ELIGIBLE] = eligible
    return {"timestamp": timestamp, "registration_request": request, "responses": list(responses), **fields}


def _one(entry: dict) -> ParsedRegistration | RegistrationFailure:
    results = parse_entry(entry, COORDINATORS)
    assert len(results) == 1
    return results[0]


def _registration(entry: dict) -> ParsedRegistration:
    result = _one(entry)
    assert isinstance(result, ParsedRegistration), result
    return result


def _failure(entry: dict) -> RegistrationFailure:
    result = _one(entry)
    assert isinstance(result, RegistrationFailure), result
    return result


# --------------------------------------------------------------------------------------------
# Eligibility
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("eligible", "source_type"), [
    ("navigation-source", NAVIGATION),
    ("event-source", EVENT),
    ("event-source, trigger", EVENT),
    ("trigger, navigation-source", NAVIGATION),
    (" navigation-source ", NAVIGATION),
])
def test_a_source_registers_with_the_requests_eligibility(eligible, source_type):
    parsed = _registration(_entry(_response({SOURCE_HEADER: SOURCE}), eligible=eligible))
    source = parsed.registration
    assert isinstance(source, SourceRegistration)
    assert source.source_type == source_type
    assert source.time_micros == 1_000_000
    assert source.source_origin == "https://www.source.test"
    assert source.source_site == "https://source.test"
    assert source.reporting_origin == "https://reporter.test"
    assert source.destination_sites == ("https://destination.test",)
    assert parsed.randomized_response is None
    assert parsed.null_report_days is None


@pytest.mark.parametrize("eligible", [ABSENT, "trigger", "event-source, trigger"])
def test_a_trigger_registers_without_the_header_or_when_eligible(eligible):
    parsed = _registration(_entry(_response({TRIGGER_HEADER: TRIGGER}), eligible=eligible,
                                  context="https://shop.destination.test"))
    trigger = parsed.registration
    assert isinstance(trigger, TriggerRegistration)
    assert trigger.destination_site == "https://destination.test"
    assert trigger.reporting_origin == "https://reporter.test"
    assert trigger.reporting_site == "https://reporter.test"
    assert trigger.event_trigger_data[0].trigger_data == 1
    assert trigger.aggregation_coordinator_origin == COORDINATORS[0]
    assert trigger.time_micros == 1_000_000


@pytest.mark.parametrize("eligible", [ABSENT, "trigger", ""])
def test_a_source_header_on_a_request_not_eligible_for_sources(eligible):
    failure = _failure(_entry(_response({SOURCE_HEADER: SOURCE}), eligible=eligible))
    assert failure.reason == "source_ineligible"
    assert failure.header == SOURCE_HEADER
    assert failure.time_millis == 1000


@pytest.mark.parametrize("eligible", ["navigation-source", "event-source", ""])
def test_a_trigger_header_on_a_request_not_eligible_for_triggers(eligible):
    failure = _failure(_entry(_response({TRIGGER_HEADER: TRIGGER}), eligible=eligible))
    assert failure.reason == "trigger_ineligible"
    assert failure.header == TRIGGER_HEADER


def test_an_eligibility_header_that_is_not_a_string():
    failure = _failure(_entry(_response({SOURCE_HEADER: SOURCE}), eligible=["navigation-source"]))
    assert failure.reason == "eligibility_invalid"
    assert failure.time_millis is None


# --------------------------------------------------------------------------------------------
# Headers
# --------------------------------------------------------------------------------------------


def test_a_header_given_as_json_text_is_parsed():
    source = _registration(_entry(_response({SOURCE_HEADER: json.dumps({**SOURCE, "priority": "7"})}),
                                  eligible="navigation-source")).registration
    assert isinstance(source, SourceRegistration)
    assert source.priority == 7
    trigger = _registration(_entry(_response({TRIGGER_HEADER: json.dumps(TRIGGER)}))).registration
    assert isinstance(trigger, TriggerRegistration)
    assert trigger.event_trigger_data[0].trigger_data == 1


@pytest.mark.parametrize(("header", "text"), [(SOURCE_HEADER, "{not json"), (TRIGGER_HEADER, ""),
                                              (TRIGGER_HEADER, '{"a": 1,}')])
def test_header_text_that_is_not_json(header, text):
    failure = _failure(_entry(_response({header: text}), eligible="navigation-source, trigger"))
    assert failure.reason == "invalid_json"
    assert failure.header == header


def test_header_text_that_is_json_but_not_a_dictionary():
    failure = _failure(_entry(_response({SOURCE_HEADER: "[1, 2]"}), eligible="navigation-source"))
    assert failure.reason == "root_wrong_type"


def test_both_headers_in_one_response():
    failure = _failure(_entry(_response({SOURCE_HEADER: SOURCE, TRIGGER_HEADER: TRIGGER}),
                              eligible="navigation-source, trigger"))
    assert failure.reason == "source_and_trigger_headers"
    assert failure.header is None


def test_a_response_without_a_registration_header():
    failure = _failure(_entry(_response({"Attribution-Reporting-Info": "report-header-errors"})))
    assert failure.reason == "no_registration_header"


@pytest.mark.parametrize("response", [None, "x", {"url": "https://reporter.test"}, {"url": "https://r.test", "response": []}])
def test_a_response_that_is_not_a_dictionary_of_headers(response):
    assert _failure(_entry(response)).reason == "response_invalid"


@pytest.mark.parametrize("url", ["http://reporter.test/register", "ftp://reporter.test/x", "not a url", None, 5])
def test_an_untrustworthy_reporting_url(url):
    failure = _failure(_entry({"url": url, "response": {TRIGGER_HEADER: TRIGGER}}))
    assert failure.reason == "reporting_origin_untrustworthy"


def test_a_localhost_reporting_url_is_trustworthy():
    parsed = _registration(_entry({"url": "http://localhost:9000/register", "response": {TRIGGER_HEADER: TRIGGER}}))
    assert parsed.registration.reporting_origin == "http://localhost:9000"
    assert isinstance(parsed.registration, TriggerRegistration)
    assert parsed.registration.reporting_site == "http://localhost"


def test_a_header_error_becomes_a_failure_with_the_header_name():
    failure = _failure(_entry(_response({SOURCE_HEADER: {**SOURCE, "priority": 5}}), eligible="navigation-source",
                              device_id="d42"))
    assert failure.reason == "priority_value_invalid"
    assert failure.header == SOURCE_HEADER
    assert failure.device_id == "d42"
    assert failure.time_millis == 1000
    assert "priority" in failure.detail


# --------------------------------------------------------------------------------------------
# Timestamps and context
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("timestamp", ["abc", "-1", "1.5", "", 1000, None, " 1"])
def test_an_invalid_request_timestamp_fails_the_entry(timestamp):
    failure = _failure(_entry(_response({TRIGGER_HEADER: TRIGGER}), timestamp=timestamp, device_id="d1"))
    assert failure.reason == "timestamp_invalid"
    assert failure.time_millis is None
    assert failure.header is None
    assert failure.device_id == "d1"


@pytest.mark.parametrize("timestamp", ["abc", 2000, "-5"])
def test_an_invalid_response_timestamp_fails_the_response(timestamp):
    failure = _failure(_entry(_response({TRIGGER_HEADER: TRIGGER}, timestamp=timestamp)))
    assert failure.reason == "timestamp_invalid"
    assert failure.time_millis is None


def test_the_response_timestamp_overrides_the_requests():
    entry = _entry(_response({TRIGGER_HEADER: TRIGGER}, timestamp="2000"), _response({TRIGGER_HEADER: TRIGGER}),
                   timestamp="1000")
    first, second = parse_entry(entry, COORDINATORS)
    assert isinstance(first, ParsedRegistration) and isinstance(second, ParsedRegistration)
    assert first.registration.time_micros == 2_000_000
    assert second.registration.time_micros == 1_000_000


def test_a_failure_keeps_the_response_timestamp():
    failure = _failure(_entry(_response({TRIGGER_HEADER: {"event_trigger_data": {}}}, timestamp="2500")))
    assert failure.reason == "event_trigger_data_wrong_type"
    assert failure.time_millis == 2500


@pytest.mark.parametrize("context", ["not a url", "ftp://source.test", None, 5])
def test_an_invalid_context_origin(context):
    failure = _failure(_entry(_response({TRIGGER_HEADER: TRIGGER}), context=context))
    assert failure.reason == "context_origin_invalid"


@pytest.mark.parametrize("entry", [None, [], {"timestamp": "1"}, {"timestamp": "1", "registration_request": "x"}])
def test_an_entry_without_a_request(entry):
    assert _failure(entry).reason == "entry_invalid"


@pytest.mark.parametrize("responses", [None, [], {}])
def test_an_entry_without_responses(responses):
    entry = {"timestamp": "1", "registration_request": {"context_origin": "https://a.test"}, "responses": responses}
    assert _failure(entry).reason == "entry_invalid"


def test_responses_are_parsed_in_order_each_on_its_own():
    entry = _entry(
        _response({SOURCE_HEADER: SOURCE}),
        _response({SOURCE_HEADER: {**SOURCE, "filter_data": {"_x": []}}}),
        _response({SOURCE_HEADER: {**SOURCE, "source_event_id": "9"}}),
        eligible="event-source", device_id=7,
    )
    first, second, third = parse_entry(entry, COORDINATORS)
    assert isinstance(first, ParsedRegistration) and isinstance(third, ParsedRegistration)
    assert isinstance(second, RegistrationFailure)
    assert second.reason == "filter_data_key_reserved"
    assert isinstance(third.registration, SourceRegistration)
    assert third.registration.source_event_id == 9
    assert {first.device_id, second.device_id, third.device_id} == {"7"}


def test_the_device_id_defaults_to_empty():
    assert _registration(_entry(_response({TRIGGER_HEADER: TRIGGER}))).device_id == ""


def test_debug_permission_keeps_debug_keys():
    kept = _registration(_entry(_response({TRIGGER_HEADER: {"debug_key": "5"}}, debug_permission=True)))
    assert kept.registration.debug_key == 5
    assert kept.registration.debug_permission is True
    dropped = _registration(_entry(_response({TRIGGER_HEADER: {"debug_key": "5"}})))
    assert dropped.registration.debug_key is None
    assert dropped.registration.debug_permission is False
    not_true = _registration(_entry(_response({TRIGGER_HEADER: {"debug_key": "5"}}, debug_permission="true")))
    assert not_true.registration.debug_key is None


def test_the_coordinators_are_passed_to_the_trigger_parser():
    trigger = {"aggregation_coordinator_origin": "https://c2.test"}
    parsed = _registration(_entry(_response({TRIGGER_HEADER: trigger})))
    assert isinstance(parsed.registration, TriggerRegistration)
    assert parsed.registration.aggregation_coordinator_origin == "https://c2.test"
    other = {"aggregation_coordinator_origin": "https://c3.test"}
    assert _failure(_entry(_response({TRIGGER_HEADER: other}))).reason == "aggregation_coordinator_value_invalid"


# --------------------------------------------------------------------------------------------
# Fixed randomness and ignored fields
# --------------------------------------------------------------------------------------------


def test_randomized_response_is_carried():
    randomized = [{"trigger_data": 1, "report_window_index": 0}, {"trigger_data": 3, "report_window_index": 2}]
    parsed = _registration(_entry(_response({SOURCE_HEADER: SOURCE}, randomized_response=randomized),
                                  eligible="navigation-source"))
    assert parsed.randomized_response == ((1, 0), (3, 2))
    empty = _registration(_entry(_response({SOURCE_HEADER: SOURCE}, randomized_response=[]), eligible="event-source"))
    assert empty.randomized_response == ()


@pytest.mark.parametrize("randomized", [{"trigger_data": 1}, [{"trigger_data": 1}], [1], [{"trigger_data": "1",
                                                                                            "report_window_index": 0}]])
def test_an_invalid_randomized_response(randomized):
    failure = _failure(_entry(_response({SOURCE_HEADER: SOURCE}, randomized_response=randomized),
                              eligible="navigation-source"))
    assert failure.reason == "randomized_response_invalid"


def test_null_aggregatable_reports_days_are_carried():
    parsed = _registration(_entry(_response({TRIGGER_HEADER: TRIGGER}, null_aggregatable_reports_days=[0, 3])))
    assert parsed.null_report_days == (0, 3)
    assert parsed.randomized_response is None


@pytest.mark.parametrize("days", [[-1], ["1"], [True], 3])
def test_invalid_null_aggregatable_reports_days(days):
    failure = _failure(_entry(_response({TRIGGER_HEADER: TRIGGER}, null_aggregatable_reports_days=days)))
    assert failure.reason == "null_aggregatable_reports_days_invalid"


def test_a_field_the_specification_dropped_is_ignored_as_chrome_ignores_it():
    """``trigger_specs`` (full flexible event-level configurations) left the specification in May 2025 and never
    shipped in Chrome: a source that sets it registers as if it did not."""
    header = {**SOURCE, "trigger_specs": [{"trigger_data": [1], "summary_buckets": [1]}]}
    parsed = _registration(_entry(_response({SOURCE_HEADER: header}), eligible="navigation-source"))
    plain = _registration(_entry(_response({SOURCE_HEADER: SOURCE}), eligible="navigation-source"))
    assert parsed == plain


def test_one_scopes_set_per_reporting_origin_and_navigation():
    """Chrome's ``AttributionDataHostManagerImpl`` (the interop cases ``attribution_scopes_navigation_limit_*``):
    in one navigation (an entry eligible for navigation sources), a reporting origin's first source fixes its set of
    scope values (none: the empty set); a later source with another set is dropped, without a debug report."""
    def scoped(values, origin="https://reporter.test"):
        header = {**SOURCE, "debug_reporting": True}
        if values is not None:
            header["attribution_scopes"] = {"limit": 3, "values": values}
        return _response({SOURCE_HEADER: header}, url=f"{origin}/register", debug_permission=True)

    entry = _entry(scoped(None), scoped(["1"]), scoped(None), scoped(["2"], "https://other.test"), scoped(["2"]),
                   eligible="navigation-source")
    results = parse_entry(entry, COORDINATORS)
    assert [getattr(result, "reason", "ok") for result in results] == [
        "ok", "attribution_scopes_navigation_limit", "ok", "ok", "attribution_scopes_navigation_limit"]
    assert all(result.header_error_report is None for result in results if isinstance(result, RegistrationFailure))
    scoped_first = parse_entry(_entry(scoped(["1"]), scoped(["1"]), scoped(None), eligible="navigation-source"),
                               COORDINATORS)
    assert [getattr(result, "reason", "ok") for result in scoped_first] == [
        "ok", "ok", "attribution_scopes_navigation_limit"]
    event = parse_entry(_entry(scoped(None), scoped(["1"]), eligible="event-source"), COORDINATORS)
    assert all(isinstance(result, ParsedRegistration) for result in event)  # event sources are not held to it


# --------------------------------------------------------------------------------------------
# Chrome's interop case parse_failures
# --------------------------------------------------------------------------------------------


@pytest.mark.skipif(not PARSE_FAILURES.is_file(), reason="the interop suite is not in this checkout")
def test_the_interop_parse_failures_all_fail_with_their_reasons():
    case = jsonc.loads(PARSE_FAILURES.read_text())
    entries = case["input"]["registrations"]
    results = [result for entry in entries for result in parse_entry(entry, COORDINATORS)]
    assert all(isinstance(result, RegistrationFailure) for result in results), results
    assert [(r.reason, r.header, r.time_millis) for r in results] == [
        ("event_trigger_data_wrong_type", TRIGGER_HEADER, 1),
        ("filter_data_key_reserved", SOURCE_HEADER, 2),
        ("filters_key_reserved", TRIGGER_HEADER, 3),
    ]
    # each failure matches the header of the verbose debug report Chrome sends for it
    expected_headers = [report["payload"][0]["body"]["header"] for report in case["output"]["reports"]]
    assert [r.header for r in results] == expected_headers


# --------------------------------------------------------------------------------------------
# Found by this file's first version, fixed since
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("timestamp", ["²", "١٢٣", "-1", "1.5"])
def test_timestamps_are_ascii_digits(timestamp):
    entry = _entry(_response({TRIGGER_HEADER: {}}), timestamp=timestamp)
    assert _failure(entry).reason == "timestamp_invalid"


@pytest.mark.parametrize("text", ['{"destination":"https://d.test","x":NaN}', '{"destination":"https://d.test","x":Infinity}'])
def test_header_text_with_nan_or_infinity_is_invalid_json(text):
    entry = _entry(_response({SOURCE_HEADER: text}), eligible="navigation-source")
    assert _failure(entry).reason == "invalid_json"
