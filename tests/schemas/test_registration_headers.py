"""``schemas.registration_headers``: source and trigger registration JSON parsed as the Attribution Reporting
specification and Chrome's ``components/attribution_reporting`` parsers define it (defaults, clamping, limits and
the reasons of invalid headers), origins and sites, and ``schemas.registrations.debug_keys``."""
from __future__ import annotations

import json
import math

import pytest

from schemas.registration_headers import (
    SOURCE_DEBUG_TYPES,
    HeaderError,
    is_trustworthy,
    origin_of,
    parse_decimal,
    parse_source,
    parse_trigger,
    site_of,
)
from schemas.registrations import (
    EVENT,
    EXCLUDE,
    INCLUDE,
    NAVIGATION,
    NO_FILTERS,
    AggregatableDedupKey,
    AggregatableTriggerData,
    AggregatableValues,
    AttributionScopes,
    EventTriggerData,
    FilterConfig,
    FilterPair,
    NamedBudgetCandidate,
    debug_keys,
)

DAY = 86_400
HOUR = 3_600
COORDINATORS = ("https://c1.test", "https://c2.test")
DESTINATION = "https://destination.test"
FIELDS = object()  # the header is built from the keyword arguments


def _source(header=FIELDS, *, source_type=NAVIGATION, debug_permission=False, **fields):
    if header is FIELDS:
        header = {"destination": DESTINATION, **fields}
    return parse_source(header, time_micros=5_000_000, context_origin="https://www.source.test",
                        reporting_origin="https://reporter.test", source_type=source_type,
                        debug_permission=debug_permission)


def _trigger(header=FIELDS, *, debug_permission=False, reporting_origin="https://reporter.test", **fields):
    if header is FIELDS:
        header = dict(fields)
    return parse_trigger(header, time_micros=7_000_000, context_origin="https://shop.destination.test",
                         reporting_origin=reporting_origin, coordinator_origins=COORDINATORS,
                         debug_permission=debug_permission)


def _source_reason(header=FIELDS, **kwargs) -> str:
    with pytest.raises(HeaderError) as caught:
        _source(header, **kwargs)
    return caught.value.reason


def _trigger_reason(header=FIELDS, **kwargs) -> str:
    with pytest.raises(HeaderError) as caught:
        _trigger(header, **kwargs)
    return caught.value.reason


# --------------------------------------------------------------------------------------------
# Sources: defaults and durations
# --------------------------------------------------------------------------------------------


def test_navigation_source_defaults():
    source = _source()
    assert source.source_type == NAVIGATION
    assert source.time_micros == 5_000_000
    assert source.source_origin == "https://www.source.test"
    assert source.source_site == "https://source.test"
    assert source.reporting_origin == "https://reporter.test"
    assert source.destination_sites == (DESTINATION,)
    assert source.source_event_id == 0
    assert source.priority == 0
    assert source.expiry_seconds == 30 * DAY
    assert source.event_report_window_start_seconds == 0
    assert source.event_report_window_ends == (172_800, 604_800, 2_592_000)
    assert source.aggregatable_report_window_seconds == 30 * DAY
    assert source.max_event_level_reports == 3
    assert source.trigger_data == tuple(range(8))
    assert source.trigger_data_matching == "modulus"
    assert source.event_level_epsilon == 14.0
    assert source.filter_data == ()
    assert source.aggregation_keys == ()
    assert source.debug_key is None
    assert source.debug_permission is False
    assert source.debug_reporting is False


def test_event_source_defaults():
    source = _source(source_type=EVENT)
    assert source.source_type == EVENT
    assert source.expiry_seconds == 30 * DAY
    assert source.event_report_window_ends == (30 * DAY,)
    assert source.aggregatable_report_window_seconds == 30 * DAY
    assert source.max_event_level_reports == 1
    assert source.trigger_data == (0, 1)


@pytest.mark.parametrize(("expiry", "expected"), [
    ("88400", DAY),  # 1.02 days: rounded down
    ("172600", 2 * DAY),  # 1.998 days: rounded up
    (129_600, 2 * DAY),  # exactly 1.5 days: half rounds up
    (129_599, DAY),
    (3 * DAY, 3 * DAY),
    (1, DAY),  # clamped first
    (40 * DAY, 30 * DAY),
])
def test_an_event_sources_expiry_is_rounded_to_whole_days(expiry, expected):
    source = _source(source_type=EVENT, expiry=expiry)
    assert source.expiry_seconds == expected
    assert source.event_report_window_ends == (expected,)
    assert source.aggregatable_report_window_seconds == expected


@pytest.mark.parametrize(("expiry", "expected"), [
    (86_390.0, DAY),
    (1, DAY),
    (0, DAY),
    ("86401", 86_401),  # a navigation source's expiry is not rounded
    (172_800.0, 172_800),
    (2_592_001, 2_592_000),
    (10**9, 2_592_000),
    (str(2**64 - 1), 2_592_000),
])
def test_expiry_is_clamped_to_one_to_thirty_days(expiry, expected):
    assert _source(expiry=expiry).expiry_seconds == expected


@pytest.mark.parametrize("expiry", [-1, "-1", "1.5", 1.5, "abc", "", True, None, [DAY], 2**64, str(2**64)])
def test_invalid_expiry(expiry):
    assert _source_reason(expiry=expiry) == "expiry_value_invalid"


def test_navigation_default_windows_end_before_a_short_expiry():
    source = _source(expiry=3 * DAY)
    assert source.event_report_window_ends == (2 * DAY, 3 * DAY)
    assert _source(expiry=DAY).event_report_window_ends == (DAY,)
    assert _source(expiry=2 * DAY).event_report_window_ends == (2 * DAY,)


@pytest.mark.parametrize(("window", "ends"), [
    ("182800", (172_800, 182_800)),
    (96_400, (96_400,)),
    (172_800, (172_800,)),
    (700_000, (172_800, 604_800, 700_000)),
    (60, (HOUR,)),  # clamped up to an hour
    (0, (HOUR,)),
    (10**8, (172_800, 604_800, 2_592_000)),  # clamped down to the expiry
])
def test_event_report_window_replaces_the_last_navigation_window(window, ends):
    source = _source(event_report_window=window)
    assert source.event_report_window_start_seconds == 0
    assert source.event_report_window_ends == ends
    assert source.expiry_seconds == 30 * DAY


def test_event_report_window_is_clamped_to_the_expiry():
    assert _source(expiry=3 * DAY, event_report_window=5 * DAY).event_report_window_ends == (2 * DAY, 3 * DAY)
    assert _source(source_type=EVENT, expiry="88400", event_report_window=DAY + 10).event_report_window_ends == (DAY,)
    assert _source(source_type=EVENT, event_report_window="7200").event_report_window_ends == (7_200,)


