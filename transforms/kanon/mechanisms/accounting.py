"""Privacy accounting for the k-anonymity server (k-anonymity note), in exact arithmetic, in both directions.

Forward: per-draw noise TLap(eps, delta) (Sec. 4.1), used for both rho_1 and
rho_2 of Alg. 2, gives

* one AboveThreshold instance: (2 eps, 2 delta (w + 1))-DP (Cor. 4.4, i.e.
  Thm. 4.2 with eps_1 = eps_2 = eps and delta_1 = delta_2 = delta);
* the whole stream of Alg. 1 (periodic restart every w steps): a join touches
  at most two instances, so (4 eps, 4 delta (w + 1))-DP (Cor. 3.1 applied to
  Cor. 4.4).

Backward: ``solve_draw_parameters`` inverts the stream guarantee exactly:
eps = eps_total / 4 and delta = delta_total / (4 (w + 1)).

All privacy parameters are ``Fraction``s (DESIGN.md: budgets are exact);
floats given by users are converted through their decimal repr, so 1e-5 is
exactly 1/100000 and a round trip gives back exactly the target.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from fractions import Fraction

from transforms.core.mechanisms.budget_units import as_fraction
from transforms.core.mechanisms.noise import TruncatedLaplace

INSTANCE_BASIS = "Cor. 4.4 (one AboveThreshold instance, Alg. 2, with two TLap draws)"
STREAM_BASIS = "Cor. 3.1 applied to Cor. 4.4 (Alg. 1: periodic restart; a join affects at most two instances)"


def _check_epsilon_delta(epsilon: Fraction, delta: Fraction, what: str) -> None:
    if epsilon <= 0:
        raise ValueError(f"{what} epsilon must be > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"{what} delta must be in (0, 1), got {delta} ({float(delta):.6g})")


def _check_window(window_steps: int) -> int:
    if not isinstance(window_steps, numbers.Integral) or isinstance(window_steps, bool) or window_steps < 1:
        raise ValueError(f"window_steps must be an integer >= 1, got {window_steps!r}")
    return int(window_steps)


@dataclass(frozen=True)
class DrawParameters:
    """One TLap(eps, delta) noise draw (Sec. 4.1); Alg. 2 uses it for both rho_1 and rho_2.

    ``epsilon`` and ``delta`` accept ints, strings, floats or Fractions and are
    stored as exact Fractions.
    """

    epsilon: Fraction
    delta: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", as_fraction(self.epsilon))
        object.__setattr__(self, "delta", as_fraction(self.delta))
        _check_epsilon_delta(self.epsilon, self.delta, "per-draw")

    def noise(self) -> TruncatedLaplace:
        """The float view of the same distribution, for sampling."""
        return TruncatedLaplace(float(self.epsilon), float(self.delta))

    @property
    def A(self) -> float:
        """The per-draw support bound A = (1/eps) ln(1 + (e^eps - 1) / (2 delta)) (Sec. 4.1)."""
        return self.noise().A

    @property
    def total_bound(self) -> float:
        """A_1 + A_2 = 2 A (Thm. 4.2, Cor. 4.4): true verdicts have count >= k - 2A, false ones <= k + 2A."""
        return 2 * self.A


@dataclass(frozen=True)
class Guarantee:
    """An (epsilon, delta)-DP guarantee (Def. 2.3, neighbours of Def. 2.1) and the result it comes from."""

    epsilon: Fraction
    delta: Fraction
    basis: str


def instance_guarantee(draw: DrawParameters, window_steps: int) -> Guarantee:
    """Cor. 4.4: one AboveThreshold instance (Alg. 2) is (2 eps, 2 delta (w + 1))-DP."""
    w = _check_window(window_steps)
    return Guarantee(2 * draw.epsilon, 2 * draw.delta * (w + 1), INSTANCE_BASIS)


def stream_guarantee(draw: DrawParameters, window_steps: int) -> Guarantee:
    """Cor. 3.1 applied to Cor. 4.4: the restarted stream (Alg. 1) is (4 eps, 4 delta (w + 1))-DP."""
    instance = instance_guarantee(draw, window_steps)
    return Guarantee(2 * instance.epsilon, 2 * instance.delta, STREAM_BASIS)


def solve_draw_parameters(
    total_epsilon: numbers.Rational | float | str,
    total_delta: numbers.Rational | float | str,
    window_steps: int,
) -> DrawParameters:
    """The per-draw TLap(eps, delta) whose stream guarantee is exactly (total_epsilon, total_delta).

    Inverse of ``stream_guarantee``: eps = eps_total / 4, delta = delta_total / (4 (w + 1)).
    """
    w = _check_window(window_steps)
    epsilon, delta = as_fraction(total_epsilon), as_fraction(total_delta)
    _check_epsilon_delta(epsilon, delta, "total")
    return DrawParameters(epsilon / 4, delta / (4 * (w + 1)))
