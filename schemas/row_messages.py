"""Typed rows to their protobuf messages and back, field by field, with no validation: for rows that are already
valid (state that a runner checkpoints, messages a pipeline writes), not for input (``codecs`` validates that).

The row types of ``schemas.rows`` have the protobuf messages' field names, and a nested message's row type has
the message's name (``AttributionRequest``, ``AggregationKey``, ``TriggerSpec``, ...), so one generic walk does
every type. A scalar that the row allows to be None is a proto3 ``optional`` field, unset for None; a repeated
field that the row allows to be None is empty for None. A 128-bit ARA key (an int in the row) is the hexadecimal
string ``0x...`` of the wire format.
"""
from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple, TypeVar, cast

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from schemas import rows

# the NamedTuple classes of schemas.rows (a tuple class with _fields: what the checks below can narrow to)
ROW_TYPES: dict[str, type[NamedTuple]] = {
    name: cast("type[NamedTuple]", value) for name, value in vars(rows).items()
    if isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")
}

P = TypeVar("P")  # a part of a state (EncodedRows.kept)
T = TypeVar("T")  # its encoding


def _is_repeated(field: FieldDescriptor) -> bool:
    return field.label == FieldDescriptor.LABEL_REPEATED  # protobuf 5 has no FieldDescriptor.is_repeated


@cache
def _optional_fields(row_type: type) -> frozenset[str]:
    """The fields of ``row_type`` whose annotation admits None."""
    hints = typing.get_type_hints(row_type)
    return frozenset(
        name for name, hint in hints.items()
        if typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in typing.get_args(hint)
    )


@cache
def _key_fields(row_type: type) -> frozenset[str]:
    """The fields of ``row_type`` annotated ``int`` whose message field is a string: 128-bit keys."""
    hints = typing.get_type_hints(row_type)
    return frozenset(name for name, hint in hints.items() if hint is int)


_SCALAR, _KEYABLE, _SCALARS, _MESSAGE, _MESSAGES = range(5)  # how ``message_of`` sets a field (``_plan``)


@cache
def _plan(row_type: type[NamedTuple], descriptor: Any) -> tuple[tuple[str, int], ...]:
    """How ``message_of`` fills each field of ``row_type``'s message: (name, kind) in the row's order, read once
    from the descriptor (reading a field's descriptor for every row cost ``message_of`` 40 % of its time,
    measured on the summary-client benchmark's ARA sources: 6.0 against 3.5 us a source)."""
    plan = []
    for name in row_type._fields:
        field = descriptor.fields_by_name[name]
        if field.message_type is not None:
            plan.append((name, _MESSAGES if _is_repeated(field) else _MESSAGE))
        elif _is_repeated(field):
            plan.append((name, _SCALARS))
        elif field.type == FieldDescriptor.TYPE_STRING:
            plan.append((name, _KEYABLE))  # a string, or a 128-bit key the row holds as an int
        else:
            plan.append((name, _SCALAR))
    return tuple(plan)


def message_of(row: NamedTuple, message: Message) -> Message:
    """Fill ``message`` (a fresh message of the row's type) with ``row``'s fields; returns it."""
    # a NamedTuple has as many values as _fields; a per-row path of state checkpoints, where any keyword to zip
    # (strict=False as much as strict=True) costs 5 to 10 % of the call (measured)
    for (name, kind), value in zip(_plan(type(row), message.DESCRIPTOR), row):  # noqa: B905
        if value is None:
            continue
        if kind == _SCALAR:
            setattr(message, name, value)
        elif kind == _KEYABLE:
            setattr(message, name, hex(value) if type(value) is int else value)
        elif kind == _SCALARS:
            getattr(message, name).extend(value)
        elif kind == _MESSAGES:
            target = getattr(message, name)
            for item in value:
                message_of(item, target.add())
        else:
            message_of(value, getattr(message, name))
    return message


def varint(value: int) -> bytes:
    """The base-128 varint of ``value``, as protobuf writes an integer or a length (its wire format's "Base 128
    Varints"); a negative int64 as its 64-bit two's complement (ten bytes)."""
    if value < 0x80:
        if value >= 0:
            return bytes((value,))
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_field(number: int, value: int) -> bytes:
    """Field ``number`` holding the integer ``value`` (nothing for 0, a proto3 scalar's default)."""
    return varint(number << 3) + varint(value) if value else b""


