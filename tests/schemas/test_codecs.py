"""Decoders of ``schemas/codecs.py``: every dead-letter reason of its docstring, round trips, ``format_of``."""
from __future__ import annotations

import base64
import gzip
import io
import json
from datetime import datetime

import fastavro
import pytest
from google.protobuf.internal.encoder import _VarintBytes

from schemas.codecs import (
    FORMATS,
    JOIN_EVENT,
    READERS,
    encode_delimited,
    event_spec,
    format_of,
    parse_json_line,
    read_avro,
    read_delimited_proto,
    read_jsonl,
    row_to_dict,
    validate,
)
from schemas.formats import load_avro_schema
from schemas.proto import events_pb2
from schemas.rows import DeadLetter, JoinEvent
from schemas.time_units import MAX_EVENT_TIME_MICROS

T = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds
GOOD = JoinEvent("https://dsp-1.example/ig/000001", "u0000001", T)
FIELD = "event_time_micros"


def record(**changes) -> dict:
    """The good join as a dict, with fields replaced (a value of ``...`` deletes the field)."""
    values = dict(GOOD._asdict(), **changes)
    return {name: value for name, value in values.items() if value is not ...}


def jsonl_bytes(lines: list[str | bytes]) -> bytes:
    return b"".join((line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n" for line in lines)


def read(reader, data: bytes, source: str = "in.file") -> list:
    return list(reader(JOIN_EVENT, io.BytesIO(data), source))


# --------------------------------------------------------------------------- JSON Lines


JSON_CASES = [
    # (line, reason)
    ('{"interest_group": "g", "user_id": ', "malformed_json"),
    ("not json at all", "malformed_json"),
    ('{"interest_group": "g",}', "malformed_json"),
    ("[1, 2, 3]", "not_an_object"),
    ('"a string"', "not_an_object"),
    ("42", "not_an_object"),
    ("null", "not_an_object"),
    (json.dumps(record(interest_group=...)), "missing_field:interest_group"),
    (json.dumps(record(user_id=...)), "missing_field:user_id"),
    (json.dumps(record(event_time_micros=...)), f"missing_field:{FIELD}"),
    (json.dumps(record(event_time_micros=None)), f"missing_field:{FIELD}"),
    ("{}", "missing_field:interest_group"),
    (json.dumps(record(interest_group="")), "empty_field:interest_group"),
    (json.dumps(record(user_id="")), "empty_field:user_id"),
    (json.dumps(record(user_id=" \t ")), "empty_field:user_id"),
    (json.dumps(record(interest_group="\n")), "empty_field:interest_group"),
    (json.dumps(record(user_id=1234567)), "wrong_type:user_id"),
    (json.dumps(record(user_id=["u"])), "wrong_type:user_id"),
    (json.dumps(record(interest_group={"id": "g"})), "wrong_type:interest_group"),
    (json.dumps(record(event_time_micros=str(T))), f"wrong_type:{FIELD}"),
    (json.dumps(record(event_time_micros=True)), f"wrong_type:{FIELD}"),
    (json.dumps(record(event_time_micros=False)), f"wrong_type:{FIELD}"),
    (json.dumps(record(event_time_micros=float(T))), f"wrong_type:{FIELD}"),
    (json.dumps(record(event_time_micros=1.5)), f"wrong_type:{FIELD}"),
    ('{"interest_group": "g", "user_id": "u", "event_time_micros": 1e6}', f"wrong_type:{FIELD}"),
    ('{"interest_group": "g", "user_id": "u", "event_time_micros": NaN}', f"wrong_type:{FIELD}"),
    (json.dumps(record(event_time_micros=-1)), f"negative_timestamp:{FIELD}"),
    (json.dumps(record(event_time_micros=-T)), f"negative_timestamp:{FIELD}"),
    (json.dumps(record(event_time_micros=MAX_EVENT_TIME_MICROS)), f"absurd_timestamp:{FIELD}"),
    (json.dumps(record(event_time_micros=T * 1000)), f"absurd_timestamp:{FIELD}"),  # nanoseconds by mistake
]


@pytest.mark.parametrize("line, reason", JSON_CASES)
def test_json_line_dead_letters(line, reason):
    """Each bad JSON line is one dead letter with its reason, the line itself as raw text, and the source given."""
    parsed = parse_json_line(JOIN_EVENT, line, "f.jsonl:7")
    assert parsed == DeadLetter(raw=line, reason=reason, source="f.jsonl:7")


def test_jsonl_file_reports_every_bad_line_with_its_line_number():
    """In a file, a dead letter names the file and the 1-based line; blank lines are skipped; good lines decode."""
    lines = [
        json.dumps(record()),
        "",
        "   ",
        "{broken",
        b"\xff\xfe not utf-8",
        json.dumps(record(user_id="")),
        json.dumps(record(event_time_micros=T + 1)) + "\r",  # CRLF line ending
    ]
    out = read(read_jsonl, jsonl_bytes(lines), "dir/joins.jsonl")
    assert out == [
        GOOD,
        DeadLetter(raw="{broken", reason="malformed_json", source="dir/joins.jsonl:4"),
        DeadLetter(
            raw=base64.b64encode(b"\xff\xfe not utf-8").decode(), reason="malformed_json", source="dir/joins.jsonl:5"
        ),
        DeadLetter(raw=json.dumps(record(user_id="")), reason="empty_field:user_id", source="dir/joins.jsonl:6"),
        GOOD._replace(event_time_micros=T + 1),
    ]


def test_jsonl_last_line_without_newline_and_extra_fields():
    """The last line needs no newline; fields the event does not have are ignored."""
    data = (json.dumps(record()) + "\n" + json.dumps(record(extra="x", user_id="u2"))).encode()
    assert read(read_jsonl, data) == [GOOD, GOOD._replace(user_id="u2")]


def test_json_boundary_timestamps_are_valid():
    """0 (the epoch) and the last microsecond before 2100 are valid; MAX is the first absurd one."""
    for t in (0, MAX_EVENT_TIME_MICROS - 1):
        assert parse_json_line(JOIN_EVENT, json.dumps(record(event_time_micros=t)), "s") == GOOD._replace(event_time_micros=t)


def test_json_huge_integer_is_a_dead_letter_not_a_crash():
    """An integer literal too long for Python's int parser is a dead letter (malformed_json)."""
    line = '{"interest_group": "g", "user_id": "u", "event_time_micros": ' + "9" * 5000 + "}"
    assert parse_json_line(JOIN_EVENT, line, "s").reason == "malformed_json"


def test_deeply_nested_json_is_a_dead_letter():
    """A pathologically nested line is one malformed_json dead letter, not an exception."""
    line = "[" * 100_000 + "]" * 100_000
    assert parse_json_line(JOIN_EVENT, line, "s") == DeadLetter(raw=line, reason="malformed_json", source="s")


def test_lone_surrogate_in_a_json_string_is_a_dead_letter():
    """A JSON string that is not valid Unicode text (an escaped lone surrogate) cannot become a row."""
    line = '{"interest_group": "g\\ud800", "user_id": "u", "event_time_micros": 1}'
    assert isinstance(parse_json_line(JOIN_EVENT, line, "s"), DeadLetter)


# --------------------------------------------------------------------------- Avro

LOOSE_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": "LooseJoin",
    "fields": [
        {"name": "interest_group", "type": ["null", "string", "long"]},
        {"name": "user_id", "type": ["null", "string", "long", "bytes"]},
        {"name": "event_time_micros", "type": ["null", "string", "long", "double", "boolean"]},
    ],
})