@pytest.mark.parametrize("window", [-1, "x", 1.5, True])
def test_invalid_event_report_window(window):
    assert _source_reason(event_report_window=window) == "event_report_window_value_invalid"


@pytest.mark.parametrize(("windows", "expiry", "start", "ends"), [
    ({"end_times": [1800, 7200]}, None, 0, (HOUR, 7_200)),
    ({"start_time": 0, "end_times": [DAY, 2_592_000]}, 1_296_000, 0, (DAY, 1_296_000)),
    ({"start_time": 7_200, "end_times": [10_800]}, None, 7_200, (10_800,)),
    ({"start_time": "3600", "end_times": ["7200", 14_400.0]}, None, HOUR, (7_200, 14_400)),
    ({"end_times": [HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR, 5 * HOUR]}, None, 0, (HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR, 5 * HOUR)),
])
def test_event_report_windows(windows, expiry, start, ends):
    fields = {"event_report_windows": windows} if expiry is None else {"event_report_windows": windows, "expiry": expiry}
    source = _source(**fields)
    assert source.event_report_window_start_seconds == start
    assert source.event_report_window_ends == ends


def test_event_report_windows_of_an_event_source_clamp_to_its_rounded_expiry():
    source = _source(source_type=EVENT, expiry="88400", event_report_windows={"end_times": [HOUR, 2 * DAY]})
    assert source.event_report_window_ends == (HOUR, DAY)


@pytest.mark.parametrize(("fields", "reason"), [
    ({"event_report_windows": {"end_times": [7_200, 3_600]}}, "event_report_windows_end_time_not_increasing"),
    ({"event_report_windows": {"end_times": [7_200, 7_200]}}, "event_report_windows_end_time_not_increasing"),
    ({"event_report_windows": {"end_times": [1_000, 2_000]}}, "event_report_windows_end_time_not_increasing"),  # both 1 h
    ({"event_report_windows": {"start_time": 7_200, "end_times": [7_200]}}, "event_report_windows_end_time_not_increasing"),
    ({"event_report_windows": {"end_times": [DAY, 3 * DAY]}, "expiry": DAY}, "event_report_windows_end_time_not_increasing"),
    ({"event_report_window": DAY, "event_report_windows": {"end_times": [DAY]}}, "both_event_report_window_fields_found"),
    ({"event_report_windows": {"end_times": []}}, "event_report_windows_end_times_list_invalid"),
    ({"event_report_windows": {"end_times": [HOUR * i for i in range(1, 7)]}}, "event_report_windows_end_times_list_invalid"),
    ({"event_report_windows": {"start_time": 0}}, "event_report_windows_end_times_missing"),
    ({"event_report_windows": {"end_times": HOUR}}, "event_report_windows_end_times_missing"),
    ({"event_report_windows": [HOUR]}, "event_report_windows_wrong_type"),
    ({"event_report_windows": {"start_time": -1, "end_times": [HOUR]}}, "event_report_windows_start_time_invalid"),
    ({"event_report_windows": {"start_time": 2 * DAY, "end_times": [3 * DAY]}, "expiry": DAY},
     "event_report_windows_start_time_invalid"),
    ({"event_report_windows": {"end_times": ["x"]}}, "event_report_windows_end_time_value_invalid"),
    ({"event_report_windows": {"end_times": [-HOUR]}}, "event_report_windows_end_time_value_invalid"),
])
def test_invalid_event_report_windows(fields, reason):
    assert _source_reason(**fields) == reason


@pytest.mark.parametrize(("fields", "expected"), [
    ({"aggregatable_report_window": 100}, HOUR),
    ({"aggregatable_report_window": "7200"}, 7_200),
    ({"aggregatable_report_window": 7_200.0}, 7_200),
    ({"aggregatable_report_window": 10**8}, 30 * DAY),
    ({"aggregatable_report_window": 5 * DAY, "expiry": 2 * DAY}, 2 * DAY),
    ({"expiry": 2 * DAY}, 2 * DAY),
])
def test_aggregatable_report_window_is_clamped_to_an_hour_and_the_expiry(fields, expected):
    assert _source(**fields).aggregatable_report_window_seconds == expected


@pytest.mark.parametrize("window", [-1, "abc", 1.5, False])
def test_invalid_aggregatable_report_window(window):
    assert _source_reason(aggregatable_report_window=window) == "aggregatable_report_window_value_invalid"


# --------------------------------------------------------------------------------------------
# Sources: destinations, ids, priorities
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("destination", "sites"), [
    ("https://example.destination.test", ("https://destination.test",)),
    ("https://destination.test/path?q=1", ("https://destination.test",)),
    (["https://b.test", "https://a.test"], ("https://a.test", "https://b.test")),
    (["https://x.shop.test", "https://y.shop.test", "https://shop.test"], ("https://shop.test",)),
    (["https://a.test", "https://a.test"], ("https://a.test",)),
    ("http://localhost", ("http://localhost",)),
    ("http://localhost:8080/x", ("http://localhost",)),
    ("http://127.0.0.1:8080", ("http://127.0.0.1",)),
    ("https://www.example.co.uk", ("https://example.co.uk",)),
])
def test_destinations_become_sorted_distinct_sites(destination, sites):
    assert _source(destination=destination).destination_sites == sites


@pytest.mark.parametrize(("header", "reason"), [
    ({}, "destination_missing"),
    ({"destination": None}, "destination_missing"),
    ({"destination": []}, "destination_missing"),
    ({"destination": [f"https://{name}.test" for name in "abcd"]}, "destination_list_too_long"),
    ({"destination": "http://insecure.test"}, "destination_untrustworthy"),
    ({"destination": ["https://a.test", "http://insecure.test"]}, "destination_untrustworthy"),
    ({"destination": 123}, "destination_wrong_type"),
    ({"destination": "not a url"}, "destination_wrong_type"),
    ({"destination": "ftp://files.test"}, "destination_wrong_type"),
    ({"destination": ["https://a.test", 1]}, "destination_wrong_type"),
])
def test_invalid_destinations(header, reason):
    assert _source_reason(header) == reason


def test_the_destination_limit_counts_distinct_sites():
    """Chrome's interop case ``destination_validation``: four URLs of three sites are three destinations."""
    header = {"destination": ["https://d1.test", "https://d2.test", "https://d3.test/a", "https://d3.test/b"]}
    assert _source(header).destination_sites == ("https://d1.test", "https://d2.test", "https://d3.test")
    assert _source({"destination": ["https://a.test"] * 4}).destination_sites == ("https://a.test",)


def test_three_destinations_are_allowed():
    destinations = ["https://a.test", "https://b.test", "https://c.test"]
    assert _source(destination=destinations).destination_sites == tuple(destinations)


