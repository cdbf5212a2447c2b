"""Decoding and validating events from Avro, JSON Lines and length-delimited protobuf.

Each event type (``EventSpec``) is derived from its protobuf message (``schemas/proto/events.proto``, the one
description of the event): its fields, their order and their validation kinds; the checks of each kind, and
the fast path generated from them, are in ``schemas.field_kinds``.

Every decoder yields, for each input record, either a valid typed row or a
``DeadLetter`` carrying the raw input (as text) and a reason, never raises on
bad data: a pipeline reading a file of mixed quality keeps the good records,
sends the rest to the dead-letter sink, and ``read == parsed + dead_lettered``.

Reasons (stable strings, counted per reason in every run's summary):
``malformed_json``, ``malformed_avro`` (a corrupt header or block, or a writer schema or block that
``schemas.avro_files`` refuses; ends the file), ``malformed_protobuf``, ``truncated_protobuf`` (ends the file),
``oversized_record`` (a JSON line or protobuf message longer than ``MAX_RECORD_BYTES``, 1 MiB; reading goes on),
``unreadable_file`` (an I/O or decompression error; ends the file), ``not_an_object``, ``missing_field:<name>``,
``empty_field:<name>``,
``invalid_text:<name>`` (not Unicode text, e.g. a lone surrogate), ``wrong_type:<name>``, ``negative_timestamp:<name>``,
``absurd_timestamp:<name>``; for conversions and their attribution requests also ``negative_value:<name>``,
``non_finite:<name>``, ``nonpositive:<name>`` (epsilon, sensitivities, window, n), ``report_sensitivity_above_query``,
``unknown_logic``, ``unknown_norm``, ``dimension_out_of_range``, ``incomplete_epochs`` (one of first/last epoch),
``reversed_epochs``; for the summary-report clients' events (ARA sources and triggers, PAA events) also
``invalid_key:<name>`` (not "0x" and 1 to 32 hex digits), ``duplicate_name:<name>``, ``too_many:<name>`` (more
than 20 entries), ``out_of_range:<name>``, ``nonpositive:expiry_seconds``, ``value_too_large:<name>`` (above
65536) and ``unknown_api:api``; for the event-level sources and triggers (Ghazi et al. Sec. 2.2) also
``negative_value:trigger_data`` and ``nonpositive:value`` (the configuration of an event-level source is judged
by the pipeline, with ``transforms.event_level.mechanisms.config``'s ``ConfigurationError`` reasons).
"""
from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any, NamedTuple, Union

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.internal.decoder import _DecodeVarint  # type: ignore[attr-defined]  # private: not in the stubs
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]  # private: not in the stubs
from google.protobuf.message import DecodeError, Message

from schemas.avro_files import open_avro
from schemas.field_kinds import MESSAGE_LISTS, FieldSpec, convert_fields, fast_validator
from schemas.proto import events_pb2
from schemas.rows import (
    AraSource,
    AraTrigger,
    Conversion,
    DeadLetter,
    EventLevelSource,
    EventLevelTrigger,
    Impression,
    JoinEvent,
    PaaEvent,
)

FORMATS = ("avro", "jsonl", "pb")
MALFORMED_AVRO, TRUNCATED_PROTOBUF, UNREADABLE_FILE = "malformed_avro", "truncated_protobuf", "unreadable_file"
OVERSIZED_RECORD = "oversized_record"
# One record of a JSON Lines or protobuf file is at most this long (an event is a few hundred bytes): a longer one
# is a dead letter, read past without being held, so a hostile or corrupt file cannot exhaust memory.
MAX_RECORD_BYTES = 1 << 20
OVERSIZED_RAW_BYTES = 256  # what an oversized record's dead letter keeps of it
READ_CHUNK_BYTES = 1 << 20
MAX_VARINT_BYTES = 10
# Dead-letter reasons that mean the rest of a file was lost: a corrupt Avro header or block (Avro cannot
# resynchronise), a protobuf file cut inside a message, a file that cannot be read or decompressed. Any of them
# fails the run (DESIGN.md, "Command-line conventions"): half a file is not an answer.
FILE_FAILURES = frozenset({MALFORMED_AVRO, TRUNCATED_PROTOBUF, UNREADABLE_FILE})
_EXTENSIONS = {".avro": "avro", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".pb": "pb", ".binpb": "pb"}


