"""The search phase of the audit: which output event separates two neighbours best (StatDP's threshold sets).

Every mechanism's outputs are reduced to a scalar test statistic S (``AuditCase.statistic`` says which). The
candidate events are the threshold sets of S, {S >= t} and {S <= t}, for t at up to ``MAX_THRESHOLDS`` quantiles
of the pooled samples, and, when S takes at most that many values, the single values {S = v} (Ding et al.,
"Detecting Violations of Differential Privacy", CCS 2018, Sec. 4: events as sets of outputs; threshold sets
are optimal for statistics whose likelihood ratio is monotone). Each candidate is scored in both directions
(D against D', D' against D) by the lower bound ``bounds.epsilon_lower_bounds`` computed on the search samples,
and the best one wins. Those samples are then discarded: the test phase counts the chosen event on fresh ones.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.bounds import epsilon_lower_bounds

MAX_THRESHOLDS = 512
RELATIONS = (">=", "<=", "==")


@dataclass(frozen=True)
class OutputEvent:
    """The event {S <relation> threshold} on the output of the side ``given`` ("D" or "D'"), compared with the
    other side: the bound is ln((P[E | given] - delta) / P[E | other])."""

    relation: str
    threshold: float
    given: str

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"relation must be one of {RELATIONS}, got {self.relation!r}")
        if self.given not in ("D", "D'"):
            raise ValueError(f"given must be D or D', got {self.given!r}")

    def hits(self, statistic: np.ndarray) -> int:
        """How many samples of ``statistic`` fall in the event."""
        if self.relation == ">=":
            return int(np.count_nonzero(statistic >= self.threshold))
        if self.relation == "<=":
            return int(np.count_nonzero(statistic <= self.threshold))
        return int(np.count_nonzero(statistic == self.threshold))

    def describe(self) -> str:
        threshold = f"{self.threshold:.6g}"
        return f"S {self.relation} {threshold}, given {self.given}"


def _thresholds(pooled: np.ndarray) -> tuple[np.ndarray, bool]:
    """Candidate thresholds: every distinct value (then also exhaustive: True), or ``MAX_THRESHOLDS`` quantiles
    of them when there are more."""
    values = np.unique(pooled)
    if values.size <= MAX_THRESHOLDS:
        return values, True
    return np.unique(values[np.linspace(0, values.size - 1, MAX_THRESHOLDS).round().astype(np.int64)]), False


def _counts(sorted_samples: np.ndarray, thresholds: np.ndarray, relation: str) -> np.ndarray:
    """How many samples are >=, <= or == each threshold (samples sorted)."""
    below = np.searchsorted(sorted_samples, thresholds, side="left")
    through = np.searchsorted(sorted_samples, thresholds, side="right")
    if relation == ">=":
        return sorted_samples.size - below
    if relation == "<=":
        return through
    return through - below


def select_event(on_d: np.ndarray, on_d_prime: np.ndarray, delta: float, confidence: float) -> OutputEvent:
    """The candidate event whose lower bound on epsilon, on these (search) samples, is the largest."""
    samples = {"D": np.sort(np.asarray(on_d, dtype=np.float64)), "D'": np.sort(np.asarray(on_d_prime, dtype=np.float64))}
    thresholds, exhaustive = _thresholds(np.concatenate(list(samples.values())))
    relations = [">=", "<="] + (["=="] if exhaustive else [])
    best, best_bound = OutputEvent(">=", float(thresholds[0]), "D"), -np.inf
    for relation in relations:
        counts = {side: _counts(values, thresholds, relation) for side, values in samples.items()}
        for given, other in (("D", "D'"), ("D'", "D")):
            bounds = epsilon_lower_bounds(counts[given], counts[other], samples[given].size, samples[other].size,
                                          delta, confidence)
            index = int(np.argmax(bounds))
            if bounds[index] > best_bound:
                best, best_bound = OutputEvent(relation, float(thresholds[index]), given), float(bounds[index])
    return best
