"""Decoded per-key state kept in the process between a stateful DoFn's calls.

Decoding a shard's state costs far more than using it (a k-anonymity group's record about 100 us, a budgeting
device's tens). A stateful DoFn that keeps its decoded state here decodes nothing when the key's Beam state
still holds the token it wrote together with that state: the state was last written by this process. Any other
writer (another worker, a restart that restored the state) leaves a different token or none, and the state is
decoded again, so the cache never stands in for state it did not write.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")  # a key's decoded state


class ProcessStateCache(Generic[V]):
    """Decoded state per (DoFn instance, key), valid while the key's token state holds the token written with it."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, Hashable], tuple[bytes, V]] = {}

    def get(self, owner: str, key: Hashable, token_state, load: Callable[[], V]) -> V:
        """The cached value of ``key`` when ``token_state`` still holds its token, else ``load()`` (cached)."""
        token = token_state.read() or b""
        entry = self._entries.get((owner, key))
        if entry is not None and entry[0] == token:
            return entry[1]
        value = load()
        self._entries[(owner, key)] = (token, value)
        return value

    def written(self, owner: str, key: Hashable, token_state, value: V) -> None:
        """After the key's state was written from ``value``: a new token, in the state and in the cache."""
        token = uuid.uuid4().bytes
        token_state.write(token)
        self._entries[(owner, key)] = (token, value)

    def clear(self) -> None:
        """Forget every decoded value, as a new worker process starts: each key is decoded again from its state."""
        self._entries.clear()
