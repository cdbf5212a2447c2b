"""Hostile inputs for the decoder fuzz tests (``tests/fuzz``) and the pipelines' hostile-input runs.

* valid records of every event type (``VALID_RECORDS``) in their wire form, and their files (``encode``);
* ``FUZZ``, the settings of every fuzz test, and hypothesis strategies: values with the awkward cases (NaN,
  infinities, 2^70, blank and lone-surrogate text, bytes, nesting), hostile records (a valid record with fields
  replaced, removed or added), byte mutations (truncation, flipped, inserted, deleted and repeated bytes), Avro
  values a loose writer schema holds, and CBOR documents with tags, simple values and bombs;
* a fixed, seeded batch of the same cases for the pipeline runs, where one deterministic batch is enough:
  ``write_hostile_files`` (JSON Lines, loose Avro and protobuf files of events) and ``hostile_reports``;
* ``documented_reasons``: the dead-letter reasons a docstring or documentation page lists, as one pattern, so a test
  can check that every reason a decoder gives is a documented one.
"""
from __future__ import annotations

import io
import json
import math
import random
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import cbor2
import fastavro
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]  # private: not in the stubs
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from schemas.aggregatable import encode_payload
from schemas.codecs import EVENT_SPECS, EventSpec, row_to_dict
from schemas.formats import load_avro_schema
from schemas.limits import MAX_KEY_ID_CHARS, MAX_PAYLOAD_BYTES, MAX_SHARED_INFO_CHARS
from schemas.rows import JoinEvent
from tests.support import event_level_events, measurement_data, summary_events

T = 1_700_000_000_000_000  # an event time, in microseconds

VALID_ROWS = {
    "join_event": JoinEvent("https://dsp.example/ig/1", "u1", T),
    "impression": measurement_data.impression("d1", 1.0, "i1"),
    "conversion": measurement_data.conversion("d1", 2.0, "c1", 10.0, measurement_data.request()),
    "ara_source": summary_events.source("d1", 0, "s1"),
    "ara_trigger": summary_events.trigger("d1", 5, "t1"),
    "paa_event": summary_events.paa_event("d1", 0, "e1", "c1"),
    "event_level_source": event_level_events.source("d1", 0, "s1"),
    "event_level_trigger": event_level_events.trigger("d1", 1, "t1"),
}


_WIRE_FORM: dict[str, Callable[[Any], dict]] = {
    "ara_source": summary_events.record_of, "ara_trigger": summary_events.record_of, "paa_event": summary_events.record_of,
    "event_level_source": event_level_events.record_of, "event_level_trigger": event_level_events.record_of,
}


def wire_record(name: str, row: Any) -> dict:
    """A row of the event type ``name`` as its Avro and JSON Lines files (and protobuf constructor) hold it."""
    return _WIRE_FORM.get(name, row_to_dict)(row)


VALID_RECORDS = {name: wire_record(name, row) for name, row in VALID_ROWS.items()}
SPECS = tuple(EVENT_SPECS[name] for name in VALID_RECORDS)


def _without_none(value: Any) -> Any:
    """A record for a protobuf constructor: unset (None) fields left out, at every level."""
    if isinstance(value, dict):
        return {key: _without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_none(item) for item in value]
    return value


def message(spec: EventSpec, record: dict) -> bytes:
    """``record`` as one serialized protobuf message of the event's type."""
    return spec.proto_type(**_without_none(record)).SerializeToString()


def encode(fmt: str, spec: EventSpec, records: Iterable[dict]) -> bytes:
    """``records`` as a file of format ``fmt`` (``avro`` with the event's schema, ``jsonl``, delimited ``pb``)."""
    records = list(records)
    if fmt == "avro":
        out = io.BytesIO()
        fastavro.writer(out, load_avro_schema(spec.avro_schema), records)
        return out.getvalue()
    if fmt == "jsonl":
        return b"".join(json.dumps(record).encode() + b"\n" for record in records)
    return b"".join(_VarintBytes(len(body)) + body for body in (message(spec, record) for record in records))


# ------------------------------------------------------------------------------------------------------------
# Strategies
# ------------------------------------------------------------------------------------------------------------

# The settings of every fuzz test (each adds its ``max_examples``): derandomized, so a run in CI draws the same
# examples as a run here; no example database, so nothing is written into the worktree; no per-example deadline, as
# the tests run on shared cores (their example counts keep the folder's run time in check).
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
TEXT = st.text(st.characters() | SURROGATES, max_size=10) | st.sampled_from(["", " ", "\t\n", "0x", "NaN", "é"])
NUMBERS = (st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([0, -1, 2**63, -(2**63) - 1, 65_537, 2**32 - 1, math.nan, math.inf, -math.inf]))
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                           max_leaves=8)
VALUES = st.recursive(SCALARS | st.binary(max_size=8),
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=8)


