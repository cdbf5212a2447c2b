"""The state store's rows encrypted at rest (docs/security.md, "State stores").

A streaming job's state holds what must not be read at rest: the AboveThreshold instances' noisy thresholds and
step noises (with them, whoever watches the verdicts learns the true counts near the threshold), the devices'
budgeting filters, the windows' distinct user ids, buffered input records and dead letters (personal data). So
every value the store keeps (snapshots, per-key records, the release log, the source's dead letters) is sealed
with AES-256-GCM (NIST SP 800-38D) under a key derived from the run's state key (``--state-key``, by default the
noise key: HKDF, ``transforms.core.noise_key``), with a fresh 96-bit nonce per write and the row's place (table,
job, step, key or sequence number) as associated data, so that a row moved to another place does not open. A
per-key row's key (a group, a device id) is stored as a keyed hash (HMAC-SHA256 under a second derived key): the
store can update and delete it without learning it; the key itself is inside the sealed value.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from transforms.core.noise_key import KeyLocation

FORMAT = "sealed-v1"  # the store's format, kept in its store_meta table
_VERSION = b"\x01"
_NONCE_BYTES = 12
# row names kept per Seal (about 17 MB when full): a live device job writes the devices it replayed at every firing,
# thousands a firing, and a name cost 9 µs to derive (3 % of the measurement job's firings, benchmarks/README.md,
# issue 40, session 17)
_ROW_NAMES = 1 << 16


class SealBroken(Exception):
    """A sealed value that does not open under this key: another key, or a value altered or moved."""


def _encode(parts: tuple[str | int | bytes, ...]) -> bytes:
    """A self-delimiting encoding of a row's place (each part length-prefixed)."""
    encoded = [part if isinstance(part, bytes) else str(part).encode("utf-8") for part in parts]
    return b"".join(b"%d:%b" % (len(part), part) for part in encoded)


class Seal:
    """AES-256-GCM sealing and keyed row names under the keys derived from one state key."""

    def __init__(self, key: KeyLocation) -> None:
        material = key.read()
        self.key_id = key.key_id
        self._aead = AESGCM(material.derive("state", "aes-256-gcm"))
        self._names = material.derive("state", "row-names")
        self.row_name = functools.lru_cache(maxsize=_ROW_NAMES)(self._row_name)

    def seal(self, data: bytes, *place: str | int) -> bytes:
        """``data`` encrypted and authenticated for ``place``: version, nonce, ciphertext and tag."""
        nonce = os.urandom(_NONCE_BYTES)
        return _VERSION + nonce + self._aead.encrypt(nonce, data, _encode(place))

    def open(self, blob: bytes, *place: str | int) -> bytes:
        """The data sealed for ``place``; ``SealBroken`` when it does not open."""
        blob = bytes(blob)
        if blob[:1] != _VERSION or len(blob) < 1 + _NONCE_BYTES + 16:
            raise SealBroken("a value of the store is not sealed in a format this version reads")
        try:
            return self._aead.decrypt(blob[1:1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES:], _encode(place))
        except InvalidTag:
            raise SealBroken(f"a value of the store does not open with state key {self.key_id} (another key, or "
                             "the value was altered)") from None

    def _row_name(self, *place: str | int) -> str:
        """The keyed hash a per-key row is stored under (32 hex digits): ``row_name``, which keeps the latest
        ones."""
        return hmac.new(self._names, _encode(place), hashlib.sha256).hexdigest()[:32]

    def seal_keyed(self, key: str, value: bytes, *place: str | int) -> bytes:
        """A per-key row's value: its key and its value, sealed together."""
        body = key.encode("utf-8")
        return self.seal(b"%d:%b%b" % (len(body), body, value), *place)

    def open_keyed(self, blob: bytes, *place: str | int) -> tuple[str, bytes]:
        """The key and value ``seal_keyed`` sealed."""
        data = self.open(blob, *place)
        length, _, rest = data.partition(b":")
        size = int(length)
        return rest[:size].decode("utf-8"), rest[size:]
