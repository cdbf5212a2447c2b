"""The public Aggregation Service's formats: aggregatable reports in, output domains, summary reports out.

An aggregatable report (Ghazi et al. Sec. 2.1: the tuple (r, k, v, m)) travels as the Avro record
``AggregatableReport {payload: bytes, key_id: string, shared_info: string}``:

* ``shared_info`` is a JSON object kept as the exact string the browser wrote (it is authenticated by the
  encryption, so it is never re-serialised): ``version``, ``api``, ``report_id`` (a UUID: the r of Ghazi et al.),
  ``reporting_origin``, ``scheduled_report_time`` and ``source_registration_time`` (decimal strings of seconds
  since the Unix epoch, or integral JSON numbers as the service's own test data writes them), ``attribution_destination``
  (Attribution Reporting only) and ``debug_mode`` (``"enabled"``; absent or ``"disabled"`` otherwise).
* ``payload`` is the CBOR map ``{"operation": "histogram", "data": [{"bucket": <= 16-byte big-endian,
  "value": <= 4-byte big-endian, "id": optional <= 8-byte filtering id}, ...]}``: the contributions (k, v),
  in clear text (debug payloads, the Local Testing Tool) or HPKE-encrypted (RFC 9180, DHKEM(X25519,
  HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305) as ``enc || ciphertext`` with the HPKE info string
  ``"aggregation_service" + shared_info`` (Chromium's "authenticated info") and no extra associated data.

This module is Beam-free: the aggregation job decodes with it and the report-producing clients and the tests
encode with it, through the same ``pyhpke`` library. Keys are raw 32-byte X25519 keys in the JSON shape of
the public key endpoint, ``{"keys": [{"id": "...", "key": "<base64>"}]}`` (private key files use the same
shape).

Validation reasons (stable strings, counted per reason): ``malformed_report``, ``malformed_shared_info``,
``missing_field:<name>``, ``invalid_field:<name>``, ``oversized_field:<name>`` (``payload``, ``shared_info`` or
``key_id`` longer than its bound), ``unsupported_version``, ``unknown_api``, ``unknown_key_id``,
``undecryptable_payload``, ``malformed_payload``, ``wrong_operation``, ``too_many_payload_entries`` (more entries
than a payload padded to the largest allowed size holds), ``too_many_contributions`` and ``value_sum_over_bound``
(a report over the job's ``PayloadLimits``). The bounds and their sources are in ``schemas.limits``.
"""
from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple, overload

import cbor2
import numpy as np
import orjson
from pyhpke import AEADId, CipherSuite, KDFId, KEMId

from schemas.limits import (
    CONTRIBUTION_BUDGET,
    MAX_KEY_ID_CHARS,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_ENTRIES,
    MAX_REPORT_CONTRIBUTIONS,
    MAX_SHARED_INFO_CHARS,
)
from schemas.rows import APIS, ATTRIBUTION_APIS, SharedInfo

SUPPORTED_MAJOR_VERSIONS = ("0", "1")

BUCKET_BYTES = 16  # the 128-bit key k of Ghazi et al. Sec. 2.1
VALUE_BYTES = 4
FILTERING_ID_BYTES = 8
HPKE_INFO_PREFIX = b"aggregation_service"
NULL_CONTRIBUTION = (0, 0, 0)  # bucket, value, filtering id: padding, dropped by the service

_SUITE = CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.CHACHA20_POLY1305)
_ENC_BYTES = 32  # X25519 encapsulated key
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_VERSION = re.compile(r"([0-9]+)\.([0-9]+)")
TOO_MANY_PAYLOAD_ENTRIES = "too_many_payload_entries"
TOO_MANY_CONTRIBUTIONS = "too_many_contributions"
VALUE_SUM_OVER_BOUND = "value_sum_over_bound"
# A payload is three containers deep (map, list, entry maps); one more level lets a tag wrap it (RFC 8949's
# self-described CBOR). Anything deeper is refused by the CBOR decoder before it builds it.
_MAX_CBOR_DEPTH = 4