@pytest.mark.parametrize(("value", "expected"), [("123", 123), ("0", 0), (str(2**64 - 1), 2**64 - 1), ("007", 7)])
def test_source_event_id(value, expected):
    assert _source(source_event_id=value).source_event_id == expected


@pytest.mark.parametrize("value", [123, "-1", "1e3", str(2**64), "", " 1", "0x1", "1.0", None, True])
def test_invalid_source_event_id(value):
    assert _source_reason(source_event_id=value) == "source_event_id_value_invalid"


@pytest.mark.parametrize(("value", "expected"), [
    ("5", 5), ("-5", -5), ("0", 0), (str(2**63 - 1), 2**63 - 1), (str(-(2**63)), -(2**63)),
])
def test_priority(value, expected):
    assert _source(priority=value).priority == expected


@pytest.mark.parametrize("value", [5, str(2**63), str(-(2**63) - 1), "1.0", "x", "--1", None])
def test_invalid_priority(value):
    assert _source_reason(priority=value) == "priority_value_invalid"


# --------------------------------------------------------------------------------------------
# Sources: filter data, aggregation keys, reports, trigger data, debug
# --------------------------------------------------------------------------------------------


def test_filter_data_is_sorted_by_key():
    source = _source(filter_data={"product": ["a", "b"], "campaign": [], "k" * 25: ["v" * 25]})
    assert source.filter_data == (("campaign", ()), ("k" * 25, ("v" * 25,)), ("product", ("a", "b")))


def test_fifty_filter_keys_and_values_are_allowed():
    data = {f"k{i}": [f"v{j}" for j in range(50)] for i in range(50)}
    assert len(_source(filter_data=data).filter_data) == 50


@pytest.mark.parametrize(("filter_data", "reason"), [
    ({"source_type": ["navigation"]}, "filter_data_has_source_type_key"),
    ({"_x": ["1"]}, "filter_data_key_reserved"),
    ({"_lookback_window": ["1"]}, "filter_data_key_reserved"),
    ({f"k{i}": [] for i in range(51)}, "filter_data_too_many_keys"),
    ({"k": [1]}, "filter_data_value_invalid"),
    ({"k": ["a", None]}, "filter_data_value_invalid"),
    ({"k": "a"}, "filter_data_list_invalid"),
    ({"k": {"a": 1}}, "filter_data_list_invalid"),
    ({"k" * 26: []}, "filter_data_key_too_long"),
    ({"k": [str(i) for i in range(51)]}, "filter_data_list_too_long"),
    ({"k": ["v" * 26]}, "filter_data_value_too_long"),
    (["k"], "filter_data_wrong_type"),
    ("k", "filter_data_wrong_type"),
])
def test_invalid_filter_data(filter_data, reason):
    assert _source_reason(filter_data=filter_data) == reason


def test_the_filter_value_limit_counts_distinct_values():
    """Chrome's interop case ``filter_data_validation``: 51 values of which two are equal are 50 values."""
    values = [f"{i:02d}" for i in range(1, 51)] + ["50"]
    assert dict(_source(filter_data={"01": values}).filter_data)["01"] == tuple(values)


def test_aggregation_keys_keep_header_order():
    keys = {"b": "0x159", "a": "0X1f", "max": "0x" + "f" * 32, "k" * 25: "0x0"}
    assert _source(aggregation_keys=keys).aggregation_keys == (
        ("b", 0x159), ("a", 0x1F), ("max", 2**128 - 1), ("k" * 25, 0))


def test_twenty_aggregation_keys_are_allowed():
    keys = {f"k{i}": hex(i) for i in range(20)}
    assert len(_source(aggregation_keys=keys).aggregation_keys) == 20


@pytest.mark.parametrize(("keys", "reason"), [
    ({"a": "159"}, "aggregation_keys_value_invalid"),
    ({"a": "0xZZ"}, "aggregation_keys_value_invalid"),
    ({"a": "0x" + "1" * 33}, "aggregation_keys_value_invalid"),
    ({"a": "0x"}, "aggregation_keys_value_invalid"),
    ({"a": 0x159}, "aggregation_keys_value_invalid"),
    ({"a": " 0x1"}, "aggregation_keys_value_invalid"),
    ({f"k{i}": "0x1" for i in range(21)}, "aggregation_keys_too_many_keys"),
    ({"k" * 26: "0x1"}, "aggregation_keys_key_too_long"),
    (["0x1"], "aggregation_keys_wrong_type"),
])
def test_invalid_aggregation_keys(keys, reason):
    assert _source_reason(aggregation_keys=keys) == reason


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (1.0, 1), (5, 5), (20, 20)])
def test_max_event_level_reports(value, expected):
    assert _source(max_event_level_reports=value).max_event_level_reports == expected
    assert _source(source_type=EVENT, max_event_level_reports=value).max_event_level_reports == expected


@pytest.mark.parametrize("value", [21, "3", -1, 1.5, True, None])
def test_invalid_max_event_level_reports(value):
    assert _source_reason(max_event_level_reports=value) == "max_event_level_reports_value_invalid"


@pytest.mark.parametrize(("fields", "trigger_data", "matching"), [
    ({"trigger_data": [3, 1, 2, 0]}, (0, 1, 2, 3), "modulus"),
    ({"trigger_data": []}, (), "modulus"),
    ({"trigger_data": [5, 1], "trigger_data_matching": "exact"}, (1, 5), "exact"),
    ({"trigger_data": [2**32 - 1], "trigger_data_matching": "exact"}, (2**32 - 1,), "exact"),
    ({"trigger_data": list(range(32))}, tuple(range(32)), "modulus"),
    ({"trigger_data_matching": "exact"}, tuple(range(8)), "exact"),
])
def test_trigger_data(fields, trigger_data, matching):
    source = _source(**fields)
    assert (source.trigger_data, source.trigger_data_matching) == (trigger_data, matching)


@pytest.mark.parametrize(("fields", "reason"), [
    ({"trigger_data": [1, 2]}, "trigger_data_matching_modulus_invalid"),
    ({"trigger_data": [0, 0]}, "duplicate_trigger_data"),
    ({"trigger_data": list(range(33))}, "trigger_data_list_too_long"),
    ({"trigger_data": [-1]}, "trigger_data_value_invalid"),
    ({"trigger_data": [2**32], "trigger_data_matching": "exact"}, "trigger_data_value_invalid"),
    ({"trigger_data": ["1"]}, "trigger_data_value_invalid"),
    ({"trigger_data": 1}, "trigger_data_list_invalid"),
    ({"trigger_data_matching": "fuzzy"}, "trigger_data_matching_value_invalid"),
])
def test_invalid_trigger_data(fields, reason):
    assert _source_reason(**fields) == reason


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (3, 3.0), (14, 14.0), (2.5, 2.5)])
def test_event_level_epsilon(value, expected):
    assert _source(event_level_epsilon=value).event_level_epsilon == expected


