"""IDP-induced bias detection: the side counting query of Cookie Monster paper Appendix D (Thm. 15-18).

On-device budgeting hides budgets: a device-epoch that cannot pay is silently
replaced by the empty set (Appendix A Alg. 1), which biases the query result
(Eq. 42). Appendix D proposes, and this module implements, a counting
coordinate atomically prepended to every report of a query:

* Thm. 15 (``count="epochs"``): coordinate 0 is kappa times the number of
  epochs of the report's window whose data F_e the report used was empty
  (out of budget, or no event at all on the device in that epoch).
* Thm. 16 (``count="reports"``): kappa times 1[some epoch of the window was
  empty].

The coordinate is noised like the others (same Laplace scale b = sigma /
sqrt 2), so the querier receives M_0 and, by a one-sided Laplace tail bound,
with probability at least 1 - beta

    ||E[M(D) - Q(D)]||_1 <= (M_0 + b ln(1/beta)) / kappa * max_r Delta_r

with Delta_r the report's global sensitivity (Thm. 15) or Delta^max (Thm.
16), both bounded by Thm. 18 (``bias_weight``). Thm. 17: every requested
device-epoch that holds data pays kappa more individual sensitivity
(``extra_loss_units``). Heartbeats (``heartbeats=True``) put an event in every
device-epoch, so an empty F_e means out of budget and the count is exact
(Eq. 44 with equality). Beam-free.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from schemas.rows import AttributionRequest
from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON, as_fraction

BIAS_COUNTS = ("epochs", "reports")
DEFAULT_BIAS_BETA = 0.01


@dataclass(frozen=True)
class BiasDetection:
    """The Appendix D counting query: ``kappa`` (> 0) scales the count, ``count`` picks Thm. 15 (``epochs``)
    or Thm. 16 (``reports``), ``beta`` is the failure probability of the released bound, ``heartbeats`` makes
    every device-epoch non-empty."""

    kappa: Fraction
    count: str = "epochs"
    beta: float = DEFAULT_BIAS_BETA
    heartbeats: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kappa", as_fraction(self.kappa))
        if self.kappa <= 0:
            raise ValueError(f"the bias-detection kappa must be > 0, got {self.kappa}")
        if self.count not in BIAS_COUNTS:
            raise ValueError(f"the bias count must be one of {', '.join(BIAS_COUNTS)}, got {self.count!r}")
        if not 0 < self.beta < 1:
            raise ValueError(f"the bias-bound beta must be in (0, 1), got {self.beta}")

    def coordinate(self, empty_epochs: int) -> float:
        """Coordinate 0 of a report whose window had ``empty_epochs`` epochs with F_e empty (Thm. 15 or 16)."""
        counted = empty_epochs if self.count == "epochs" else min(empty_epochs, 1)
        return float(self.kappa * counted)

    def extra_loss_units(self, request: AttributionRequest) -> int:
        """Thm. 17 (Eq. 61): a requested device-epoch holding data pays kappa more individual sensitivity, i.e.
        ceil(epsilon kappa / query global sensitivity) budget units more (the noise scale is unchanged)."""
        return _kappa_loss_units(request.requested_epsilon, request.query_global_sensitivity, self.kappa)

    def bound(self, noisy_coordinate: float, noise_scale: float, weight: float) -> float:
        """The released bound on the L1 bias, (M_0 + b ln(1/beta)) / kappa * ``weight`` (Thm. 15/16; b ln(1/beta)
        is sigma ln(1/beta) / sqrt 2 for Laplace noise of standard deviation sigma), never below 0."""
        count_bound = (noisy_coordinate + noise_scale * math.log(1 / self.beta)) / float(self.kappa)
        return max(0.0, count_bound * weight)


@lru_cache(maxsize=4096)
def _kappa_loss_units(epsilon: float, query_sensitivity: float, kappa: Fraction) -> int:
    """ceil(epsilon kappa / query global sensitivity) in budget units, exactly."""
    return math.ceil(as_fraction(epsilon) * UNITS_PER_EPSILON * kappa / as_fraction(query_sensitivity))


def max_l1(request: AttributionRequest) -> float:
    """The largest L1 norm of a clipped report: the cap itself in L1, sqrt(m) times the cap in L2."""
    if request.norm == "L1":
        return request.report_global_sensitivity
    return request.report_global_sensitivity * math.sqrt(request.dimension)


def bias_weight(request: AttributionRequest, window_epochs: int) -> float:
    """Thm. 18's bound on Delta(rho) <= Delta^max(rho) in L1 for histogram attribution functions (all the
    logics of ``attribution.py``; clipping scales a histogram down and keeps the bound): A^max if m = 1 or
    k = 1, else 2 A^max, with A^max the largest L1 norm of a report. Thm. 15 and Thm. 16 multiply it by
    the estimated count."""
    single = request.dimension == 1 or window_epochs == 1
    return max_l1(request) * (1 if single else 2)
