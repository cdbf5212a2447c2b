"""Fuzzing the event file readers of ``schemas/codecs.py`` (Avro, JSON Lines, length-delimited protobuf) and the Avro
guards of ``schemas/avro_files.py``.

Property (DESIGN.md, "Rules that hold everywhere"): whatever the bytes, a reader yields record by record a valid row
of the event type or a ``DeadLetter`` with the raw input as text and a reason ``schemas.codecs`` documents, never
raises, and yields one item per record it can delimit; a reason that ends the file (``malformed_avro``,
``truncated_protobuf``) comes last. Inputs, for every event type: hostile records (fields replaced by NaN,
infinities, 2^70, blank or lone-surrogate text, bytes, nested values; removed; unknown ones added) in each format,
random bytes, mutations of valid files and of valid messages, and fixed cases: a recursive writer schema nesting
records 100,000 deep (which crashed the process before ``schemas.avro_files``), a schema nested past the bound, and
a deflate block that inflates past the bound.

Examples: 160 to 240 per test, about 4 s on one core (the folder: about 15 s, under 30 s).
"""
from __future__ import annotations

import bz2
import io
import json
import lzma
import tracemalloc
import zlib

import fastavro
import pytest
from google.protobuf.internal.encoder import _VarintBytes
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import avro_files, codecs
from schemas.codecs import read_avro, read_delimited_proto, read_jsonl
from schemas.rows import DeadLetter
from tests.support.hostile_inputs import (
    AVRO_VALUES,
    FUZZ,
    JSON_VALUES,
    SPECS,
    TEXT,
    VALID_RECORDS,
    avro_value,
    documented_reasons,
    encode,
    hostile_records,
    loose_schema,
    message,
    mutations,
)

REASONS = documented_reasons(codecs.__doc__)
FILE_ENDS = {"malformed_avro", "truncated_protobuf"}
spec_names = st.sampled_from(SPECS)


def checked(spec, items: list) -> list:
    """``items`` after checking each is a row of ``spec`` or a documented dead letter, a file-ending one last."""
    for position, item in enumerate(items):
        if type(item) is DeadLetter:
            assert REASONS.fullmatch(item.reason), item.reason
            assert type(item.raw) is str and type(item.source) is str
            assert item.reason not in FILE_ENDS or position == len(items) - 1
        else:
            assert type(item) is spec.row_type, item
    return items


def lines_in(data: bytes) -> int:
    """The records ``read_jsonl`` delimits in ``data``: its lines that are not UTF-8, or not blank."""
    count = 0
    for number, line in enumerate(io.BytesIO(data), start=1):
        try:
            count += bool(line.decode("utf-8-sig" if number == 1 else "utf-8").strip())
        except UnicodeDecodeError:
            count += 1
    return count


