"""Random sources (DESIGN.md, "Two kinds of randomness"): ``SecureSource`` (kind ``"secure"``), the OS CSPRNG,
for anything a real deployment would release; ``SecretSource`` (kind ``"secure"`` too), a stream keyed by a
secret drawn from the OS CSPRNG, for a release that a retry must reproduce exactly; ``SeededSource`` (kind
``"seeded"``), a numpy PCG64 generator for vectorised simulation and tests, plus a counter-based
``keyed_uniform`` whose value depends only on (seed, key), so batch and streaming runs draw the same noise for the
same (group, step) whatever the processing order.

Every uniform double lies on the grid {m / 2**53 : 1 <= m < 2**53}: 53 random bits, strictly inside (0, 1), and
symmetric (u and 1 - u are equally likely), so inverse-CDF samples of symmetric noise are symmetric too. (The
midpoint grid (m + 0.5) / 2**53 is not used: its upper half is not representable in binary64 and m = 2**53 - 1
rounds to exactly 1.0.)
"""
from __future__ import annotations

import hashlib
import numbers
import operator
import os
import secrets
from abc import ABC, abstractmethod

import numpy as np

_GRID_BITS = 53
_GRID = 2**_GRID_BITS  # uniforms are m / 2**53 with 1 <= m < 2**53


def _scalar_or_array(values: np.ndarray) -> np.ndarray | float:
    """A Python float for a 0-d result (a scalar argument), the array otherwise."""
    return float(values) if values.ndim == 0 else values


# --------------------------------------------------------------------------------------------
# Random sources
# --------------------------------------------------------------------------------------------


class RandomSource(ABC):
    """Where noise comes from; ``kind`` ("secure" or "seeded") is recorded in every output summary."""

    kind: str

    @abstractmethod
    def uniform(self) -> float:
        """One U(0, 1) double m / 2**53, 1 <= m < 2**53: strictly inside (0, 1)."""

    @abstractmethod
    def keyed_uniform(self, key: tuple) -> float:
        """One U(0, 1) double for ``key`` (a tuple of str and int), on the same grid as ``uniform``."""

    @abstractmethod
    def uniforms(self, size: int) -> np.ndarray:
        """``size`` independent U(0, 1) doubles on the grid of ``uniform`` (vectorised)."""

    @abstractmethod
    def keyed_uniforms(self, key: tuple, size: int) -> np.ndarray:
        """A block of ``size`` U(0, 1) doubles for ``key``: seeded, a function of (seed, key); secure, fresh."""

    @abstractmethod
    def randbelow(self, n: int) -> int:
        """An exactly uniform integer in [0, n) for any positive Python int n (no floating point)."""

    def random_words(self, size: int) -> np.ndarray:
        """``size`` independent, exactly uniform 64-bit words as a uint64 array (vectorised).

        The raw material of the exact vectorised samplers (``randbelow_array``,
        ``bernoulli_exp_array``, ``DiscreteLaplace.sample_exact_array``). This default
        makes one ``randbelow(2**64)`` call per word: exact but slow; ``SecureSource``
        and ``SeededSource`` override it with one bulk draw.
        """
        return np.array([self.randbelow(_WORD) for _ in range(_check_size(size))], dtype=np.uint64)

    @abstractmethod
    def keyed_token(self, key: tuple) -> str:
        """A 128-bit identifier as 32 hex digits (a report identifier r, Cookie Monster paper Sec. 4.2): seeded, a function
        of (seed, key), so batch and streaming runs name the same report alike; secure, fresh and unpredictable."""

    @abstractmethod
    def keyed_child(self, key: tuple) -> RandomSource:
        """A source for everything drawn about ``key`` (one query's noise): seeded, a fresh ``SeededSource`` whose
        seed is a function of (seed, key), so the draws do not depend on processing order; secure, itself."""


_WORD = 2**64  # random_words draws uniform integers in [0, 2**64)


