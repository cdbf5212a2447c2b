"""ARA event-level reports: configuration, the output set O, randomized response, information gain.

Seed 000 Sec. 2.2 ("Event-level Reports", Alg. 4 ARA-Event-Client) and Sec. 5 (Alg. 8
InteractiveRandomizedResponse, Thm. 5.1). The per-device client of Alg. 4 is in ``event_client``.

* **Configuration** (``EventLevelConfig``): per source at most ``max_event_level_reports`` M reports
  (0..20; default 3 for navigation sources, 1 for event sources) and a list of at most 32 trigger data
  values, each with its reporting windows (at most 5 end times, strictly increasing, seconds from the
  source registration; ends beyond the source expiry are dropped and the expiry becomes the last end)
  and its summary buckets (increasing positive thresholds b_1 < ... < b_k: "a report is sent when the
  threshold is met", default [1, ..., M]). A trigger's data maps to a listed value by ``modulus``
  (trigger_data % number of values, the listed values being 0..n-1) or ``exact`` (it must equal a listed
  value, else the trigger is ignored: "if it does not match any in the specification it gets ignored").
  An invalid configuration raises ``ConfigurationError`` (a ValueError) whose message starts with a
  stable reason string, so a pipeline can dead-letter it.
* **The output set O** (Sec. 2.2, "Noisy Version", Table 1): an output is the number n_{t,w} of reports
  sent for trigger data t at the end of its window w, with sum_w n_{t,w} <= b_t (t has b_t summary
  buckets) and sum_{t,w} n_{t,w} <= M. In the seed's example (two trigger data with two windows and two
  buckets each, M = 3) |O| = 36 - 9 = 27. With T trigger data sharing W windows and b_t >= M,
  |O| = C(T W + M, M) (2925 for the navigation defaults, 3 for the event defaults); the general count
  is a dynamic programme over the cells (t, w) (``count_outputs``). An output is represented by the
  tuple of its counts n_{t,w} in ``config.cells`` order (trigger data by increasing value, then windows
  in time order); ``unrank_output`` / ``rank_output`` map O to [0, |O|) and back in lexicographic order
  of these tuples (index 0 is "no report"), using the same table, never enumerating O.
* **Randomized response** (Alg. 8, "with probability (e^eps - 1) / (e^eps + |O| - 1) we proceed like in
  the noiseless version, otherwise we sample an element of O uniformly at random"): chosen once at
  source registration (``randomized_response``; ``randomized_response_array`` for many sources at once).
  Thm. 5.1: the mechanism is eps-DP; see ``truthful_threshold`` for why the implemented Bernoulli keeps
  that guarantee exactly.
* **Information gain**: the capacity of the k-ary symmetric channel the mechanism is, with the limits
  used by ARA (11.5 bits for navigation sources, 6.5 bits for event sources); ``check_configuration``
  rejects a configuration above its limit or with |O| > 2**32 - 1.

Counts are Python ints throughout (|O| can exceed 2**64); no floating point touches a count or a
sampled value. No Beam import here.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Iterable, Sequence

import numpy as np

from schemas.codecs import MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS, SECONDS_PER_DAY
from transforms.core.mechanisms.noise import RandomSource, as_fraction, randbelow_array

NAVIGATION = "navigation"
EVENT = "event"
SOURCE_TYPES = (NAVIGATION, EVENT)
MODULUS = "modulus"
EXACT = "exact"
MATCHING_MODES = (MODULUS, EXACT)

MAX_TRIGGER_DATA = 32  # "trigSpec ... is a list of at most 32 elements" (Sec. 2.2)
MAX_WINDOWS = 5  # "at most five reporting windows" (Sec. 2.2)
MAX_EVENT_LEVEL_REPORTS = 20
MAX_TRIGGER_DATA_VALUE = 2**32 - 1
DEFAULT_EXPIRY_SECONDS = MAX_EXPIRY_SECONDS
MAX_STATES = 2**32 - 1
MAX_EPSILON = 14.0
INFORMATION_GAIN_LIMITS = {NAVIGATION: 11.5, EVENT: 6.5}  # bits
DEFAULT_MAX_REPORTS = {NAVIGATION: 3, EVENT: 1}
DEFAULT_CARDINALITY = {NAVIGATION: 8, EVENT: 2}
MAX_EPSILON_TOLERANCE = 1e-9  # max_epsilon's bisection stops when its bracket is this narrow

# Reasons (the first word of every ConfigurationError message).
REASONS = (
    "not_an_integer", "unknown_source_type", "expiry_out_of_range", "max_reports_out_of_range",
    "no_trigger_data", "too_many_trigger_data", "duplicate_trigger_data", "trigger_data_out_of_range",
    "unknown_matching_mode", "modulus_needs_values_0_to_n_minus_1", "no_windows", "too_many_windows",
    "window_out_of_range", "windows_not_increasing", "bucket_out_of_range", "buckets_not_increasing",
    "epsilon_out_of_range", "information_gain_too_high", "too_many_states",
)


class ConfigurationError(ValueError):
    """An invalid event-level configuration: ``str(error)`` is ``"<reason>: <detail>"``, ``error.reason`` the reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _integer(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigurationError("not_an_integer", f"{name} must be an integer, got {value!r}")
    return int(value)


def _strictly_increasing(values: Sequence[int]) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TriggerDataSpec:
    """One trigger data value of a source's trigSpec (Sec. 2.2): its reporting windows and summary buckets.

    ``window_ends``: at most 5 strictly increasing end times, in seconds from the source registration
    (the window w covers triggers registered in [end_{w-1}, end_w), end_{-1} = 0).
    ``summary_buckets``: strictly increasing positive thresholds b_1 < ... < b_k (Alg. 4); empty allowed
    (the trigger data then never reports). ``EventLevelConfig`` clamps the windows to the expiry.
    """

    value: int
    window_ends: tuple[int, ...]
    summary_buckets: tuple[int, ...]

    def __post_init__(self) -> None:
        value = _integer(self.value, "trigger data")
        if not 0 <= value <= MAX_TRIGGER_DATA_VALUE:
            raise ConfigurationError("trigger_data_out_of_range", f"trigger data must be in [0, 2**32), got {value}")
        ends = tuple(_integer(end, "window end") for end in self.window_ends)
        if not ends:
            raise ConfigurationError("no_windows", f"trigger data {value} has no reporting window")
        if len(ends) > MAX_WINDOWS:
            raise ConfigurationError("too_many_windows", f"trigger data {value} has {len(ends)} windows (at most 5)")
        if ends[0] <= 0:
            raise ConfigurationError("window_out_of_range", f"window ends must be > 0 seconds, got {ends}")
        if not _strictly_increasing(ends):
            raise ConfigurationError("windows_not_increasing", f"window ends {ends} of trigger data {value}")
        buckets = tuple(_integer(bucket, "summary bucket") for bucket in self.summary_buckets)
        if buckets and buckets[0] <= 0:
            raise ConfigurationError("bucket_out_of_range", f"summary buckets must be > 0, got {buckets}")
        if not _strictly_increasing(buckets):
            raise ConfigurationError("buckets_not_increasing", f"summary buckets {buckets} of trigger data {value}")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "window_ends", ends)
        object.__setattr__(self, "summary_buckets", buckets)


