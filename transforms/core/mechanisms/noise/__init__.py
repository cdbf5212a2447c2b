"""Random sources and noise samplers, one module per family:

* ``sources.py``: ``SecureSource`` (the OS CSPRNG, for released outputs), ``SecretSource`` (a stream keyed by a
  secret from the OS CSPRNG, for a release a retry must reproduce) and ``SeededSource`` (seeded, vectorised, for
  simulation and tests) behind one ``RandomSource`` interface; ``make_source``.
* ``continuous.py``: ``TruncatedLaplace`` (TLap of the k-anonymity note, k-anonymity note Sec. 4.1) and ``Laplace``.
* ``discrete.py``: exact integer samplers (Canonne, Kamath and Steinke 2020): ``DiscreteLaplace``,
  ``TruncatedDiscreteLaplace``, ``GridLaplace`` and their building blocks.

Beam-free: read against the papers line by line.
"""
from transforms.core.mechanisms.noise.continuous import Laplace, TruncatedLaplace
from transforms.core.mechanisms.noise.discrete import (
    DEFAULT_GRANULARITY,
    MAX_RANDBELOW_BOUND,
    VECTORISED_SCALE_DENOMINATOR_LIMIT,
    VECTORISED_SCALE_NUMERATOR_LIMIT,
    DiscreteLaplace,
    GridLaplace,
    TruncatedDiscreteLaplace,
    bernoulli_exp_array,
    laplace_scale_for,
    randbelow_array,
)
from transforms.core.mechanisms.noise.sources import RandomSource, SecretSource, SecureSource, SeededSource, make_source

__all__ = [
    "DEFAULT_GRANULARITY", "MAX_RANDBELOW_BOUND", "VECTORISED_SCALE_DENOMINATOR_LIMIT", "VECTORISED_SCALE_NUMERATOR_LIMIT",
    "DiscreteLaplace", "GridLaplace", "Laplace", "RandomSource", "SecretSource", "SecureSource", "SeededSource",
    "TruncatedDiscreteLaplace", "TruncatedLaplace", "bernoulli_exp_array", "laplace_scale_for", "make_source", "randbelow_array",
]