AVRO_CASES = [
    # (record written with LOOSE_SCHEMA, reason or None for valid)
    (record(), None),
    (record(interest_group=None), "missing_field:interest_group"),
    (record(user_id=None), "missing_field:user_id"),
    (record(event_time_micros=None), f"missing_field:{FIELD}"),
    (record(interest_group=""), "empty_field:interest_group"),
    (record(user_id="  "), "empty_field:user_id"),
    (record(interest_group=17), "wrong_type:interest_group"),
    (record(user_id=1234567), "wrong_type:user_id"),
    (record(user_id=b"u0000001"), "wrong_type:user_id"),
    (record(event_time_micros=str(T)), f"wrong_type:{FIELD}"),
    (record(event_time_micros=float(T)), f"wrong_type:{FIELD}"),
    (record(event_time_micros=True), f"wrong_type:{FIELD}"),
    (record(event_time_micros=-5), f"negative_timestamp:{FIELD}"),
    (record(event_time_micros=MAX_EVENT_TIME_MICROS + 1), f"absurd_timestamp:{FIELD}"),
]


def avro_bytes(schema, records, **options) -> bytes:
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, records, **options)
    return buffer.getvalue()


def test_avro_records_of_a_loose_writer_schema_give_each_reason():
    """Fields are read by name whatever the writer schema: unions with null and wrong types give precise reasons."""
    out = read(read_avro, avro_bytes(LOOSE_SCHEMA, [r for r, _ in AVRO_CASES]), "in/joins.avro")
    assert len(out) == len(AVRO_CASES)
    for index, ((written, reason), parsed) in enumerate(zip(AVRO_CASES, out, strict=True)):
        if reason is None:
            assert parsed == JoinEvent(**written)
            continue
        assert type(parsed) is DeadLetter, written
        assert parsed.reason == reason
        assert parsed.source == f"in/joins.avro#{index}"
        raw = json.loads(parsed.raw)  # raw text is the record as JSON (bytes as base64)
        expected = {k: (base64.b64encode(v).decode() if isinstance(v, bytes) else v) for k, v in written.items()}
        assert raw == expected


def test_avro_writer_schema_without_a_field():
    """A writer schema lacking a field gives missing_field for it."""
    schema = fastavro.parse_schema({
        "type": "record", "name": "Partial",
        "fields": [{"name": "interest_group", "type": "string"}, {"name": "event_time_micros", "type": "long"}],
    })
    out = read(read_avro, avro_bytes(schema, [{"interest_group": "g", "event_time_micros": T}]), "p.avro")
    assert out == [DeadLetter(raw=json.dumps({"interest_group": "g", "event_time_micros": T}),
                              reason="missing_field:user_id", source="p.avro#0")]


def test_avro_non_record_schema_gives_not_an_object():
    """A file of plain strings is read, and each value is not_an_object."""
    out = read(read_avro, avro_bytes("string", ["a", "b"]), "s.avro")
    assert [(d.reason, d.raw, d.source) for d in out] == [
        ("not_an_object", '"a"', "s.avro#0"), ("not_an_object", '"b"', "s.avro#1")]


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_avro_round_trip_with_the_shipped_schema(codec):
    """Rows written with schemas/avro/join_event.avsc come back as the same JoinEvents."""
    rows = [GOOD, GOOD._replace(user_id="u2", event_time_micros=0), GOOD._replace(interest_group="é/ü")]
    data = avro_bytes(load_avro_schema("join_event"), [row_to_dict(r) for r in rows], codec=codec)
    assert read(read_avro, data) == rows