def clamp_windows(window_ends: Sequence[int], expiry_seconds: int) -> tuple[int, ...]:
    """The window ends with those beyond the expiry dropped and the expiry as the last end (if any was dropped).

    So the navigation defaults [2 days, 7 days, expiry] become [1 day] for a 1-day expiry and
    [2 days, 3 days] for a 3-day expiry.
    """
    kept = tuple(end for end in window_ends if end < expiry_seconds)
    return kept + (expiry_seconds,) if len(kept) < len(window_ends) else kept


@dataclass(frozen=True)
class EventLevelConfig:
    """The event-level part of a source registration: (maxRep, trigSpec) of Sec. 2.2, plus its type and expiry.

    ``trigger_specs`` is stored sorted by value with windows clamped to ``expiry_seconds``
    (``clamp_windows``). ``source_type`` ("navigation" or "event") selects the information-gain limit.
    Frozen and hashable: the tables of ``count_outputs`` and ``unrank_output`` are cached per configuration.
    """

    source_type: str
    expiry_seconds: int
    max_event_level_reports: int
    trigger_specs: tuple[TriggerDataSpec, ...]
    matching: str = MODULUS

    def __post_init__(self) -> None:
        if self.source_type not in SOURCE_TYPES:
            raise ConfigurationError("unknown_source_type", f"source type must be one of {SOURCE_TYPES}, "
                                     f"got {self.source_type!r}")
        expiry = _integer(self.expiry_seconds, "expiry")
        if not MIN_EXPIRY_SECONDS <= expiry <= MAX_EXPIRY_SECONDS:
            raise ConfigurationError("expiry_out_of_range", f"expiry must be 1 to 30 days (86400 to 2592000 s), "
                                     f"got {expiry} s")
        reports = _integer(self.max_event_level_reports, "max_event_level_reports")
        if not 0 <= reports <= MAX_EVENT_LEVEL_REPORTS:
            raise ConfigurationError("max_reports_out_of_range", f"max_event_level_reports must be in [0, 20], "
                                     f"got {reports}")
        specs = tuple(self.trigger_specs)
        if not specs:
            raise ConfigurationError("no_trigger_data", "a configuration needs at least one trigger data value")
        if len(specs) > MAX_TRIGGER_DATA:
            raise ConfigurationError("too_many_trigger_data", f"{len(specs)} trigger data values (at most 32)")
        if not all(isinstance(spec, TriggerDataSpec) for spec in specs):
            raise TypeError("trigger_specs must be TriggerDataSpec instances")
        values = sorted(spec.value for spec in specs)
        if not _strictly_increasing(values):
            raise ConfigurationError("duplicate_trigger_data", f"trigger data values {values} repeat")
        if self.matching not in MATCHING_MODES:
            raise ConfigurationError("unknown_matching_mode", f"matching must be one of {MATCHING_MODES}, "
                                     f"got {self.matching!r}")
        if self.matching == MODULUS and values != list(range(len(values))):
            raise ConfigurationError("modulus_needs_values_0_to_n_minus_1",
                                     f"modulus matching needs trigger data 0..n-1, got {values}")
        clamped = tuple(
            TriggerDataSpec(spec.value, clamp_windows(spec.window_ends, expiry), spec.summary_buckets)
            for spec in sorted(specs, key=lambda spec: spec.value)
        )
        object.__setattr__(self, "expiry_seconds", expiry)
        object.__setattr__(self, "max_event_level_reports", reports)
        object.__setattr__(self, "trigger_specs", clamped)

    @property
    def trigger_data_values(self) -> tuple[int, ...]:
        return tuple(spec.value for spec in self.trigger_specs)

    @cached_property
    def cells(self) -> tuple[tuple[int, int], ...]:
        """(spec index, window index) of every count n_{t,w} of an output, in the order of its tuple (computed once:
        the client looks a cell up at every window it passes)."""
        return tuple((t, w) for t, spec in enumerate(self.trigger_specs) for w in range(len(spec.window_ends)))

    @cached_property
    def output_count(self) -> int:
        """|O| (``count_outputs``), computed once per configuration: the client reads it at every registration."""
        return _output_table(self).total

    @property
    def caps(self) -> tuple[int, ...]:
        """Per trigger data, the most reports it can send: min(b_t, M)."""
        return tuple(min(len(spec.summary_buckets), self.max_event_level_reports) for spec in self.trigger_specs)

    def spec_index(self, trigger_data: int) -> int | None:
        """The position t in ``trigger_specs`` a trigger's data maps to: ``modulus``, trigger_data % n; ``exact``,
        the position of the equal value or None."""
        if self.matching == MODULUS:
            return trigger_data % len(self.trigger_specs)
        for t, spec in enumerate(self.trigger_specs):
            if spec.value == trigger_data:
                return t
        return None

    def spec_for(self, trigger_data: int) -> TriggerDataSpec | None:
        """The spec a trigger's data maps to (``spec_index``), or None."""
        t = self.spec_index(trigger_data)
        return None if t is None else self.trigger_specs[t]


