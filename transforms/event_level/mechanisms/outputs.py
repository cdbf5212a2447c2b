"""ARA event-level reports: the output set O, counted, ranked and unranked exactly (Ghazi et al. Sec. 2.2).

* **The output set O** (Sec. 2.2, "Noisy Version", Table 1): an output is the number n_{t,w} of reports
  sent for trigger data t at the end of its window w, with sum_w n_{t,w} <= b_t (t has b_t summary
  buckets) and sum_{t,w} n_{t,w} <= M. In the paper's example (two trigger data with two windows and two
  buckets each, M = 3) |O| = 36 - 9 = 27. With T trigger data sharing W windows and b_t >= M,
  |O| = C(T W + M, M) (2925 for the navigation defaults, 3 for the event defaults); the general count
  is a dynamic programme over the cells (t, w) (``count_outputs``). An output is represented by the
  tuple of its counts n_{t,w} in ``config.cells`` order (trigger data by increasing value, then windows
  in time order); ``unrank_output`` / ``rank_output`` map O to [0, |O|) and back in lexicographic order
  of these tuples (index 0 is "no report"), using the same table, never enumerating O.

Counts are Python ints throughout (|O| can exceed 2**64); no floating point touches a count or a
sampled value. No Beam import here.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from transforms.event_level.mechanisms.config import ConfigurationError, EventLevelConfig, _integer, output_table

Output = tuple[int, ...]  # n_{t,w} in ``config.cells`` order


def count_outputs(config: EventLevelConfig) -> int:
    """|O|, exactly (a Python int): the number of output configurations of Sec. 2.2 (27 in Table 1's example)."""
    return config.output_count


def count_outputs_by_polynomial(config: EventLevelConfig) -> int:
    """|O| as the sum of the coefficients of x^0..x^M of prod_t P_t(x), P_t(x) = sum_{j <= cap_t} C(j + W_t - 1, j) x^j.

    C(j + W_t - 1, j) is the number of ways to spread j reports of trigger data t over its W_t windows;
    the product (truncated at degree M) spreads a total over the trigger data. A second, independent
    derivation of ``count_outputs``.
    """
    m = config.max_event_level_reports
    product = [1] + [0] * m
    for spec, cap in zip(config.trigger_specs, config.caps, strict=True):
        windows = len(spec.window_ends)
        factor = [math.comb(j + windows - 1, j) if j <= cap else 0 for j in range(m + 1)]
        product = [sum(product[i] * factor[d - i] for i in range(d + 1)) for d in range(m + 1)]
    return sum(product)


def count_outputs_closed_form(trigger_data: int, windows: int, max_reports: int) -> int:
    """C(T W + M, M): |O| when T trigger data share W windows and each has b_t >= M buckets (Sec. 2.2)."""
    return math.comb(trigger_data * windows + max_reports, max_reports)


def unrank_output(config: EventLevelConfig, index: int) -> Output:
    """The output of rank ``index`` in [0, |O|): the counts n_{t,w} in ``config.cells`` order.

    Lexicographic order of the count tuples: at each cell, skip the F-table count of the completions of
    every smaller count. O(cells * M) Python-int steps; O is never enumerated.
    """
    table = output_table(config)
    index = _integer(index, "index")
    if not 0 <= index < table.total:
        raise ValueError(f"index must be in [0, {table.total}), got {index}")
    remaining, bucket_left = config.max_event_level_reports, table.cell_cap[0]
    out = []
    for i in range(len(table.cell_cap)):
        c = 0
        while True:
            block = table.after(i, remaining - c, bucket_left - c)
            if index < block:
                break
            index -= block
            c += 1
        out.append(c)
        remaining -= c
        bucket_left = bucket_left - c if table.same_spec_next[i] else table.next_cap[i]
    return tuple(out)


def is_output(config: EventLevelConfig, output: Sequence[int]) -> bool:
    """Whether ``output`` (counts in ``config.cells`` order) lies in O."""
    cells = config.cells
    if len(output) != len(cells) or any(not isinstance(c, numbers.Integral) or c < 0 for c in output):
        return False
    per_spec = [0] * len(config.trigger_specs)
    for (t, _), c in zip(cells, output, strict=True):
        per_spec[t] += c
    return sum(output) <= config.max_event_level_reports and all(n <= cap for n, cap in zip(per_spec, config.caps, strict=True))


def rank_output(config: EventLevelConfig, output: Sequence[int]) -> int:
    """The rank of ``output`` in O: the inverse of ``unrank_output``; a ValueError if it is not in O."""
    if not is_output(config, output):
        raise ValueError(f"{tuple(output)} is not an output of this configuration")
    table = output_table(config)
    remaining, bucket_left = config.max_event_level_reports, table.cell_cap[0]
    rank = 0
    for i, c in enumerate(output):
        rank += sum(table.after(i, remaining - smaller, bucket_left - smaller) for smaller in range(c))
        remaining -= c
        bucket_left = bucket_left - c if table.same_spec_next[i] else table.next_cap[i]
    return rank


@lru_cache(maxsize=64)
def _numpy_tables(config: EventLevelConfig) -> tuple[np.ndarray, ...]:
    """Per cell i, A_i[R', B'] = ``after(i, R', B')`` as int64 (needs |O| < 2**63: every entry is <= |O|)."""
    table = output_table(config)
    if table.total >= 2**63:
        raise ConfigurationError("too_many_states", f"|O| = {table.total} is too large for the vectorised path")
    m = config.max_event_level_reports
    return tuple(
        np.array([[table.after(i, r, b) for b in range(m + 1)] for r in range(m + 1)], dtype=np.int64)
        for i in range(len(table.cell_cap))
    )


_ALL_OUTPUTS_LIMIT = 2**16  # configurations with at most this many outputs keep O as one array


@lru_cache(maxsize=16)
def _all_outputs(config: EventLevelConfig) -> np.ndarray:
    return _unrank_lanes(config, np.arange(count_outputs(config), dtype=np.int64))


def _unrank_lanes(config: EventLevelConfig, indices: np.ndarray) -> np.ndarray:
    """``unrank_output`` on every lane at once (numpy masks over the cells and candidate counts)."""
    tables = _numpy_tables(config)
    static = output_table(config)
    m = config.max_event_level_reports
    idx = indices.astype(np.int64, copy=True)
    lanes = idx.size
    out = np.zeros((lanes, len(tables)), dtype=np.uint8)
    remaining = np.full(lanes, m, dtype=np.int64)
    bucket_left: np.ndarray = np.full(lanes, static.cell_cap[0], dtype=np.int64)
    for i, after in enumerate(tables):
        undecided = np.arange(lanes)
        c = 0
        while undecided.size:
            r = remaining[undecided] - c
            b = bucket_left[undecided] - c
            valid = (r >= 0) & (b >= 0)
            block = np.where(valid, after[np.maximum(r, 0), np.maximum(b, 0)], 0)
            take = idx[undecided] < block
            out[undecided[take], i] = c
            idx[undecided[~take]] -= block[~take]
            undecided = undecided[~take]
            c += 1
        chosen = out[:, i].astype(np.int64)
        remaining -= chosen
        bucket_left = bucket_left - chosen if static.same_spec_next[i] else np.full(lanes, static.next_cap[i])
    return out


def unrank_outputs_array(config: EventLevelConfig, indices: np.ndarray) -> np.ndarray:
    """``unrank_output`` for an array of indices: a (len(indices), cells) uint8 array of counts, vectorised.

    Configurations with |O| <= 2**16 index a cached array of all of O; larger ones (|O| < 2**63) run
    the unranking on all lanes at once.
    """
    indices = np.asarray(indices, dtype=np.int64).ravel()
    k = count_outputs(config)
    if indices.size and (indices.min() < 0 or indices.max() >= k):
        raise ValueError(f"indices must be in [0, {k})")
    if k <= _ALL_OUTPUTS_LIMIT:
        return _all_outputs(config)[indices]
    return _unrank_lanes(config, indices)


# --------------------------------------------------------------------------------------------
# Randomized response (Alg. 8)
# --------------------------------------------------------------------------------------------
