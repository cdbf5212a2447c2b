"""Exact Clopper-Pearson intervals and the epsilon bounds they give (the test phase of the audit).

For an output event E of a mechanism M and neighbours D, D', (eps, delta)-DP requires
P[M(D) in E] <= e^eps P[M(D') in E] + delta, so every event gives

    eps >= ln((P[M(D) in E] - delta) / P[M(D') in E]).

With k hits in n samples, the Clopper-Pearson interval [lo, hi] at confidence 1 - alpha (each tail alpha / 2,
from beta quantiles: exact, never below the nominal coverage) holds the true probability with probability at
least 1 - alpha. Taking the lower end on the D side and the upper end on the D' side, both hold together with
probability at least 1 - alpha (each fails with at most alpha / 2), so

    eps_lower = ln((lo_D - delta) / hi_D')

is a lower bound on the mechanism's epsilon with confidence at least 1 - alpha. ``estimate`` is the same ratio
at the empirical frequencies and ``upper`` the other ends of the intervals: the privacy loss of this one event
lies in [lower, upper] with the same confidence (the mechanism's epsilon can be larger: other events).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from transforms.core.io import InputError

DISTRIBUTION = "privacy-measurement-beam"  # setup.py's name, for the install hint


class AuditUnavailable(InputError):
    """The audit was asked for and scipy (the ``audit`` extra) is not installed: one line naming the extra."""


def require_scipy() -> None:
    """Raises ``AuditUnavailable`` when scipy cannot be imported; the entry point calls it before any work."""
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        raise AuditUnavailable(f"the audit needs scipy: pip install '{DISTRIBUTION}[audit]'") from None


def clopper_pearson(hits: npt.ArrayLike, trials: npt.ArrayLike, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided Clopper-Pearson interval (lo, hi) for a binomial probability, each tail (1 - confidence) / 2.

    lo = Beta quantile (alpha / 2; k, n - k + 1), 0 when k = 0; hi = Beta quantile (1 - alpha / 2; k + 1, n - k),
    1 when k = n. Vectorised over arrays of counts.
    """
    from scipy.stats import beta  # the audit extra (require_scipy); imported here so --help needs only the core

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    k = np.asarray(hits, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("hits must be between 0 and the number of trials")
    tail = (1 - confidence) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta.ppf(tail, k, n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1 - tail, k + 1, n - k), 1.0)
    return lo, hi


def _log_ratio(numerator: npt.ArrayLike, denominator: npt.ArrayLike, delta: float) -> np.ndarray:
    """ln((numerator - delta) / denominator) with the limits the bound needs: 0 evidence (-inf) when the
    numerator is at most delta, +inf when only the denominator vanishes."""
    top = np.asarray(numerator, dtype=np.float64) - delta
    bottom = np.asarray(denominator, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(top <= 0, -np.inf, np.where(bottom <= 0, np.inf, np.log(top) - np.log(bottom)))


def epsilon_lower_bounds(hits_in: npt.ArrayLike, hits_out: npt.ArrayLike, trials_in: int, trials_out: int,
                         delta: float, confidence: float) -> np.ndarray:
    """ln((lo_D - delta) / hi_D') for many events at once (``hits_in`` on the D side, ``hits_out`` on D');
    -inf where the event shows nothing."""
    lo_in, _ = clopper_pearson(hits_in, trials_in, confidence)
    _, hi_out = clopper_pearson(hits_out, trials_out, confidence)
    return _log_ratio(lo_in, hi_out, delta)


@dataclass(frozen=True)
class EpsilonBound:
    """What one event's counts say about epsilon: ``lower`` (the audit's result, clamped at 0), the point
    ``estimate`` and ``upper``, at ``confidence`` and the claimed ``delta``."""

    lower: float
    estimate: float
    upper: float
    confidence: float
    delta: float

    @classmethod
    def of(cls, hits_in: int, trials_in: int, hits_out: int, trials_out: int, delta: float, confidence: float) -> EpsilonBound:
        (lo_in, hi_in), (lo_out, hi_out) = (clopper_pearson(hits, trials, confidence)
                                            for hits, trials in ((hits_in, trials_in), (hits_out, trials_out)))
        lower = float(_log_ratio(lo_in, hi_out, delta))
        estimate = float(_log_ratio(hits_in / trials_in, hits_out / trials_out, delta))
        upper = float(_log_ratio(hi_in, lo_out, delta))
        return cls(lower=max(lower, 0.0), estimate=estimate, upper=upper, confidence=confidence, delta=delta)

    def to_json(self) -> dict:
        """Finite numbers as floats, infinities as strings (JSON has no infinity)."""
        return {name: (value if math.isfinite(value) else ("inf" if value > 0 else "-inf"))
                for name, value in vars(self).items()}