@st.composite
def hostile_records(draw, valid: dict, values: st.SearchStrategy = VALUES) -> dict:
    """``valid`` with some fields replaced by ``values``, some removed and some unknown ones added."""
    record = dict(valid)
    for name in draw(st.lists(st.sampled_from(sorted(valid)), max_size=3, unique=True)):
        if draw(st.booleans()):
            record[name] = draw(values)
        else:
            del record[name]
    record.update(draw(st.dictionaries(TEXT, values, max_size=2)))
    return record


@st.composite
def mutations(draw, data: bytes) -> bytes:
    """``data`` after one to four edits: cut short, a byte flipped, bytes inserted or deleted, a span repeated."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        edit = draw(st.sampled_from(("truncate", "flip", "insert", "delete", "repeat")))
        at = draw(st.integers(0, len(out)))
        if edit == "truncate":
            del out[at:]
        elif edit == "flip" and at < len(out):
            out[at] ^= draw(st.integers(1, 255))
        elif edit == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif edit == "delete":
            del out[at:at + draw(st.integers(1, 8))]
        else:
            out[at:at] = out[at:at + draw(st.integers(1, 64))] * draw(st.integers(1, 3))
    return bytes(out)


CBOR_TAGS = st.sampled_from([0, 1, 2, 3, 4, 5, 21, 24, 25, 28, 29, 30, 35, 36, 37, 256, 258, 260, 261, 1004, 55799,
                             2**64 - 1])
CBOR_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8) | st.binary(max_size=20)
    | st.integers(0, 255).filter(lambda n: not 20 <= n <= 31).map(cbor2.CBORSimpleValue) | st.just(cbor2.undefined),
    lambda inner: (st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | st.binary(max_size=4), inner,
                                                                 max_size=4)
                   | st.builds(cbor2.CBORTag, CBOR_TAGS, inner)),
    max_leaves=10,
)
ENTRY_VALUES = st.binary(max_size=20) | st.sampled_from([b"", bytes(16), b"\xff" * 4, b"\xff" * 17]) | CBOR_VALUES


@st.composite
def cbor_payloads(draw) -> bytes:
    """CBOR payloads: the histogram shape with hostile entries or operation, any CBOR document, or both."""
    entry = st.fixed_dictionaries({}, optional={"bucket": ENTRY_VALUES, "value": ENTRY_VALUES, "id": ENTRY_VALUES,
                                                "extra": CBOR_VALUES}) | CBOR_VALUES
    document = draw(st.fixed_dictionaries(
        {}, optional={"operation": st.just("histogram") | CBOR_VALUES, "data": st.lists(entry, max_size=6) | CBOR_VALUES})
        | CBOR_VALUES)
    return cbor2.dumps(document, canonical=draw(st.booleans()))


def cbor_bombs() -> list[bytes]:
    """CBOR headers that announce far more than they hold, and nesting far deeper than a payload's."""
    histogram = cbor2.dumps("operation") + cbor2.dumps("histogram") + cbor2.dumps("data")
    null, entry = cbor2.dumps({"bucket": bytes(16), "value": bytes(4)}), cbor2.dumps({"bucket": b"\x01", "value": b"\x01"})
    return [
        b"\x9b" + b"\xff" * 8,  # an array of 2^64 - 1 items, then nothing
        b"\xa2" + histogram + b"\x9b\x00\x00\x00\x01\x00\x00\x00\x00",  # "data": 2^32 entries announced
        b"\xa2" + histogram + b"\x99\x03\xe9" + null * 1001,  # 1001 null entries: more than a payload may hold
        # one entry shared (tag 28) and referenced (tag 29) 20,000 times: 20,001 contributions in 60 KB
        b"\xa2" + histogram + b"\x9f\xd8\x1c" + entry + b"\xd8\x1d\x00" * 20_000 + b"\xff",
        b"\x5b" + b"\x00\x00\x00\x10\x00\x00\x00\x00" + b"\x00" * 16,  # a 2^36-byte string
        b"\x7a\xff\xff\xff\xff" + b"a" * 16,  # a 4 GiB text string
        b"\xbb" + b"\xff" * 8,  # a map of 2^64 - 1 pairs
        b"\x81" * 100_000 + b"\x00",  # arrays nested 100,000 deep
        b"\xa1\x61a" * 50_000 + b"\x00",  # maps nested 50,000 deep
        b"\x9f" * 50_000,  # indefinite-length arrays nested, never closed
        b"\xd8\x1c" * 50_000 + b"\x00",  # tags nested
        b"\xd8\x1c\x81\xd8\x1d\x00",  # a shared list that holds itself
        b"\xc5\x82\x1b\x7f\xff\xff\xff\xff\xff\xff\xff\x01",  # a bigfloat with a 2^63 exponent
        b"\xc2\x5a\x00\x01\x00\x00" + b"\xff" * 65_536,  # a 2^524288 bignum
        b"\xa2\x61a\x00\x61a\x01",  # a duplicate key
        b"\x5f\x41a\x61b\xff",  # an indefinite byte string with a text chunk
        b"\x62\xff\xfe",  # invalid UTF-8 in a text string
        b"\xff", b"", b"\xf8\x10", b"\x1c",  # a lone break, nothing, an invalid simple value, a reserved header
    ]


