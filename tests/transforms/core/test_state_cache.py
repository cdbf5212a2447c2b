"""The process cache of decoded per-key state: used only while the key's state holds the token written with it."""
from __future__ import annotations

from transforms.core.state_cache import ProcessStateCache


class _Cell:
    """A ReadModifyWrite state cell's read and write."""

    def __init__(self) -> None:
        self.value: bytes | None = None

    def read(self) -> bytes | None:
        return self.value

    def write(self, value: bytes) -> None:
        self.value = value


def test_a_key_written_here_is_not_decoded_again_and_one_written_elsewhere_is():
    cache: ProcessStateCache[list] = ProcessStateCache()
    token = _Cell()
    loads: list[str] = []

    def load(name: str):
        def go() -> list:
            loads.append(name)
            return [name]
        return go

    first = cache.get("fn", 0, token, load("first"))
    cache.written("fn", 0, token, first)
    assert cache.get("fn", 0, token, load("again")) is first and loads == ["first"]
    token.write(b"another writer")  # a restored state, another worker
    assert cache.get("fn", 0, token, load("reloaded")) == ["reloaded"] and loads == ["first", "reloaded"]
    assert cache.get("other fn", 0, token, load("owner")) == ["owner"]  # per DoFn instance