def _check_size(size: int) -> int:
    """``size`` as a Python int (numpy integers accepted); a ValueError if it is negative."""
    size = operator.index(size)
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    return size


def _check_randbelow(n: int) -> int:
    """``n`` as a Python int (numpy integers accepted); a ValueError unless it is >= 1."""
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"randbelow needs a positive integer, got {n!r}")
    return n


class SecureSource(RandomSource):
    """The OS CSPRNG (``secrets`` / ``os.urandom``): the default for anything released.

    ``keyed_uniform`` ignores the key and draws fresh: a real deployment must
    not be able to replay its noise. Stateless, hence picklable.
    """

    kind = "secure"

    def uniform(self) -> float:
        return (1 + secrets.randbelow(_GRID - 1)) / _GRID

    def keyed_uniform(self, key: tuple) -> float:
        return self.uniform()

    def keyed_uniforms(self, key: tuple, size: int) -> np.ndarray:
        return self.uniforms(size)

    def uniforms(self, size: int) -> np.ndarray:
        m = np.frombuffer(os.urandom(8 * size), dtype="<u8") >> np.uint64(64 - _GRID_BITS)
        zeros = np.flatnonzero(m == 0)
        while zeros.size:  # m is uniform on [0, 2**53); redrawing the zeros makes it uniform on [1, 2**53)
            m[zeros] = np.frombuffer(os.urandom(8 * zeros.size), dtype="<u8") >> np.uint64(64 - _GRID_BITS)
            zeros = zeros[m[zeros] == 0]
        return m.astype(np.float64) / _GRID

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(_check_randbelow(n))

    def random_words(self, size: int) -> np.ndarray:
        """``size`` words from one ``os.urandom`` call (about 3.4 ns per byte here); a writable copy."""
        return np.frombuffer(os.urandom(8 * _check_size(size)), dtype=np.uint64).copy()

    def keyed_token(self, key: tuple) -> str:
        return secrets.token_hex(16)

    def keyed_child(self, key: tuple) -> RandomSource:
        return self


def _encode_item(value: str | int) -> bytes:
    """Self-delimiting, typed encoding of one key element: b"i<len>:<decimal>" or b"s<len>:<utf-8>"."""
    if type(value) is str:  # the common cases first, by %-formatting: this runs for every report id and keyed draw
        body = value.encode("utf-8")
        return b"s%d:%b" % (len(body), body)
    if type(value) is int:
        digits = b"%d" % value
        return b"i%d:%b" % (len(digits), digits)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        body, tag = str(int(value)).encode("ascii"), b"i"
    elif isinstance(value, str):
        body, tag = value.encode("utf-8"), b"s"
    else:
        raise TypeError(f"key elements must be str or int, got {type(value).__name__}: {value!r}")
    return tag + str(len(body)).encode("ascii") + b":" + body


def _encode_key(key: tuple) -> bytes:
    """A key's canonical encoding: its length, then each element (``_encode_item``)."""
    return b"".join([_encode_item(len(key)), *map(_encode_item, key)])