@dataclass(frozen=True)
class EventSpec:
    """How to turn a decoded mapping into a typed row, for one event type."""

    name: str
    row_type: type[NamedTuple]
    proto_type: type[Message]
    avro_schema: str
    fields: tuple[FieldSpec, ...]
    # The common case of ``validate`` unrolled for this type (a row, or None to ask ``validate`` for the
    # reason): validation runs once per input record, and the generic loop costs as much as Avro decoding.
    accept: Callable[[dict], NamedTuple | None] | None = None

    def __reduce__(self):
        """Pickle by name: generated protobuf classes cannot be pickled by value (Beam ships DoFns pickled)."""
        return (event_spec, (self.name,))


def _event_spec(name: str, row_type: type[NamedTuple], proto_type: type[Message]) -> EventSpec:
    """The event type ``name``: its fields and their kinds are the proto message's (``(kind)`` options of
    ``schemas/proto/events.proto``), in the message's order, which is the row type's and the Avro schema's."""
    fields = tuple(FieldSpec(field.name, field.GetOptions().Extensions[events_pb2.kind])
                   for field in proto_type.DESCRIPTOR.fields)
    if [field.name for field in fields] != list(row_type._fields) or not all(field.kind for field in fields):
        raise TypeError(f"{proto_type.DESCRIPTOR.name}: fields and kinds must match {row_type.__name__}")
    return EventSpec(name, row_type, proto_type, name, fields, fast_validator(row_type, fields))


JOIN_EVENT = _event_spec("join_event", JoinEvent, events_pb2.JoinEvent)
IMPRESSION = _event_spec("impression", Impression, events_pb2.Impression)
CONVERSION = _event_spec("conversion", Conversion, events_pb2.Conversion)
ARA_SOURCE = _event_spec("ara_source", AraSource, events_pb2.AraSource)
ARA_TRIGGER = _event_spec("ara_trigger", AraTrigger, events_pb2.AraTrigger)
PAA_EVENT = _event_spec("paa_event", PaaEvent, events_pb2.PaaEvent)
EVENT_LEVEL_SOURCE = _event_spec("event_level_source", EventLevelSource, events_pb2.EventLevelSource)
EVENT_LEVEL_TRIGGER = _event_spec("event_level_trigger", EventLevelTrigger, events_pb2.EventLevelTrigger)

EVENT_SPECS = {
    spec.name: spec
    for spec in (JOIN_EVENT, IMPRESSION, CONVERSION, ARA_SOURCE, ARA_TRIGGER, PAA_EVENT, EVENT_LEVEL_SOURCE,
                 EVENT_LEVEL_TRIGGER)
}


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


def validate(spec: EventSpec, record: Any) -> NamedTuple | str:
    """The typed row for a decoded ``record`` (a mapping), or the reason it is invalid.

    The common case goes through the spec's unrolled ``accept``, since this
    runs once per input record; anything it does not accept (or every record
    of a spec without one) is converted field by field, which gives the
    precise reason of the first bad field.
    """
    if type(record) is not dict:
        if not isinstance(record, Mapping):
            return "not_an_object"
    elif spec.accept is not None:
        row = spec.accept(record)
        if row is not None:
            return row
    return convert_fields(spec.row_type, spec.fields, record)


def _parsed(spec: EventSpec, record: Any, raw: Callable[[], str], source: str) -> Parsed:
    row = validate(spec, record)
    if isinstance(row, str):
        return DeadLetter(raw=raw(), reason=row, source=source)
    return row


def _base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _json_text(record: Any) -> str:
    return json.dumps(record, default=lambda v: base64.b64encode(v).decode() if isinstance(v, bytes) else repr(v))


