"""The committed generated code and the three descriptions of each record (proto, Avro, NamedTuple) agree."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from schemas.codecs import EVENT_SPECS, JOIN_EVENT
from schemas.formats import AVRO_DIR, PROTO_DIR, SCHEMA_DIR, load_avro_schema
from schemas.proto import events_pb2, reports_pb2
from schemas.rows import JoinEvent, KAnonVerdict
from tests.support.files import avro_field_names

PROTOS = ("events", "reports", "state")


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    """The *_pb2.py files and their *_pb2.pyi stubs protoc writes today, produced exactly as the Makefile's
    ``protos`` target does."""
    out = tmp_path_factory.mktemp("protos")
    completed = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", f"--python_out={out}", f"--pyi_out={out}",
         *(f"schemas/proto/{name}.proto" for name in PROTOS)],
        cwd=SCHEMA_DIR.parent,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, f"protoc failed: {completed.stderr}"
    return out


@pytest.mark.parametrize("suffix", [".py", ".pyi"])
@pytest.mark.parametrize("name", PROTOS)
def test_committed_pb2_is_what_protoc_generates(regenerated, name, suffix):
    """schemas/proto/<name>_pb2.py and its stub <name>_pb2.pyi are byte-identical to a fresh protoc run on
    schemas/proto/<name>.proto."""
    fresh = (regenerated / "schemas" / "proto" / f"{name}_pb2{suffix}").read_bytes()
    committed = (PROTO_DIR / f"{name}_pb2{suffix}").read_bytes()
    assert fresh == committed, (
        f"schemas/proto/{name}_pb2{suffix} is stale with respect to schemas/proto/{name}.proto: "
        "run `make protos` and commit the result"
    )


def test_schema_files_are_where_formats_says():
    """The proto and Avro directories hold the files the packages load."""
    for name in PROTOS:
        assert (PROTO_DIR / f"{name}.proto").is_file()
    for name in ("join_event", "kanon_verdict"):
        assert (AVRO_DIR / f"{name}.avsc").is_file()


@pytest.mark.parametrize(
    "avsc, message, row",
    [("join_event", events_pb2.JoinEvent, JoinEvent), ("kanon_verdict", reports_pb2.KAnonVerdict, KAnonVerdict)],
)
def test_avro_proto_and_row_fields_match_in_order(avsc, message, row):
    """Field names, in order, are the same in the .avsc, the proto message (by declaration) and the NamedTuple."""
    proto_fields = [field.name for field in message.DESCRIPTOR.fields]
    assert avro_field_names(avsc) == proto_fields == list(row._fields)
    # The parsed schema the writers use describes the same record.
    assert [field["name"] for field in load_avro_schema(avsc)["fields"]] == proto_fields
    assert message.DESCRIPTOR.name == row.__name__


@pytest.mark.parametrize("spec", EVENT_SPECS.values(), ids=EVENT_SPECS)
def test_every_event_is_described_once_by_its_proto_message(spec):
    """The proto message is the event's one description: the Avro schema's fields and the row type's are the
    message's, in order, and every field has a validation kind (the ``(kind)`` option)."""
    proto_fields = [field.name for field in spec.proto_type.DESCRIPTOR.fields]
    assert avro_field_names(spec.avro_schema) == proto_fields == list(spec.row_type._fields)
    assert [field.name for field in spec.fields] == proto_fields
    assert all(field.GetOptions().Extensions[events_pb2.kind] for field in spec.proto_type.DESCRIPTOR.fields)


def test_proto_field_numbers_follow_declaration_order():
    """Field numbers are 1..n in declaration order (what the readers and other languages' stubs rely on)."""
    for message in (events_pb2.JoinEvent, reports_pb2.KAnonVerdict):
        assert [field.number for field in message.DESCRIPTOR.fields] == list(range(1, len(message.DESCRIPTOR.fields) + 1))


def test_join_event_codec_spec_matches_the_row():
    """The codec's field list for join events is the row's, and it decodes into the row type and proto type."""
    assert [field.name for field in JOIN_EVENT.fields] == list(JoinEvent._fields)
    assert JOIN_EVENT.row_type is JoinEvent
    assert JOIN_EVENT.proto_type is events_pb2.JoinEvent
    assert JOIN_EVENT.avro_schema == "join_event"


def test_event_time_is_an_optional_proto_field():
    """A missing timestamp must be told apart from 0 on the wire (proto3 ``optional``)."""
    field = events_pb2.JoinEvent.DESCRIPTOR.fields_by_name["event_time_micros"]
    assert field.has_presence
    assert not events_pb2.JoinEvent(interest_group="g", user_id="u").HasField("event_time_micros")
    assert events_pb2.JoinEvent(event_time_micros=0).HasField("event_time_micros")
