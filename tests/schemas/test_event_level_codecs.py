"""Event-level sources and triggers (Ghazi et al. Sec. 2.2): the three descriptions of each record agree, the three
file formats decode to the same rows, the fast path agrees with the field-by-field one, and bad fields give
their reasons."""
from __future__ import annotations

import dataclasses
import io

import pytest

from schemas.codecs import (
    EVENT_LEVEL_SOURCE,
    EVENT_LEVEL_TRIGGER,
    read_avro,
    read_delimited_proto,
    read_jsonl,
    validate,
)
from schemas.formats import load_avro_schema
from schemas.limits import MAX_EXPIRY_SECONDS
from schemas.proto import events_pb2, reports_pb2
from schemas.rows import DeadLetter, EventLevelReport, EventLevelSource, EventLevelTrigger, TriggerSpec
from tests.support.event_level_events import hand_built, record_of, split, write_avro, write_jsonl, write_pb
from tests.support.files import avro_field_names


@pytest.mark.parametrize("avsc, message, row", [
    ("event_level_source", events_pb2.EventLevelSource, EventLevelSource),
    ("event_level_trigger", events_pb2.EventLevelTrigger, EventLevelTrigger),
    ("event_level_report", reports_pb2.EventLevelReport, EventLevelReport),
])
def test_avro_proto_and_row_fields_match_in_order(avsc, message, row):
    proto_fields = [field.name for field in message.DESCRIPTOR.fields]
    assert avro_field_names(avsc) == proto_fields == list(row._fields)
    assert [field.number for field in message.DESCRIPTOR.fields] == list(range(1, len(proto_fields) + 1))
    assert message.DESCRIPTOR.name == row.__name__


def test_trigger_spec_fields_match():
    avro = load_avro_schema("event_level_source")
    specs = next(field for field in avro["fields"] if field["name"] == "trigger_specs")
    record = next(branch for branch in specs["type"] if branch != "null")["items"]
    assert [field["name"] for field in record["fields"]] == [f.name for f in events_pb2.TriggerSpec.DESCRIPTOR.fields]
    assert list(TriggerSpec._fields) == [f.name for f in events_pb2.TriggerSpec.DESCRIPTOR.fields]


def _read(reader, spec, path):
    with open(path, "rb") as handle:
        return list(reader(spec, handle, str(path)))


def test_the_three_formats_decode_to_the_same_rows(tmp_path):
    sources, triggers = split(hand_built())
    for rows, spec, schema in ((sources, EVENT_LEVEL_SOURCE, "event_level_source"),
                               (triggers, EVENT_LEVEL_TRIGGER, "event_level_trigger")):
        jsonl = _read(read_jsonl, spec, write_jsonl(tmp_path / f"{schema}.jsonl", rows))
        avro = _read(read_avro, spec, write_avro(tmp_path / f"{schema}.avro", rows, schema))
        pb = _read(read_delimited_proto, spec, write_pb(tmp_path / f"{schema}.pb", rows))
        assert jsonl == avro == pb == rows


def _slow(spec, record):
    """``validate`` without the fast path."""
    return validate(dataclasses.replace(spec, accept=None), record)


@pytest.mark.parametrize("row", hand_built())
def test_the_fast_path_and_the_field_by_field_path_agree(row):
    spec = EVENT_LEVEL_SOURCE if type(row) is EventLevelSource else EVENT_LEVEL_TRIGGER
    record = record_of(row)
    assert spec.accept(record) == _slow(spec, record) == row


SOURCE = record_of(hand_built()[0])
TRIGGER = record_of(hand_built()[2])


@pytest.mark.parametrize("changes, expected", [
    (dict(expiry_seconds=None, priority=None, max_event_level_reports=None, trigger_data_matching=None,
          trigger_specs=None, filter_data=None),
     dict(expiry_seconds=MAX_EXPIRY_SECONDS, priority=0, filter_data=(), max_event_level_reports=None,
          trigger_data_matching="", trigger_specs=None)),
    (dict(trigger_specs=[]), dict(trigger_specs=None)),  # empty: the defaults, as an unset protobuf field
    (dict(expiry_seconds=10), dict(expiry_seconds=10)),  # not clamped: the configuration refuses it
    (dict(trigger_specs=[{"trigger_data": [1, 2]}]), dict(trigger_specs=(TriggerSpec((1, 2), (), ()),))),
])
def test_sources_take_their_defaults(changes, expected):
    row = validate(EVENT_LEVEL_SOURCE, {**SOURCE, **changes})
    assert type(row) is EventLevelSource
    assert {name: getattr(row, name) for name in expected} == expected
    assert row == _slow(EVENT_LEVEL_SOURCE, {**SOURCE, **changes})


@pytest.mark.parametrize("spec, base, changes, reason", [
    (EVENT_LEVEL_SOURCE, SOURCE, dict(source_id=""), "empty_field:source_id"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(source_type=None), "missing_field:source_type"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(expiry_seconds="1d"), "wrong_type:expiry_seconds"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(max_event_level_reports=2.0), "wrong_type:max_event_level_reports"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(priority=2**70), "out_of_range:priority"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(trigger_data_matching=3), "wrong_type:trigger_data_matching"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(trigger_specs={"trigger_data": [1]}), "wrong_type:trigger_specs"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(trigger_specs=[{"trigger_data": ["1"]}]), "wrong_type:trigger_specs.trigger_data"),
    (EVENT_LEVEL_SOURCE, SOURCE, dict(trigger_specs=[{"trigger_data": [0], "summary_buckets": 3}]),
     "wrong_type:trigger_specs.summary_buckets"),
    (EVENT_LEVEL_TRIGGER, TRIGGER, dict(trigger_data=None), "missing_field:trigger_data"),
    (EVENT_LEVEL_TRIGGER, TRIGGER, dict(trigger_data=-1), "negative_value:trigger_data"),
    (EVENT_LEVEL_TRIGGER, TRIGGER, dict(trigger_data=True), "wrong_type:trigger_data"),
    (EVENT_LEVEL_TRIGGER, TRIGGER, dict(value=0), "nonpositive:value"),
    (EVENT_LEVEL_TRIGGER, TRIGGER, dict(value=1.5), "wrong_type:value"),
    (EVENT_LEVEL_TRIGGER, TRIGGER, dict(filters="shoes"), "wrong_type:filters"),
    (EVENT_LEVEL_TRIGGER, TRIGGER, dict(event_time_micros=-1), "negative_timestamp:event_time_micros"),
])
def test_bad_fields_give_their_reason(spec, base, changes, reason):
    record = {**base, **changes}
    assert spec.accept(record) is None
    assert validate(spec, record) == reason


def test_a_trigger_value_defaults_to_one_and_a_bad_file_is_dead_lettered():
    assert validate(EVENT_LEVEL_TRIGGER, {**TRIGGER, "value": None}).value == 1
    letters = list(read_jsonl(EVENT_LEVEL_TRIGGER, io.BytesIO(b'{"device_id": 3}\n[1]\n'), "x.jsonl"))
    assert [letter.reason for letter in letters] == ["wrong_type:device_id", "not_an_object"]
    assert all(type(letter) is DeadLetter for letter in letters)
