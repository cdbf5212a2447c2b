"""Random sources and noise samplers for the k-anonymity server and the aggregation math.

Two kinds of randomness (DESIGN.md, "Rules that hold everywhere"):

* ``SecureSource`` (kind ``"secure"``): the OS CSPRNG, for anything a real
  deployment would release.
* ``SeededSource`` (kind ``"seeded"``): a numpy PCG64 generator for vectorised
  simulation and tests, plus a counter-based ``keyed_uniform`` whose value
  depends only on (seed, key), so batch and streaming runs draw the same noise
  for the same (group, step) whatever the processing order.

Samplers:

* ``TruncatedLaplace``: TLap(eps, delta) of seed 004 Sec. 4.1, the noise rho_1
  and rho_2 of Alg. 2 (inverse CDF of one uniform, clipped to [-A, A]).
* ``Laplace``: the untruncated noise of Dwork and Roth, for comparison.
* ``DiscreteLaplace`` and ``TruncatedDiscreteLaplace``: exact integer samplers
  (Canonne, Kamath and Steinke 2020, "The Discrete Gaussian for Differential
  Privacy", Alg. 1 and 2) for released integer counts.
* ``GridLaplace``: Laplace noise for released real-valued sums (the query
  results of seed 003 Alg. 1 AnswerQuery), exact on a fine grid.

Every uniform double lies on the grid {m / 2**53 : 1 <= m < 2**53}: 53 random
bits, strictly inside (0, 1), and symmetric (u and 1 - u are equally likely),
so inverse-CDF samples of symmetric noise are symmetric too. (The midpoint
grid (m + 0.5) / 2**53 is not used: its upper half is not representable in
binary64 and m = 2**53 - 1 rounds to exactly 1.0.)

No Beam import here: this module is read against the papers line by line.
"""
from __future__ import annotations

import hashlib
import math
import numbers
import operator
import os
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np
import numpy.typing as npt

_GRID_BITS = 53
_GRID = 2**_GRID_BITS  # uniforms are m / 2**53 with 1 <= m < 2**53


def as_fraction(value: numbers.Rational | float | str) -> Fraction:
    """An exact Fraction; a float goes through its shortest repr, so 1e-5 becomes exactly 1/100000."""
    if isinstance(value, bool):
        raise TypeError("a privacy parameter cannot be a bool")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a privacy parameter must be finite, got {value}")
        return Fraction(str(value))
    return Fraction(value)


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

    @abstractmethod
    def keyed_token(self, key: tuple) -> str:
        """A 128-bit identifier as 32 hex digits (a report identifier r, seed 003 Sec. 4.2): seeded, a function
        of (seed, key), so batch and streaming runs name the same report alike; secure, fresh and unpredictable."""

    @abstractmethod
    def keyed_child(self, key: tuple) -> RandomSource:
        """A source for everything drawn about ``key`` (one query's noise): seeded, a fresh ``SeededSource`` whose
        seed is a function of (seed, key), so the draws do not depend on processing order; secure, itself."""


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

    def keyed_token(self, key: tuple) -> str:
        return secrets.token_hex(16)

    def keyed_child(self, key: tuple) -> RandomSource:
        return self


def _encode_item(value: str | int) -> bytes:
    """Self-delimiting, typed encoding of one key element: b"i<len>:<decimal>" or b"s<len>:<utf-8>"."""
    if type(value) is str:  # the common case first: this runs for every report id and keyed draw
        body = value.encode("utf-8")
        return b"s" + str(len(body)).encode("ascii") + b":" + body
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        body, tag = str(int(value)).encode("ascii"), b"i"
    elif isinstance(value, str):
        body, tag = value.encode("utf-8"), b"s"
    else:
        raise TypeError(f"key elements must be str or int, got {type(value).__name__}: {value!r}")
    return tag + str(len(body)).encode("ascii") + b":" + body


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
        self._seed_prefix = _encode_item(self.seed)
        self.generator = np.random.Generator(np.random.PCG64(self.seed))

    def uniform(self) -> float:
        return int(self.generator.integers(1, _GRID, dtype=np.int64)) / _GRID

    def _key_prefix(self, key: tuple) -> bytes:
        return self._seed_prefix + _encode_item(len(key)) + b"".join([_encode_item(item) for item in key])

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


def make_source(seed: int | None) -> RandomSource:
    """``SecureSource()`` when no seed is given (the default for released outputs), else ``SeededSource(seed)``."""
    return SecureSource() if seed is None else SeededSource(seed)


# --------------------------------------------------------------------------------------------
# Continuous noise
# --------------------------------------------------------------------------------------------


def _check_epsilon_delta(epsilon: float, delta: float) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def _log1pexp(z: float) -> float:
    """ln(1 + e^z) in plain floats, without overflow for large z (numpy's logaddexp(0, z) for one value)."""
    return max(z, 0.0) + math.log1p(math.exp(-abs(z)))