class ReportError(ValueError):
    """A report the service cannot use; ``reason`` is the dead-letter reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PayloadLimits(NamedTuple):
    """What one report's payload may carry: at most ``max_contributions`` non-null contributions whose values sum to
    at most ``max_value_sum`` (null contributions, the padding, do not count). The defaults are the specifications'
    (``schemas.limits``): 20 contributions, L1 = 65536."""

    max_contributions: int = MAX_REPORT_CONTRIBUTIONS
    max_value_sum: int = CONTRIBUTION_BUDGET

    def reason(self, contributions: int, value_sum: int) -> str | None:
        """The dead-letter reason of a payload with ``contributions`` non-null contributions summing to
        ``value_sum``, or None within the limits (too many contributions is judged first)."""
        if contributions > self.max_contributions:
            return TOO_MANY_CONTRIBUTIONS
        if value_sum > self.max_value_sum:
            return VALUE_SUM_OVER_BOUND
        return None


SPEC_LIMITS = PayloadLimits()


def report_fields(record: object) -> tuple[bytes, str, str]:
    """The ``(payload, key_id, shared_info)`` of a decoded ``AggregatableReport`` record (``key_id`` missing = ""),
    each of its type and the payload and key id within their bounds; a ReportError with the reason otherwise.
    (``parse_shared_info`` bounds ``shared_info``.)"""
    if type(record) is not dict:
        raise ReportError("malformed_report")
    payload, key_id, text = record.get("payload"), record.get("key_id", ""), record.get("shared_info")
    if type(payload) is not bytes:
        raise ReportError("missing_field:payload" if payload is None else "invalid_field:payload")
    if type(text) is not str:
        raise ReportError("missing_field:shared_info" if text is None else "invalid_field:shared_info")
    if type(key_id) is not str:
        raise ReportError("invalid_field:key_id")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ReportError("oversized_field:payload")
    if len(key_id) > MAX_KEY_ID_CHARS:
        raise ReportError("oversized_field:key_id")
    return payload, key_id, text


# ------------------------------------------------------------------------------------------------
# shared_info
# ------------------------------------------------------------------------------------------------


def _required_text(info: Mapping, name: str) -> str:
    value = info.get(name)
    if value is None:
        raise ReportError(f"missing_field:{name}")
    if type(value) is not str or not value or value.isspace():
        raise ReportError(f"invalid_field:{name}")
    return value


@overload
def _seconds(info: Mapping, name: str, required: Literal[True]) -> str: ...
@overload
def _seconds(info: Mapping, name: str, required: bool) -> str | None: ...
def _seconds(info: Mapping, name: str, required: bool) -> str | None:
    value = info.get(name)
    if value is None:
        if required:
            raise ReportError(f"missing_field:{name}")
        return None
    if type(value) in (int, float) and 0 <= value < 10**12 and float(value).is_integer():
        return str(int(value))  # a number, as the service's local testing tool writes it (1640995200.000000000)
    if type(value) is not str or not value.isdigit() or not value.isascii() or len(value) > 12:
        raise ReportError(f"invalid_field:{name}")
    return value


def parse_shared_info(text: str) -> SharedInfo:
    """The validated ``shared_info``; a ReportError with the reason otherwise.

    Every api needs ``version``, ``api``, ``report_id`` (a UUID), ``reporting_origin`` and
    ``scheduled_report_time``; Attribution Reporting also needs ``attribution_destination``.
    The major version must be one the public service supports (0 or 1). Text longer than
    ``MAX_SHARED_INFO_CHARS``, or that is not Unicode text, is refused before it is parsed.
    """
    if type(text) is not str:
        raise ReportError("malformed_shared_info")
    if len(text) > MAX_SHARED_INFO_CHARS:
        raise ReportError("oversized_field:shared_info")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: not Unicode text (no budget key can be hashed from it)
            raise ReportError("malformed_shared_info") from None
    match = _BROWSER_SHARED_INFO.fullmatch(text)
    if match is not None:
        api, destination, debug, report_id, origin, scheduled, registration, version = match.groups()
        attribution = api in ATTRIBUTION_APIS
        if not origin.isspace() and (destination is not None and not destination.isspace() if attribution else True):
            return SharedInfo(version, api, report_id.lower(), origin, int(scheduled), registration,
                              destination if attribution else None, debug is not None)
    try:
        info = orjson.loads(text)  # strict RFC 8259 JSON
    except (orjson.JSONDecodeError, TypeError):
        raise ReportError("malformed_shared_info") from None
    if type(info) is not dict:
        raise ReportError("malformed_shared_info")
    return _checked_shared_info(info)


# shared_info exactly as a browser serialises it (compact JSON, keys in alphabetical order, strings without
# escapes): one regular expression reads every field at once, several times faster than decoding the JSON and
# checking each field (this runs for every report of a job). A string without escapes, quotes and control
# characters decodes to itself, so the fields are what a JSON parser would return; any other text (other key
# orders, spaces, escapes, extra keys) goes through the JSON parser and the field-by-field checks.
_JSON_TEXT = r'([^"\\\x00-\x1f]+)'
_BROWSER_SHARED_INFO = re.compile(
    r'\{"api":"(attribution-reporting|attribution-reporting-debug|protected-audience|shared-storage)"'
    r'(?:,"attribution_destination":"' + _JSON_TEXT + r'")?'
    r'(?:,"debug_mode":"(enabled)")?'
    r',"report_id":"(' + _UUID.pattern + r')"'
    r',"reporting_origin":"' + _JSON_TEXT + r'"'
    r',"scheduled_report_time":"([0-9]{1,12})"'
    r'(?:,"source_registration_time":"([0-9]{1,12})")?'
    r',"version":"(0\.1|1\.0)"\}'
)


def _checked_shared_info(info: dict) -> SharedInfo:
    """``parse_shared_info`` field by field: the first problem's reason, or the validated fields."""
    version = _required_text(info, "version")
    match = _VERSION.fullmatch(version)
    if match is None:
        raise ReportError("invalid_field:version")
    if (match.group(1).lstrip("0") or "0") not in SUPPORTED_MAJOR_VERSIONS:  # no int(): any number of digits
        raise ReportError("unsupported_version")
    api = _required_text(info, "api")
    if api not in APIS:
        raise ReportError("unknown_api")
    report_id = _required_text(info, "report_id")
    if not _UUID.fullmatch(report_id):
        raise ReportError("invalid_field:report_id")
    origin = _required_text(info, "reporting_origin")
    scheduled = int(_seconds(info, "scheduled_report_time", required=True))
    registration = _seconds(info, "source_registration_time", required=False)
    destination = _required_text(info, "attribution_destination") if api in ATTRIBUTION_APIS else None
    debug = info.get("debug_mode")
    if debug not in (None, "enabled", "disabled"):  # "disabled": as the service's own test data writes it
        raise ReportError("invalid_field:debug_mode")
    return SharedInfo(version, api, report_id.lower(), origin, scheduled, registration, destination, debug == "enabled")


