"""Audit cases of the Aggregation Service (Ghazi et al., "On the Differential Privacy and Interactivity of Privacy
Sandbox Reports", Alg. 1 and Thm. 4.3): the noisy sums and the two ways keys outside the domain are released.

Every case runs ``transforms.summary_reports.mechanisms.aggregation.aggregate`` as the aggregation job does,
once per side over n keys: key i is the i-th independent run (the noise of distinct keys is independent, and a
key's output depends only on its own sum), so one call gives n runs.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from audit.case import AuditCase, D
from transforms.core.mechanisms.noise import RandomSource
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L0, DEFAULT_L1, AggregationParams, KeyedSums, aggregate

NOT_RELEASED = -math.inf  # the statistic of a key the release rule withholds


def released_metrics(params: AggregationParams, sums: np.ndarray, in_domain: bool, source: RandomSource) -> np.ndarray:
    """The summary report's metric of keys 1..n whose true sums are ``sums`` (0: no report holds the key),
    ``NOT_RELEASED`` for a key the mode does not release; the domain lists the keys when ``in_domain``."""
    n = len(sums)
    keys = np.arange(1, n + 1, dtype=np.uint64)
    held = np.asarray(sums) > 0
    reports = KeyedSums(np.zeros(int(held.sum()), np.uint64), keys[held], np.asarray(sums, np.uint64)[held])
    domain = (np.zeros(n, np.uint64), keys) if in_domain else (np.zeros(0, np.uint64), np.zeros(0, np.uint64))
    outcomes = aggregate(params, reports, domain, source)
    metric = np.full(n, NOT_RELEASED)
    positions = (outcomes.low - 1).astype(np.int64)  # keys 1..n, high half 0
    metric[positions] = np.where(outcomes.released, outcomes.metric, NOT_RELEASED)
    return metric


def make_noisy_sum_case(epsilon: Fraction, params_of=AggregationParams, l1: int = DEFAULT_L1) -> AuditCase:
    """Discrete Laplace on a key's sum (Alg. 1 without key discovery): one report contributing exactly L1 to a
    key of the domain (D) or absent (D'). ``params_of`` builds the parameters (a test passes a broken one)."""
    params = params_of(mode="domain", epsilon=epsilon, delta=Fraction(1, 10**9), l1=l1)

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        return released_metrics(params, np.full(n, l1 if side == D else 0), True, source)

    return AuditCase(
        name=f"aggregation.noisy_sum@eps={float(epsilon):g}", mechanism="Aggregation Service: discrete Laplace on sums",
        neighbours=f"one report of value L1 = {l1} on a key of the domain, present or not",
        statistic="the key's noisy sum", claimed_epsilon=float(epsilon), claimed_delta=0.0,
        basis="Ghazi et al. Alg. 1 (domain), Thm. 4.3 with delta = 0", sample=sample,
        samples=4_000_000, quick_samples=100_000,
        tight="tight: {sum >= L1} has probability ratio exactly e^eps; the bound is limited only by the samples "
              "on D', whose probability is about e^-eps / 2",
    )


def make_key_discovery_case(epsilon: Fraction, delta: Fraction, params_of=AggregationParams, l1: int = DEFAULT_L1,
                            l0: int = DEFAULT_L0) -> AuditCase:
    """Key discovery (Alg. 1, green): DLap truncated to [-tau, tau], released above tau. The key's other reports
    sum to floor(tau) on both sides, so it is released about half the time without the audited report; the
    audited report adds L1 (D) or is absent (D'). Outputs beyond anything D' can produce (the truncation) have
    probability below delta / L0 on D."""
    params = params_of(mode="key-discovery", epsilon=epsilon, delta=delta, l1=l1, l0=l0)
    others = math.floor(params.tau)

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        return released_metrics(params, np.full(n, others + (l1 if side == D else 0)), False, source)

    return AuditCase(
        name=f"aggregation.key_discovery@eps={float(epsilon):g}", mechanism="Aggregation Service: key discovery",
        neighbours=f"a key the other reports hold with sum floor(tau) = {others}, plus or minus one report of value L1",
        statistic=f"the key's released sum, {NOT_RELEASED} when withheld", claimed_epsilon=float(epsilon),
        claimed_delta=float(delta), basis="Ghazi et al. Alg. 1 (key discovery), Thm. 4.3", sample=sample,
        samples=4_000_000, quick_samples=100_000,
        tight="tight in epsilon (the released sums differ by L1 under the same noise); the delta part is never "
              "observed: outputs D' cannot produce have probability at most delta / L0 on D",
    )


def make_threshold_case(epsilon: Fraction, delta: Fraction, l1: int = DEFAULT_L1, l0: int = DEFAULT_L0) -> AuditCase:
    """The shipped service's thresholding: a key outside the domain held only by the audited report (D) or by
    nobody (D'); it is released when its noisy sum reaches T = L1 + (L1 / eps) ln(1 / delta)."""
    params = AggregationParams(mode="threshold", epsilon=epsilon, delta=delta, l1=l1, l0=l0)

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        return released_metrics(params, np.full(n, l1 if side == D else 0), False, source)

    return AuditCase(
        name=f"aggregation.threshold@eps={float(epsilon):g}", mechanism="Aggregation Service: thresholding",
        neighbours=f"a key outside the domain that only one report (value L1 = {l1}) holds, present or not",
        statistic=f"the key's released sum, {NOT_RELEASED} when withheld", claimed_epsilon=float(epsilon),
        claimed_delta=float(l0 * delta), basis="the public service's threshold; (eps, L0 delta) per report",
        sample=sample, samples=4_000_000, quick_samples=100_000,
        tight="not tight: the key is released with probability about delta on D and never on D', so every event "
              "is within the claimed delta and the bound is 0; the audit checks that no more leaks",
    )