def default_windows(source_type: str, expiry_seconds: int) -> tuple[int, ...]:
    """Navigation [2 days, 7 days, expiry], event [expiry], clamped to the expiry (``clamp_windows``)."""
    early = (2 * SECONDS_PER_DAY, 7 * SECONDS_PER_DAY) if source_type == NAVIGATION else ()
    return tuple(end for end in early if end < expiry_seconds) + (expiry_seconds,)


def uniform_config(
    source_type: str,
    *,
    expiry_seconds: int = DEFAULT_EXPIRY_SECONDS,
    max_event_level_reports: int | None = None,
    trigger_data: Iterable[int] | None = None,
    window_ends: Sequence[int] | None = None,
    summary_buckets: Sequence[int] | None = None,
    matching: str = MODULUS,
) -> EventLevelConfig:
    """A configuration whose trigger data all share windows and buckets; every unset field takes ARA's default.

    Defaults: M = 3 (navigation) or 1 (event); trigger data 0..7 (navigation) or 0..1 (event);
    windows ``default_windows``; summary buckets [1, ..., M] (one report per trigger, up to M).
    """
    if source_type not in SOURCE_TYPES:
        raise ConfigurationError("unknown_source_type", f"source type must be one of {SOURCE_TYPES}, got {source_type!r}")
    reports = DEFAULT_MAX_REPORTS[source_type] if max_event_level_reports is None else max_event_level_reports
    values = tuple(range(DEFAULT_CARDINALITY[source_type])) if trigger_data is None else tuple(trigger_data)
    if window_ends is None:
        if isinstance(expiry_seconds, numbers.Integral) and MIN_EXPIRY_SECONDS <= expiry_seconds <= MAX_EXPIRY_SECONDS:
            window_ends = default_windows(source_type, int(expiry_seconds))
        else:
            window_ends = (SECONDS_PER_DAY,)  # the configuration check below rejects the expiry
    if summary_buckets is None:
        reports_int = _integer(reports, "max_event_level_reports")
        summary_buckets = tuple(range(1, max(reports_int, 0) + 1))
    if len(values) > MAX_TRIGGER_DATA:  # checked before building 2**32 specs
        raise ConfigurationError("too_many_trigger_data", f"{len(values)} trigger data values (at most 32)")
    specs = tuple(TriggerDataSpec(value, tuple(window_ends), tuple(summary_buckets)) for value in values)
    return EventLevelConfig(source_type, expiry_seconds, reports, specs, matching)


