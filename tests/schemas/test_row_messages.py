"""Every event row survives the trip to its protobuf message and back (``schemas.row_messages``), on rows read from
generated data of every kind, including the optional fields left unset and nested messages; ``EncodedRows`` fills a
message with the bytes ``message_of`` would, encodes a row once while it is in use, and forgets the rows an encode
did not use. Deterministic: no false-failure probability to state."""
from __future__ import annotations

import pytest

from schemas.codecs import (
    ARA_SOURCE,
    ARA_TRIGGER,
    CONVERSION,
    EVENT_LEVEL_SOURCE,
    EVENT_LEVEL_TRIGGER,
    IMPRESSION,
    JOIN_EVENT,
    PAA_EVENT,
)
from schemas.row_messages import EncodedRows, length_delimited, message_of, row_of, varint_field
from schemas.rows import AttributionRequest, Conversion, EventLevelSource, TriggerSpec
from synthetic.ara import generate_ara
from synthetic.event_level import generate_event_level
from synthetic.kanon import generate_kanon
from synthetic.microbenchmark import generate_microbenchmark
from synthetic.paa import generate_paa
from tests.support.files import read_rows


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """(spec, files) of small generated datasets of every event kind."""
    out = tmp_path_factory.mktemp("rows")
    ara = generate_ara(out / "ara", devices=30, days=5, progress=False)
    paa = generate_paa(out / "paa", devices=20, days=2, progress=False)
    event_level = generate_event_level(out / "el", devices=40, days=5, progress=False)
    micro = generate_microbenchmark(out / "micro", knob1=1.0, knob2=0.05, batch_size=5, products=2, progress=False)
    kanon = generate_kanon(out / "kanon", groups=20, users=200, joins=500, days=7, start_micros=0, k=5,
                           progress=False)
    return [
        (ARA_SOURCE, ara.source_files), (ARA_TRIGGER, ara.trigger_files), (PAA_EVENT, paa.event_files),
        (EVENT_LEVEL_SOURCE, event_level.source_files), (EVENT_LEVEL_TRIGGER, event_level.trigger_files),
        (IMPRESSION, micro.impression_files), (CONVERSION, micro.conversion_files), (JOIN_EVENT, kanon.files),
    ]


def test_every_generated_row_round_trips(generated):
    for spec, files in generated:
        rows, _ = read_rows(files, spec)
        assert rows, spec.name
        for row in rows:
            message = message_of(row, spec.proto_type())
            assert row_of(spec.row_type, spec.proto_type.FromString(message.SerializeToString())) == row, spec.name


def test_unset_optionals_and_empty_repeated_fields_come_back_as_none():
    source = EventLevelSource("d", 5, "s", "o", "x", "event", 86_400, 0, (), None, "", None)
    assert row_of(EventLevelSource, message_of(source, EVENT_LEVEL_SOURCE.proto_type())) == source
    specs = source._replace(max_event_level_reports=2, trigger_specs=(TriggerSpec((0, 1), (86_400,), (1, 2)),))
    assert row_of(EventLevelSource, message_of(specs, EVENT_LEVEL_SOURCE.proto_type())) == specs
    request = AttributionRequest(None, 3, 4, ("c",), "p", (), "last_touch", 1, 1, None, 5.0, 5.0, "L1", "k")
    conversion = Conversion("d", 7, "c1", "a", "q", 5.0, "p", request)
    assert row_of(Conversion, message_of(conversion, CONVERSION.proto_type())) == conversion


def test_encoded_rows_fill_messages_as_message_of_does_and_encode_each_row_once_while_in_use(generated, monkeypatch):
    from schemas import row_messages

    spec, files = generated[0]
    rows = read_rows(files, spec)[0][:20]
    encoded, calls = EncodedRows(), []

    def counted(row, message):
        if type(row) is spec.row_type:  # not its nested rows
            calls.append(row)
        return message_of(row, message)

    monkeypatch.setattr(row_messages, "message_of", counted)

    def encode(kept: list) -> list[bytes]:
        filled = [spec.proto_type() for _ in kept]
        for row, message in zip(kept, filled, strict=True):
            encoded.into(row, message)
        encoded.encoded()
        return [message.SerializeToString() for message in filled]

    expected = [message_of(row, spec.proto_type()).SerializeToString() for row in rows]
    assert encode(rows) == expected and calls == rows  # each row encoded once
    assert encode(rows) == expected and calls == rows  # then merged from its bytes
    assert encode(rows[:5]) == expected[:5]  # the other 15 are forgotten ...
    copies = [row._replace() for row in rows[5:10]]  # ... and an equal row that is another object is encoded
    assert encode(rows[:10]) == expected[:10] and calls == rows + rows[5:10]
    assert encode(copies) == expected[5:10] and calls == rows + rows[5:10] + copies


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_384, 1_700_000_000_000_000, 2**63 - 1, -1, -(2**63)])
def test_fields_put_together_from_bytes_are_protobufs_own(value):
    """``varint_field`` and ``length_delimited`` write what protobuf writes: an int64 (a negative one as ten bytes)
    and a message field, so that a record put together from them is the record's own serialization."""
    from schemas.proto import state_pb2

    window = state_pb2.ScheduledWindow(time_micros=value)
    assert varint_field(1, value) == window.SerializeToString()
    state = state_pb2.EventLevelDeviceState(registered=7)
    state.windows.add().CopyFrom(window)
    assert varint_field(1, 7) + length_delimited(4, window.SerializeToString()) == state.SerializeToString()
    long_name = state_pb2.NamedEventLevelSource(name="n" * 300)
    assert length_delimited(1, b"n" * 300) == long_name.SerializeToString()


def test_a_part_encoded_again_looks_up_only_its_own_parts():
    """``EncodedRows.kept``: a part whose version stays is not encoded again, nor are its own parts looked up; a
    part whose version changed encodes again, reusing its own parts that stayed; a part not used is forgotten."""
    encoded, calls = EncodedRows(), []

    def leaf(part: list, version: int) -> bytes:
        calls.append(("leaf", version))
        return bytes([version])

    def block(parts: list, version: tuple) -> bytes:
        calls.append(("block", len(parts)))
        return b"".join(encoded.kept(part, part[0], leaf) for part in parts)

    leaves = [[1], [2], [3]]

    def encode(version: int) -> bytes:
        value = encoded.kept(leaves, version, block)
        encoded.encoded()
        return value

    assert encode(0) == b"\x01\x02\x03" and calls == [("block", 3), ("leaf", 1), ("leaf", 2), ("leaf", 3)]
    calls.clear()
    assert encode(0) == b"\x01\x02\x03" and calls == []  # nothing looked up inside
    leaves[1][0] = 9
    assert encode(1) == b"\x01\x09\x03" and calls == [("block", 3), ("leaf", 9)]
    calls.clear()
    del leaves[0]
    assert encode(2) == b"\x09\x03" and calls == [("block", 2)]
    calls.clear()
    leaves.insert(0, [1])  # another object: encoded again (the old one was forgotten with its entry)
    assert encode(3) == b"\x01\x09\x03" and calls == [("block", 3), ("leaf", 1)]
