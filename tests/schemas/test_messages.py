"""One record per message: every encoding decodes to the same row, and every kind of bad message to its dead letter."""
from __future__ import annotations

import json
import struct

import pytest

from schemas.codecs import CONVERSION, JOIN_EVENT, row_to_dict
from schemas.messages import MessageEncoder, avro_single_object, confluent_wire, decode_message
from schemas.proto import events_pb2
from schemas.rows import DeadLetter, JoinEvent, KAnonVerdict

JOIN = JoinEvent("https://dsp.example/ig/1", "user-7", 1_767_571_316_440_797)
RECORD = row_to_dict(JOIN)


@pytest.mark.parametrize("fmt, value", [
    ("jsonl", json.dumps(RECORD).encode()),
    ("pb", events_pb2.JoinEvent(**RECORD).SerializeToString()),
    ("avro", avro_single_object("join_event", RECORD)),
    ("avro", confluent_wire("join_event", 42, RECORD)),
])
def test_every_encoding_gives_the_same_row(fmt, value):
    assert decode_message(JOIN_EVENT, fmt, value, "t/0@1") == JOIN


def test_a_confluent_message_must_carry_the_expected_schema_id_when_one_is_named():
    assert decode_message(JOIN_EVENT, "avro", confluent_wire("join_event", 42, RECORD), "t/0@1", 42) == JOIN
    dead = decode_message(JOIN_EVENT, "avro", confluent_wire("join_event", 41, RECORD), "t/0@1", 42)
    assert isinstance(dead, DeadLetter) and dead.reason == "unknown_schema"


@pytest.mark.parametrize("fmt, value, reason", [
    ("jsonl", b"{not json", "malformed_json"),
    ("jsonl", b"\xff\xfe", "malformed_json"),
    ("jsonl", b"[1, 2]", "not_an_object"),
    ("jsonl", json.dumps({**RECORD, "user_id": ""}).encode(), "empty_field:user_id"),
    ("pb", b"\x0a\xff", "malformed_protobuf"),
    ("avro", b"\x00\x00", "malformed_avro"),
    ("avro", b"plain bytes", "malformed_avro"),
    ("avro", avro_single_object("join_event", RECORD)[:12], "malformed_avro"),
    ("avro", avro_single_object("join_event", RECORD) + b"\x00", "malformed_avro"),
    ("avro", b"\xc3\x01" + struct.pack("<Q", 12345) + b"\x00", "unknown_schema"),
])
def test_bad_messages_are_dead_letters_with_their_reason(fmt, value, reason):
    dead = decode_message(JOIN_EVENT, fmt, value, "t/3@9")
    assert isinstance(dead, DeadLetter) and dead.reason == reason and dead.source == "t/3@9" and dead.raw


def test_a_conversion_with_its_nested_request_decodes_from_json():
    from tests.support.measurement_events import at, conversion

    expected = conversion(at(3), "c-1", 12.5)
    for fmt, value in (("jsonl", json.dumps(row_to_dict(expected)).encode()),
                       ("avro", avro_single_object("conversion", row_to_dict(expected)))):
        assert decode_message(CONVERSION, fmt, value, "t/0@0") == expected


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_outputs_encode_and_read_back(fmt):
    verdict = KAnonVerdict("https://dsp.example/ig/1", 491000, 491000 * 3_600_000_000, True, 490900)
    value = MessageEncoder(fmt, "kanon_verdict").encode(verdict)
    if fmt == "jsonl":
        assert json.loads(value) == row_to_dict(verdict)
    else:
        import io

        import fastavro

        from schemas.messages import _parsed_schema

        schema, header = _parsed_schema("kanon_verdict")
        assert value.startswith(header)
        assert fastavro.schemaless_reader(io.BytesIO(value[len(header):]), schema, None) == row_to_dict(verdict)