# ------------------------------------------------------------------------------------------------------------
# Fixed batches for the pipeline runs
# ------------------------------------------------------------------------------------------------------------

HOSTILE_VALUES = [None, True, 0, -1, 2**70, -(2**70), 1.5, math.nan, math.inf, -math.inf, "", " ", "\u00e9", "0x",
                  "1e400", [], {}, [1, "a"], {"a": {"b": [None]}}, "x" * 5_000]


def hostile_event_lines(valid: dict, count: int, seed: int) -> list[bytes]:
    """``count`` JSON Lines lines made from the record ``valid`` (seeded), nearly all of them invalid: a field
    replaced by one of ``HOSTILE_VALUES`` or a lone surrogate, removed, or written twice (the second time hostile);
    lines cut short; invalid UTF-8; JSON that is not an object; nesting deeper than any parser allows."""
    rng = random.Random(seed)
    text = json.dumps(valid)
    names = sorted(valid)

    def replaced(value_text: str) -> str:
        name = rng.choice(names)
        return "{" + ", ".join(f"{json.dumps(k)}: {value_text if k == name else json.dumps(v)}" for k, v in valid.items()) + "}"

    makers: list[Callable[[], str | bytes]] = [
        lambda: replaced(json.dumps(rng.choice(HOSTILE_VALUES))),
        lambda: replaced('"\\ud800"'),
        lambda: json.dumps({k: v for k, v in valid.items() if k != rng.choice(names)}),
        lambda: text[:-1] + f", {json.dumps(rng.choice(names))}: {json.dumps(rng.choice(HOSTILE_VALUES))}}}",
        lambda: text[:rng.randrange(1, len(text))],
        lambda: text.encode()[:8] + b"\xff\xfe" + text.encode()[8:],
        lambda: rng.choice(["[]", "null", "42", '"text"', "NaN", "{}"]),
        lambda: "[" * 100_000 + "]" * 100_000,
        lambda: '{"a": ' * 5_000 + "1" + "}" * 5_000,
        lambda: text.replace('"', "'"),
    ]
    lines = [makers[index % len(makers)]() for index in range(count)]
    return [line if isinstance(line, bytes) else line.encode() for line in lines]


_SCALAR_TYPES = ["null", "boolean", "long", "double", "string", "bytes"]
_MAP = {"type": "map", "values": [*_SCALAR_TYPES, {"type": "array", "items": _SCALAR_TYPES}]}
LOOSE_FIELD = [*_SCALAR_TYPES, {"type": "array", "items": [*_SCALAR_TYPES, _MAP]}, _MAP]


def loose_schema(name: str, fields: Iterable[str]) -> dict:
    """An Avro writer schema whose fields take any scalar, list or map: how a hostile producer writes ``name``."""
    return {"type": "record", "name": name, "fields": [{"name": field, "type": LOOSE_FIELD, "default": None}
                                                       for field in fields]}


def _avro_scalar(value: Any) -> Any:
    """A scalar as a 64-bit Avro ``long`` can hold it (a larger integer becomes null)."""
    return None if type(value) is int and not -(2**63) <= value < 2**63 else value


def _avro_map(value: dict) -> dict:
    return {str(key): [_avro_scalar(x) for x in item if not isinstance(x, (dict, list, tuple))]
            if isinstance(item, (list, tuple)) else _avro_scalar(item) for key, item in value.items()
            if not isinstance(item, dict)}


def avro_value(value: Any) -> Any:
    """``value`` as ``LOOSE_FIELD`` can hold it: what nests deeper than its lists of maps and maps of lists dropped."""
    if isinstance(value, dict):
        return _avro_map(value)
    if isinstance(value, (list, tuple)):
        return [_avro_map(item) if isinstance(item, dict) else _avro_scalar(item) for item in value
                if not isinstance(item, (list, tuple))]
    return _avro_scalar(value)


AVRO_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=10) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6,
).map(avro_value)


