"""The noise key: one 256-bit secret, held outside every store, from which every secret a job needs is derived.

A released value's noise must not be readable by whoever reads the stores the release leaves behind (a ledger that
dashboards query, a state store on a shared disk): with it, the noise could be subtracted from the release and the
guarantee would be gone. So no store keeps a seed. A job's noise is a ``SecretSource`` keyed by

    HKDF-SHA256(key, salt=nonce, info=purpose || job || ...)      (RFC 5869)

where the nonce is a public random value the job's store or ledger keeps with the job (a new store or a new job
starts with a new one, so two different jobs never share noise), and the key is read from a location the stores
never see (``--noise-key``: a file readable by its owner only, ``env:NAME``, a Beam file system URL; by default a key
file created ``0600`` in the user's configuration directory on first use). Whatever is computed again (a retried
bundle, a restarted job, a re-run release) derives the same secret and draws the same noise: derive, don't store.
The key at rest in a state store is derived the same way (``purpose`` ``state``, ``transforms.core.durable``).

The key's id (``key_id``, 16 hex digits of an HKDF output, which reveals nothing of the key) is recorded with each
job; a run that continues a job under another key stops in one line. docs/security.md says how to rotate keys.
"""
from __future__ import annotations

import binascii
import os
import secrets
from dataclasses import dataclass, field
from functools import lru_cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from transforms.core.mechanisms.noise import RandomSource, SecretSource
from transforms.core.private_files import SharedFile, check_private, create_private_file
from transforms.core.secrets import SecretUnavailable, is_environment, read_secret

KEY_ENVIRONMENT = "PM_BEAM_NOISE_KEY"  # when set, the location of the key of a run that names none
KEY_BYTES = 32
KEY_FILE = "noise.key"
_INFO = b"pm-beam/v1"


def default_key_location() -> str:
    """``$PM_BEAM_NOISE_KEY``, else ``noise.key`` in the user's configuration directory (``$XDG_CONFIG_HOME/pm-beam``,
    by default ``~/.config/pm-beam``)."""
    given = os.environ.get(KEY_ENVIRONMENT)
    if given:
        return given
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "pm-beam", KEY_FILE)


def _info(purpose: str, context: tuple[str | int, ...]) -> bytes:
    """HKDF's ``info``: the purpose and the context, each length-prefixed (no two contexts share an encoding)."""
    parts = [_INFO, purpose.encode("utf-8"), *(str(item).encode("utf-8") for item in context)]
    return b"".join(b"%d:%b" % (len(part), part) for part in parts)


@dataclass(frozen=True)
class NoiseKey:
    """A key's material (never printed) and its id."""

    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.material) < KEY_BYTES:
            raise ValueError(f"a noise key has at least {KEY_BYTES} bytes, got {len(self.material)}")

    def derive(self, purpose: str, *context: str | int, salt: bytes = b"", length: int = KEY_BYTES) -> bytes:
        """``length`` bytes of HKDF-SHA256 over the key, with ``salt`` and the purpose and context as info."""
        return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt or None,
                    info=_info(purpose, context)).derive(self.material)

    @property
    def key_id(self) -> str:
        """16 hex digits naming the key (an HKDF output of its own: it reveals nothing of the key)."""
        return self.derive("key-id", length=8).hex()

    def text(self) -> str:
        """The key as a key file holds it: hex digits and a newline."""
        return self.material.hex() + "\n"

    @classmethod
    def new(cls) -> NoiseKey:
        """A fresh key from the OS CSPRNG."""
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def parse(cls, data: bytes, where: str) -> NoiseKey:
        """A key from its text (at least 64 hex digits, white space ignored); ``ValueError`` naming ``where``."""
        text = b"".join(data.split())
        try:
            material = binascii.unhexlify(text)
        except (binascii.Error, ValueError):
            material = b""
        if len(material) < KEY_BYTES:
            raise ValueError(f"{where} is not a noise key (at least {2 * KEY_BYTES} hex digits; "
                             "pm-beam noise-key new PATH makes one)")
        return cls(material)


def _is_local(location: str) -> bool:
    return not is_environment(location) and "://" not in location