@pytest.mark.parametrize("value", [-0.1, 14.1, "3", True])
def test_invalid_event_level_epsilon(value):
    assert _source_reason(event_level_epsilon=value) == "event_level_epsilon_value_invalid"


def test_debug_key_is_kept_only_with_debug_permission():
    assert _source(debug_key="123", debug_permission=True).debug_key == 123
    assert _source(debug_key="123", debug_permission=True).debug_permission is True
    assert _source(debug_key="123").debug_key is None
    assert _source(debug_key=str(2**64 - 1), debug_permission=True).debug_key == 2**64 - 1


@pytest.mark.parametrize("value", [123, "-1", "abc", str(2**64), None, "0x1"])
def test_an_invalid_debug_key_is_dropped_not_an_error(value):
    source = _source(debug_key=value, debug_permission=True)
    assert source.debug_key is None
    assert source.debug_permission is True


def test_debug_reporting():
    assert _source(debug_reporting=True).debug_reporting is True
    assert _source_reason(debug_reporting="true") == "debug_reporting_value_invalid"


@pytest.mark.parametrize("header", [[], "x", None, 1, ["destination"]])
def test_a_source_root_that_is_not_a_dictionary(header):
    assert _source_reason(header) == "root_wrong_type"


def test_header_error_carries_its_reason_and_detail():
    with pytest.raises(HeaderError) as caught:
        _source(priority=5)
    assert caught.value.reason == "priority_value_invalid"
    assert str(caught.value).startswith("priority_value_invalid: ")
    assert isinstance(caught.value, ValueError)
    assert str(HeaderError("x")) == "x"


# --------------------------------------------------------------------------------------------
# Triggers
# --------------------------------------------------------------------------------------------


def test_trigger_defaults():
    trigger = _trigger({})
    assert trigger.time_micros == 7_000_000
    assert trigger.destination_site == "https://destination.test"
    assert trigger.reporting_origin == "https://reporter.test"
    assert trigger.reporting_site == "https://reporter.test"
    assert trigger.event_trigger_data == ()
    assert trigger.aggregatable_trigger_data == ()
    assert trigger.aggregatable_values == ()
    assert trigger.aggregatable_dedup_keys == ()
    assert trigger.filters == NO_FILTERS
    assert trigger.aggregation_coordinator_origin == COORDINATORS[0]
    assert trigger.source_registration_time == EXCLUDE
    assert trigger.trigger_context_id is None
    assert trigger.debug_key is None
    assert trigger.debug_permission is False
    assert trigger.debug_reporting is False
    assert trigger.has_aggregatable_data is False


@pytest.mark.parametrize(("reporting_origin", "site"), [
    ("https://reporter.test", "https://reporter.test"),
    ("https://a.b.adtech.test", "https://adtech.test"),
    ("https://ads.example.co.uk:8443", "https://example.co.uk"),
    ("http://localhost:9000", "http://localhost"),
])
def test_reporting_site_is_the_site_of_the_reporting_origin(reporting_origin, site):
    trigger = _trigger({}, reporting_origin=reporting_origin)
    assert trigger.reporting_origin == reporting_origin
    assert trigger.reporting_site == site


def test_event_trigger_data_entries():
    trigger = _trigger(event_trigger_data=[
        {"trigger_data": "3", "priority": "-2", "deduplication_key": "7"},
        {},
        {"trigger_data": str(2**64 - 1), "filters": {"product": ["a"]}, "not_filters": [{"x": []}]},
    ])
    assert trigger.event_trigger_data == (
        EventTriggerData(trigger_data=3, priority=-2, deduplication_key=7),
        EventTriggerData(trigger_data=0, priority=0, deduplication_key=None),
        EventTriggerData(trigger_data=2**64 - 1, filters=FilterPair(
            (FilterConfig((("product", ("a",)),)),), (FilterConfig((("x", ()),)),))),
    )
    assert trigger.has_aggregatable_data is False


@pytest.mark.parametrize(("event_trigger_data", "reason"), [
    ({}, "event_trigger_data_wrong_type"),
    ({"trigger_data": "1"}, "event_trigger_data_wrong_type"),
    ("[]", "event_trigger_data_wrong_type"),
    ([1], "event_trigger_data_wrong_type"),
    ([{"trigger_data": 3}], "trigger_data_value_invalid"),
    ([{"trigger_data": "-1"}], "trigger_data_value_invalid"),
    ([{"trigger_data": str(2**64)}], "trigger_data_value_invalid"),
    ([{"priority": "x"}], "event_priority_value_invalid"),
    ([{"priority": 1}], "event_priority_value_invalid"),
    ([{"deduplication_key": "-1"}], "event_dedup_key_value_invalid"),
    ([{"deduplication_key": 1}], "event_dedup_key_value_invalid"),
    ([{"filters": {"_some_key": []}}], "filters_key_reserved"),
])
def test_invalid_event_trigger_data(event_trigger_data, reason):
    assert _trigger_reason(event_trigger_data=event_trigger_data) == reason


def test_filters_as_a_dictionary_or_a_list_of_them():
    one = _trigger(filters={"product": ["b", "a"], "campaign": ["c"]})
    assert one.filters == FilterPair((FilterConfig((("campaign", ("c",)), ("product", ("b", "a")))),))
    many = _trigger(filters=[{"a": ["1"]}, {"b": ["2"]}], not_filters={"source_type": ["event"]})
    assert many.filters == FilterPair(
        (FilterConfig((("a", ("1",)),)), FilterConfig((("b", ("2",)),))),
        (FilterConfig((("source_type", ("event",)),)),),
    )
    assert _trigger(filters=[]).filters == FilterPair((), ())
    assert _trigger(filters={}).filters == FilterPair((FilterConfig(),), ())


@pytest.mark.parametrize(("window", "micros"), [(31.0, 31_000_000), (31, 31_000_000), (1, 1_000_000)])
def test_lookback_window_in_microseconds(window, micros):
    trigger = _trigger(filters={"_lookback_window": window, "a": []})
    assert trigger.filters.filters == (FilterConfig((("a", ()),), micros),)