def navigation_config(expiry_seconds: int = DEFAULT_EXPIRY_SECONDS) -> EventLevelConfig:
    """ARA's navigation-source defaults: M = 3, trigger data 0..7, windows [2 d, 7 d, expiry], buckets [1, 2, 3]."""
    return uniform_config(NAVIGATION, expiry_seconds=expiry_seconds)


def event_config(expiry_seconds: int = DEFAULT_EXPIRY_SECONDS) -> EventLevelConfig:
    """ARA's event-source defaults: M = 1, trigger data 0..1, windows [expiry], buckets [1]."""
    return uniform_config(EVENT, expiry_seconds=expiry_seconds)


# --------------------------------------------------------------------------------------------
# The output set O: counting, ranking, unranking
# --------------------------------------------------------------------------------------------


Output = tuple[int, ...]  # n_{t,w} in ``config.cells`` order


@dataclass(frozen=True)
class _OutputTable:
    """The completion counts F[i][R][B] of the dynamic programme over the cells of a configuration.

    F[i][R][B] = number of ways to fill cells i, i+1, ... when at most R reports remain in total and at
    most B remain for the trigger data of cell i (B <= its cap; entries with B above the cap are 0 and
    never read). F[C][R][B] = 1 (no cell left). With c = (the count at cell i):
    F[i][R][B] = sum_{c=0}^{min(R,B)} next(R - c, B - c), where next(R', B') = F[i+1][R'][B'] within a
    trigger data and F[i+1][R'][cap of the next trigger data] at its last window; hence the O(1) step
    F[i][R][B] = next(R, B) + F[i][R-1][B-1]. |O| = F[0][M][cap_0].
    """

    same_spec_next: tuple[bool, ...]  # per cell: is cell i+1 of the same trigger data?
    next_cap: tuple[int, ...]  # per cell: the cap of cell i+1's trigger data (0 after the last cell)
    cell_cap: tuple[int, ...]
    table: tuple[tuple[tuple[int, ...], ...], ...]  # F[i][R][B], i in 0..C
    total: int

    def after(self, i: int, remaining: int, bucket_left: int) -> int:
        """Completions of cells i+1, ... once cell i took its count, leaving ``remaining`` and ``bucket_left``."""
        if remaining < 0 or bucket_left < 0:
            return 0
        if self.same_spec_next[i]:
            return self.table[i + 1][remaining][bucket_left]
        return self.table[i + 1][remaining][self.next_cap[i]]