def parse_json_line(spec: EventSpec, line: str, source: str) -> Parsed:
    """One JSON Lines record: a JSON object with the event's fields."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: pathologically nested input
        return DeadLetter(raw=line, reason="malformed_json", source=source)
    return _parsed(spec, record, lambda: line, source)


def _oversized(prefix: bytes, source: str) -> DeadLetter:
    """The dead letter of a record longer than ``MAX_RECORD_BYTES``: its first bytes only, so it stays small."""
    return DeadLetter(raw=base64.b64encode(prefix[:OVERSIZED_RAW_BYTES]).decode(), reason=OVERSIZED_RECORD, source=source)


def _bounded_lines(handle: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """The lines of ``handle`` without their newline, None for a line longer than ``limit`` bytes, read in chunks
    so that memory stays bounded whatever the file holds (a compressed file can expand without bound)."""
    pending, skipping = b"", False  # skipping: inside a line already reported as too long
    while chunk := handle.read(READ_CHUNK_BYTES):
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        for part in parts:
            if skipping:
                skipping = False  # the end of the long line
                continue
            yield part if len(part) <= limit else None
        if len(pending) > limit:
            if not skipping:
                yield None
            pending, skipping = b"", True
    if pending and not skipping:
        yield pending


def read_json_lines(handle: IO[bytes], source: str, loads: Callable[[str], Any] = json.loads
                    ) -> Iterator[tuple[str, str, Any] | DeadLetter]:
    """(where, line, decoded value) for every non-blank line of a JSON Lines file: undecodable bytes or JSON are a
    ``malformed_json`` dead letter, a line of more than ``MAX_RECORD_BYTES`` an ``oversized_record`` one.
    ``loads``: the JSON decoder (any that raises ``ValueError`` on bad input)."""
    for number, line_bytes in enumerate(_bounded_lines(handle, MAX_RECORD_BYTES), start=1):
        where = f"{source}:{number}"
        if line_bytes is None:
            yield _oversized(b"", where)
            continue
        try:
            # utf-8-sig on the first line: a byte-order mark some editors write is not part of the record
            line = line_bytes.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r")
        except UnicodeDecodeError:
            yield DeadLetter(raw=base64.b64encode(line_bytes).decode(), reason="malformed_json", source=where)
            continue
        if not line.strip():
            continue
        try:
            value = loads(line)
        except (ValueError, RecursionError):  # RecursionError: pathologically nested input
            yield DeadLetter(raw=line, reason="malformed_json", source=where)
            continue
        yield where, line, value


def read_jsonl(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every non-blank line of a JSON Lines file as a row of ``spec`` or a dead letter (``read_json_lines``)."""
    for item in read_json_lines(handle, source):
        if isinstance(item, DeadLetter):
            yield item
        else:
            where, line, record = item
            yield _parsed(spec, record, functools.partial(str, line), where)


def avro_record(spec: EventSpec, record: Any, source: str, index: int) -> Parsed:
    """The row of the decoded Avro record at ``index`` of the file ``source``, or its dead letter."""
    row = validate(spec, record)
    if isinstance(row, str):
        return DeadLetter(raw=_json_text(record), reason=row, source=f"{source}#{index}")
    return row


