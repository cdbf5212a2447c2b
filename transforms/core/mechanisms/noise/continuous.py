"""Continuous Laplace noise, by the inverse CDF of one uniform of a ``RandomSource``.

* ``TruncatedLaplace``: TLap(eps, delta) of the k-anonymity note (k-anonymity note Sec. 4.1), the noise rho_1 and rho_2
  of Alg. 2, clipped to [-A, A].
* ``Laplace``: the untruncated noise of Dwork and Roth, for comparison.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import overload

import numpy as np
import numpy.typing as npt

from transforms.core.mechanisms.noise.sources import RandomSource, _scalar_or_array


def _check_epsilon_delta(epsilon: float, delta: float) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def _log1pexp(z: float) -> float:
    """ln(1 + e^z) in plain floats, without overflow for large z (numpy's logaddexp(0, z) for one value)."""
    return max(z, 0.0) + math.log1p(math.exp(-abs(z)))


class _InverseCdfNoise:
    """What the continuous distributions share: ``quantile``, the inverse CDF on [0, 1] of a scalar or an array
    (each class gives ``_quantile`` on an array), and sampling through it."""

    def _quantile(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @overload
    def quantile(self, u: float) -> float: ...
    @overload
    def quantile(self, u: np.ndarray) -> np.ndarray: ...
    @overload
    def quantile(self, u: npt.ArrayLike) -> np.ndarray | float: ...
    def quantile(self, u: npt.ArrayLike) -> np.ndarray | float:
        """The inverse CDF; a ValueError outside [0, 1]."""
        u = np.asarray(u, dtype=np.float64)
        if np.any((u < 0) | (u > 1)):
            raise ValueError("quantile needs u in [0, 1]")
        return _scalar_or_array(self._quantile(u))

    def sample_array(self, source: RandomSource, size: int) -> np.ndarray:
        return self._quantile(source.uniforms(size))


@dataclass(frozen=True)
class TruncatedLaplace(_InverseCdfNoise):
    """TLap(eps, delta) of k-anonymity note Sec. 4.1 (from Geng et al. 2020): pdf B e^{-eps |x|} on [-A, A].

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

    def _quantile(self, u: np.ndarray) -> np.ndarray:
        """-A + ln(1 + u r) / eps for u <= 1/2, its mirror A - ln(1 + (1 - u) r) / eps above.

        ln(1 + u r) is computed as log1pexp(ln u + ln r). The result is clipped
        to [-A, A] (the same float ``A``) so no rounding ever leaves the support.
        """
        a = self.A
        tail = np.minimum(u, 1.0 - u)  # exact: 1 - u is exact for u >= 1/2 (Sterbenz)
        with np.errstate(divide="ignore"):  # ln 0 = -inf maps u = 0 to -A
            from_edge = np.logaddexp(0.0, np.log(tail) + self._log_r) / self.epsilon
        x = np.where(u <= 0.5, from_edge - a, a - from_edge)
        return np.clip(x, -a, a)

    def sample(self, source: RandomSource, key: tuple | None = None) -> float:
        """One draw: inverse CDF of ``source.keyed_uniform(key)`` if a key is given, else of ``source.uniform()``."""
        u = source.uniform() if key is None else source.keyed_uniform(key)
        # ``quantile`` for one value, in plain floats (numpy's per-call overhead dominates a scalar).
        a = self.A
        from_edge = _log1pexp(math.log(min(u, 1.0 - u)) + self._log_r) / self.epsilon
        return min(max(from_edge - a if u <= 0.5 else a - from_edge, -a), a)

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
class Laplace(_InverseCdfNoise):
    """Laplace noise with pdf e^{-|x|/scale} / (2 scale) (Dwork and Roth [1] of k-anonymity note)."""

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

    def _quantile(self, u: np.ndarray) -> np.ndarray:
        """scale ln(2u) for u <= 1/2 and -scale ln(2(1 - u)) above; +-inf at u = 0, 1."""
        with np.errstate(divide="ignore"):
            from_center = -self.scale * np.log(2 * np.minimum(u, 1.0 - u))
        return np.where(u <= 0.5, -from_center, from_center)

    def sample(self, source: RandomSource, key: tuple | None = None) -> float:
        u = source.uniform() if key is None else source.keyed_uniform(key)
        return float(self.quantile(u))


# --------------------------------------------------------------------------------------------
# Exact discrete noise (Canonne, Kamath and Steinke 2020)
# --------------------------------------------------------------------------------------------