def write_key_file(path: str, key: NoiseKey) -> None:
    """Write ``key`` to a new file ``path``, ``0600`` in a directory created ``0700``; ``FileExistsError`` if it
    exists (a key is never overwritten: what it derived would be lost)."""
    if not create_private_file(path):
        raise FileExistsError(f"{path} exists: a noise key is never overwritten")
    with open(path, "w", encoding="ascii") as handle:
        handle.write(key.text())


def read_noise_key(location: str, accept_shared: bool = False) -> NoiseKey:
    """The key at ``location``; ``SecretUnavailable`` naming the location (never the key) when it cannot be read, is
    not a key, or is a local file that group or others may read (unless ``accept_shared``)."""
    if _is_local(location):
        try:
            check_private(location, "the noise key", accept_shared)
        except SharedFile as error:
            raise SecretUnavailable(str(error)) from None
    try:
        return NoiseKey.parse(read_secret(location), repr(location))
    except ValueError as error:
        raise SecretUnavailable(str(error)) from None


@dataclass(frozen=True)
class KeyLocation:
    """Where a run's key is and the id of the key found there when the run started: what a job's graph carries,
    never the key. Each process reads the key when it first needs it and checks its id."""

    location: str
    key_id: str

    def read(self) -> NoiseKey:
        key = _cached_key(self.location)
        if key.key_id != self.key_id:  # the key there changed since it was cached (a rotation): read it again
            _cached_key.cache_clear()
            key = _cached_key(self.location)
        if key.key_id != self.key_id:
            raise SecretUnavailable(f"the noise key at {self.location!r} is {key.key_id}, but the run started with key "
                                    f"{self.key_id}: give every process the same key")
        return key

    def source(self, purpose: str, *context: str | int, salt: bytes = b"") -> DerivedSource:
        """The secure noise source of ``purpose`` and ``context`` (a job, a step), derived from this key."""
        return DerivedSource(self, purpose, tuple(context), salt)


@lru_cache(maxsize=8)
def _cached_key(location: str) -> NoiseKey:
    """A process reads each key once (its workers share it); the permissions were checked when the run started."""
    return read_noise_key(location, accept_shared=True)


def resolve_key(location: str | None, accept_shared: bool = False) -> KeyLocation:
    """The run's key (``location``, else ``default_key_location()``), read and checked now; the default key file is
    created on first use (``0600``). A local path is made absolute (workers need not run in this directory)."""
    if location is None:
        location = default_key_location()
        if _is_local(location) and not os.path.exists(location):
            write_key_file(location, NoiseKey.new())
            print(f"noise key: created {location} (0600; keep it, and back it up: it derives every noise value)",
                  flush=True)
    if _is_local(location):
        location = os.path.abspath(location)
    key = read_noise_key(location, accept_shared)
    return KeyLocation(location, key.key_id)


class DerivedSource(RandomSource):
    """A ``SecretSource`` keyed by ``HKDF(key, salt, purpose || context)``, built in each process from the key's
    location when first drawn from: it pickles as the location, the key id and the context, never a secret."""

    kind = "secure"

    def __init__(self, key: KeyLocation, purpose: str, context: tuple, salt: bytes = b"") -> None:
        self.key, self.purpose, self.context, self.salt = key, purpose, context, salt
        self._inner: SecretSource | None = None

    def __getstate__(self) -> dict:
        return {"key": self.key, "purpose": self.purpose, "context": self.context, "salt": self.salt}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state, _inner=None)

    @property
    def inner(self) -> SecretSource:
        if self._inner is None:
            self._inner = SecretSource(self.key.read().derive(self.purpose, *self.context, salt=self.salt))
        return self._inner

    def uniform(self) -> float:
        return self.inner.uniform()

    def keyed_uniform(self, key: tuple) -> float:
        return self.inner.keyed_uniform(key)

    def uniforms(self, size: int):
        return self.inner.uniforms(size)

    def keyed_uniforms(self, key: tuple, size: int):
        return self.inner.keyed_uniforms(key, size)

    def randbelow(self, n: int) -> int:
        return self.inner.randbelow(n)

    def random_words(self, size: int):
        return self.inner.random_words(size)

    def keyed_token(self, key: tuple) -> str:
        return self.inner.keyed_token(key)

    def keyed_child(self, key: tuple) -> RandomSource:
        return self.inner.keyed_child(key)

    def __repr__(self) -> str:
        return f"DerivedSource(key {self.key.key_id}, {self.purpose}, {self.context})"
