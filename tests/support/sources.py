"""Test doubles for random sources."""
from __future__ import annotations

import hashlib

import numpy as np

from transforms.core.mechanisms.noise import RandomSource, SeededSource


class ConstantSource(RandomSource):
    """Every uniform is ``u``: with u = 0.5 every symmetric noise draw is exactly 0 (a no-noise source).

    Records the key of every draw (a block of keyed uniforms counts once), so tests can check
    when the mechanisms draw and when they do not.
    """

    kind = "seeded"

    def __init__(self, u: float = 0.5) -> None:
        self.u = u
        self.keys: list[tuple] = []

    @property
    def draws(self) -> int:
        return len(self.keys)

    def uniform(self) -> float:
        self.keys.append(())
        return self.u

    def keyed_uniform(self, key: tuple) -> float:
        self.keys.append(key)
        return self.u

    def keyed_uniforms(self, key: tuple, size: int) -> np.ndarray:
        self.keys.append(key)
        return np.full(size, self.u)

    def uniforms(self, size: int) -> np.ndarray:
        self.keys.extend([()] * size)
        return np.full(size, self.u)

    def randbelow(self, n: int) -> int:
        raise NotImplementedError("ConstantSource serves continuous noise only")

    def random_words(self, size: int) -> np.ndarray:
        raise NotImplementedError("ConstantSource serves continuous noise only")

    def keyed_token(self, key: tuple) -> str:
        """A deterministic 32-hex-digit token of ``key`` (not a draw: not recorded)."""
        return hashlib.blake2b(repr(key).encode("utf-8"), digest_size=16).hexdigest()

    def keyed_child(self, key: tuple) -> RandomSource:
        """Itself: every draw, keyed or not, is ``u`` anyway."""
        return self


class ReproducibleSource(RandomSource):
    """A seeded, reproducible source that is NOT a ``SeededSource``: samplers treat it like the
    ``SecureSource`` (``DiscreteLaplace.sample_array`` takes its exact vectorised path), while a
    fixed seed keeps statistical tests reproducible.

    Every draw is delegated to a private ``SeededSource(seed)``. Counts the words drawn through
    ``random_words`` and the scalar ``randbelow`` calls, so tests can check which path a sampler took.
    """

    kind = "seeded"

    def __init__(self, seed: int) -> None:
        self._inner = SeededSource(seed)
        self.seed = self._inner.seed
        self.words_drawn = 0
        self.word_calls = 0
        self.randbelow_calls = 0

    def uniform(self) -> float:
        return self._inner.uniform()

    def keyed_uniform(self, key: tuple) -> float:
        return self._inner.keyed_uniform(key)

    def uniforms(self, size: int) -> np.ndarray:
        return self._inner.uniforms(size)

    def keyed_uniforms(self, key: tuple, size: int) -> np.ndarray:
        return self._inner.keyed_uniforms(key, size)

    def randbelow(self, n: int) -> int:
        self.randbelow_calls += 1
        return self._inner.randbelow(n)

    def random_words(self, size: int) -> np.ndarray:
        words = self._inner.random_words(size)
        self.words_drawn += words.size
        self.word_calls += 1
        return words

    def keyed_token(self, key: tuple) -> str:
        return self._inner.keyed_token(key)

    def keyed_child(self, key: tuple) -> RandomSource:
        """A ``ReproducibleSource`` seeded like ``SeededSource.keyed_child``: a function of (seed, key)."""
        return ReproducibleSource(self._inner.keyed_child(key).seed)