def shared_info_json(
    *,
    api: str,
    report_id: str,
    reporting_origin: str,
    scheduled_report_time: int,
    version: str = "1.0",
    attribution_destination: str | None = None,
    source_registration_time: int | None = None,
    debug_mode: bool = False,
) -> str:
    """A ``shared_info`` string as a browser writes it: compact JSON with keys in alphabetical order."""
    info = {"api": api, "report_id": report_id, "reporting_origin": reporting_origin,
            "scheduled_report_time": str(int(scheduled_report_time)), "version": version}
    if attribution_destination is not None:
        info["attribution_destination"] = attribution_destination
    if source_registration_time is not None:
        info["source_registration_time"] = str(int(source_registration_time))
    if debug_mode:
        info["debug_mode"] = "enabled"
    return json.dumps(info, sort_keys=True, separators=(",", ":"))


# ------------------------------------------------------------------------------------------------
# Payload (CBOR) and its encryption (HPKE)
# ------------------------------------------------------------------------------------------------


def encode_payload(contributions: Iterable[tuple[int, int, int]], pad_to: int = 0, filtering_id_bytes: int = 1) -> bytes:
    """The CBOR payload of ``(bucket, value, filtering_id)`` contributions, padded with null contributions to
    ``pad_to`` entries (reports have a fixed shape, so their size says nothing about their content). Map keys
    in CBOR's canonical order, as Chromium writes them."""
    data = [
        {"bucket": bucket.to_bytes(BUCKET_BYTES, "big"), "value": value.to_bytes(VALUE_BYTES, "big"),
         "id": filtering_id.to_bytes(filtering_id_bytes, "big")}
        for bucket, value, filtering_id in contributions
    ]
    if len(data) < pad_to:
        null = {"bucket": bytes(BUCKET_BYTES), "value": bytes(VALUE_BYTES), "id": bytes(filtering_id_bytes)}
        data.extend([null] * (pad_to - len(data)))
    return cbor2.dumps({"operation": "histogram", "data": data}, canonical=True)