@pytest.mark.parametrize(("filters", "reason"), [
    ({"_lookback_window": 0}, "filters_lookback_window_value_invalid"),
    ({"_lookback_window": "5"}, "filters_lookback_window_value_invalid"),
    ({"_lookback_window": -5}, "filters_lookback_window_value_invalid"),
    ({"_lookback_window": 1.5}, "filters_lookback_window_value_invalid"),
    ({"_lookback_window": True}, "filters_lookback_window_value_invalid"),
    ({"_some_key": []}, "filters_key_reserved"),
    ([{"a": []}, {"_x": ["1"]}], "filters_key_reserved"),
    (123, "filters_wrong_type"),
    ([{"a": []}, "b"], "filters_wrong_type"),
    ({"a": "b"}, "filters_list_invalid"),
    ({"a": [1]}, "filters_value_invalid"),
])
def test_invalid_filters(filters, reason):
    assert _trigger_reason(filters=filters) == reason
    assert _trigger_reason(not_filters=filters) == reason


def test_aggregatable_values_dictionary_form():
    trigger = _trigger(aggregatable_values={"a": 123.0, "b": 65_536, "c": 1, "k" * 25: 2})
    assert trigger.aggregatable_values == (AggregatableValues((("a", 123), ("b", 65_536), ("c", 1), ("k" * 25, 2))),)
    assert trigger.aggregatable_values[0].filters == NO_FILTERS
    assert trigger.has_aggregatable_data is True


def test_aggregatable_values_list_form_with_filters():
    trigger = _trigger(aggregatable_values=[
        {"values": {"a": 1}, "filters": {"x": ["y"]}, "not_filters": {"z": []}},
        {"values": {"b": 2}},
    ])
    assert trigger.aggregatable_values == (
        AggregatableValues((("a", 1),), FilterPair((FilterConfig((("x", ("y",)),)),), (FilterConfig((("z", ()),)),))),
        AggregatableValues((("b", 2),)),
    )
    assert trigger.has_aggregatable_data is True


@pytest.mark.parametrize("values", [{}, []])
def test_empty_aggregatable_values_register_no_entries(values):
    trigger = _trigger(aggregatable_values=values)
    assert trigger.aggregatable_values == ()
    assert trigger.has_aggregatable_data is False


@pytest.mark.parametrize("value", [0, 65_537, "5", True, 1.5, None, -1])
def test_invalid_aggregatable_value(value):
    assert _trigger_reason(aggregatable_values={"a": value}) == "aggregatable_values_value_invalid"
    assert _trigger_reason(aggregatable_values=[{"values": {"a": value}}]) == "aggregatable_values_value_invalid"


@pytest.mark.parametrize(("values", "reason"), [
    (5, "aggregatable_values_wrong_type"),
    ("{}", "aggregatable_values_wrong_type"),
    ([5], "aggregatable_values_wrong_type"),
    ([{"filters": {}}], "aggregatable_values_wrong_type"),
    ([{"values": [1]}], "aggregatable_values_wrong_type"),
    ([{"values": {"a": 1}, "filters": {"_x": []}}], "filters_key_reserved"),
])
def test_invalid_aggregatable_values(values, reason):
    assert _trigger_reason(aggregatable_values=values) == reason


def test_a_triggers_key_names_may_be_longer_than_a_sources():
    """Chrome's interop case ``aggregation_key_identifier_length``: the 25-character limit is on a source's
    aggregation keys; a trigger may name longer ones (they match none)."""
    name = "k" * 26
    trigger = _trigger(aggregatable_trigger_data=[{"key_piece": "0x1", "source_keys": [name]}],
                       aggregatable_values={name: 5})
    assert trigger.aggregatable_trigger_data[0].source_keys == (name,)
    assert trigger.aggregatable_values[0].values == ((name, 5),)


def test_aggregatable_trigger_data():
    trigger = _trigger(aggregatable_trigger_data=[
        {"key_piece": "0x400", "source_keys": ["a", "b"]},
        {"key_piece": "0X1", "filters": {"p": ["1"]}},
    ])
    assert trigger.aggregatable_trigger_data == (
        AggregatableTriggerData(0x400, ("a", "b")),
        AggregatableTriggerData(0x1, (), FilterPair((FilterConfig((("p", ("1",)),)),))),
    )
    assert trigger.has_aggregatable_data is True


@pytest.mark.parametrize(("data", "reason"), [
    ([{"source_keys": ["a"]}], "aggregatable_trigger_data_key_piece_missing"),
    ([{}], "aggregatable_trigger_data_key_piece_missing"),
    ([{"key_piece": "400"}], "aggregatable_trigger_data_key_piece_invalid"),
    ([{"key_piece": 0x400}], "aggregatable_trigger_data_key_piece_invalid"),
    ([{"key_piece": "0x" + "1" * 33}], "aggregatable_trigger_data_key_piece_invalid"),
    ([{"key_piece": "0x1", "source_keys": [1]}], "aggregatable_trigger_data_source_keys_invalid"),
    ([{"key_piece": "0x1", "source_keys": "a"}], "aggregatable_trigger_data_source_keys_invalid"),
    ({"key_piece": "0x1"}, "aggregatable_trigger_data_wrong_type"),
    (["0x1"], "aggregatable_trigger_data_wrong_type"),
])
def test_invalid_aggregatable_trigger_data(data, reason):
    assert _trigger_reason(aggregatable_trigger_data=data) == reason


def test_aggregatable_deduplication_keys_with_and_without_a_key():
    trigger = _trigger(aggregatable_deduplication_keys=[
        {"deduplication_key": "5", "filters": {"a": ["1"]}},
        {"not_filters": {"b": []}},
        {"deduplication_key": str(2**64 - 1)},
    ])
    assert trigger.aggregatable_dedup_keys == (
        AggregatableDedupKey(5, FilterPair((FilterConfig((("a", ("1",)),)),))),
        AggregatableDedupKey(None, FilterPair((), (FilterConfig((("b", ()),)),))),
        AggregatableDedupKey(2**64 - 1),
    )
    assert trigger.has_aggregatable_data is False


@pytest.mark.parametrize(("keys", "reason"), [
    ([{"deduplication_key": "x"}], "aggregatable_dedup_key_value_invalid"),
    ([{"deduplication_key": 5}], "aggregatable_dedup_key_value_invalid"),
    ([{"deduplication_key": str(2**64)}], "aggregatable_dedup_key_value_invalid"),
    ({"deduplication_key": "5"}, "aggregatable_dedup_key_wrong_type"),
    (["5"], "aggregatable_dedup_key_wrong_type"),
])
def test_invalid_aggregatable_deduplication_keys(keys, reason):
    assert _trigger_reason(aggregatable_deduplication_keys=keys) == reason


@pytest.mark.parametrize(("value", "expected"), [
    ("https://c1.test", "https://c1.test"),
    ("https://c2.test", "https://c2.test"),
    ("https://c2.test/", "https://c2.test"),
    ("https://c2.test:443", "https://c2.test"),
])
def test_aggregation_coordinator_origin(value, expected):
    assert _trigger(aggregation_coordinator_origin=value).aggregation_coordinator_origin == expected