def read_avro(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every record of an Avro container file.

    Fields are read by name whatever the writer schema, so files written with
    extra fields, or with a field of the wrong type, still decode and the
    record is judged by ``validate``. A corrupt block (bad header, sync marker
    or codec data), or a writer schema or block ``open_avro`` refuses, ends the
    file with one ``malformed_avro`` dead letter naming the position, since
    Avro cannot resynchronise inside a block.
    """
    accept = spec.accept or (lambda record: None)
    index = 0
    try:
        records = open_avro(handle)
    except Exception as error:  # noqa: BLE001 - fastavro raises many types for a corrupt header
        yield DeadLetter(raw=f"{type(error).__name__}: {error}", reason=MALFORMED_AVRO, source=f"{source}#0")
        return
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except Exception as error:  # noqa: BLE001 - fastavro raises many types for corrupt blocks
            yield DeadLetter(raw=f"{type(error).__name__}: {error}", reason=MALFORMED_AVRO, source=f"{source}#{index}")
            return
        # the unrolled fast path first (this loop runs once per record), ``validate`` for the rest
        row = accept(record) if type(record) is dict else None
        yield avro_record(spec, record, source, index) if row is None else row
        index += 1


def _message_mapping(message: Message) -> dict:
    """The set fields of a nested message (unset optional fields are missing; repeated fields are lists)."""
    return {
        descriptor.name: list(value) if descriptor.label == FieldDescriptor.LABEL_REPEATED else value
        for descriptor, value in message.ListFields()
    }


def _proto_mapping(spec: EventSpec, message: Message) -> dict:
    """The message's fields as a mapping; an unset optional field or an empty string counts as missing/empty."""
    record = {}
    for field in spec.fields:
        if field.kind in ("string", "text", "api"):
            record[field.name] = getattr(message, field.name)
        elif field.kind == "strings":
            record[field.name] = list(getattr(message, field.name))
        elif field.kind in MESSAGE_LISTS:
            record[field.name] = [_message_mapping(item) for item in getattr(message, field.name)]
        elif message.HasField(field.name):
            value = getattr(message, field.name)
            record[field.name] = _message_mapping(value) if field.kind == "request" else value
    return record


class _Chunks:
    """A file read in chunks, so that only what is being parsed is in memory: ``data[cursor:]`` are the next bytes,
    at file offset ``offset``."""

    __slots__ = ("handle", "data", "cursor", "base")

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle, self.data, self.cursor, self.base = handle, b"", 0, 0

    @property
    def offset(self) -> int:
        return self.base + self.cursor

    def available(self, n: int) -> int:
        """Reads until ``n`` bytes are available (or the file ends); how many are."""
        if len(self.data) - self.cursor < n:
            self.base += self.cursor
            self.data, self.cursor = self.data[self.cursor:], 0
            while len(self.data) < n and (chunk := self.handle.read(max(READ_CHUNK_BYTES, n - len(self.data)))):
                self.data += chunk
        return len(self.data) - self.cursor

    def skip(self, n: int) -> bool:
        """Drops the next ``n`` bytes a chunk at a time; False when the file ends first."""
        while n:
            step = min(n, READ_CHUNK_BYTES)
            if self.available(step) < step:
                return False
            self.cursor += step
            n -= step
        return True


def read_delimited_proto(spec: EventSpec, handle: IO[bytes], source: str) -> Iterator[Parsed]:
    """Every message of a file of varint-length-prefixed protobuf messages.

    A message that does not parse is one ``malformed_protobuf`` dead letter and
    reading goes on with the next length prefix; a message longer than
    ``MAX_RECORD_BYTES`` is an ``oversized_record`` dead letter (its bytes are
    skipped unread); a truncated tail (a length running past the end of the
    file, or no length at all) is one final ``truncated_protobuf`` dead letter:
    the file is broken (``FILE_FAILURES``). The file is read in chunks.
    """
    chunks = _Chunks(handle)
    while chunks.available(MAX_VARINT_BYTES):
        raw_source = f"{source}@{chunks.offset}"
        data, position = chunks.data, chunks.cursor
        try:
            length, start = _DecodeVarint(data, position)
        except (IndexError, DecodeError):
            yield DeadLetter(raw=base64.b64encode(data[position:]).decode(), reason=TRUNCATED_PROTOBUF, source=raw_source)
            return
        if length > MAX_RECORD_BYTES:
            prefix = data[position:position + OVERSIZED_RAW_BYTES]
            chunks.cursor = start
            if not chunks.skip(length):
                yield DeadLetter(raw=base64.b64encode(prefix).decode(), reason=TRUNCATED_PROTOBUF, source=raw_source)
                return
            yield _oversized(prefix, raw_source)
            continue
        size = start - position + length  # the length prefix and the message
        if chunks.available(size) < size:
            tail = chunks.data[chunks.cursor:]
            yield DeadLetter(raw=base64.b64encode(tail).decode(), reason=TRUNCATED_PROTOBUF, source=raw_source)
            return
        payload = chunks.data[chunks.cursor + size - length:chunks.cursor + size]
        chunks.cursor += size
        message = spec.proto_type()
        try:
            message.ParseFromString(payload)
        except DecodeError:
            yield DeadLetter(raw=base64.b64encode(payload).decode(), reason="malformed_protobuf", source=raw_source)
        else:
            yield _parsed(spec, _proto_mapping(spec, message), functools.partial(_base64_text, payload), raw_source)


READERS: dict[str, Callable[[EventSpec, IO[bytes], str], Iterator[Parsed]]] = {
    "avro": read_avro,
    "jsonl": read_jsonl,
    "pb": read_delimited_proto,
}


def read_files(paths: Iterable, spec: EventSpec) -> tuple[list, list[DeadLetter]]:
    """The valid rows and the dead letters of the files ``paths`` (in the order given), each read with the reader
    of its format (from its name): for tools that need a dataset in memory (producers, tests), not for pipelines."""
    valid: list = []
    dead: list[DeadLetter] = []
    for path in map(str, paths):
        with open(path, "rb") as handle:
            for row in READERS[format_of(path)](spec, handle, path):
                if type(row) is DeadLetter:
                    dead.append(row)
                else:
                    valid.append(row)
    return valid, dead


def encode_delimited(message: Message) -> bytes:
    """One varint-length-prefixed protobuf message, as ``read_delimited_proto`` reads it."""
    payload = message.SerializeToString()
    return _VarintBytes(len(payload)) + payload


def row_to_dict(row: NamedTuple) -> dict:
    """A row as a plain dict (for JSON Lines and Avro writers); nested rows become nested dicts."""
    return {name: row_to_dict(value) if hasattr(value, "_asdict") else value for name, value in row._asdict().items()}