@st.composite
def json_lines(draw, spec) -> bytes:
    valid = VALID_RECORDS[spec.name]
    line = (st.builds(json.dumps, hostile_records(valid, JSON_VALUES)).map(str.encode)
            | mutations(encode("jsonl", spec, [valid]).rstrip(b"\n"))
            | TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")) | st.binary(max_size=32))
    return b"\n".join(draw(st.lists(line, min_size=1, max_size=4)))


@settings(FUZZ, max_examples=240)
@given(spec=spec_names, data=st.data())
def test_json_lines_give_a_row_or_a_documented_dead_letter_per_line(spec, data):
    blob = data.draw(json_lines(spec))
    items = checked(spec, list(read_jsonl(spec, io.BytesIO(blob), "in.jsonl")))
    assert len(items) == lines_in(blob)


@settings(FUZZ, max_examples=160)
@given(spec=spec_names, data=st.data())
def test_avro_records_of_any_writer_schema_give_a_row_or_a_dead_letter_each(spec, data):
    base = {name: avro_value(value) for name, value in VALID_RECORDS[spec.name].items()}
    records = data.draw(st.lists(hostile_records(base, AVRO_VALUES), min_size=1, max_size=3))
    out = io.BytesIO()
    fastavro.writer(out, loose_schema(spec.avro_schema, base), records)  # fields it does not name are left out
    items = checked(spec, list(read_avro(spec, io.BytesIO(out.getvalue()), "in.avro")))
    assert len(items) == len(records) and not any(type(i) is DeadLetter and i.reason in FILE_ENDS for i in items)


@settings(FUZZ, max_examples=200)
@given(spec=spec_names, data=st.data())
def test_random_and_mutated_avro_files_never_raise(spec, data):
    blob = data.draw(st.binary(max_size=64) | mutations(encode("avro", spec, [VALID_RECORDS[spec.name]] * 3)))
    checked(spec, list(read_avro(spec, io.BytesIO(blob), "in.avro")))


@settings(FUZZ, max_examples=200)
@given(spec=spec_names, data=st.data())
def test_random_and_mutated_protobuf_streams_never_raise(spec, data):
    blob = data.draw(st.binary(max_size=64) | mutations(encode("pb", spec, [VALID_RECORDS[spec.name]] * 3)))
    checked(spec, list(read_delimited_proto(spec, io.BytesIO(blob), "in.pb")))


@settings(FUZZ, max_examples=200)
@given(spec=spec_names, data=st.data())
def test_each_framed_protobuf_message_gives_a_row_or_a_dead_letter(spec, data):
    valid = message(spec, VALID_RECORDS[spec.name])
    bodies = data.draw(st.lists(st.binary(max_size=48) | mutations(valid), min_size=1, max_size=4))
    blob = b"".join(_VarintBytes(len(body)) + body for body in bodies)
    items = checked(spec, list(read_delimited_proto(spec, io.BytesIO(blob), "in.pb")))
    assert len(items) == len(bodies) and not any(type(i) is DeadLetter and i.reason in FILE_ENDS for i in items)


# ------------------------------------------------------------------------------------------------------------
# Fixed cases: writer schemas and blocks the guards of schemas/avro_files.py refuse
# ------------------------------------------------------------------------------------------------------------

JOIN = SPECS[0]
NODE = {"type": "record", "name": "Node", "fields": [{"name": "interest_group", "type": ["null", "Node"], "default": None}]}


def container(schema: dict, body: bytes, codec: str = "null", count: int = 1) -> bytes:
    """An Avro container file of ``schema`` holding one block of ``count`` records whose (encoded) bytes are
    ``body``: what a hostile writer can put in a block without fastavro's writer."""
    empty = io.BytesIO()
    fastavro.writer(empty, schema, [], codec=codec)
    header = empty.getvalue()
    sync = header[-16:]
    frame = io.BytesIO()
    encoder = fastavro.io.binary_encoder.BinaryEncoder(frame)
    encoder.write_long(count)
    encoder.write_long(len(body))
    encoder.flush()
    return header + frame.getvalue() + body + sync


def test_a_recursive_writer_schema_ends_the_file_before_any_record_is_decoded():
    nested = container(NODE, b"\x02" * 100_000 + b"\x00")  # each \x02 opens one more Node
    [letter] = read_avro(JOIN, io.BytesIO(nested), "deep.avro")
    assert letter.reason == "malformed_avro" and "recursive writer schema" in letter.raw


def test_a_writer_schema_nested_past_the_bound_ends_the_file():
    schema: dict | str = "long"
    for _ in range(avro_files.MAX_SCHEMA_DEPTH + 1):
        schema = {"type": "array", "items": schema}
    deep = {"type": "record", "name": "Deep", "fields": [{"name": "interest_group", "type": schema}]}
    [letter] = read_avro(JOIN, io.BytesIO(container(deep, b"\x00")), "deep.avro")
    assert letter.reason == "malformed_avro" and "nested deeper" in letter.raw


@pytest.mark.parametrize("codec, compress", [
    ("deflate", lambda data: zlib.compress(data, wbits=-15)),
    ("bzip2", bz2.compress),
    ("xz", lambda data: lzma.compress(data, preset=0)),  # a 256 KiB dictionary, within the decoder's memory bound
])
def test_a_block_that_inflates_past_the_bound_ends_the_file_within_the_bound(monkeypatch, codec, compress):
    bound = 2**20
    monkeypatch.setattr(avro_files, "MAX_BLOCK_BYTES", bound)
    schema = {"type": "record", "name": "Join", "fields": [{"name": "interest_group", "type": "bytes"}]}
    record = b"\x80\x80\x80\x08" + bytes(8 * bound)  # one 8 MiB byte string of zeros
    bomb = container(schema, compress(record), codec)
    assert len(bomb) < bound // 8
    tracemalloc.start()
    try:
        [letter] = read_avro(JOIN, io.BytesIO(bomb), "bomb.avro")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert letter.reason == "malformed_avro" and "decompresses to more than" in letter.raw
    assert peak < 3 * bound
    small = container(schema, compress(b"\x08" + b"abcd"), codec)  # within the bound: read as before
    assert read_avro(JOIN, io.BytesIO(small), "ok.avro").__next__().reason == "wrong_type:interest_group"
