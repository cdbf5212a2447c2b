"""Test doubles for random sources."""
from __future__ import annotations

import hashlib

import numpy as np

from transforms.mechanisms.noise import RandomSource


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

    def keyed_token(self, key: tuple) -> str:
        """A deterministic 32-hex-digit token of ``key`` (not a draw: not recorded)."""
        return hashlib.blake2b(repr(key).encode("utf-8"), digest_size=16).hexdigest()

    def keyed_child(self, key: tuple) -> RandomSource:
        """Itself: every draw, keyed or not, is ``u`` anyway."""
        return self