def hostile_event_records(valid: dict, count: int, seed: int) -> list[dict]:
    """``count`` records of ``valid``'s fields for a loose writer schema, each with one field replaced by a value of
    ``HOSTILE_VALUES`` (seeded)."""
    rng = random.Random(seed)
    records = []
    for _ in range(count):
        record = {name: avro_value(value) for name, value in valid.items()}
        record[rng.choice(sorted(valid))] = avro_value(rng.choice(HOSTILE_VALUES))
        records.append(record)
    return records


def write_loose_avro(path: Path, name: str, records: list[dict]) -> None:
    """``records`` in an Avro file written with ``loose_schema`` (the fields of the first record)."""
    with open(path, "wb") as handle:
        fastavro.writer(handle, loose_schema(name, records[0]), records)


def hostile_messages(valid: bytes, count: int, seed: int) -> list[bytes]:
    """``count`` protobuf message bodies made from the message ``valid`` (seeded): bytes flipped, cut short,
    random bytes appended, or random bytes only."""
    rng = random.Random(seed)
    bodies = []
    for index in range(count):
        body = bytearray(valid)
        if index % 4 == 0:
            for _ in range(rng.randint(1, 3)):
                body[rng.randrange(len(body))] ^= rng.randint(1, 255)
        elif index % 4 == 1:
            del body[rng.randrange(1, len(body)):]
        else:
            body = bytearray(rng.randbytes(rng.randint(1, 16))) if index % 4 == 3 else body + rng.randbytes(4)
        bodies.append(bytes(body))
    return bodies


def write_hostile_files(directory: Path, spec: EventSpec, count: int, seed: int) -> int:
    """Writes ``hostile.jsonl``, ``hostile.avro`` (a loose writer schema) and ``hostile.pb`` into ``directory``, each
    with ``count`` records made from the valid record of ``spec`` (seeded); returns how many records they hold."""
    valid = VALID_RECORDS[spec.name]
    (directory / "hostile.jsonl").write_bytes(b"\n".join(hostile_event_lines(valid, count, seed)) + b"\n")
    write_loose_avro(directory / "hostile.avro", spec.avro_schema, hostile_event_records(valid, count, seed))
    bodies = hostile_messages(message(spec, valid), count, seed)
    (directory / "hostile.pb").write_bytes(b"".join(_VarintBytes(len(body)) + body for body in bodies))
    return 3 * count


def hostile_reports(valid: dict, count: int, seed: int) -> list[dict]:
    """``count`` AggregatableReport records made from the record ``valid`` (seeded), for a loose writer schema:
    CBOR bombs, payloads past the byte bound or with a byte flipped, over the contribution and value-sum limits,
    shared_info mutated or past its bound, key ids past theirs, a field of another type or missing."""
    rng = random.Random(seed)
    payload, info = valid["payload"], valid["shared_info"]

    def flipped(data: bytes) -> bytes:
        out = bytearray(data)
        out[rng.randrange(len(out))] ^= rng.randint(1, 255)
        return bytes(out)

    changes: list[Callable[[], dict]] = [
        lambda: {"payload": rng.choice(cbor_bombs())},
        lambda: {"payload": bytes(MAX_PAYLOAD_BYTES + 1)},
        lambda: {"payload": flipped(payload)},
        lambda: {"payload": encode_payload([(1, 2**32 - 1, 0)])},
        lambda: {"payload": encode_payload([(bucket, 1, 0) for bucket in range(1, 30)])},
        lambda: {"shared_info": flipped(info.encode()).decode("utf-8", "replace")},
        lambda: {"shared_info": info + " " * MAX_SHARED_INFO_CHARS},
        lambda: {"key_id": "k" * (MAX_KEY_ID_CHARS + 1)},
        lambda: {rng.choice(sorted(valid)): avro_value(rng.choice(HOSTILE_VALUES))},
    ]
    return [dict(valid, **changes[index % len(changes)]()) for index in range(count)]


# ------------------------------------------------------------------------------------------------------------
# Documented reasons
# ------------------------------------------------------------------------------------------------------------

_REASON = re.compile(r"`{1,2}([a-z_]+(?::(?:<name>|[a-z_.]+))?)`{1,2}")


def documented_reasons(*docstrings: str | None) -> re.Pattern:
    """The reasons the docstrings (or Markdown pages) list, each ````reason```` or ````reason:<name>```` (single
    back-quotes in Markdown), as one pattern; ``<name>`` stands for a field name."""
    tokens = sorted({token for doc in docstrings for token in _REASON.findall(doc or "")})
    return re.compile("|".join(re.escape(token).replace(re.escape("<name>"), r"[\w.]+") for token in tokens))