@pytest.mark.parametrize("value", ["https://other.test", "http://c1.test", "c1.test", "", 5, None, ["https://c1.test"]])
def test_aggregation_coordinator_origin_must_be_allowed(value):
    assert _trigger_reason(aggregation_coordinator_origin=value) == "aggregation_coordinator_value_invalid"


def test_the_default_coordinator_is_the_first_allowed():
    trigger = parse_trigger({}, time_micros=0, context_origin="https://d.test", reporting_origin="https://r.test",
                            coordinator_origins=["https://c2.test", "https://c1.test"])
    assert trigger.aggregation_coordinator_origin == "https://c2.test"


@pytest.mark.parametrize("value", [INCLUDE, EXCLUDE])
def test_aggregatable_source_registration_time(value):
    assert _trigger(aggregatable_source_registration_time=value).source_registration_time == value


@pytest.mark.parametrize("value", ["INCLUDE", "yes", "", 1, True, None])
def test_invalid_aggregatable_source_registration_time(value):
    assert _trigger_reason(aggregatable_source_registration_time=value) == \
        "aggregatable_source_registration_time_value_invalid"


@pytest.mark.parametrize("value", ["abc", "x" * 64, "1", ""])  # empty: interop aggregatable_report_trigger_context_id
def test_trigger_context_id(value):
    assert _trigger(trigger_context_id=value).trigger_context_id == value
    explicit = _trigger(trigger_context_id=value, aggregatable_source_registration_time=EXCLUDE)
    assert explicit.trigger_context_id == value


@pytest.mark.parametrize("fields", [
    {"trigger_context_id": "x" * 65},
    {"trigger_context_id": 5},
    {"trigger_context_id": ["a"]},
    {"trigger_context_id": "abc", "aggregatable_source_registration_time": INCLUDE},
])
def test_invalid_trigger_context_id(fields):
    assert _trigger_reason(**fields) == "trigger_context_id_invalid_value"


@pytest.mark.parametrize(("value", "expected"), [("-1", -1), ("123", 123), (str(-2**63), -2**63)])
def test_destination_limit_priority(value, expected):
    assert _source(destination_limit_priority=value).destination_limit_priority == expected
    assert _source().destination_limit_priority == 0


@pytest.mark.parametrize("value", [1, "x", str(2**63), None, "1.5"])
def test_invalid_destination_limit_priority(value):
    assert _source_reason(destination_limit_priority=value) == "destination_limit_priority_invalid"


def test_attribution_scopes_of_a_source():
    """Spec "parse attribution scopes" (the interop case ``attribution_scopes_parsing_failures``): a limit, 1 to
    min(limit, 20) distinct values of at most 50 characters, and max_event_states (default 3)."""
    assert _source().attribution_scopes is None
    scopes = _source(attribution_scopes={"limit": 3.0, "values": ["b", "a", "a"], "other": 1}).attribution_scopes
    assert scopes == AttributionScopes(3, ("a", "b"), 3)
    assert _source(attribution_scopes={"limit": 1, "values": ["x" * 50, "x" * 50], "max_event_states": 7}) \
        .attribution_scopes == AttributionScopes(1, ("x" * 50,), 7)
    assert _source(attribution_scopes={"limit": 2**32 - 1, "values": [str(i) for i in range(20)]}) \
        .attribution_scopes.limit == 2**32 - 1
    assert _source(max_event_states=0).attribution_scopes is None  # only inside attribution_scopes


@pytest.mark.parametrize(("scopes", "reason"), [
    ([], "attribution_scopes_invalid"),
    ({"limit": 3, "values": "2"}, "attribution_scopes_list_invalid"),
    ({"limit": 3, "values": [3]}, "attribution_scopes_list_value_invalid"),
    ({"limit": 3, "values": ["x" * 51]}, "attribution_scopes_list_value_invalid"),
    ({"limit": 3, "values": []}, "attribution_scopes_list_invalid"),
    ({"limit": 1, "values": ["a", "b"]}, "attribution_scopes_list_invalid"),
    ({"limit": 30, "values": [str(i) for i in range(21)]}, "attribution_scopes_list_invalid"),
    ({"limit": 3}, "attribution_scopes_list_invalid"),
    ({"values": ["1"]}, "attribution_scope_limit_required"),
    *[({"limit": bad, "values": ["1"]}, "attribution_scope_limit_invalid") for bad in ("3", 0, -3, 2**32, 3.5, True)],
    *[({"limit": 3, "values": ["1"], "max_event_states": bad}, "max_event_states_invalid")
      for bad in ("3", 0, -3, 2**32, 3.5)],
])
def test_invalid_attribution_scopes_of_a_source(scopes, reason):
    assert _source_reason(attribution_scopes=scopes) == reason


def test_attribution_scopes_of_a_trigger():
    assert _trigger().attribution_scopes == ()
    assert _trigger(attribution_scopes=[]).attribution_scopes == ()
    assert _trigger(attribution_scopes=["b", "a", "b", "x" * 100]).attribution_scopes == ("a", "b", "x" * 100)
    assert _trigger_reason(attribution_scopes={"a": 1}) == "attribution_scopes_invalid"
    assert _trigger_reason(attribution_scopes=["a", 1]) == "attribution_scopes_value_invalid"


def test_named_budgets():
    """Spec "parse named budgets" (the interop case ``aggregatable_named_budgets_parsing_failures``)."""
    assert _source(named_budgets={"b": 0, "a": 65_536.0}).named_budgets == (("a", 65_536), ("b", 0))
    assert _source(named_budgets={f"n{i}": 1 for i in range(25)}).named_budgets[0] == ("n0", 1)
    trigger = _trigger(named_budgets=[{"name": "a", "filters": {"x": ["1"]}}, {}])
    assert trigger.named_budgets == (NamedBudgetCandidate("a", FilterPair((FilterConfig((("x", ("1",)),)),))),
                                     NamedBudgetCandidate(None))


@pytest.mark.parametrize(("budgets", "reason"), [
    ([], "aggregatable_named_budgets_dict_invalid"),
    ({f"n{i}": 1 for i in range(26)}, "aggregatable_named_budgets_dict_invalid"),
    ({"x" * 26: 1}, "aggregatable_named_budgets_key_too_long"),
    *[({"a": bad}, "aggregatable_named_budgets_value_invalid") for bad in ("100", -1, 65_537, 1.5, True)],
])
def test_invalid_named_budgets_of_a_source(budgets, reason):
    assert _source_reason(named_budgets=budgets) == reason


