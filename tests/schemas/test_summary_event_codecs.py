"""The summary-report clients' events (ARA sources and triggers, PAA events): schemas agree, every format reads
back the same rows, the fast path agrees with the field-by-field path, and bad records get their reasons."""
from __future__ import annotations

import dataclasses
import io
import json

import fastavro
import pytest

from schemas.codecs import ARA_SOURCE, ARA_TRIGGER, EVENT_SPECS, PAA_EVENT, READERS, encode_delimited, validate
from schemas.formats import load_avro_schema
from schemas.limits import MAX_EXPIRY_SECONDS
from schemas.proto import events_pb2
from schemas.rows import AggregatableTriggerData, AggregatableValue, AggregationKey, DeadLetter
from tests.support.files import avro_field_names
from tests.support.summary_events import paa_event, record_of, source, trigger

SPECS = (ARA_SOURCE, ARA_TRIGGER, PAA_EVENT)
ROWS = {
    "ara_source": [source("d1", 0, "s1", priority=-3, filters=("a", "b"), expiry_days=2),
                   source("d2", 5, "s2", {"k": (1 << 128) - 1}), source("d3", 9, "s3", {})],
    "ara_trigger": [trigger("d1", 1, "t1", filters=("a",)), trigger("d2", 2, "t2", {}, pieces=()),
                    trigger("d3", 3, "t3", {"count": 65536}, pieces=[(0x1, ()), (0xF0, ("count", "x"))])],
    "paa_event": [paa_event("d1", 0, "e1", "c1"), paa_event("d2", 1, "e2", "c2", api="protected-audience")],
}


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_avro_proto_row_and_codec_fields_match_in_order(spec):
    proto_fields = [field.name for field in spec.proto_type.DESCRIPTOR.fields]
    assert avro_field_names(spec.avro_schema) == proto_fields == list(spec.row_type._fields) == [f.name for f in spec.fields]
    assert [field.number for field in spec.proto_type.DESCRIPTOR.fields] == list(range(1, len(proto_fields) + 1))
    assert spec.proto_type.DESCRIPTOR.name == spec.row_type.__name__
    assert spec.proto_type.DESCRIPTOR.fields_by_name["event_time_micros"].has_presence
    assert EVENT_SPECS[spec.name] is spec


def test_nested_records_match_their_rows():
    for message, row in ((events_pb2.AggregationKey, AggregationKey), (events_pb2.AggregatableTriggerData,
                         AggregatableTriggerData), (events_pb2.AggregatableValue, AggregatableValue)):
        assert [field.name for field in message.DESCRIPTOR.fields] == list(row._fields)


def _encode(fmt: str, spec, records: list[dict]) -> bytes:
    if fmt == "avro":
        out = io.BytesIO()
        fastavro.writer(out, load_avro_schema(spec.avro_schema), records)
        return out.getvalue()
    if fmt == "jsonl":
        return "".join(json.dumps(record) + "\n" for record in records).encode()
    return b"".join(encode_delimited(spec.proto_type(**{k: v for k, v in r.items() if v is not None})) for r in records)


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_every_format_reads_back_the_rows(fmt, spec):
    rows = ROWS[spec.name]
    read = list(READERS[fmt](spec, io.BytesIO(_encode(fmt, spec, [record_of(row) for row in rows])), "mem"))
    assert read == rows


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
def test_the_fast_path_agrees_with_the_field_by_field_path(spec):
    slow = dataclasses.replace(spec, accept=None)
    for row in ROWS[spec.name]:
        record = record_of(row)
        assert spec.accept(record) == validate(slow, record) == row


def test_defaults_and_aras_object_form():
    """Missing expiry means 30 days, priority 0; JSON may write keys and values as ARA's {name: x} objects."""
    record = {"device_id": "d", "event_time_micros": 1, "source_id": "s", "reporting_origin": "o", "destination": "x",
              "aggregation_keys": {"campaignCounts": "0x159", "geoValue": "0X5"}}
    row = validate(ARA_SOURCE, record)
    assert (row.expiry_seconds, row.priority, row.filter_data) == (MAX_EXPIRY_SECONDS, 0, ())
    assert row.aggregation_keys == (AggregationKey("campaignCounts", 0x159), AggregationKey("geoValue", 5))
    trigger_row = validate(ARA_TRIGGER, {"device_id": "d", "event_time_micros": 1, "trigger_id": "t",
                                         "reporting_origin": "o", "destination": "x",
                                         "aggregatable_values": {"campaignCounts": 32768}})
    assert trigger_row.aggregatable_values == (AggregatableValue("campaignCounts", 32768),)