class SeededSource(RandomSource):
    """Reproducible randomness for simulation and tests (never for released outputs).

    ``uniform``, ``uniforms`` and ``randbelow`` advance one numpy
    ``Generator(PCG64(seed))``. ``keyed_uniform(key)`` is counter-based: the
    first 53 bits of BLAKE2b over a canonical, self-delimiting encoding of
    (seed, key, counter), counter 0 unless those bits are all zero (then 1, ...).
    It is a deterministic function of (seed, key), independent across distinct
    keys as far as BLAKE2b is a random function, and does not touch the
    generator. The generator pickles with its state, so a pickled source
    resumes exactly where it was (Beam state, workers).
    """

    kind = "seeded"

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)
        self._seed_prefix: bytes = _encode_item(self.seed)
        self.generator: np.random.Generator = np.random.Generator(np.random.PCG64(self.seed))

    def uniform(self) -> float:
        return int(self.generator.integers(1, _GRID, dtype=np.int64)) / _GRID

    def _key_prefix(self, key: tuple) -> bytes:
        return self._seed_prefix + _encode_key(key)

    def keyed_uniform(self, key: tuple) -> float:
        prefix = self._key_prefix(key)
        counter = 0
        while True:
            digest = hashlib.blake2b(prefix + _encode_item(counter), digest_size=8, person=b"keyed_uniform_v1")
            m = int.from_bytes(digest.digest(), "big") >> (64 - _GRID_BITS)
            if m:
                return m / _GRID
            counter += 1

    def uniforms(self, size: int) -> np.ndarray:
        return self.generator.integers(1, _GRID, size=size, dtype=np.int64).astype(np.float64) / _GRID

    def keyed_uniforms(self, key: tuple, size: int) -> np.ndarray:
        """A block of ``size`` values: 53-bit words of SHAKE-256 over the same encoding of (seed, key) as
        ``keyed_uniform`` (an extendable-output function, so any block length is one call); the rare zero
        word is redrawn from the next counter, keeping the values uniform on the grid."""
        prefix = self._key_prefix(key)
        digest = hashlib.shake_256(prefix + _encode_item(0)).digest(8 * size)
        words = np.frombuffer(digest, dtype=">u8") >> np.uint64(64 - _GRID_BITS)
        counter = 0
        while not words.all():
            counter += 1
            zeros = np.flatnonzero(words == 0)
            fresh = hashlib.shake_256(prefix + _encode_item(counter)).digest(8 * zeros.size)
            words = words.copy()
            words[zeros] = np.frombuffer(fresh, dtype=">u8") >> np.uint64(64 - _GRID_BITS)
        return words.astype(np.float64) / _GRID

    def keyed_token(self, key: tuple) -> str:
        digest = hashlib.blake2b(self._key_prefix(key), digest_size=16, person=b"keyed_token_v1")
        return digest.hexdigest()

    def keyed_child(self, key: tuple) -> RandomSource:
        digest = hashlib.blake2b(self._key_prefix(key), digest_size=16, person=b"keyed_child_v1")
        return SeededSource(int.from_bytes(digest.digest(), "big"))

    def random_words(self, size: int) -> np.ndarray:
        """``size`` raw 64-bit outputs of the PCG64 bit generator (``random_raw``): advances the generator."""
        return self.generator.bit_generator.random_raw(_check_size(size))

    def randbelow(self, n: int) -> int:
        """Rejection on n.bit_length() raw generator bits: exact for any n, fewer than 2 tries on average."""
        n = _check_randbelow(n)
        bits = n.bit_length()
        words = (bits + 63) // 64
        while True:
            value = 0
            for _ in range(words):
                value = (value << 64) | int(self.generator.bit_generator.random_raw())
            value >>= 64 * words - bits
            if value < n:
                return value


