"""The querier's accuracy target and the epsilon it asks for (Cookie Monster, Cookie Monster paper Sec. 8.1):
eps = Delta ln(1/beta) / (alpha B c~). Beam-free."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class AccuracyTarget:
    """Seed 003 Sec. 8.1: the querier wants the Laplace error within alpha of the true sum with probability
    1 - beta, for batches of ``batch_size`` reports whose average value it guesses at ``expected_value``
    (c~; None: the query global sensitivity, i.e. every conversion at the cap, as in the microbenchmark)."""

    alpha: float
    beta: float
    batch_size: int
    expected_value: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.alpha:
            raise ValueError(f"alpha must be > 0, got {self.alpha}")
        if not 0 < self.beta < 1:
            raise ValueError(f"beta must be in (0, 1), got {self.beta}")
        if self.batch_size < 1:
            raise ValueError(f"the batch size must be >= 1, got {self.batch_size}")
        if self.expected_value is not None and not self.expected_value > 0:
            raise ValueError(f"the expected conversion value must be > 0, got {self.expected_value}")

    def epsilon(self, sensitivity: float) -> float:
        """eps = Delta ln(1/beta) / (alpha B c~)."""
        expected = sensitivity if self.expected_value is None else self.expected_value
        return sensitivity * math.log(1 / self.beta) / (self.alpha * self.batch_size * expected)