@pytest.mark.parametrize(
    "expiry, expected", [(60, 86_400), (86_400, 86_400), (3 * 86_400, 3 * 86_400), (10**9, MAX_EXPIRY_SECONDS)]
)
def test_expiry_is_clamped_to_one_to_thirty_days(expiry, expected):
    record = {**record_of(ROWS["ara_source"][0]), "expiry_seconds": expiry}
    assert validate(ARA_SOURCE, record).expiry_seconds == expected


SOURCE, TRIGGER, EVENT = (record_of(ROWS[name][0]) for name in ("ara_source", "ara_trigger", "paa_event"))


@pytest.mark.parametrize(
    "spec, record, reason",
    [
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": [{"name": "a", "key": "159"}]}, "invalid_key:aggregation_keys.key"),
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": [{"name": "a", "key": "0x" + "f" * 33}]}, "invalid_key:aggregation_keys.key"),
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": [{"name": "a", "key": "0x1_0"}]}, "invalid_key:aggregation_keys.key"),
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": [{"name": "a", "key": 345}]}, "wrong_type:aggregation_keys.key"),
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": [{"key": "0x1"}]}, "missing_field:aggregation_keys.name"),
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": [{"name": "a", "key": "0x1"}, {"name": "a", "key": "0x2"}]},
         "duplicate_name:aggregation_keys"),
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": [{"name": f"k{i}", "key": "0x1"} for i in range(21)]},
         "too_many:aggregation_keys"),
        (ARA_SOURCE, {**SOURCE, "aggregation_keys": "0x1"}, "wrong_type:aggregation_keys"),
        (ARA_SOURCE, {**SOURCE, "expiry_seconds": 0}, "nonpositive:expiry_seconds"),
        (ARA_SOURCE, {**SOURCE, "priority": 2**63}, "out_of_range:priority"),
        (ARA_SOURCE, {**SOURCE, "priority": "high"}, "wrong_type:priority"),
        (ARA_SOURCE, {**SOURCE, "destination": " "}, "empty_field:destination"),
        (ARA_TRIGGER, {**TRIGGER, "aggregatable_values": [{"name": "count", "value": 65537}]},
         "value_too_large:aggregatable_values.value"),
        (ARA_TRIGGER, {**TRIGGER, "aggregatable_values": [{"name": "count", "value": -1}]},
         "negative_value:aggregatable_values.value"),
        (ARA_TRIGGER, {**TRIGGER, "aggregatable_values": [{"name": "count", "value": 1.5}]},
         "wrong_type:aggregatable_values.value"),
        (ARA_TRIGGER, {**TRIGGER, "aggregatable_values": {"count": 1, "value": None}},
         "missing_field:aggregatable_values.value"),
        (ARA_TRIGGER, {**TRIGGER, "aggregatable_trigger_data": [{"key_piece": "0xg"}]},
         "invalid_key:aggregatable_trigger_data.key_piece"),
        (ARA_TRIGGER, {**TRIGGER, "aggregatable_trigger_data": [{"key_piece": "0x1", "source_keys": [""]}]},
         "empty_field:aggregatable_trigger_data.source_keys"),
        (ARA_TRIGGER, {**TRIGGER, "filters": "a"}, "wrong_type:filters"),
        (ARA_TRIGGER, {**TRIGGER, "reporting_origin": None}, "missing_field:reporting_origin"),
        (PAA_EVENT, {**EVENT, "api": "fledge"}, "unknown_api:api"),
        (PAA_EVENT, {**EVENT, "campaign_id": ""}, "empty_field:campaign_id"),
        (PAA_EVENT, {**EVENT, "event_time_micros": -1}, "negative_timestamp:event_time_micros"),
    ],
)
def test_bad_records_get_their_reason(spec, record, reason):
    assert validate(spec, record) == reason
    (letter,) = READERS["jsonl"](spec, io.BytesIO(json.dumps(record).encode() + b"\n"), "mem")
    assert type(letter) is DeadLetter and letter.reason == reason


def test_protobuf_nested_fields_missing_on_the_wire():
    message = events_pb2.AraTrigger(device_id="d", event_time_micros=1, trigger_id="t", reporting_origin="o",
                                    destination="x", aggregatable_values=[{"name": "count"}])
    (letter,) = READERS["pb"](ARA_TRIGGER, io.BytesIO(encode_delimited(message)), "mem")
    assert letter.reason == "missing_field:aggregatable_values.value"