@pytest.mark.parametrize(("candidates", "reason"), [
    ({}, "aggregatable_named_budget_wrong_type"),
    ([[]], "aggregatable_named_budget_wrong_type"),
    ([{"name": 1}], "aggregatable_named_budget_name_invalid"),
    ([{"name": "a", "filters": {"_x": []}}], "filters_key_reserved"),
])
def test_invalid_named_budgets_of_a_trigger(candidates, reason):
    assert _trigger_reason(named_budgets=candidates) == reason


def _debug_source(config):
    return parse_source({"destination": DESTINATION, "aggregatable_debug_reporting": config}, time_micros=0,
                        context_origin="https://source.test", reporting_origin="https://reporter.test",
                        source_type=NAVIGATION, coordinator_origins=COORDINATORS)


def test_aggregatable_debug_reporting_of_a_source():
    """Spec "parse a source aggregatable debug reporting config" (the interop case ``aggregatable_debug_reports``):
    the budget is set aside, each listed type of its kind gets its key piece and value, ``unspecified`` the rest."""
    source = _debug_source({"budget": 1024.0, "key_piece": "0x1", "aggregation_coordinator_origin": COORDINATORS[1],
                            "debug_data": [{"types": ["source-success", "trigger-no-matching-source", "x"],
                                            "key_piece": "0x10", "value": 7},
                                           {"types": ["unspecified"], "key_piece": "0x20", "value": 1024}]})
    assert source.aggregatable_debug_budget == 1024
    config = source.aggregatable_debug
    assert (config.key_piece, config.aggregation_coordinator_origin) == (1, COORDINATORS[1])
    assert config.data == (("source-success", 0x10, 7),)  # a trigger's type is not a source's, "x" no type
    assert config.data_of("source-success") == (0x10, 7) and config.unspecified == (0x20, 1024)
    assert all(config.data_of(kind) == (0x20, 1024) for kind in SOURCE_DEBUG_TYPES - {"source-success"})
    plain = _debug_source({"budget": 5, "key_piece": "0x2"})
    assert (plain.aggregatable_debug_budget, plain.aggregatable_debug.reports_any) == (5, False)


@pytest.mark.parametrize("config", [
    [], {"budget": "1024", "key_piece": "0x1"}, {"budget": 0, "key_piece": "0x1"}, {"budget": 65_537, "key_piece": "0x1"},
    {"budget": 10}, {"budget": 10, "key_piece": "0x1", "aggregation_coordinator_origin": "https://elsewhere.test"},
    {"budget": 10, "key_piece": "0x1", "debug_data": [{"types": ["source-success"], "key_piece": "0x1", "value": 11}]},
    {"budget": 10, "key_piece": "0x1", "debug_data": [{"types": ["source-success", "source-success"],
                                                        "key_piece": "0x1", "value": 1}]},
    {"budget": 10, "key_piece": "0x1", "debug_data": [{"types": ["source-noised"], "key_piece": "0x1", "value": 1},
                                                       {"types": ["source-noised"], "key_piece": "0x2", "value": 1}]},
    {"budget": 10, "key_piece": "0x1", "debug_data": [{"types": ["x", "x"], "key_piece": "0x1", "value": 1}]},
    {"budget": 10, "key_piece": "0x1", "debug_data": [{"types": [], "key_piece": "0x1", "value": 1}]},
])
def test_an_invalid_aggregatable_debug_reporting_is_ignored_budget_and_all(config):
    source = _debug_source(config)
    assert (source.aggregatable_debug_budget, source.aggregatable_debug) == (0, None)


def test_a_debug_configuration_is_parsed_once_and_json_twins_are_not_confused():
    """Parsed once per distinct configuration (its JSON as the key), but a NaN, which JSON writes as null, is not
    taken for the null it is written as, nor an integer past 64 bits for anything."""
    config = {"budget": 10, "key_piece": "0x1", "debug_data": [{"types": ["source-success"], "key_piece": "0x2",
                                                                 "value": 3}]}
    assert _debug_source(config).aggregatable_debug is _debug_source(json.loads(json.dumps(config))).aggregatable_debug
    for hostile in (math.nan, None, 2**70):
        broken = {**config, "debug_data": [{**config["debug_data"][0], "value": hostile}]}
        assert _debug_source(broken).aggregatable_debug is None
    named = {**config, "aggregation_coordinator_origin": COORDINATORS[1]}
    assert _debug_source(named).aggregatable_debug.aggregation_coordinator_origin == COORDINATORS[1]


@pytest.mark.parametrize(("value", "expected"), [("00", 0), ("007", 7), ("18446744073709551615", 2**64 - 1),
                                                  ("１", None), ("1_000", None), (" 1", None), ("", None), ("-1", None)])
def test_decimal_strings(value, expected):
    assert parse_decimal(value) == expected


def test_aggregatable_debug_reporting_of_a_trigger():
    trigger = parse_trigger({"aggregatable_debug_reporting": {
        "key_piece": "0x2", "debug_data": [{"types": ["trigger-no-matching-source"], "key_piece": "0x4", "value": 65_536}]}},
        time_micros=0, context_origin="https://destination.test", reporting_origin="https://reporter.test",
        coordinator_origins=COORDINATORS)
    assert trigger.aggregatable_debug.data == (("trigger-no-matching-source", 4, 65_536),)
    assert trigger.aggregatable_debug.aggregation_coordinator_origin == COORDINATORS[0]
    assert _trigger(aggregatable_debug_reporting={"key_piece": "0x2", "debug_data": [
        {"types": ["trigger-no-matching-source"], "key_piece": "0x4", "value": 65_537}]}).aggregatable_debug is None


def test_filtering_ids():
    """Chrome's interop case ``aggregatable_contributions_with_filtering_ids``: a value may carry a filtering id
    (a uint64 string, default 0) that fits in ``aggregatable_filtering_id_max_bytes`` bytes (1 to 8, default 1)."""
    trigger = _trigger(aggregatable_values={"a": 1, "b": {"value": 456, "filtering_id": "255"}, "c": {"value": 2}})
    assert trigger.aggregatable_values == (AggregatableValues((("a", 1), ("b", 456), ("c", 2)), NO_FILTERS, (("b", 255),)),)
    assert trigger.filtering_id_max_bytes == 1
    wide = _trigger(aggregatable_filtering_id_max_bytes=2.0,
                    aggregatable_values=[{"values": {"a": {"value": 3, "filtering_id": "65535"}}}])
    assert (wide.filtering_id_max_bytes, wide.aggregatable_values[0].filtering_ids) == (2, (("a", 65_535),))
    largest = _trigger(aggregatable_filtering_id_max_bytes=8,
                       aggregatable_values={"a": {"value": 1, "filtering_id": str(2**64 - 1)}})
    assert largest.aggregatable_values[0].filtering_ids == (("a", 2**64 - 1),)
    assert _trigger(aggregatable_filtering_id_max_bytes=1, aggregatable_source_registration_time=INCLUDE) \
        .filtering_id_max_bytes == 1


