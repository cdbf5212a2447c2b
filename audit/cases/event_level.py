"""Audit cases of ARA event-level reports: randomized response over the output set O (Ghazi et al. Sec. 5,
Alg. 8, Thm. 5.1: eps-DP), on the default navigation and event sources.

A run is one source registration through ``randomized_response_array`` (the batch pipeline's call; one call
draws n sources): truthful with probability p = (e^eps - 1) / (e^eps + |O| - 1), else a uniform output of O. The
neighbours are two sources whose true outputs differ: the last output of O (D) and the first (D'), so the
threshold events of the search include {output = the last}, the event of the proof: rare unless it is the
truth.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from audit.case import AuditCase, D
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.mechanisms.config import EventLevelConfig, event_config, navigation_config
from transforms.event_level.mechanisms.outputs import count_outputs
from transforms.event_level.mechanisms.randomized_response import TRUTHFUL, randomized_response_array

Respond = Callable[[EventLevelConfig, Fraction, RandomSource, int], np.ndarray]


def reported_outputs(respond: Respond, config: EventLevelConfig, epsilon: Fraction, truth: int, n: int,
                     source: RandomSource) -> np.ndarray:
    """The rank of the output each of n sources reports, when the truth has rank ``truth``."""
    ranks = respond(config, epsilon, source, n)
    return np.where(ranks == TRUTHFUL, truth, ranks).astype(np.float64)


def samples_for(epsilon: Fraction, k: int) -> int:
    """The full audit's samples per side for randomized response over k outputs at ``epsilon``.

    P[o = x | x'] = 1 / (e^eps + k - 1). With h hits on D' the bound is within about 3.3 / sqrt(h) of the event's
    ln-ratio (the 99.9 % interval), so h = 4356 / eps^2 hits bring it within 5 % of eps, and at least 100 hits
    are drawn; at least 1e6 and at most 2e8 samples (eps = 14 needs 1.2e8)."""
    hits = max(100.0, 4356 / float(epsilon) ** 2)
    return int(min(2e8, max(1e6, hits * (math.exp(float(epsilon)) + k))))


def make_randomized_response_case(source_type: str, epsilon: Fraction,
                                  respond: Respond = randomized_response_array) -> AuditCase:
    """Randomized response on the default ``navigation`` or ``event`` source at ``epsilon``; ``respond`` is the
    mechanism (a test passes a broken one)."""
    config = navigation_config() if source_type == "navigation" else event_config()
    k = count_outputs(config)

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        return reported_outputs(respond, config, epsilon, k - 1 if side == D else 0, n, source)

    return AuditCase(
        name=f"event_level.{source_type}@eps={float(epsilon):g}",
        mechanism=f"event-level: randomized response, {source_type} source (|O| = {k})",
        neighbours="a source whose true output is the last of O, or the first",
        statistic="the rank of the reported output", claimed_epsilon=float(epsilon), claimed_delta=0.0,
        basis="Ghazi et al. Alg. 8, Thm. 5.1", sample=sample, samples=samples_for(epsilon, k), quick_samples=200_000,
        tight="tight: P[o = x | x] / P[o = x | x'] = e^eps exactly; the bound needs about e^eps + |O| samples per "
              "hit on D'",
    )
