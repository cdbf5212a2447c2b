"""A literal, step-by-step reading of k-anonymity note Alg. 1 and Alg. 2, for checking the optimised code."""
from __future__ import annotations

from collections.abc import Hashable

from transforms.core.mechanisms.noise import RandomSource, TruncatedLaplace


def naive_verdicts(
    joins: dict[int, set[Hashable]],
    k: int,
    w: int,
    noise: TruncatedLaplace,
    source: RandomSource,
    group: str,
    last_step: int,
) -> dict[int, tuple[bool, int]]:
    """(o_t, c_t) for every step from the first join to ``last_step``, drawing at every unlatched step."""
    out = {}
    nu, latched, instance, step_noises = 0.0, False, None, None
    for t in range(min(joins), last_step + 1):
        count = len({u for s, users in joins.items() if t - w + 1 <= s <= t for u in users})
        start = (t // w) * w
        if start != instance:
            instance, latched = start, False
            nu = noise.sample(source, key=(group, "threshold", start))
            step_noises = noise.sample_keyed_array(source, (group, "steps", start), w)  # nu_t = step_noises[t - s]
        if not latched:
            latched = count + step_noises[t - start] >= k + nu
        out[t] = (latched, count)
    return out


def naive_changes(naive: dict[int, tuple[bool, int]]) -> list[tuple[int, bool]]:
    """The ``changes`` records of a naive verdict sequence: (t, o_t) where o_t != o_{t-1}, from false."""
    records, previous = [], False
    for t, (verdict, _) in sorted(naive.items()):
        if verdict != previous:
            records.append((t, verdict))
            previous = verdict
    return records