@pytest.mark.parametrize(("fields", "reason"), [
    ({"aggregatable_filtering_id_max_bytes": "2"}, "aggregatable_filtering_id_max_bytes_invalid_value"),
    ({"aggregatable_filtering_id_max_bytes": 0}, "aggregatable_filtering_id_max_bytes_invalid_value"),
    ({"aggregatable_filtering_id_max_bytes": 9}, "aggregatable_filtering_id_max_bytes_invalid_value"),
    ({"aggregatable_filtering_id_max_bytes": 1.5}, "aggregatable_filtering_id_max_bytes_invalid_value"),
    ({"aggregatable_filtering_id_max_bytes": 2, "aggregatable_source_registration_time": INCLUDE},
     "aggregatable_filtering_ids_max_bytes_invalid_source_registration_time_config"),
    ({"aggregatable_values": {"a": {"value": 1, "filtering_id": 255}}}, "aggregatable_values_value_invalid"),
    ({"aggregatable_values": {"a": {"value": 1, "filtering_id": "256"}}}, "aggregatable_values_value_invalid"),
    ({"aggregatable_values": {"a": {"value": 1, "filtering_id": "-1"}}}, "aggregatable_values_value_invalid"),
    ({"aggregatable_values": {"a": {"filtering_id": "1"}}}, "aggregatable_values_value_invalid"),
    ({"aggregatable_filtering_id_max_bytes": 2, "aggregatable_values": {"a": {"value": 1, "filtering_id": "65536"}}},
     "aggregatable_values_value_invalid"),
])
def test_invalid_filtering_ids(fields, reason):
    assert _trigger_reason(**fields) == reason


def test_trigger_debug_key_and_reporting():
    assert _trigger(debug_key="9", debug_permission=True).debug_key == 9
    assert _trigger(debug_key="9").debug_key is None
    assert _trigger(debug_key="-9", debug_permission=True).debug_key is None
    assert _trigger(debug_reporting=True).debug_reporting is True
    assert _trigger_reason(debug_reporting=1) == "debug_reporting_value_invalid"


@pytest.mark.parametrize("header", [[], "{}", None, 0])
def test_a_trigger_root_that_is_not_a_dictionary(header):
    assert _trigger_reason(header) == "root_wrong_type"


# --------------------------------------------------------------------------------------------
# Origins and sites
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("origin", "site"), [
    ("https://192.168.1.1", "https://192.168.1.1"),
    ("https://192.168.1.1:8443", "https://192.168.1.1"),
    ("http://127.0.0.1", "http://127.0.0.1"),
    ("https://github.io", "https://github.io"),
    ("https://co.uk", "https://co.uk"),
    ("https://user.github.io", "https://user.github.io"),
    ("https://a.b.user.github.io", "https://user.github.io"),
    ("https://a.b.example.co.uk", "https://example.co.uk"),
    ("https://example.co.uk", "https://example.co.uk"),
    ("https://www.example.com:8443", "https://example.com"),
    ("http://www.example.com", "http://example.com"),
    ("https://a.b.destination.test", "https://destination.test"),
    ("http://localhost:8080", "http://localhost"),
])
def test_site_of(origin, site):
    assert site_of(origin) == site


@pytest.mark.parametrize(("url", "origin"), [
    ("https://a.test/path?q=1#f", "https://a.test"),
    ("https://a.test:443/x", "https://a.test"),
    ("http://a.test:80", "http://a.test"),
    ("https://a.test:8443/x", "https://a.test:8443"),
    ("http://a.test:443", "http://a.test:443"),
    ("HTTPS://A.Test/", "https://a.test"),
    ("https://user:pw@a.test/", "https://a.test"),
    ("ftp://a.test", None),
    ("https://", None),
    ("a.test", None),
    ("https://a.test:99999", None),
    ("", None),
])
def test_origin_of(url, origin):
    assert origin_of(url) == origin


@pytest.mark.parametrize(("origin", "trustworthy"), [
    ("https://a.test", True),
    ("https://a.test:8443", True),
    ("http://localhost", True),
    ("http://localhost:9000", True),
    ("http://127.0.0.1", True),
    ("http://[::1]", True),
    ("http://a.test", False),
    ("http://10.0.0.1", False),
])
def test_is_trustworthy(origin, trustworthy):
    assert is_trustworthy(origin) is trustworthy


# --------------------------------------------------------------------------------------------
# Records: debug keys
# --------------------------------------------------------------------------------------------


def test_debug_keys_need_both_keys_each_with_its_permission():
    """As Chrome (the interop cases success_debug_event_level and success_debug_aggregatable): a report carries
    both debug keys or none."""
    source = _source(debug_key="1", debug_permission=True)
    trigger = _trigger(debug_key="2", debug_permission=True)
    assert debug_keys(source, trigger) == (1, 2)
    assert debug_keys(source, trigger._replace(debug_permission=False, debug_key=None)) == (None, None)
    assert debug_keys(_source(debug_key="1"), trigger) == (None, None)
    assert debug_keys(source, _trigger(debug_permission=True)) == (None, None)


def test_a_fake_report_has_no_debug_keys():
    assert debug_keys(_source(debug_key="1", debug_permission=True), None) == (None, None)


def test_registrations_are_frozen():
    source = _source()
    with pytest.raises(AttributeError):
        source.priority = 1  # type: ignore[misc]
    assert source._replace(priority=1).priority == 1


# --------------------------------------------------------------------------------------------
# Found by this file's first version, fixed since
# --------------------------------------------------------------------------------------------


def test_ipv6_hosts_keep_their_brackets():
    assert origin_of("https://[2001:db8::1]:8443/x") == "https://[2001:db8::1]:8443"
    assert site_of("https://[2001:db8::1]") == "https://[2001:db8::1]"
    assert is_trustworthy(origin_of("http://[::1]:8080/x"))


@pytest.mark.parametrize("origin", ["http://127.0.0.2", "http://a.localhost", "http://localhost:8000"])
def test_every_loopback_host_is_trustworthy(origin):
    assert is_trustworthy(origin)
    assert _source(destination=origin).destination_sites


def test_http_on_a_public_host_is_not_trustworthy():
    assert not is_trustworthy("http://127.example")


def test_an_empty_values_entry_is_no_aggregatable_data():
    assert not _trigger(aggregatable_values=[{"values": {}}]).has_aggregatable_data
    assert _trigger(aggregatable_values=[{"values": {}}, {"values": {"a": 1}}]).has_aggregatable_data


def test_a_zero_end_time_is_invalid():
    assert _source_reason(event_report_windows={"end_times": [0]}) == "event_report_windows_end_time_value_invalid"