@dataclass(frozen=True)
class TruncatedLaplace:
    """TLap(eps, delta) of seed 004 Sec. 4.1 (from Geng et al. 2020): pdf B e^{-eps |x|} on [-A, A].

    A = (1/eps) ln(1 + (e^eps - 1) / (2 delta)) and B = eps / (2 (1 - e^{-eps A})).
    By Thm. 4.3 it satisfies Def. 4.1 with shift d = 1, i.e. it is
    bound(eps, delta, A, 1), so two draws (rho_1 = rho_2 in Alg. 2) give
    Cor. 4.4. With r = (e^eps - 1) / delta, everything below has a closed form:
    e^{eps A} = 1 + r / 2, B = (eps / 2)(1 + 2 delta / (e^eps - 1)),
    F(x) = (e^{eps (x + A)} - 1) / r on [-A, 0] and F(x) = 1 - F(-x) on [0, A].
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))
        _check_epsilon_delta(self.epsilon, self.delta)

    @cached_property
    def _log_r(self) -> float:
        """ln r = ln((e^eps - 1) / delta), with ln(e^eps - 1) = eps + ln(1 - e^{-eps}) (no overflow)."""
        eps = self.epsilon
        return eps + math.log(-math.expm1(-eps)) - math.log(self.delta)

    @cached_property
    def A(self) -> float:
        """The support bound: (1/eps) ln(1 + (e^eps - 1) / (2 delta)) (Sec. 4.1).

        ln(1 + r / 2) = logaddexp(0, ln r - ln 2): no overflow, no cancellation, and the
        same expression ``quantile`` evaluates at u = 1/2, so the median draw is exactly 0.
        """
        return float(np.logaddexp(0.0, self._log_r - math.log(2))) / self.epsilon

    @property
    def B(self) -> float:
        """The density at 0: eps / (2 (1 - e^{-eps A})) (Sec. 4.1).

        Computed as (eps / 2)(1 + 2 delta e^{-eps} / (1 - e^{-eps})), which has no overflow for any eps.
        """
        eps = self.epsilon
        return eps / 2 * (1 + 2 * self.delta * math.exp(-eps) / -math.expm1(-eps))

    def pdf(self, x: npt.ArrayLike) -> np.ndarray | float:
        x = np.asarray(x, dtype=np.float64)
        inside = np.abs(x) <= self.A
        return _scalar_or_array(np.where(inside, self.B * np.exp(-self.epsilon * np.abs(x)), 0.0))

    def cdf(self, x: npt.ArrayLike) -> np.ndarray | float:
        x = np.asarray(x, dtype=np.float64)
        a = self.A
        # Lower half F(-|x|) = (e^{eps (A - |x|)} - 1) / r, clipped to [0, 1/2] outside the support.
        lower = np.clip(np.expm1(self.epsilon * (a - np.minimum(np.abs(x), a))) * math.exp(-self._log_r), 0.0, 0.5)
        return _scalar_or_array(np.where(x < 0, lower, 1.0 - lower))

    def quantile(self, u: npt.ArrayLike) -> np.ndarray | float:
        """Inverse CDF on [0, 1]: -A + ln(1 + u r) / eps for u <= 1/2, its mirror A - ln(1 + (1 - u) r) / eps above.

        ln(1 + u r) is computed as log1pexp(ln u + ln r). The result is clipped
        to [-A, A] (the same float ``A``) so no rounding ever leaves the support.
        """
        u = np.asarray(u, dtype=np.float64)
        if np.any((u < 0) | (u > 1)):
            raise ValueError("quantile needs u in [0, 1]")
        a = self.A
        tail = np.minimum(u, 1.0 - u)  # exact: 1 - u is exact for u >= 1/2 (Sterbenz)
        with np.errstate(divide="ignore"):  # ln 0 = -inf maps u = 0 to -A
            from_edge = np.logaddexp(0.0, np.log(tail) + self._log_r) / self.epsilon
        x = np.where(u <= 0.5, from_edge - a, a - from_edge)
        return _scalar_or_array(np.clip(x, -a, a))

    def sample(self, source: RandomSource, key: tuple | None = None) -> float:
        """One draw: inverse CDF of ``source.keyed_uniform(key)`` if a key is given, else of ``source.uniform()``."""
        u = source.uniform() if key is None else source.keyed_uniform(key)
        # ``quantile`` for one value, in plain floats (numpy's per-call overhead dominates a scalar).
        a = self.A
        from_edge = _log1pexp(math.log(min(u, 1.0 - u)) + self._log_r) / self.epsilon
        return min(max(from_edge - a if u <= 0.5 else a - from_edge, -a), a)

    def sample_array(self, source: RandomSource, size: int) -> np.ndarray:
        return self.quantile(source.uniforms(size))

    def sample_keyed_array(self, source: RandomSource, key: tuple, size: int) -> np.ndarray:
        """A block of ``size`` independent draws for ``key``: ``quantile`` of ``source.keyed_uniforms``.

        The uniforms are strictly inside (0, 1), so the range check and the
        ln 0 guard of ``quantile`` are skipped (this runs once per
        AboveThreshold instance on the batch path).
        """
        u = source.keyed_uniforms(key, size)
        a = self.A
        from_edge = np.logaddexp(0.0, np.log(np.minimum(u, 1.0 - u)) + self._log_r) / self.epsilon
        x = np.where(u <= 0.5, from_edge - a, a - from_edge)
        return np.clip(x, -a, a, out=x)


@dataclass(frozen=True)
class Laplace:
    """Laplace noise with pdf e^{-|x|/scale} / (2 scale) (Dwork and Roth [1] of seed 004)."""

    scale: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", float(self.scale))
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a finite number > 0, got {self.scale}")

    def pdf(self, x: npt.ArrayLike) -> np.ndarray | float:
        x = np.asarray(x, dtype=np.float64)
        return _scalar_or_array(np.exp(-np.abs(x) / self.scale) / (2 * self.scale))

    def cdf(self, x: npt.ArrayLike) -> np.ndarray | float:
        x = np.asarray(x, dtype=np.float64)
        lower = 0.5 * np.exp(-np.abs(x) / self.scale)  # F(-|x|)
        return _scalar_or_array(np.where(x < 0, lower, 1.0 - lower))

    def quantile(self, u: npt.ArrayLike) -> np.ndarray | float:
        """scale ln(2u) for u <= 1/2 and -scale ln(2(1 - u)) above; +-inf at u = 0, 1."""
        u = np.asarray(u, dtype=np.float64)
        if np.any((u < 0) | (u > 1)):
            raise ValueError("quantile needs u in [0, 1]")
        with np.errstate(divide="ignore"):
            from_center = -self.scale * np.log(2 * np.minimum(u, 1.0 - u))
        return _scalar_or_array(np.where(u <= 0.5, -from_center, from_center))

    def sample(self, source: RandomSource, key: tuple | None = None) -> float:
        u = source.uniform() if key is None else source.keyed_uniform(key)
        return float(self.quantile(u))

    def sample_array(self, source: RandomSource, size: int) -> np.ndarray:
        return self.quantile(source.uniforms(size))


# --------------------------------------------------------------------------------------------
# Exact discrete noise (Canonne, Kamath and Steinke 2020)
# --------------------------------------------------------------------------------------------


def _bernoulli(source: RandomSource, numerator: int, denominator: int) -> bool:
    """Bernoulli(numerator / denominator), exactly."""
    return source.randbelow(denominator) < numerator


def _bernoulli_exp(source: RandomSource, numerator: int, denominator: int) -> bool:
    """Bernoulli(exp(-gamma)) for rational gamma = numerator / denominator >= 0 (CKS 2020, Alg. 1).

    For gamma <= 1: draw Bernoulli(gamma / K) for K = 1, 2, ... until one is 0;
    return whether that K is odd (P = sum_k (-gamma)^k / k! = e^{-gamma}).
    For gamma > 1: floor(gamma) Bernoulli(e^{-1}) draws and one for the fraction.
    """
    while numerator > denominator:  # gamma > 1
        if not _bernoulli_exp(source, 1, 1):
            return False
        numerator -= denominator
    k = 1
    while _bernoulli(source, numerator, denominator * k):
        k += 1
    return k % 2 == 1


def _check_scale(scale: Fraction) -> None:
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")


@dataclass(frozen=True)
class DiscreteLaplace:
    """The discrete Laplace (two-sided geometric) distribution: P(x) ∝ exp(-|x| / scale) on the integers.

    ``scale`` is exact (a Fraction; ints, strings and floats are converted with
    ``as_fraction``). ``sample`` is exact: CKS 2020 Alg. 2 with only
    ``source.randbelow``, no floating point.
    """

    scale: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", as_fraction(self.scale))
        _check_scale(self.scale)

    def pmf(self, x: int) -> float:
        """tanh(1 / (2 scale)) exp(-|x| / scale)  (= (1 - q) / (1 + q) q^{|x|} with q = e^{-1/scale})."""
        inverse = float(1 / self.scale)
        return math.tanh(inverse / 2) * math.exp(-abs(x) * inverse)

    def sample(self, source: RandomSource) -> int:
        """CKS 2020 Alg. 2 with scale t / s.

        U uniform in [0, t) accepted with probability e^{-U/t}, V ~ Geometric(1 - e^{-1}),
        X = U + t V is geometric with ratio e^{-1/t}; Y = floor(X / s) is geometric with
        ratio e^{-s/t}; a uniform sign, rejecting (sign -, Y = 0) so 0 is not counted twice.
        """
        t, s = self.scale.numerator, self.scale.denominator
        while True:
            u = source.randbelow(t)
            if not _bernoulli_exp(source, u, t):
                continue
            v = 0
            while _bernoulli_exp(source, 1, 1):
                v += 1
            y = (u + t * v) // s
            negative = source.randbelow(2) == 1
            if negative and y == 0:
                continue
            return -y if negative else y

    def sample_array(self, source: RandomSource, size: int) -> np.ndarray:
        """``size`` draws as int64.

        With a ``SeededSource`` (simulation only): the difference of two numpy
        geometric draws with success probability 1 - e^{-1/scale} (rounded to a
        double). Otherwise: ``size`` exact draws.
        """
        if isinstance(source, SeededSource):
            p = -math.expm1(-float(1 / self.scale))
            return source.generator.geometric(p, size) - source.generator.geometric(p, size)
        return np.fromiter((self.sample(source) for _ in range(size)), dtype=np.int64, count=size)


DEFAULT_GRANULARITY = Fraction(1, 2**20)


@dataclass(frozen=True)
class GridLaplace:
    """Laplace noise of scale ``scale`` for a real-valued sum, released on the grid g·Z (g = ``granularity``).

    The true value is rounded to the nearest grid point, then ``g`` times a
    ``DiscreteLaplace(scale / g)`` draw is added: the result's distribution
    is the Laplace distribution of scale ``scale`` discretised to g·Z, and
    the draw is exact (CKS 2020), so it has none of the floating-point
    weaknesses of inverse-CDF Laplace samples (Mironov 2012). Rounding moves
    a sum by at most g/2, so two neighbouring sums at distance Delta are at
    most Delta + g apart after rounding: a caller wanting epsilon-DP passes
    ``scale = (Delta + g) / epsilon`` (``laplace_scale_for``).
    """

    scale: Fraction
    granularity: Fraction = DEFAULT_GRANULARITY

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", as_fraction(self.scale))
        object.__setattr__(self, "granularity", as_fraction(self.granularity))
        _check_scale(self.scale)
        _check_scale(self.granularity)

    def release(self, value: float, source: RandomSource) -> float:
        """``value`` rounded to the grid plus discretised Laplace noise, as the nearest double."""
        grid_value = round(Fraction(value) / self.granularity)
        noise = DiscreteLaplace(self.scale / self.granularity).sample(source)
        return float((grid_value + noise) * self.granularity)


def laplace_scale_for(sensitivity: Fraction, epsilon: Fraction, granularity: Fraction = DEFAULT_GRANULARITY) -> Fraction:
    """The ``GridLaplace`` scale (Delta + g) / epsilon giving epsilon-DP for a sum of L1 sensitivity Delta."""
    return (as_fraction(sensitivity) + as_fraction(granularity)) / as_fraction(epsilon)


@dataclass(frozen=True)
class TruncatedDiscreteLaplace:
    """The discrete Laplace distribution conditioned on |x| <= bound.

    pmf(x) = (1 - q) q^{|x|} / (1 + q - 2 q^{bound + 1}) for |x| <= bound, q = e^{-1/scale}.
    ``sample`` is exact: rejection on ``DiscreteLaplace.sample``.
    """

    scale: Fraction
    bound: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", as_fraction(self.scale))
        _check_scale(self.scale)
        if not isinstance(self.bound, numbers.Integral) or isinstance(self.bound, bool) or self.bound < 0:
            raise ValueError(f"bound must be an integer >= 0, got {self.bound!r}")

    @property
    def untruncated(self) -> DiscreteLaplace:
        return DiscreteLaplace(self.scale)

    def pmf(self, x: int) -> float:
        if abs(x) > self.bound:
            return 0.0
        inverse = float(1 / self.scale)
        q = math.exp(-inverse)
        return -math.expm1(-inverse) * q ** abs(x) / (1 + q - 2 * q ** (self.bound + 1))

    def sample(self, source: RandomSource) -> int:
        untruncated = self.untruncated
        while True:
            x = untruncated.sample(source)
            if abs(x) <= self.bound:
                return x

    def sample_array(self, source: RandomSource, size: int) -> np.ndarray:
        """``size`` draws as int64: rejection on ``DiscreteLaplace.sample_array`` (vectorised for a SeededSource)."""
        untruncated = self.untruncated
        accepted = np.empty(0, dtype=np.int64)
        while accepted.size < size:
            draws = untruncated.sample_array(source, size - accepted.size)
            accepted = np.concatenate([accepted, draws[np.abs(draws) <= self.bound]])
        return accepted