def decode_payload(payload: bytes, limits: PayloadLimits = SPEC_LIMITS) -> list[tuple[int, int, int]]:
    """The contributions ``(bucket, value, filtering id)`` of a clear-text CBOR payload, null contributions
    (bucket 0, value 0) dropped, within ``limits``. (Plain tuples: this runs for every report of a job.)

    Buckets are 1 to 16 big-endian bytes, values 1 to 4, filtering ids (optional, 0 when absent) 1 to 8. Hostile
    payloads are refused cheaply: one over ``MAX_PAYLOAD_BYTES`` before it is decoded; one nested deeper than a
    payload is, or with a duplicate map key or a map key that is not a string, by the CBOR decoder; one with more
    than ``MAX_PAYLOAD_ENTRIES`` entries before they are read.
    """
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ReportError("oversized_field:payload")
    try:
        document = cbor2.loads(payload, max_depth=_MAX_CBOR_DEPTH, allow_duplicate_keys=False,
                               strict_hashable_types=True)
    except Exception:  # noqa: BLE001 - cbor2 raises several types for malformed input
        raise ReportError("malformed_payload") from None
    if type(document) is not dict or type(document.get("data")) is not list:
        raise ReportError("malformed_payload")
    if document.get("operation") != "histogram":
        raise ReportError("wrong_operation")
    if len(document["data"]) > MAX_PAYLOAD_ENTRIES:
        raise ReportError(TOO_MANY_PAYLOAD_ENTRIES)
    contributions = []
    value_sum = 0
    from_bytes = int.from_bytes
    for entry in document["data"]:
        if type(entry) is not dict:
            raise ReportError("malformed_payload")
        bucket, value, filtering_id = entry.get("bucket"), entry.get("value"), entry.get("id", b"\0")
        if not (type(bucket) is bytes and type(value) is bytes and type(filtering_id) is bytes
                and 0 < len(bucket) <= BUCKET_BYTES and 0 < len(value) <= VALUE_BYTES
                and 0 < len(filtering_id) <= FILTERING_ID_BYTES):
            raise ReportError("malformed_payload")
        bucket, value = from_bytes(bucket, "big"), from_bytes(value, "big")
        if bucket or value:
            contributions.append((bucket, value, from_bytes(filtering_id, "big")))
            value_sum += value
    reason = limits.reason(len(contributions), value_sum)
    if reason is not None:
        raise ReportError(reason)
    return contributions


class PayloadColumns(NamedTuple):
    """The contributions of many payloads, column by column, in payload order: contribution j belongs to
    payload ``owner[j]``; its bucket is ``(high[j] << 64) | low[j]``. Null contributions are dropped."""

    owner: np.ndarray  # int64
    high: np.ndarray  # uint64
    low: np.ndarray  # uint64
    values: np.ndarray  # uint64
    filtering_ids: np.ndarray  # uint64
    errors: dict  # payload index -> dead-letter reason