@lru_cache(maxsize=256)
def _output_table(config: EventLevelConfig) -> _OutputTable:
    m = config.max_event_level_reports
    caps = config.caps
    cells = config.cells
    count = len(cells)
    cell_cap = tuple(caps[t] for t, _ in cells)
    same = tuple(i + 1 < count and cells[i + 1][0] == cells[i][0] for i in range(count))
    next_cap = tuple(cell_cap[i + 1] if i + 1 < count else 0 for i in range(count))
    table: list[tuple[tuple[int, ...], ...]] = [tuple(tuple(1 for _ in range(m + 1)) for _ in range(m + 1))]
    for i in range(count - 1, -1, -1):
        following = table[0]
        rows: list[list[int]] = []
        for r in range(m + 1):
            row = [0] * (m + 1)
            for b in range(cell_cap[i] + 1):
                nxt = following[r][b] if same[i] else following[r][next_cap[i]]
                row[b] = nxt + (rows[r - 1][b - 1] if r and b else 0)
            rows.append(row)
        table.insert(0, tuple(tuple(row) for row in rows))
    total = table[0][m][cell_cap[0]]
    return _OutputTable(same, next_cap, cell_cap, tuple(table), total)


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
    for spec, cap in zip(config.trigger_specs, config.caps):
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
    table = _output_table(config)
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
    for (t, _), c in zip(cells, output):
        per_spec[t] += c
    return sum(output) <= config.max_event_level_reports and all(n <= cap for n, cap in zip(per_spec, config.caps))


def rank_output(config: EventLevelConfig, output: Sequence[int]) -> int:
    """The rank of ``output`` in O: the inverse of ``unrank_output``; a ValueError if it is not in O."""
    if not is_output(config, output):
        raise ValueError(f"{tuple(output)} is not an output of this configuration")
    table = _output_table(config)
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
    table = _output_table(config)
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
    static = _output_table(config)
    m = config.max_event_level_reports
    idx = indices.astype(np.int64, copy=True)
    lanes = idx.size
    out = np.zeros((lanes, len(tables)), dtype=np.uint8)
    remaining = np.full(lanes, m, dtype=np.int64)
    bucket_left = np.full(lanes, static.cell_cap[0], dtype=np.int64)
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


def _check_epsilon(epsilon: numbers.Rational | float | str) -> Fraction:
    try:
        value = as_fraction(epsilon)
    except (TypeError, ValueError) as error:
        raise ConfigurationError("epsilon_out_of_range", f"epsilon must be a finite number >= 0: {error}") from None
    if value < 0:
        raise ConfigurationError("epsilon_out_of_range", f"epsilon must be >= 0, got {epsilon}")
    return value


@lru_cache(maxsize=256)
def exp_lower_bound(x: Fraction) -> Fraction:
    """A rational L with L <= e^x (x >= 0 rational), tight to a relative 2**-80.

    The Taylor partial sums of e^x = sum_n x^n / n! have positive terms, so every partial sum is a lower
    bound; the sum stops once n > 2 x (the tail is then below the last term: successive terms at least halve) and the last term
    is below 2**-80 of the sum.
    """
    total, term, n = Fraction(1), Fraction(1), 0
    while True:
        n += 1
        term = term * x / n
        total += term
        if n > 2 * x and term * 2**80 < total:
            return total


@lru_cache(maxsize=1024)
def _truthful_threshold(k: int, epsilon: Fraction) -> int:
    lower = exp_lower_bound(epsilon)
    q = (lower - 1) / (lower + k - 1)
    return math.floor(q * 2**64)


