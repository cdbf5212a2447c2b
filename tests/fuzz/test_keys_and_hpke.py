"""Fuzzing the decryption path of ``schemas/aggregatable.py``: HPKE envelopes (``PayloadDecrypter.decrypt``) and key
files (``parse_key_file``).

Properties: an envelope opens to exactly the sealed payload when nothing in it, its ``shared_info`` or its key id
was changed, and otherwise raises ``ReportError`` ``undecryptable_payload`` (``unknown_key_id`` for an id that no
key of a several-key file has), never anything else; a key file gives raw 32-byte keys by distinct string ids or a
``ValueError`` naming the file's location and never its contents. Inputs: envelopes cut short (inside the
encapsulated key or the tag), with bytes flipped, inserted or deleted, random bytes; ``shared_info`` changed; key
ids unknown, empty or long; key files of random bytes, mutated valid files, JSON of any shape (NaN, nesting deeper
than the parser allows, duplicate and non-string ids, keys of the wrong length or not base64).

Examples: 300 and 400, about 1.5 s on one core (the folder: about 15 s, under 30 s).
"""
from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.aggregatable import PayloadDecrypter, ReportError, encode_payload, encrypt_payload, parse_key_file
from tests.support.hostile_inputs import FUZZ, JSON_VALUES, TEXT, mutations

PRIVATE = {key_id: bytes([number]) * 32 for number, key_id in enumerate(("k1", "k2"), start=1)}  # fixed, reproducible
PUBLIC = {key_id: X25519PrivateKey.from_private_bytes(raw).public_key().public_bytes_raw()
          for key_id, raw in PRIVATE.items()}
INFO = '{"api":"shared-storage","report_id":"6b3f1e0c-1d2a-4c5b-9e8f-0a1b2c3d4e5f","version":"1.0"}'
PLAINTEXT = encode_payload([(5, 7, 0)], pad_to=20)
SEALED = encrypt_payload(PLAINTEXT, INFO, PUBLIC["k1"])
KEY_FILE = json.dumps({"keys": [{"id": key_id, "key": base64.b64encode(raw).decode()} for key_id, raw in PRIVATE.items()]})
WHERE = "'gs://bucket/keys.json'"


@settings(FUZZ, max_examples=300)
@given(envelope=mutations(SEALED) | st.binary(max_size=64) | st.sampled_from([SEALED[:31], SEALED[:32], SEALED[:-1]]),
       info=st.just(INFO) | mutations(INFO.encode()).map(lambda data: data.decode("utf-8", "surrogateescape")),
       key_id=st.sampled_from(["k1", "k2", "", "unknown", "k" * 200]), several=st.booleans())
def test_an_envelope_opens_only_unchanged_and_otherwise_gives_its_reason(envelope, info, key_id, several):
    decrypter = PayloadDecrypter(PRIVATE if several else {"k1": PRIVATE["k1"]})
    try:
        opened = decrypter.decrypt(envelope, info, key_id)
    except ReportError as error:
        unknown = several and key_id not in PRIVATE
        assert error.reason == ("unknown_key_id" if unknown else "undecryptable_payload")
        assert unknown or (envelope, info, key_id if several else "k1") != (SEALED, INFO, "k1")
    else:
        assert opened == PLAINTEXT and (envelope, info) == (SEALED, INFO) and (key_id == "k1" or not several)


base64_keys = st.binary(max_size=40).map(lambda raw: base64.b64encode(raw).decode())
entries = st.fixed_dictionaries({"id": TEXT | st.integers() | st.none(), "key": base64_keys | TEXT})
key_files = (st.binary(max_size=48) | mutations(KEY_FILE.encode())
             | st.builds(lambda value: json.dumps(value).encode(), JSON_VALUES | st.fixed_dictionaries({"keys": JSON_VALUES}))
             | st.builds(lambda listed: json.dumps({"keys": listed}).encode(), st.lists(entries, max_size=3))
             | st.sampled_from([b"[" * 100_000 + b"]" * 100_000, KEY_FILE.replace("k2", "k1").encode(), b"\xff\xfe{}"]))


@settings(FUZZ, max_examples=400)
@given(data=key_files)
def test_a_key_file_gives_keys_by_id_or_an_error_naming_only_its_location(data):
    try:
        keys = parse_key_file(data, WHERE)
    except ValueError as error:
        message = str(error)
        assert type(error) is ValueError and message.startswith(f"key file {WHERE} ") and "\n" not in message
        assert not any(base64.b64encode(raw).decode() in message for raw in PRIVATE.values())
    else:
        assert keys and all(type(key_id) is str and type(raw) is bytes and len(raw) == 32 for key_id, raw in keys.items())