# The canonical payload with one-byte filtering ids, as ``encode_payload`` and Chromium write it: a fixed prefix
# (up to the array header), the entries and a fixed suffix. Every entry has the same bytes as ``_ENTRY`` except
# its id (offset 5), value (offsets 13 to 16) and bucket (offsets 25 to 40).
_NULL_ENTRY = {"bucket": bytes(BUCKET_BYTES), "value": bytes(VALUE_BYTES), "id": b"\0"}
_ENTRY = cbor2.dumps(_NULL_ENTRY, canonical=True)
_ENTRY_SIZE = len(_ENTRY)
_ENTRY_TEMPLATE = np.frombuffer(_ENTRY, np.uint8)
_ONE_ENTRY = cbor2.dumps({"operation": "histogram", "data": [_NULL_ENTRY]}, canonical=True)
_PREFIX, _SUFFIX = _ONE_ENTRY[:6], _ONE_ENTRY[7 + _ENTRY_SIZE:]  # around the one-byte array header
_HEADER_SIZE = len(_PREFIX) + 1 + len(_SUFFIX)  # a payload's bytes besides its entries
_ID_AT, _VALUE_AT, _BUCKET_AT = 5, 13, 25
_FIXED_RANGES = ((0, _ID_AT), (_ID_AT + 1, _VALUE_AT), (_VALUE_AT + VALUE_BYTES, _BUCKET_AT))
_LOW = 2**64 - 1  # a bucket's low 64 bits


def _layout(entries: int) -> tuple[bytes, bytes]:
    """The fixed prefix and suffix of the canonical payload of ``entries`` (< 24) contributions."""
    return _PREFIX + bytes((0x80 + entries,)), _SUFFIX


def _decode_same_layout(payloads: list[bytes], entries: int) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Payloads of one length that may have the canonical layout of ``entries`` entries: which of them do
    (a boolean per payload) and their (id, value, high, low) matrices of shape (payloads, entries), meaningful
    only in the rows that fit. Views and slices throughout: this is memory-bound."""
    prefix, suffix = _layout(entries)
    size = _ENTRY_SIZE
    length = len(prefix) + entries * size + len(suffix)
    rows = np.frombuffer(b"".join(payloads), np.uint8).reshape(len(payloads), length)
    fits = (rows[:, :len(prefix)] == np.frombuffer(prefix, np.uint8)).all(axis=1)
    fits &= (rows[:, length - len(suffix):] == np.frombuffer(suffix, np.uint8)).all(axis=1)
    matrix = rows[:, len(prefix):len(prefix) + entries * size].reshape(len(payloads), entries, size)
    for start, stop in _FIXED_RANGES:
        fits &= (matrix[:, :, start:stop] == _ENTRY_TEMPLATE[start:stop]).all(axis=(1, 2))
    values = np.ascontiguousarray(matrix[:, :, _VALUE_AT:_VALUE_AT + VALUE_BYTES]).view(">u4")[:, :, 0]
    buckets = np.ascontiguousarray(matrix[:, :, _BUCKET_AT:_BUCKET_AT + BUCKET_BYTES]).view(">u8")
    return fits, (matrix[:, :, _ID_AT], values, buckets[:, :, 0], buckets[:, :, 1])


def _limit_reasons(kept: np.ndarray, values: np.ndarray, limits: PayloadLimits) -> np.ndarray:
    """``PayloadLimits.reason`` for every row of a same-layout matrix at once: the index in ``_LIMIT_REASONS`` of
    each payload's reason (0 within the limits), from its non-null contributions ``kept`` and their ``values``."""
    counts = kept.sum(axis=1)
    sums = np.where(kept, values, 0).sum(axis=1, dtype=np.uint64)  # < 24 values below 2^32: exact
    return np.where(counts > limits.max_contributions, 1, np.where(sums > limits.max_value_sum, 2, 0))