def length_delimited(number: int, payload: bytes) -> bytes:
    """Field ``number`` holding ``payload`` (a message's serialization, a string's bytes), as protobuf writes it.
    A message serializes as its fields in the order of their numbers, each written once, so a record can be put
    together from the bytes of its fields: the same bytes as ``SerializeToString``."""
    size = len(payload)
    return varint(number << 3 | 2) + (bytes((size,)) if size < 0x80 else varint(size)) + payload


class EncodedRows:
    """Rows serialized once and merged into their messages as bytes, for a state re-encoded whole again and
    again while most of it stays the same: a streaming device step encodes a device's record at every firing
    that replays it, and an ARA device's record is mostly the sources it registered weeks before (``message_of``
    takes 6 us a source, merging its bytes 1.2 us, measured on the summary-client benchmark's sources).

    A row is known by its identity (the row object a state keeps from one firing to the next), and the entry
    holds the row, so that its identity is not reused while the entry lives. A part of a state that is encoded
    straight to bytes (an event-level client's sources, a device's source rows with their names) is known by its
    identity and a ``version``: a value that changes whenever what it encodes does (``kept``). Parts nest: the
    parts kept while a part is encoded are its own, looked up again only when it is encoded again, so an encode
    whose parts are as they were costs one look-up a part, however many rows they hold. ``encoded()`` ends an
    encode: the rows and parts it did not use (sources a device dropped) are forgotten."""

    __slots__ = ("_kept", "_used")

    def __init__(self) -> None:
        # id -> (the row or part, its version (None for a row), its encoding, the entries of its own parts)
        self._kept: dict[int, tuple[Any, Any, Any, dict]] = {}
        self._used: dict[int, tuple[Any, Any, Any, dict]] = {}

    def into(self, row: NamedTuple, message: Message) -> None:
        """Fill ``message`` (a fresh message of the row's type) with ``row``, as ``message_of`` does."""
        entry = self._kept.get(id(row))
        if entry is None or entry[0] is not row:
            entry = (row, None, message_of(row, message).SerializeToString(), _NO_PARTS)
        else:
            message.MergeFromString(entry[2])
        self._used[id(row)] = entry

    def kept(self, part: P, version: Any, encode: Callable[[P, Any], T]) -> T:
        """``encode(part, version)``, or what it returned at the last encode when ``part`` was there with an
        equal ``version``. A version that is a tuple may hold the part's own lists, compared by content: the entry
        keeps copies of them, made only when the part is encoded, so that a version costs a tuple of references
        to make and one comparison to check."""
        entry = self._kept.get(id(part))
        if entry is None or entry[0] is not part or entry[1] != version:
            if type(version) is tuple:
                version = tuple(item.copy() if type(item) is list else item for item in version)
            outer = self._kept, self._used
            self._kept, self._used = entry[3] if entry is not None and entry[0] is part else _NO_PARTS, {}
            try:
                value = encode(part, version)
                parts = self._used or _NO_PARTS
            finally:
                self._kept, self._used = outer
            entry = (part, version, value, parts)
        self._used[id(part)] = entry
        return entry[2]

    def encoded(self) -> None:
        """The end of an encode: keep what it used, forget the rest."""
        self._kept, self._used = self._used, {}


_NO_PARTS: dict = {}  # an entry's parts when it has none (never written: a part's encode writes a dict of its own)


def row_of(row_type: type[NamedTuple], message: Message) -> Any:
    """The ``row_type`` row of ``message`` (the inverse of ``message_of``)."""
    descriptor = message.DESCRIPTOR
    optional = _optional_fields(row_type)
    values: list[Any] = []
    for name in row_type._fields:
        field = descriptor.fields_by_name[name]
        if field.message_type is not None:
            inner = ROW_TYPES[field.message_type.name]
            if _is_repeated(field):
                items = tuple(row_of(inner, item) for item in getattr(message, name))
                values.append(None if not items and name in optional else items)
            else:
                values.append(row_of(inner, getattr(message, name)) if message.HasField(name) else None)
        elif _is_repeated(field):
            items = tuple(getattr(message, name))
            values.append(None if not items and name in optional else items)
        elif field.has_presence and name in optional and not message.HasField(name):
            values.append(None)
        elif field.type == FieldDescriptor.TYPE_STRING and name in _key_fields(row_type):
            values.append(int(getattr(message, name), 16))
        else:
            values.append(getattr(message, name))
    return row_type(*values)
