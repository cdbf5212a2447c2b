"""The noise key of the tests: one key file per test worker, created ``0600`` (``tests/conftest.py`` points
``PM_BEAM_NOISE_KEY`` at it for every test, so no run writes the user's own key file)."""
from __future__ import annotations

import os

from transforms.core.noise_key import KEY_ENVIRONMENT, KeyLocation, NoiseKey, resolve_key, write_key_file


def make_key_file(path: str) -> KeyLocation:
    """A new key at ``path`` (``0600``), as a run sees it."""
    write_key_file(path, NoiseKey.new())
    return resolve_key(path)


def run_key() -> KeyLocation:
    """The key the test's runs use (``PM_BEAM_NOISE_KEY``)."""
    return resolve_key(os.environ[KEY_ENVIRONMENT])