_LIMIT_REASONS = ("", TOO_MANY_CONTRIBUTIONS, VALUE_SUM_OVER_BOUND)  # by code; 0: within the limits


def decode_payloads(payloads: list[bytes], limits: PayloadLimits = SPEC_LIMITS) -> PayloadColumns:
    """``decode_payload`` for many clear-text payloads at once.

    Payloads in the canonical layout (every payload ``encode_payload`` or Chromium writes with one-byte
    filtering ids) are decoded together with numpy: their bytes are checked against the layout, ids, values
    and buckets are read from fixed offsets, and ``limits`` are checked per row. Every other payload goes
    through ``decode_payload``, so the result, and the reason of a payload that fails, are the same as decoding
    one by one.
    """
    by_length: dict[int, list[int]] = {}
    for index, payload in enumerate(payloads):
        by_length.setdefault(len(payload), []).append(index)
    parts: list[tuple[np.ndarray, ...]] = []
    others: list[int] = []
    errors: dict[int, str] = {}
    for length, indexes in by_length.items():
        entries, rest = divmod(length - _HEADER_SIZE, _ENTRY_SIZE)
        if rest or not 0 <= entries < 24:
            others.extend(indexes)
            continue
        fits, (ids, values, high, low) = _decode_same_layout([payloads[i] for i in indexes], entries)
        owners = np.asarray(indexes, dtype=np.int64)
        others.extend(owners[~fits].tolist())
        kept = fits[:, None] & ((high != 0) | (low != 0) | (values != 0))
        over = _limit_reasons(kept, values, limits)
        refused = np.flatnonzero(over)
        errors.update(zip(owners[refused].tolist(), [_LIMIT_REASONS[code] for code in over[refused].tolist()], strict=True))
        kept[refused] = False
        owner = np.broadcast_to(owners[:, None], kept.shape)
        parts.append((owner[kept], high[kept].astype(np.uint64), low[kept].astype(np.uint64),
                      values[kept].astype(np.uint64), ids[kept].astype(np.uint64)))
    rows: list[tuple[int, int, int, int, int]] = []
    for index in others:
        try:
            contributions = decode_payload(payloads[index], limits)
            rows.extend((index, bucket >> 64, bucket & _LOW, value, fid) for bucket, value, fid in contributions)
        except ReportError as error:
            errors[index] = error.reason
    if rows:
        columns = list(zip(*rows, strict=True))
        parts.append((np.asarray(columns[0], np.int64), *(np.asarray(c, np.uint64) for c in columns[1:])))
    if not parts:
        empty = np.empty(0, np.uint64)
        return PayloadColumns(np.empty(0, np.int64), empty, empty, empty, empty, errors)
    owner, high, low, values, ids = (np.concatenate(column) for column in zip(*parts, strict=True))
    if len(parts) > 1 or len(by_length) > 1:  # more than one pass: restore payload order
        order = np.argsort(owner, kind="stable")
        owner, high, low, values, ids = owner[order], high[order], low[order], values[order], ids[order]
    return PayloadColumns(owner, high, low, values, ids, errors)


def generate_key_pair() -> tuple[bytes, bytes]:
    """A fresh X25519 key pair ``(private, public)``, 32 raw bytes each, from the OS CSPRNG."""
    pair = _SUITE.kem.derive_key_pair(os.urandom(32))
    return pair.private_key.to_private_bytes(), pair.public_key.to_public_bytes()


def _info(shared_info: str) -> bytes:
    return HPKE_INFO_PREFIX + shared_info.encode("utf-8")


def encrypt_payload(plaintext: bytes, shared_info: str, public_key: bytes) -> bytes:
    """HPKE base-mode seal of ``plaintext`` to ``public_key``: ``enc || ciphertext``."""
    enc, sender = _SUITE.create_sender_context(_SUITE.kem.deserialize_public_key(public_key), info=_info(shared_info))
    return enc + sender.seal(plaintext)