def truthful_threshold(k: int, epsilon: numbers.Rational | float | str) -> int:
    """The integer Q with P(truthful) = Q / 2**64: a 64-bit word below Q means "report truthfully" (s* = ⊥).

    Alg. 8 reports truthfully with q = (e^eps - 1) / (e^eps + k - 1). Here Q = floor(2**64 q(L)) with L a
    rational lower bound of e^eps (``exp_lower_bound``, exact Taylor partial sums; eps is converted
    with ``as_fraction``, so a float means its shortest decimal repr) and q(E) = (E - 1) / (E + k - 1),
    computed exactly with Fractions. q(E) increases with E (dq/dE = k / (E + k - 1)^2 > 0), so
    p = Q / 2**64 <= q(L) <= q(e^eps): rounding only lowers the truthful rate. Proof of Thm. 5.1 with p:
    for outputs x (the truth) and x' != x, P[o = x | x] = p + (1 - p) / k and P[o = x | x'] = (1 - p) / k,
    a ratio 1 + p k / (1 - p), increasing in p, hence <= 1 + q k / (1 - q) = e^eps; every other output
    has the same probability (1 - p) / k under both. The mechanism is eps-DP exactly, with a truthful
    rate below Alg. 8's by less than 2**-64 + 2**-80 (the floor, and L >= e^eps (1 - 2**-80)).
    """
    k = _integer(k, "number of states")
    if k < 1:
        raise ValueError(f"the number of states must be >= 1, got {k}")
    return _truthful_threshold(k, _check_epsilon(epsilon))


def randomized_response(config: EventLevelConfig, epsilon: numbers.Rational | float | str,
                        source: RandomSource) -> Output | None:
    """Alg. 8 at source registration: None (s* = ⊥, report truthfully) or a uniform random output of O.

    Truthful when ``source.randbelow(2**64)`` < ``truthful_threshold(k, eps)`` (exactly eps-DP, see
    there), else ``unrank_output(config, source.randbelow(k))``, k = |O|.
    """
    k = count_outputs(config)
    if source.randbelow(2**64) < truthful_threshold(k, epsilon):
        return None
    return unrank_output(config, source.randbelow(k))


TRUTHFUL = -1  # the index ``randomized_response_array`` returns for a truthful source


def randomized_response_array(config: EventLevelConfig, epsilon: numbers.Rational | float | str,
                              source: RandomSource, size: int) -> np.ndarray:
    """Alg. 8 for ``size`` sources sharing ``config``: an int64 array, ``TRUTHFUL`` (-1) or the rank of the
    random output (``unrank_outputs_array`` turns ranks into counts).

    The same distribution as ``randomized_response``: lane j is truthful when its word of
    ``source.random_words(size)`` is below ``truthful_threshold`` (both compare a uniform 64-bit word
    with Q), and the other lanes get ``randbelow_array(source, k)`` (exactly uniform on [0, k)).
    Needs k = |O| <= 2**63 (``check_configuration`` caps it at 2**32 - 1).

    Speed measured here (2 cores, ``SecureSource``, navigation defaults, median of 7 runs): 1,000,000
    sources in about 34 ms at eps = 14 (0.24 % randomized) and 44 ms at eps = 1 (almost all randomized);
    with ``unrank_outputs_array`` on the randomized lanes, 36 ms and 66 ms. The per-source
    ``randomized_response`` takes about 10 s (eps = 14) to 24 s (eps = 1) for the same million.
    """
    k = count_outputs(config)
    if k > 2**63:
        raise ConfigurationError("too_many_states", f"|O| = {k} exceeds the vectorised bound 2**63")
    threshold = np.uint64(truthful_threshold(k, epsilon))
    words = source.random_words(size)
    randomised = np.flatnonzero(words >= threshold)
    out = np.full(words.size, TRUTHFUL, dtype=np.int64)
    if randomised.size:
        out[randomised] = randbelow_array(source, np.full(randomised.size, k, dtype=np.uint64))
    return out