def _good_avro_file(records: int = 300) -> bytes:
    rows = [row_to_dict(GOOD._replace(user_id=f"u{i:07d}")) for i in range(records)]
    return avro_bytes(load_avro_schema("join_event"), rows, codec="deflate", sync_interval=200)


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1:],
                     id="flipped-byte"),
        pytest.param(lambda data: b"Obj\x01garbage" + data[20:], id="bad-header"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(lambda data: b"this is not avro", id="not-avro"),
    ],
)
def test_corrupt_avro_ends_with_one_malformed_avro_dead_letter(corrupt):
    """Good records before the damage decode; the damage is one final malformed_avro letter naming the file."""
    data = corrupt(_good_avro_file())
    out = read(read_avro, data, "bad.avro")
    assert out, "a corrupt file is never silently empty"
    *good, last = out
    assert all(type(row) is JoinEvent for row in good)
    assert len(good) < 300
    assert type(last) is DeadLetter and last.reason == "malformed_avro"
    assert last.raw  # the error text
    assert last.source.startswith("bad.avro")
    assert sum(1 for row in out if type(row) is DeadLetter) == 1


def test_malformed_avro_dead_letter_names_the_position():
    """Like every other dead letter, a corrupt-block letter says where in the file reading stopped."""
    data = _good_avro_file()
    out = read(read_avro, data[: len(data) // 2], "bad.avro")
    letter = out[-1]
    assert letter.reason == "malformed_avro"
    assert letter.source.startswith("bad.avro") and letter.source != "bad.avro"


# --------------------------------------------------------------------------- protobuf


def delimited(**fields) -> bytes:
    return encode_delimited(events_pb2.JoinEvent(**fields))


def test_delimited_proto_dead_letters_and_positions():
    """Each message is judged on its own; the source is file@byte-offset of its length prefix; raw is base64."""
    parts = [
        delimited(**record()),
        delimited(interest_group=GOOD.interest_group, user_id=GOOD.user_id),  # unset optional timestamp
        delimited(**record(interest_group="")),
        delimited(**record(user_id="")),
        delimited(**record(user_id=" ")),
        delimited(**record(event_time_micros=-1)),
        delimited(**record(event_time_micros=MAX_EVENT_TIME_MICROS)),
        _VarintBytes(4) + b"\x0a\x64ab",  # field 1 claims 100 bytes: garbage, but length-prefixed
        _VarintBytes(4) + b"\x0a\x02\xc3\x28",  # a string field that is not UTF-8
        delimited(**record(event_time_micros=0)),
        _VarintBytes(0),  # an empty message: proto3 cannot tell an empty string from a missing one
    ]
    data = b"".join(parts)
    offsets = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    out = read(read_delimited_proto, data, "j.pb")
    payload = lambda i: base64.b64encode(parts[i][1:]).decode()  # every prefix here is one byte  # noqa: E731
    assert out == [
        GOOD,
        DeadLetter(payload(1), f"missing_field:{FIELD}", f"j.pb@{offsets[1]}"),
        DeadLetter(payload(2), "empty_field:interest_group", f"j.pb@{offsets[2]}"),
        DeadLetter(payload(3), "empty_field:user_id", f"j.pb@{offsets[3]}"),
        DeadLetter(payload(4), "empty_field:user_id", f"j.pb@{offsets[4]}"),
        DeadLetter(payload(5), f"negative_timestamp:{FIELD}", f"j.pb@{offsets[5]}"),
        DeadLetter(payload(6), f"absurd_timestamp:{FIELD}", f"j.pb@{offsets[6]}"),
        DeadLetter(payload(7), "malformed_protobuf", f"j.pb@{offsets[7]}"),
        DeadLetter(payload(8), "malformed_protobuf", f"j.pb@{offsets[8]}"),
        GOOD._replace(event_time_micros=0),
        DeadLetter("", "empty_field:interest_group", f"j.pb@{offsets[10]}"),
    ]


def test_delimited_proto_truncated_length_is_one_final_dead_letter():
    """A length running past the end of the file is one truncated_protobuf letter with the rest of the file."""
    good = delimited(**record())
    tail = _VarintBytes(50) + b"only a few bytes"
    out = read(read_delimited_proto, good + tail, "t.pb")
    assert out == [GOOD, DeadLetter(base64.b64encode(tail).decode(), "truncated_protobuf", f"t.pb@{len(good)}")]


def test_delimited_proto_garbage_and_unterminated_varint():
    """Random garbage and a length prefix cut in the middle of its varint never raise."""
    assert read(read_delimited_proto, b"\xff" * 12, "g.pb") == [
        DeadLetter(base64.b64encode(b"\xff" * 12).decode(), "truncated_protobuf", "g.pb@0")]
    good = delimited(**record())
    out = read(read_delimited_proto, good + b"\x80", "g.pb")  # continuation bit set, no next byte
    assert out == [GOOD, DeadLetter(base64.b64encode(b"\x80").decode(), "truncated_protobuf", f"g.pb@{len(good)}")]
    assert read(read_delimited_proto, b"", "e.pb") == []


def test_delimited_proto_round_trip():
    """encode_delimited and read_delimited_proto are inverse on valid rows."""
    rows = [GOOD, GOOD._replace(user_id="ü" * 200, event_time_micros=MAX_EVENT_TIME_MICROS - 1)]  # 2-byte prefix
    data = b"".join(encode_delimited(events_pb2.JoinEvent(**row_to_dict(r))) for r in rows)
    assert read(read_delimited_proto, data) == rows


def test_records_longer_than_the_bound_are_dead_letters_and_reading_goes_on():
    """A JSON line or a protobuf message of more than MAX_RECORD_BYTES is one ``oversized_record`` dead letter
    keeping only its first bytes; the records after it are read. A gzip file whose one line expands to 64 MiB is
    read in bounded chunks (the line is never held whole)."""
    from schemas.codecs import MAX_RECORD_BYTES, OVERSIZED_RAW_BYTES

    long_line = "x" * (MAX_RECORD_BYTES + 1)
    out = read(read_jsonl, jsonl_bytes([json.dumps(record()), long_line, json.dumps(record())]), "l.jsonl")
    assert out == [GOOD, DeadLetter("", "oversized_record", "l.jsonl:2"), GOOD]
    bomb = gzip.compress(b"{" + b" " * (64 << 20))
    with gzip.open(io.BytesIO(bomb)) as handle:
        assert list(read_jsonl(JOIN_EVENT, handle, "b.jsonl.gz")) == [DeadLetter("", "oversized_record", "b.jsonl.gz:1")]
    big = _VarintBytes(MAX_RECORD_BYTES + 1) + b"\x0a" * (MAX_RECORD_BYTES + 1)
    good = delimited(**record())
    out = read(read_delimited_proto, good + big + good, "o.pb")
    prefix = base64.b64encode(big[:OVERSIZED_RAW_BYTES]).decode()
    assert out == [GOOD, DeadLetter(prefix, "oversized_record", f"o.pb@{len(good)}"), GOOD]
    endless = _VarintBytes(1 << 40) + b"\x00" * 100  # a length past the end of the file: the file is broken
    assert read(read_delimited_proto, endless, "e.pb") == [
        DeadLetter(base64.b64encode(endless[:OVERSIZED_RAW_BYTES]).decode(), "truncated_protobuf", "e.pb@0")]


# --------------------------------------------------------------------------- all formats


def test_every_documented_reason_is_produced():
    """The reasons of the module docstring are exactly those the readers produce on the inputs above."""
    import schemas.codecs as codecs

    documented = {"malformed_json", "malformed_avro", "malformed_protobuf", "not_an_object"}
    documented |= {f"{kind}:{name}" for kind in ("missing_field", "empty_field", "wrong_type")
                   for name in JoinEvent._fields}
    documented |= {f"{kind}:{FIELD}" for kind in ("negative_timestamp", "absurd_timestamp")}
    for reason in ("malformed_json", "malformed_avro", "malformed_protobuf", "not_an_object", "missing_field:<name>",
                   "empty_field:<name>", "wrong_type:<name>", "negative_timestamp:<name>", "absurd_timestamp:<name>"):
        assert f"``{reason}``" in codecs.__doc__
    produced = {reason for _, reason in JSON_CASES} | {reason for _, reason in AVRO_CASES if reason}
    produced.add("malformed_avro")  # test_corrupt_avro_ends_with_one_malformed_avro_dead_letter
    produced.add("malformed_protobuf")  # test_delimited_proto_dead_letters_and_positions
    # wrong_type of a timestamp field only: event_time_micros cannot be empty
    assert produced >= documented - {f"empty_field:{FIELD}"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_valid_rows_round_trip_in_every_format(fmt):
    """Good rows written in each format decode to equal JoinEvents, through READERS[format]."""
    rows = [GOOD, JoinEvent("g2", "u2", 0), JoinEvent("g3", "ü", MAX_EVENT_TIME_MICROS - 1)]
    if fmt == "jsonl":
        data = jsonl_bytes([json.dumps(row_to_dict(r)) for r in rows])
    elif fmt == "avro":
        data = avro_bytes(load_avro_schema("join_event"), [row_to_dict(r) for r in rows])
    else:
        data = b"".join(encode_delimited(events_pb2.JoinEvent(**row_to_dict(r))) for r in rows)
    assert read(READERS[fmt], data) == rows


def test_validate_accepts_any_mapping_and_builds_the_row():
    """validate takes any Mapping, and the row has the fields in the spec's order."""
    from types import MappingProxyType

    assert validate(JOIN_EVENT, MappingProxyType(record())) == GOOD
    assert validate(JOIN_EVENT, ["not", "a", "mapping"]) == "not_an_object"
    assert event_spec("join_event") is JOIN_EVENT


# --------------------------------------------------------------------------- format_of


@pytest.mark.parametrize(
    "path, fmt",
    [
        ("a.avro", "avro"), ("dir/x.AVRO", "avro"), ("gs://b/joins-00000-of-00002.avro", "avro"),
        ("a.jsonl", "jsonl"), ("a.json", "jsonl"), ("a.ndjson", "jsonl"), ("a.JSONL", "jsonl"),
        ("a.pb", "pb"), ("a.binpb", "pb"),
        ("a.jsonl.gz", "jsonl"), ("a.json.bz2", "jsonl"), ("a.pb.deflate", "pb"), ("a.ndjson.zst", "jsonl"),
        ("a.avro.gz", "avro"), ("a.PB.GZ", "pb"),
    ],
)
def test_format_of_by_extension(path, fmt):
    """The format follows the extension, case-insensitively, under one compression suffix."""
    assert format_of(path) == fmt


@pytest.mark.parametrize("override", FORMATS)
def test_format_of_override_wins(override):
    """An explicit format is used whatever the name says, even with no known extension."""
    assert format_of("whatever.txt", override) == override
    assert format_of("a.avro", override) == override


@pytest.mark.parametrize("path", ["a.txt", "noextension", "a.gz", "a.csv.gz", "a.jsonl.txt", "avro", "a.avro.tar"])
def test_format_of_unknown_extension_is_an_error_naming_the_formats(path):
    """An unknown extension is a ValueError that names the path and tells to pass a format."""
    with pytest.raises(ValueError) as error:
        format_of(path)
    assert repr(path) in str(error.value)
    assert all(fmt in str(error.value) for fmt in FORMATS)


def test_format_of_unknown_override_is_an_error():
    """An override that is not a known format is a ValueError listing the known ones."""
    with pytest.raises(ValueError, match="unknown format 'csv'.*avro, jsonl, pb"):
        format_of("a.avro", "csv")


def test_unrolled_fast_path_agrees_with_the_generic_checks():
    """The spec's ``accept`` shortcut gives the same row or reason as the field-by-field loop on every case here."""
    import dataclasses

    generic = dataclasses.replace(JOIN_EVENT, accept=None)
    records = [json.loads(line) for line, reason in JSON_CASES if reason != "malformed_json"]
    records += [r for r, _ in AVRO_CASES] + [record(), record(event_time_micros=0), record(extra=1)]
    for value in records:
        assert validate(JOIN_EVENT, value) == validate(generic, value), value


def test_avro_timestamp_logical_types_are_read_as_exact_microseconds():
    """Avro files whose time field is a ``timestamp-micros`` or ``timestamp-millis`` logical type (decoded by
    fastavro to aware datetimes) give the same integer microseconds as a plain long."""
    for logical, stored in (("timestamp-micros", 1_767_571_200_123_456), ("timestamp-millis", 1_767_571_200_123)):
        schema = fastavro.parse_schema({
            "type": "record",
            "name": "J",
            "fields": [
                {"name": "interest_group", "type": "string"},
                {"name": "user_id", "type": "string"},
                {"name": "event_time_micros", "type": {"type": "long", "logicalType": logical}},
            ],
        })
        buffer = io.BytesIO()
        fastavro.writer(buffer, schema, [{"interest_group": "g", "user_id": "u", "event_time_micros": stored}])
        buffer.seek(0)
        (row,) = list(read_avro(JOIN_EVENT, buffer, "t.avro"))
        expected = stored if logical == "timestamp-micros" else stored * 1000
        assert row == JoinEvent("g", "u", expected)


def test_a_byte_order_mark_before_the_first_json_line_is_ignored():
    line = '{"interest_group": "g", "user_id": "u", "event_time_micros": 5}\n'
    rows = list(read_jsonl(JOIN_EVENT, io.BytesIO(b"\xef\xbb\xbf" + line.encode() * 2), "bom.jsonl"))
    assert rows == [JoinEvent("g", "u", 5), JoinEvent("g", "u", 5)]


def test_a_naive_datetime_timestamp_is_the_wrong_type():
    record = {"interest_group": "g", "user_id": "u", "event_time_micros": datetime(2026, 1, 1)}
    assert validate(JOIN_EVENT, record) == "wrong_type:event_time_micros"


# --------------------------------------------------------------------------- impressions and conversions (Cookie Monster paper)

from schemas.codecs import CONVERSION, IMPRESSION  # noqa: E402
from schemas.rows import ATTRIBUTION_LOGICS, MAX_DIMENSION, NORMS, AttributionRequest, Conversion, Impression  # noqa: E402

IMPRESSION_ROW = Impression("dev-1", T, "imp-1", "nytimes.com", "nike.com", "a1", "shoe", ("mobile", "eu"))
REQUEST_ROW = AttributionRequest(
    window_days=None, first_epoch=2918, last_epoch=2921, campaign_ids=("a1", "a2"), product_id="shoe",
    filter_keys=("mobile",), logic="last_n", last_n=2, dimension=2, requested_epsilon=0.5,
    report_global_sensitivity=70.0, query_global_sensitivity=100.0, norm="L2", query_key="shoes-by-campaign",
)
CONVERSION_ROW = Conversion("dev-1", T + 5, "conv-1", "nike.com", "nike.com", 70.0, "shoe", REQUEST_ROW)
IMPRESSIONS = [
    IMPRESSION_ROW,
    Impression("dev-2", 0, "imp-2", "", "adidas.com", "", "", ()),  # optional fields empty
    Impression("dév-3", MAX_EVENT_TIME_MICROS - 1, "imp-3", "blog.example", "nike.com", "a2", "sock", ("ü",)),
]
CONVERSIONS = [
    CONVERSION_ROW,
    Conversion("dev-2", 0, "conv-2", "nike.com", "meta.com", 0.0, "sock", REQUEST_ROW._replace(
        window_days=30, first_epoch=None, last_epoch=None, campaign_ids=(), product_id="sock", filter_keys=(),
        logic="last_touch", last_n=1, dimension=1, requested_epsilon=None, norm="L1", query_key="product=sock",
        report_global_sensitivity=5.0, query_global_sensitivity=5.0)),
]


def without_none(mapping: dict) -> dict:
    """A dict for protobuf constructors: unset (None) fields left out, nested dicts likewise."""
    return {k: without_none(v) if isinstance(v, dict) else v for k, v in mapping.items() if v is not None}


def event_bytes(fmt: str, spec, rows: list) -> bytes:
    dicts = [row_to_dict(r) for r in rows]
    if fmt == "jsonl":
        return jsonl_bytes([json.dumps(d) for d in dicts])
    if fmt == "avro":
        return avro_bytes(load_avro_schema(spec.name), dicts)
    return b"".join(encode_delimited(spec.proto_type(**without_none(d))) for d in dicts)


def read_events(fmt: str, spec, data: bytes, source: str = "in.file") -> list:
    return list(READERS[fmt](spec, io.BytesIO(data), source))


@pytest.mark.parametrize("fmt", FORMATS)
def test_impressions_round_trip_in_every_format(fmt):
    assert read_events(fmt, IMPRESSION, event_bytes(fmt, IMPRESSION, IMPRESSIONS)) == IMPRESSIONS


@pytest.mark.parametrize("fmt", FORMATS)
def test_conversions_round_trip_in_every_format(fmt):
    out = read_events(fmt, CONVERSION, event_bytes(fmt, CONVERSION, CONVERSIONS))
    assert out == CONVERSIONS
    assert all(type(row) is Conversion and type(row.attribution_request) is AttributionRequest for row in out)


def conversion_record(value=..., **request_changes) -> dict:
    """The good conversion as a JSON-ready dict; request fields replaced (``...`` deletes one)."""
    record = row_to_dict(CONVERSION_ROW)
    if value is not ...:
        record["value"] = value
    request = dict(record["attribution_request"], **request_changes)
    record["attribution_request"] = {k: v for k, v in request.items() if v is not ...}
    return record


def with_fields(**changes) -> dict:
    record = row_to_dict(CONVERSION_ROW)
    record.update(changes)
    return {k: v for k, v in record.items() if v is not ...}


CONVERSION_CASES = [
    # (record, reason)
    (conversion_record(value=-1.0), "negative_value:value"),
    (conversion_record(value=-1e-300), "negative_value:value"),
    (conversion_record(value=float("nan")), "non_finite:value"),
    (conversion_record(value=float("inf")), "non_finite:value"),
    (conversion_record(value=10**400), "non_finite:value"),
    (conversion_record(value="70"), "wrong_type:value"),
    (conversion_record(value=True), "wrong_type:value"),
    (with_fields(value=...), "missing_field:value"),
    (conversion_record(logic="linear"), "unknown_logic"),
    (conversion_record(logic="LAST_TOUCH"), "unknown_logic"),
    (conversion_record(logic=3), "wrong_type:logic"),
    (conversion_record(norm="Linf"), "unknown_norm"),
    (conversion_record(norm="l1"), "unknown_norm"),
    (conversion_record(requested_epsilon=0.0), "nonpositive:requested_epsilon"),
    (conversion_record(requested_epsilon=-0.5), "nonpositive:requested_epsilon"),
    (conversion_record(requested_epsilon=float("nan")), "non_finite:requested_epsilon"),
    (conversion_record(requested_epsilon="0.5"), "wrong_type:requested_epsilon"),
    (conversion_record(report_global_sensitivity=0.0), "nonpositive:report_global_sensitivity"),
    (conversion_record(report_global_sensitivity=-70.0), "nonpositive:report_global_sensitivity"),
    (conversion_record(query_global_sensitivity=0, report_global_sensitivity=0), "nonpositive:report_global_sensitivity"),
    (conversion_record(query_global_sensitivity=0.0), "nonpositive:query_global_sensitivity"),
    (conversion_record(report_global_sensitivity=...), "missing_field:report_global_sensitivity"),
    (conversion_record(query_global_sensitivity=...), "missing_field:query_global_sensitivity"),
    (conversion_record(query_global_sensitivity=float("inf")), "non_finite:query_global_sensitivity"),
    (conversion_record(report_global_sensitivity=100.5), "report_sensitivity_above_query"),
    (conversion_record(dimension=0), "dimension_out_of_range"),
    (conversion_record(dimension=-2), "dimension_out_of_range"),
    (conversion_record(dimension=MAX_DIMENSION + 1), "dimension_out_of_range"),
    (conversion_record(dimension=1), "dimension_out_of_range"),  # fewer buckets than the 2 campaigns listed
    (conversion_record(dimension=..., campaign_ids=["a1", "a2"]), "dimension_out_of_range"),  # default m = 1 < 2
    (conversion_record(dimension=2.0), "wrong_type:dimension"),
    (conversion_record(dimension=True), "wrong_type:dimension"),
    (conversion_record(last_epoch=...), "incomplete_epochs"),
    (conversion_record(first_epoch=...), "incomplete_epochs"),
    (conversion_record(first_epoch=None), "incomplete_epochs"),
    (conversion_record(first_epoch=2922, last_epoch=2921), "reversed_epochs"),
    (conversion_record(first_epoch="2918"), "wrong_type:first_epoch"),
    (conversion_record(last_epoch=2921.0), "wrong_type:last_epoch"),
    (conversion_record(window_days=0), "nonpositive:window_days"),
    (conversion_record(window_days=-30), "nonpositive:window_days"),
    (conversion_record(window_days="30"), "wrong_type:window_days"),
    (conversion_record(last_n=0), "nonpositive:last_n"),
    (conversion_record(last_n=...), "missing_field:last_n"),  # logic last_n needs n
    (conversion_record(last_n=None), "missing_field:last_n"),
    (conversion_record(campaign_ids="a1"), "wrong_type:campaign_ids"),
    (conversion_record(campaign_ids=["a1", ""]), "empty_field:campaign_ids"),
    (conversion_record(campaign_ids=["a1", 2]), "wrong_type:campaign_ids"),
    (conversion_record(filter_keys=[" "]), "empty_field:filter_keys"),
    (conversion_record(filter_keys={"k": 1}), "wrong_type:filter_keys"),
    (conversion_record(impression_sites="nytimes.com"), "wrong_type:impression_sites"),
    (conversion_record(impression_callers=[""]), "empty_field:impression_callers"),
    (conversion_record(query_key=7), "wrong_type:query_key"),
    (conversion_record(product_id=["shoe"]), "wrong_type:product_id"),
    (with_fields(device_id=...), "missing_field:device_id"),
    (with_fields(device_id=None), "missing_field:device_id"),
    (with_fields(device_id=""), "empty_field:device_id"),
    (with_fields(device_id=12345), "wrong_type:device_id"),
    (with_fields(conversion_id=...), "missing_field:conversion_id"),
    (with_fields(advertiser_site=" "), "empty_field:advertiser_site"),
    (with_fields(querier_site=...), "missing_field:querier_site"),
    (with_fields(event_time_micros=-1), "negative_timestamp:event_time_micros"),
    (with_fields(event_time_micros=MAX_EVENT_TIME_MICROS), "absurd_timestamp:event_time_micros"),
    (with_fields(event_time_micros=1.5), "wrong_type:event_time_micros"),
    (with_fields(product_id=5), "wrong_type:product_id"),
    (with_fields(attribution_request=...), "missing_field:attribution_request"),
    (with_fields(attribution_request=None), "missing_field:attribution_request"),
    (with_fields(attribution_request="last_touch"), "wrong_type:attribution_request"),
    (with_fields(attribution_request=[1, 2]), "wrong_type:attribution_request"),
]


@pytest.mark.parametrize("record, reason", CONVERSION_CASES)
def test_conversion_dead_letter_reasons(record, reason):
    assert validate(CONVERSION, record) == reason


def test_every_documented_conversion_reason_is_produced():
    import schemas.codecs as codecs

    produced = {reason for _, reason in CONVERSION_CASES}
    for reason in ("negative_value:<name>", "non_finite:<name>", "nonpositive:<name>",
                   "report_sensitivity_above_query", "unknown_logic", "unknown_norm", "dimension_out_of_range",
                   "incomplete_epochs", "reversed_epochs"):
        assert f"``{reason}``" in codecs.__doc__
        prefix = reason.split("<")[0]
        assert any(p == reason or (prefix.endswith(":") and p.startswith(prefix)) for p in produced), reason
    for name in ("requested_epsilon", "report_global_sensitivity", "query_global_sensitivity", "window_days", "last_n"):
        assert f"nonpositive:{name}" in produced  # "(epsilon, sensitivities, window, n)"


@pytest.mark.parametrize(
    "text, reason",
    [
        ('"value": NaN', "non_finite:value"),
        ('"value": Infinity', "non_finite:value"),
        ('"value": -Infinity', "non_finite:value"),
        ('"value": 1e400', "non_finite:value"),  # parses to inf
        ('"value": -70', "negative_value:value"),
    ],
)
def test_conversion_json_non_finite_and_negative_values(text, reason):
    record = row_to_dict(CONVERSION_ROW)
    record["value"] = "PLACEHOLDER"
    line = json.dumps(record).replace('"value": "PLACEHOLDER"', text)
    assert parse_json_line(CONVERSION, line, "c.jsonl:1") == DeadLetter(line, reason, "c.jsonl:1")


def test_conversion_bounds_that_are_valid():
    ok = [
        conversion_record(dimension=MAX_DIMENSION),
        conversion_record(dimension=2, campaign_ids=["a1", "a2"]),
        conversion_record(report_global_sensitivity=100.0),  # equal to the query sensitivity
        conversion_record(first_epoch=2921, last_epoch=2921),
        conversion_record(first_epoch=-3, last_epoch=-1),  # negative epochs are just before the clock origin
        conversion_record(value=0),
        conversion_record(requested_epsilon=None),
        conversion_record(requested_epsilon=5),  # an int is a number
    ]
    for record in ok:
        assert type(validate(CONVERSION, record)) is Conversion, record
    assert validate(CONVERSION, conversion_record(requested_epsilon=5)).attribution_request.requested_epsilon == 5.0


MINIMAL_REQUEST = {"report_global_sensitivity": 10.0, "query_global_sensitivity": 20.0}


def minimal_conversion(**request) -> dict:
    return {"device_id": "d", "event_time_micros": T, "conversion_id": "c", "advertiser_site": "nike.com",
            "querier_site": "nike.com", "value": 3.0, "product_id": "shoe",
            "attribution_request": dict(MINIMAL_REQUEST, **request)}


DEFAULTS = AttributionRequest(
    window_days=None, first_epoch=None, last_epoch=None, campaign_ids=(), product_id="shoe", filter_keys=(),
    logic="last_touch", last_n=1, dimension=1, requested_epsilon=None, report_global_sensitivity=10.0,
    query_global_sensitivity=20.0, norm="L1", query_key="product=shoe",
)


@pytest.mark.parametrize("fmt", FORMATS)
def test_request_defaults_in_every_format(fmt):
    """logic last_touch, n = 1, m = 1, norm L1, the conversion's product, query key product=<product>."""
    record = minimal_conversion()
    if fmt == "jsonl":
        data = jsonl_bytes([json.dumps(record)])
    elif fmt == "avro":  # the schema's defaults fill the fields left out
        data = avro_bytes(load_avro_schema("conversion"), [record])
    else:
        data = encode_delimited(events_pb2.Conversion(**record))
    (row,) = read_events(fmt, CONVERSION, data)
    assert row == Conversion("d", T, "c", "nike.com", "nike.com", 3.0, "shoe", DEFAULTS)


def test_request_defaults_follow_the_request_product_and_empty_strings():
    row = validate(CONVERSION, minimal_conversion(product_id="sock"))
    assert row.attribution_request.product_id == "sock" and row.attribution_request.query_key == "product=sock"
    row = validate(CONVERSION, minimal_conversion(logic="", norm="", query_key="", product_id=""))
    assert row.attribution_request == DEFAULTS  # empty strings (proto3 unset) mean the default
    row = validate(CONVERSION, minimal_conversion(logic="last_n", last_n=3, dimension=4, norm="L2", query_key="q"))
    assert row.attribution_request == DEFAULTS._replace(logic="last_n", last_n=3, dimension=4, norm="L2", query_key="q")
    assert set(ATTRIBUTION_LOGICS) == {"last_touch", "first_touch", "equal_credit", "last_n"} and NORMS == ("L1", "L2")


def test_conversion_dead_letters_in_avro_and_protobuf():
    """The shipped Avro schema and the proto can carry a negative or NaN value, a zero epsilon, an unknown logic."""
    bad = [
        (conversion_record(value=-5.0), "negative_value:value"),
        (conversion_record(value=float("nan")), "non_finite:value"),
        (conversion_record(requested_epsilon=0.0), "nonpositive:requested_epsilon"),
        (conversion_record(logic="linear"), "unknown_logic"),
        (conversion_record(first_epoch=None), "incomplete_epochs"),
    ]
    records = [row_to_dict(CONVERSION_ROW)] + [record for record, _ in bad]
    avro_out = read_events("avro", CONVERSION, avro_bytes(load_avro_schema("conversion"), records), "c.avro")
    pb_out = read_events("pb", CONVERSION,
                         b"".join(encode_delimited(events_pb2.Conversion(**without_none(r))) for r in records), "c.pb")
    for out, source in ((avro_out, "c.avro#"), (pb_out, "c.pb@")):
        assert out[0] == CONVERSION_ROW
        assert [letter.reason for letter in out[1:]] == [reason for _, reason in bad]
        assert all(type(letter) is DeadLetter and letter.source.startswith(source) for letter in out[1:])


def test_protobuf_conversion_without_a_value_or_request():
    message = events_pb2.Conversion(**without_none(with_fields(value=...)))
    assert validate(CONVERSION, {}) == "missing_field:device_id"
    (letter,) = read_events("pb", CONVERSION, encode_delimited(message))
    assert letter.reason == "missing_field:value"  # optional double: unset is not 0.0
    message = events_pb2.Conversion(**without_none(with_fields(attribution_request=...)))
    (letter,) = read_events("pb", CONVERSION, encode_delimited(message))
    assert letter.reason == "missing_field:attribution_request"


IMPRESSION_CASES = [
    (dict(row_to_dict(IMPRESSION_ROW), device_id=None), "missing_field:device_id"),
    (dict(row_to_dict(IMPRESSION_ROW), impression_id=""), "empty_field:impression_id"),
    (dict(row_to_dict(IMPRESSION_ROW), advertiser_site=7), "wrong_type:advertiser_site"),
    (dict(row_to_dict(IMPRESSION_ROW), event_time_micros=-3), "negative_timestamp:event_time_micros"),
    (dict(row_to_dict(IMPRESSION_ROW), publisher_site=5), "wrong_type:publisher_site"),
    (dict(row_to_dict(IMPRESSION_ROW), filter_keys="mobile"), "wrong_type:filter_keys"),
    (dict(row_to_dict(IMPRESSION_ROW), filter_keys=["mobile", ""]), "empty_field:filter_keys"),
    (dict(row_to_dict(IMPRESSION_ROW), campaign_id=["a1"]), "wrong_type:campaign_id"),
]


@pytest.mark.parametrize("record, reason", IMPRESSION_CASES)
def test_impression_dead_letter_reasons(record, reason):
    assert validate(IMPRESSION, record) == reason


def test_impression_optional_fields_default_to_empty():
    record = {"device_id": "d", "event_time_micros": 5, "impression_id": "i", "advertiser_site": "nike.com"}
    assert validate(IMPRESSION, record) == Impression("d", 5, "i", "", "nike.com", "", "", ())
    assert validate(IMPRESSION, dict(record, filter_keys=("a", "b"))).filter_keys == ("a", "b")  # tuple: generic path


def test_impression_fast_path_agrees_with_the_generic_checks_on_valid_and_invalid_records():
    import dataclasses

    generic = dataclasses.replace(IMPRESSION, accept=None)
    records = [row_to_dict(row) for row in IMPRESSIONS] + [record for record, _ in IMPRESSION_CASES]
    records += [dict(record, filter_keys=list(record["filter_keys"])) for record in records
                if isinstance(record["filter_keys"], tuple)]  # lists, as JSON and Avro decode them: the fast path
    for value in records:
        assert validate(IMPRESSION, value) == validate(generic, value), value


@pytest.mark.parametrize(
    "field, value",
    [("publisher_site", 0), ("campaign_id", False), ("product_id", []), ("filter_keys", ""), ("filter_keys", 0),
     ("filter_keys", {}), ("intermediary_site", 0), ("conversion_callers", ""), ("conversion_callers", {})],
)
def test_impression_fast_path_refuses_falsy_values_of_the_wrong_type(field, value):
    record = dict(row_to_dict(IMPRESSION_ROW), filter_keys=["mobile", "eu"])  # a list, as JSON decodes it
    record[field] = value
    assert validate(IMPRESSION, record) == f"wrong_type:{field}"


def test_conversion_fast_path_agrees_with_the_generic_checks():
    """The unrolled ``accept`` of conversions gives the same row or reason as the field-by-field path, on valid
    records and on each case crafted to fail, also with the request's values varied one at a time."""
    import dataclasses

    from tests.support.measurement_data import random_population

    generic = dataclasses.replace(CONVERSION, accept=None)
    records = [row_to_dict(row) for row in random_population(seed=9, devices=30)[1]]
    variants = []
    for record in records[:5]:
        request = record["attribution_request"]
        request = dict(request, campaign_ids=list(request["campaign_ids"]), filter_keys=list(request["filter_keys"]))
        for field, bad in [("logic", 0), ("logic", "other"), ("norm", "L3"), ("product_id", []), ("query_key", 5),
                           ("dimension", 0), ("last_n", 0), ("requested_epsilon", 0.0), ("requested_epsilon", 1),
                           ("report_global_sensitivity", 1e9), ("campaign_ids", ["", "a"]), ("filter_keys", [3]),
                           ("window_days", 0), ("first_epoch", 3), ("query_key", ""), ("product_id", ""),
                           ("last_n", True), ("last_n", None), ("last_n", 2), ("impression_sites", ["a.com"]),
                           ("impression_sites", "a.com"), ("impression_callers", ["b.com", ""]),
                           ("impression_callers", [1])]:
            variants.append(dict(record, attribution_request=dict(request, **{field: bad})))
        variants += [dict(record, value=-1.0), dict(record, value=float("nan")), dict(record, value=3),
                     dict(record, device_id=" "), dict(record, attribution_request=[])]
    for record in records + variants:
        assert validate(CONVERSION, record) == validate(generic, record), record


def test_conversions_as_written_take_the_fast_path():
    """A conversion as ``row_to_dict`` writes it and JSON decodes it (every field present, ``last_n`` 1 with any
    logic) is accepted by the unrolled check, not sent down the field-by-field path: a message source validates
    every record."""
    import json

    from tests.support.measurement_data import random_population

    rows = [row for row in random_population(seed=9, devices=30)[1] if row.attribution_request.first_epoch is None]
    assert {row.attribution_request.logic for row in rows} > {"last_n"}
    for row in rows:
        assert CONVERSION.accept(json.loads(json.dumps(row_to_dict(row)))) == row
