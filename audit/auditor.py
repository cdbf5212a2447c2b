"""Run one audit case: search an event on some samples, bound epsilon with it on fresh ones (``audit``).

Per case and side the mechanism runs ``search`` + ``samples`` times with the secure source; the search samples
only choose the event (``events.select_event``), the others only count it (``bounds.EpsilonBound``), chunk by
chunk, so a large audit holds only a few chunks of statistics at a time.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from audit.bounds import EpsilonBound
from audit.case import D_PRIME, AuditCase, D
from audit.events import OutputEvent, select_event
from transforms.core.mechanisms.noise import RandomSource, SecureSource

DEFAULT_CONFIDENCE = 0.999
SEARCH_FRACTION = 0.5  # search samples per test sample
MAX_SEARCH_SAMPLES = 2_000_000  # per side: the search sorts them all
CHUNK = 1 << 22  # test samples drawn and counted at a time


@dataclass(frozen=True)
class AuditResult:
    """What auditing one case found: the event chosen, its counts, and the epsilon bound they give."""

    case: AuditCase
    event: OutputEvent
    hits_given: int
    hits_other: int
    samples: int
    search_samples: int
    bound: EpsilonBound
    seconds: float
    source: str

    @property
    def consistent(self) -> bool:
        """Whether the bound is at or below the claimed epsilon (no evidence against the claim)."""
        return self.bound.lower <= self.case.claimed_epsilon

    def to_json(self) -> dict:
        case = self.case
        return {
            "name": case.name, "mechanism": case.mechanism, "neighbours": case.neighbours,
            "statistic": case.statistic, "basis": case.basis, "tight": case.tight,
            "claimed_epsilon": case.claimed_epsilon, "claimed_delta": case.claimed_delta,
            "epsilon_lower_bound": self.bound.lower, "bound": self.bound.to_json(),
            "event": self.event.describe(), "hits_given": self.hits_given, "hits_other": self.hits_other,
            "samples_per_side": self.samples, "search_samples_per_side": self.search_samples,
            "seconds": round(self.seconds, 3), "noise_source": self.source, "consistent": self.consistent,
        }


def _draw(case: AuditCase, side: str, n: int, source: RandomSource, draw: tuple) -> np.ndarray:
    """n runs on ``side``, from the source's own stream for ``draw`` (the phase, the side, the chunk): a source whose
    keyed draws are a function of their key (derived or seeded) gives every chunk fresh runs, never the search's
    again; the OS CSPRNG is fresh anyway (``keyed_child`` is itself)."""
    statistic = np.asarray(case.sample(side, n, source.keyed_child(("audit", *draw))), dtype=np.float64)
    if statistic.shape != (n,):
        raise ValueError(f"{case.name}: sample({side!r}, {n}) returned shape {statistic.shape}, expected ({n},)")
    return statistic


def _count(case: AuditCase, side: str, n: int, source: RandomSource, event: OutputEvent) -> int:
    """How many of n fresh runs on ``side`` fall in ``event``."""
    return sum(event.hits(_draw(case, side, min(CHUNK, n - start), source, ("count", side, start)))
               for start in range(0, n, CHUNK))


def run_audit(case: AuditCase, samples: int, confidence: float = DEFAULT_CONFIDENCE,
              source: RandomSource | None = None) -> AuditResult:
    """Audit ``case`` with ``samples`` test runs per side (and half as many search runs before them, at most
    ``MAX_SEARCH_SAMPLES``)."""
    source = SecureSource() if source is None else source
    started = time.perf_counter()
    search = max(1, min(int(samples * SEARCH_FRACTION), MAX_SEARCH_SAMPLES))
    event = select_event(_draw(case, D, search, source, ("search", D)), _draw(case, D_PRIME, search, source, ("search", D_PRIME)),
                         case.claimed_delta, confidence)
    other = D_PRIME if event.given == D else D
    hits_given = _count(case, event.given, samples, source, event)
    hits_other = _count(case, other, samples, source, event)
    bound = EpsilonBound.of(hits_given, samples, hits_other, samples, case.claimed_delta, confidence)
    return AuditResult(case=case, event=event, hits_given=hits_given, hits_other=hits_other, samples=samples,
                       search_samples=search, bound=bound, seconds=time.perf_counter() - started,
                       source=getattr(source, "kind", type(source).__name__))