class PayloadDecrypter:
    """Opens encrypted payloads with the private keys of a key file, chosen by the report's ``key_id``.

    A key file with a single key opens every report whatever its ``key_id`` (the Local Testing Tool's usage).
    """

    def __init__(self, private_keys: Mapping[str, bytes]) -> None:
        if not private_keys:
            raise ValueError("a decrypter needs at least one private key")
        self._keys = {key_id: _SUITE.kem.deserialize_private_key(raw) for key_id, raw in private_keys.items()}
        self._only = next(iter(self._keys.values())) if len(self._keys) == 1 else None

    def decrypt(self, payload: bytes, shared_info: str, key_id: str) -> bytes:
        key = self._keys.get(key_id, self._only)
        if key is None:
            raise ReportError("unknown_key_id")
        if len(payload) <= _ENC_BYTES:
            raise ReportError("undecryptable_payload")
        try:
            recipient = _SUITE.create_recipient_context(payload[:_ENC_BYTES], key, info=_info(shared_info))
            return recipient.open(payload[_ENC_BYTES:])
        except Exception:  # noqa: BLE001 - pyhpke and cryptography raise several types for a bad ciphertext
            raise ReportError("undecryptable_payload") from None


def write_key_file(path: str, keys: Mapping[str, bytes]) -> None:
    """Writes ``{"keys": [{"id": ..., "key": base64}]}`` (public or private raw keys)."""
    document = {"keys": [{"id": key_id, "key": base64.b64encode(raw).decode("ascii")} for key_id, raw in keys.items()]}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2)
        handle.write("\n")


def read_key_file(path: str) -> dict[str, bytes]:
    """The keys of the key file at the local ``path`` by id (``parse_key_file``)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ValueError(f"cannot read key file {path!r}: {error.strerror}") from None
    return parse_key_file(data, repr(path))


def parse_key_file(data: bytes, where: str) -> dict[str, bytes]:
    """The keys of a key file's contents (``{"keys": [{"id", "key"}]}``, distinct string ids) by id; a ValueError
    naming ``where`` (the file's location, never its contents) and the problem otherwise."""
    shape = f'key file {where} is not {{"keys": [{{"id": <distinct strings>, "key": <base64>}}]}}'
    try:
        entries = json.loads(data)["keys"]
        keys = {entry["id"]: base64.b64decode(entry["key"], validate=True) for entry in entries}
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: pathologically nested JSON
        raise ValueError(shape) from None
    if len(keys) != len(entries) or not all(type(key_id) is str for key_id in keys):
        raise ValueError(shape)
    bad = [key_id for key_id, raw in keys.items() if len(raw) != 32]
    if not keys or bad:
        raise ValueError(f"key file {where} must hold raw 32-byte X25519 keys (bad: {bad or 'none found'})")
    return keys


# ------------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------------


def report_record(shared_info: str, payload: bytes, key_id: str = "") -> dict:
    """An ``AggregatableReport`` Avro record."""
    return {"payload": payload, "key_id": key_id, "shared_info": shared_info}


def bucket_bytes(bucket: int) -> bytes:
    """A bucket as the output domain writes it: 16-byte big-endian."""
    return bucket.to_bytes(BUCKET_BYTES, "big")


def minimal_bucket_bytes(bucket: int) -> bytes:
    """A bucket as a summary report writes it: minimal unsigned big-endian (one zero byte for bucket 0)."""
    return bucket.to_bytes(max(1, (bucket.bit_length() + 7) // 8), "big")


def bucket_from_bytes(raw: object) -> int:
    """The bucket of 1 to 16 big-endian bytes; a ReportError ``malformed_bucket`` otherwise."""
    if type(raw) is not bytes or not 1 <= len(raw) <= BUCKET_BYTES:
        raise ReportError("malformed_bucket")
    return int.from_bytes(raw, "big")
