"""Decoding and validating events from Avro, JSON Lines and length-delimited protobuf.

Every decoder yields, for each input record, either a valid typed row or a
``DeadLetter`` carrying the raw input (as text) and a reason, never raises on
bad data: a pipeline reading a file of mixed quality keeps the good records,
sends the rest to the dead-letter sink, and ``read == parsed + dead_lettered``.

Reasons (stable strings, counted per reason in every run's summary):
``malformed_json``, ``malformed_avro``, ``malformed_protobuf``,
``not_an_object``, ``missing_field:<name>``, ``empty_field:<name>``,
``invalid_text:<name>`` (not Unicode text, e.g. a lone surrogate), ``wrong_type:<name>``, ``negative_timestamp:<name>``,
``absurd_timestamp:<name>``.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import IO, Any, Callable, Iterator, Mapping, NamedTuple, Union

import fastavro
from google.protobuf.internal.decoder import _DecodeVarint
from google.protobuf.internal.encoder import _VarintBytes
from google.protobuf.message import DecodeError, Message

from schemas import events_pb2
from schemas.rows import DeadLetter, JoinEvent

# Timestamps are UTC microseconds since the Unix epoch. Anything at or after
# 2100-01-01T00:00:00Z is taken for a unit mistake (nanoseconds, or a
# sentinel) rather than a real event.
MAX_EVENT_TIME_MICROS = 4_102_444_800 * 1_000_000

FORMATS = ("avro", "jsonl", "pb")
_EXTENSIONS = {".avro": "avro", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".pb": "pb", ".binpb": "pb"}


@dataclass(frozen=True)
class FieldSpec:
    """One field of an event: its name and kind (``string`` or ``timestamp_micros``)."""

    name: str
    kind: str


@dataclass(frozen=True)
class EventSpec:
    """How to turn a decoded mapping into a typed row, for one event type."""

    name: str
    row_type: type
    proto_type: type
    avro_schema: str
    fields: tuple[FieldSpec, ...]
    # The common case of ``validate`` unrolled for this type (a row, or None to ask ``validate`` for the
    # reason): validation runs once per input record, and the generic loop costs as much as Avro decoding.
    accept: Callable[[dict], NamedTuple | None] | None = None

    def __reduce__(self):
        """Pickle by name: generated protobuf classes cannot be pickled by value (Beam ships DoFns pickled)."""
        return (event_spec, (self.name,))


def _accept_join_event(record: dict) -> JoinEvent | None:
    group, user, time = record.get("interest_group"), record.get("user_id"), record.get("event_time_micros")
    if (
        type(group) is str and group.isascii() and group and not group.isspace()
        and type(user) is str and user.isascii() and user and not user.isspace()
        and type(time) is int and 0 <= time < MAX_EVENT_TIME_MICROS
    ):
        return JoinEvent(group, user, time)
    return None


JOIN_EVENT = EventSpec(
    name="join_event",
    row_type=JoinEvent,
    proto_type=events_pb2.JoinEvent,
    avro_schema="join_event",
    fields=(
        FieldSpec("interest_group", "string"),
        FieldSpec("user_id", "string"),
        FieldSpec("event_time_micros", "timestamp_micros"),
    ),
    accept=_accept_join_event,
)

EVENT_SPECS = {spec.name: spec for spec in (JOIN_EVENT,)}


def event_spec(name: str) -> EventSpec:
    """The registered event type called ``name``."""
    return EVENT_SPECS[name]


Parsed = Union[NamedTuple, DeadLetter]


def format_of(path: str, override: str | None = None) -> str:
    """The file format: ``override`` if given, else from the extension (``.avro``, ``.jsonl``, ``.pb``)."""
    if override:
        if override not in FORMATS:
            raise ValueError(f"unknown format {override!r}; expected one of {', '.join(FORMATS)}")
        return override
    name = path.lower()
    for suffix in (".gz", ".bz2", ".deflate", ".zst"):
        name = name.removesuffix(suffix)
    for extension, fmt in _EXTENSIONS.items():
        if name.endswith(extension):
            return fmt
    raise ValueError(f"cannot tell the format of {path!r} from its extension; pass it explicitly ({', '.join(FORMATS)})")


def _check_field(field: FieldSpec, value: Any) -> str | None:
    """The reason ``value`` is not a valid ``field``, or None when it is."""
    if value is None:
        return f"missing_field:{field.name}"
    if field.kind == "string":
        if not isinstance(value, str):
            return f"wrong_type:{field.name}"
        if not value or value.isspace():
            return f"empty_field:{field.name}"
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (JSON "\ud800"): not Unicode text
                return f"invalid_text:{field.name}"
        return None
    if field.kind == "timestamp_micros":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"wrong_type:{field.name}"
        if value < 0:
            return f"negative_timestamp:{field.name}"
        if value >= MAX_EVENT_TIME_MICROS:
            return f"absurd_timestamp:{field.name}"
        return None
    raise ValueError(f"unknown field kind {field.kind!r}")


def validate(spec: EventSpec, record: Any) -> NamedTuple | str:
    """The typed row for a decoded ``record`` (a mapping), or the reason it is invalid.

    The common case goes through the spec's unrolled ``accept``, since this
    runs once per input record; anything it does not accept (or every record
    of a spec without one) goes through ``_check_field`` field by field, which
    gives the precise reason.
    """
    if type(record) is not dict:
        if not isinstance(record, Mapping):
            return "not_an_object"
    elif spec.accept is not None:
        row = spec.accept(record)
        if row is not None:
            return row
    values = []
    for field in spec.fields:
        value = record.get(field.name)
        if field.kind == "timestamp_micros" and isinstance(value, datetime) and value.tzinfo is not None:
            value = _datetime_micros(value)
        reason = _check_field(field, value)
        if reason:
            return reason
        values.append(value)
    return spec.row_type._make(values)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _datetime_micros(value: datetime) -> int:
    """An aware datetime (Avro's ``timestamp-micros`` / ``timestamp-millis`` logical types decode to these) as
    integer microseconds since the Unix epoch, exactly. A naive datetime is ambiguous and stays ``wrong_type``."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def _parsed(spec: EventSpec, record: Any, raw: Callable[[], str], source: str) -> Parsed:
    row = validate(spec, record)
    if isinstance(row, str):
        return DeadLetter(raw=raw(), reason=row, source=source)
    return row


def _json_text(record: Any) -> str:
    return json.dumps(record, default=lambda v: base64.b64encode(v).decode() if isinstance(v, bytes) else repr(v))


def parse_json_line(spec: EventSpec, line: str, source: str) -> Parsed:
    """One JSON Lines record: a JSON object with the event's fields."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: pathologically nested input
        return DeadLetter(raw=line, reason="malformed_json", source=source)
    return _parsed(spec, record, lambda: line, source)


def read_jsonl(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every non-blank line of a JSON Lines file; undecodable bytes are a ``malformed_json`` dead letter."""
    for number, line_bytes in enumerate(handle, start=1):
        try:
            # utf-8-sig on the first line: a byte-order mark some editors write is not part of the record
            line = line_bytes.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            yield DeadLetter(raw=base64.b64encode(line_bytes).decode(), reason="malformed_json", source=f"{source}:{number}")
            continue
        if line.strip():
            yield parse_json_line(spec, line, f"{source}:{number}")


def read_avro(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every record of an Avro container file.

    Fields are read by name whatever the writer schema, so files written with
    extra fields, or with a field of the wrong type, still decode and the
    record is judged by ``validate``. A corrupt block (bad header, sync marker
    or codec data) ends the file with one ``malformed_avro`` dead letter
    naming the position, since Avro cannot resynchronise inside a block.
    """
    index = 0
    try:
        for record in fastavro.reader(handle):
            row = validate(spec, record)
            yield DeadLetter(raw=_json_text(record), reason=row, source=f"{source}#{index}") if type(row) is str else row
            index += 1
    except Exception as error:  # noqa: BLE001 - fastavro raises many types for corrupt input
        yield DeadLetter(raw=f"{type(error).__name__}: {error}", reason="malformed_avro", source=f"{source}#{index}")


def _proto_mapping(spec: EventSpec, message: Message) -> dict:
    """The message's fields as a mapping; an unset optional field or an empty string counts as missing/empty."""
    record = {}
    for field in spec.fields:
        if field.kind == "string":
            record[field.name] = getattr(message, field.name)
        elif message.HasField(field.name):
            record[field.name] = getattr(message, field.name)
    return record


def read_delimited_proto(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every message of a file of varint-length-prefixed protobuf messages.

    A message that does not parse is one ``malformed_protobuf`` dead letter and
    reading goes on with the next length prefix; a truncated tail (a length
    running past the end of the file) is one final dead letter.
    """
    data = handle.read()
    position, index = 0, 0
    while position < len(data):
        raw_source = f"{source}@{position}"
        try:
            length, start = _DecodeVarint(data, position)
        except (IndexError, DecodeError):
            yield DeadLetter(raw=base64.b64encode(data[position:]).decode(), reason="malformed_protobuf", source=raw_source)
            return
        end = start + length
        payload = data[start:end]
        if end > len(data):
            yield DeadLetter(raw=base64.b64encode(data[position:]).decode(), reason="malformed_protobuf", source=raw_source)
            return
        message = spec.proto_type()
        try:
            message.ParseFromString(payload)
        except DecodeError:
            yield DeadLetter(raw=base64.b64encode(payload).decode(), reason="malformed_protobuf", source=raw_source)
        else:
            yield _parsed(spec, _proto_mapping(spec, message), lambda: base64.b64encode(payload).decode(), raw_source)
        position, index = end, index + 1


READERS: dict[str, Callable[[EventSpec, IO[bytes], str], Iterator[Parsed]]] = {
    "avro": read_avro,
    "jsonl": read_jsonl,
    "pb": read_delimited_proto,
}


def encode_delimited(message: Message) -> bytes:
    """One varint-length-prefixed protobuf message, as ``read_delimited_proto`` reads it."""
    payload = message.SerializeToString()
    return _VarintBytes(len(payload)) + payload


def row_to_dict(row: NamedTuple) -> dict:
    """A row as a plain dict (for JSON Lines and Avro writers)."""
    return row._asdict()