class SecretSource(RandomSource):
    """Secure randomness that a retry reproduces: the noise of a release as a function of a secret.

    A runner may retry the step that draws a release's noise (a failed bundle), and an operator may re-run a job
    whose driver died after the release; fresh noise each time would publish two noisy answers to the same query,
    a privacy failure. So a released job's noise comes from a 256-bit ``secret`` drawn once from the OS CSPRNG
    and kept with the job's entry in the privacy-budget ledger (``transforms.summary_reports.ledger``): the
    draws are BLAKE2b in counter mode keyed by the secret (a pseudo-random function, as in the HMAC_DRBG of NIST
    SP 800-90A, with BLAKE2b's keyed mode in place of HMAC), so whoever does not hold the secret cannot predict
    them, and a retry with the secret draws exactly the same values. ``keyed_child(key)`` derives a key's own
    stream, independent of the order in which keys are processed. Kind ``"secure"``.
    """

    kind = "secure"
    _BLOCK = 64  # bytes per BLAKE2b block

    def __init__(self, secret: bytes, label: bytes = b"") -> None:
        if not isinstance(secret, bytes) or len(secret) < 32:
            raise ValueError("a SecretSource needs a secret of at least 32 bytes")
        self._key = hashlib.blake2b(label, key=secret[:64], digest_size=64, person=b"secret_source_v1").digest()
        self._counter = 0
        self._buffer = b""

    @staticmethod
    def new_secret() -> bytes:
        """A fresh 256-bit secret from the OS CSPRNG."""
        return secrets.token_bytes(32)

    def _bytes(self, n: int) -> bytes:
        """The next ``n`` bytes of the stream."""
        if n > len(self._buffer):
            blocks = -(-(n - len(self._buffer)) // self._BLOCK)
            start, self._counter = self._counter, self._counter + blocks
            self._buffer += b"".join(
                hashlib.blake2b(counter.to_bytes(16, "little"), key=self._key, digest_size=self._BLOCK).digest()
                for counter in range(start, start + blocks)
            )
        taken, self._buffer = self._buffer[:n], self._buffer[n:]
        return taken

    def random_words(self, size: int) -> np.ndarray:
        return np.frombuffer(self._bytes(8 * _check_size(size)), dtype="<u8").copy()

    def uniforms(self, size: int) -> np.ndarray:
        m = self.random_words(size) >> np.uint64(64 - _GRID_BITS)
        zeros = np.flatnonzero(m == 0)
        while zeros.size:  # as SecureSource.uniforms: redrawing the zeros makes m uniform on [1, 2**53)
            m[zeros] = self.random_words(zeros.size) >> np.uint64(64 - _GRID_BITS)
            zeros = zeros[m[zeros] == 0]
        return m.astype(np.float64) / _GRID

    def uniform(self) -> float:
        return float(self.uniforms(1)[0])

    def randbelow(self, n: int) -> int:
        """Rejection on n.bit_length() bits of the stream: exact for any n, fewer than 2 tries on average."""
        n = _check_randbelow(n)
        bits = n.bit_length()
        while True:
            value = int.from_bytes(self._bytes((bits + 7) // 8), "big") >> (-bits % 8)
            if value < n:
                return value

    def keyed_child(self, key: tuple) -> SecretSource:
        return SecretSource(self._key, _encode_key(key))  # the child's own stream, keyed by a PRF of this one's

    def keyed_uniform(self, key: tuple) -> float:
        """One keyed BLAKE2b of (key, counter) under this source's key (its own personalisation, apart from the
        stream's blocks and the children's keys): the first 53 bits, counter 0 unless they are all zero. One hash
        and no child, as ``SeededSource.keyed_uniform``: this runs for every keyed draw of a secure run."""
        prefix = _encode_key(key)
        counter = 0
        while True:
            digest = hashlib.blake2b(prefix + _encode_item(counter), key=self._key, digest_size=8,
                                     person=b"keyed_uniform_v1").digest()
            m = int.from_bytes(digest, "big") >> (64 - _GRID_BITS)
            if m:
                return m / _GRID
            counter += 1

    def keyed_uniforms(self, key: tuple, size: int) -> np.ndarray:
        return self.keyed_child(key).uniforms(size)

    def keyed_token(self, key: tuple) -> str:
        """128 bits of one keyed BLAKE2b of the key (personalised apart from the other draws)."""
        return hashlib.blake2b(_encode_key(key), key=self._key, digest_size=16, person=b"keyed_token_v1").hexdigest()


def make_source(seed: int | None) -> RandomSource:
    """``SecureSource()`` when no seed is given (the default for released outputs), else ``SeededSource(seed)``."""
    return SecureSource() if seed is None else SeededSource(seed)


# --------------------------------------------------------------------------------------------
# Continuous noise
# --------------------------------------------------------------------------------------------