def randomized_trigger_rate(k: int, epsilon: float) -> float:
    """k / (k - 1 + e^eps), rounded to 7 decimals: the probability that a source takes a random output
    (1 - Alg. 8's truthful probability), as carried by its reports."""
    if k < 1:
        raise ValueError(f"the number of states must be >= 1, got {k}")
    if epsilon < 0 or not math.isfinite(epsilon):
        raise ConfigurationError("epsilon_out_of_range", f"epsilon must be a finite number >= 0, got {epsilon}")
    # k / (k - 1 + e^eps) = k e^-eps / ((k - 1) e^-eps + 1): no overflow for large eps
    decay = math.exp(-epsilon)
    return round(k * decay / ((k - 1) * decay + 1), 7)


# --------------------------------------------------------------------------------------------
# Information gain
# --------------------------------------------------------------------------------------------


def _binary_entropy(p: float) -> float:
    if p <= 0 or p >= 1:
        return 0.0
    return -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def information_gain(k: int, epsilon: float) -> float:
    """Capacity in bits of the k-ary symmetric channel: log2 k - h(p) - p log2(k - 1), where
    p = randomized_trigger_rate(k, eps) (k - 1) / k is the probability that the output is not the truth
    and h the binary entropy. 0 for k = 1. Non-decreasing in eps (p decreases towards 0, and the
    capacity decreases in p on [0, (k - 1) / k]); not monotone in k: at eps = 14 it peaks near 15 bits
    around k = 10**5 and falls again (0.005 bits at k = 2**32 - 1), which is why ``check_configuration``
    also caps k. p uses the rounded rate, the value reports carry."""
    if k <= 1:
        return 0.0
    p = randomized_trigger_rate(k, epsilon) * (k - 1) / k
    return max(0.0, math.log2(k) - _binary_entropy(p) - p * math.log2(k - 1))


def information_gain_limit(config: EventLevelConfig) -> float:
    """11.5 bits for navigation sources, 6.5 bits for event sources."""
    return INFORMATION_GAIN_LIMITS[config.source_type]


@dataclass(frozen=True)
class ConfigurationCheck:
    """What ``check_configuration`` found for an accepted configuration."""

    states: int
    epsilon: float
    randomized_trigger_rate: float
    information_gain_bits: float
    limit_bits: float


def check_configuration(config: EventLevelConfig, epsilon: float, limit_bits: float | None = None) -> ConfigurationCheck:
    """Accept ``config`` at ``epsilon`` or raise ``ConfigurationError``: ``epsilon_out_of_range`` outside
    [0, 14], ``too_many_states`` when |O| > 2**32 - 1, ``information_gain_too_high`` above ``limit_bits``
    (default: the source type's limit, ``information_gain_limit``)."""
    if not (math.isfinite(epsilon) and 0 <= epsilon <= MAX_EPSILON):
        raise ConfigurationError("epsilon_out_of_range", f"epsilon must be in [0, 14], got {epsilon}")
    k = count_outputs(config)
    if k > MAX_STATES:
        raise ConfigurationError("too_many_states", f"|O| = {k} exceeds 2**32 - 1")
    limit = information_gain_limit(config) if limit_bits is None else limit_bits
    gain = information_gain(k, epsilon)
    if gain > limit:
        raise ConfigurationError("information_gain_too_high",
                                 f"{gain:.4f} bits at epsilon {epsilon} with {k} states exceeds {limit} bits")
    return ConfigurationCheck(k, epsilon, randomized_trigger_rate(k, epsilon), gain, limit)


def max_epsilon(config: EventLevelConfig, limit_bits: float | None = None, eps_max: float = MAX_EPSILON,
                tolerance: float = MAX_EPSILON_TOLERANCE) -> float:
    """The largest eps in [0, eps_max] whose information gain meets ``limit_bits``, to within ``tolerance``.

    Returns ``eps_max`` when it meets the limit. Otherwise bisection on [0, eps_max] keeping
    gain(lo) <= limit < gain(hi) (gain(0) = 0: the output is then uniform on O) until hi - lo <= tolerance,
    and returns lo: it meets the limit, and (the gain being non-decreasing in eps) every eps >= lo +
    tolerance exceeds it.
    """
    limit = information_gain_limit(config) if limit_bits is None else limit_bits
    if limit < 0:
        raise ValueError(f"the limit must be >= 0 bits, got {limit}")
    k = count_outputs(config)
    if information_gain(k, eps_max) <= limit:
        return eps_max
    lo, hi = 0.0, float(eps_max)
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        if information_gain(k, mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo
