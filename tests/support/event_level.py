"""Event-level test helpers (Ghazi et al. Sec. 2.2): the paper's example configuration and a brute-force O."""
from __future__ import annotations

import itertools

from schemas.time_units import SECONDS_PER_DAY
from transforms.event_level.mechanisms.config import EventLevelConfig, TriggerDataSpec


def seed_example(matching: str = "exact") -> EventLevelConfig:
    """Sec. 2.2 / Table 1: "sandals" (0) reports at days 1 and 5 with buckets $10, $50; "sneakers" (1) at
    days 2 and 7 with buckets $20, $70; maxRep = 3; expiry 30 days."""
    day = SECONDS_PER_DAY
    return EventLevelConfig("navigation", 30 * day, 3, (
        TriggerDataSpec(0, (1 * day, 5 * day), (10, 50)),
        TriggerDataSpec(1, (2 * day, 7 * day), (20, 70)),
    ), matching)


def enumerate_outputs(config: EventLevelConfig) -> list[tuple[int, ...]]:
    """Every output of O in lexicographic order: all tuples of counts n_{t,w} (``config.cells`` order) with
    0 <= n_{t,w} <= M, kept when sum_w n_{t,w} <= b_t for every t and sum_{t,w} n_{t,w} <= M.
    Exponential in the number of cells: small configurations only."""
    m = config.max_event_level_reports
    cells = config.cells
    out = []
    for counts in itertools.product(range(m + 1), repeat=len(cells)):
        if sum(counts) > m:
            continue
        per_spec = [0] * len(config.trigger_specs)
        for (t, _), n in zip(cells, counts, strict=True):
            per_spec[t] += n
        if all(n <= len(spec.summary_buckets) for n, spec in zip(per_spec, config.trigger_specs, strict=True)):
            out.append(counts)
    return out
