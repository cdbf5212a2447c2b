"""What an audit case is: a mechanism, its claim, a hard pair of neighbours and a statistic of its output.

A frozen record (as ``dp_accounting`` keeps what happened apart from the accounting): the case knows how to
draw its mechanism's outputs on either neighbour; ``audit.auditor`` decides what they prove.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from transforms.core.mechanisms.noise import RandomSource

D, D_PRIME = "D", "D'"

# sample(side, n, source): the statistic of n independent runs of the mechanism on neighbour ``side``
Sampler = Callable[[str, int, RandomSource], np.ndarray]


@dataclass(frozen=True)
class AuditCase:
    """One mechanism at one parameter setting, with its worst-case neighbours.

    ``name`` is a stable identifier (``subject.mechanism[@parameters]``); ``mechanism`` and ``neighbours`` say in
    words what runs on what (the paper's worst case); ``statistic`` what ``sample`` returns per run;
    ``claimed_epsilon`` and ``claimed_delta`` the guarantee the project prints for it (``basis``: where it is
    proved); ``samples`` the full audit's test-phase samples per side (``make audit``), and ``quick_samples``
    those of the quick audit ``make test`` runs. ``tight`` says how close the bound can come to the claim
    and why (docs/audit.md's table quotes it).
    """

    name: str
    mechanism: str
    neighbours: str
    statistic: str
    claimed_epsilon: float
    claimed_delta: float
    basis: str
    sample: Sampler
    samples: int
    quick_samples: int
    tight: str

    def __post_init__(self) -> None:
        if self.claimed_epsilon <= 0 or not 0 <= self.claimed_delta < 1:
            raise ValueError(f"{self.name}: a claim needs epsilon > 0 and delta in [0, 1)")
        if min(self.samples, self.quick_samples) < 1:
            raise ValueError(f"{self.name}: sample sizes must be positive")
