"""Fuzzing the event-bus message decoders of ``schemas/messages.py``: ``decode_message`` (JSON, protobuf and Avro
values of every event type) and ``decode_avro_message`` (also for the aggregatable reports the collector reads).

Property: whatever the value, a decoder returns a valid row (a record of the schema for ``decode_avro_message``) or a
``DeadLetter`` with the value as text and a reason ``schemas.messages`` or ``schemas.codecs`` documents, and never
raises. Inputs: hostile records as JSON, random bytes, mutations of valid values, and valid Avro bodies behind the
single-object and Confluent headers, with the right or a wrong fingerprint or schema id.

Examples: 200 to 300 per test, about 2.5 s on one core (the folder: about 15 s, under 30 s).
"""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import codecs, messages
from schemas.aggregatable import encode_payload, report_record, shared_info_json
from schemas.messages import CONFLUENT_MAGIC, avro_single_object, confluent_wire, decode_avro_message, decode_message
from schemas.rows import DeadLetter
from tests.support.hostile_inputs import (
    FUZZ,
    JSON_VALUES,
    SPECS,
    VALID_RECORDS,
    documented_reasons,
    hostile_records,
    message,
    mutations,
)

REASONS = documented_reasons(messages.__doc__, codecs.__doc__)
REPORT = report_record(shared_info_json(api="shared-storage", report_id="6b3f1e0c-1d2a-4c5b-9e8f-0a1b2c3d4e5f",
                                        reporting_origin="https://a.test", scheduled_report_time=1),
                       encode_payload([(1, 2, 0)]), "k")


def checked(item, row_type) -> None:
    if type(item) is DeadLetter:
        assert REASONS.fullmatch(item.reason), item.reason
        assert type(item.raw) is str and item.source == "topic/0@7"
    else:
        assert type(item) is row_type, item


def avro_values(name: str, record: dict) -> st.SearchStrategy[bytes]:
    """Single-object and Confluent values of ``record``, mutated or not, and random bytes behind either header."""
    single, confluent = avro_single_object(name, record), confluent_wire(name, 42, record)
    return (st.sampled_from([single, confluent]) | mutations(single) | mutations(confluent)
            | st.binary(max_size=32).map(lambda body: single[:10] + body)
            | st.binary(max_size=32).map(lambda body: CONFLUENT_MAGIC + bytes(4) + body) | st.binary(max_size=32))


@settings(FUZZ, max_examples=300)
@given(spec=st.sampled_from(SPECS), data=st.data())
def test_json_values_give_a_row_or_a_documented_dead_letter(spec, data):
    valid = VALID_RECORDS[spec.name]
    value = data.draw(st.builds(json.dumps, hostile_records(valid, JSON_VALUES)).map(str.encode)
                      | mutations(json.dumps(valid).encode()) | st.binary(max_size=32))
    checked(decode_message(spec, "jsonl", value, "topic/0@7"), spec.row_type)


@settings(FUZZ, max_examples=200)
@given(spec=st.sampled_from(SPECS), data=st.data())
def test_protobuf_values_give_a_row_or_a_documented_dead_letter(spec, data):
    value = data.draw(mutations(message(spec, VALID_RECORDS[spec.name])) | st.binary(max_size=48))
    checked(decode_message(spec, "pb", value, "topic/0@7"), spec.row_type)


@settings(FUZZ, max_examples=300)
@given(spec=st.sampled_from(SPECS), data=st.data())
def test_avro_values_give_a_row_or_a_documented_dead_letter(spec, data):
    value = data.draw(avro_values(spec.avro_schema, VALID_RECORDS[spec.name]))
    checked(decode_message(spec, "avro", value, "topic/0@7", schema_id=data.draw(st.none() | st.just(42))), spec.row_type)


@settings(FUZZ, max_examples=200)
@given(value=avro_values("aggregatable_report", REPORT))
def test_report_messages_give_a_record_of_the_schema_or_a_dead_letter(value):
    item = decode_avro_message("aggregatable_report", value, "topic/0@7")
    if type(item) is not DeadLetter:
        assert set(item) == set(REPORT) and type(item["payload"]) is bytes and type(item["shared_info"]) is str
    else:
        checked(item, dict)
