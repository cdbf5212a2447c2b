"""ARA event-level reports: a source's configuration (Ghazi et al. Sec. 2.2, "Event-level Reports").

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

No Beam import here.
"""
from __future__ import annotations

import itertools
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from schemas.limits import (
    DEFAULT_MAX_REPORTS,
    DEFAULT_TRIGGER_DATA_CARDINALITY,
    MAX_EVENT_LEVEL_EPSILON,
    MAX_EVENT_LEVEL_REPORTS,
    MAX_EXPIRY_SECONDS,
    MAX_REPORT_WINDOWS,
    MAX_TRIGGER_DATA,
    MIN_EXPIRY_SECONDS,
)
from schemas.time_units import SECONDS_PER_DAY

NAVIGATION = "navigation"
EVENT = "event"
SOURCE_TYPES = (NAVIGATION, EVENT)
MODULUS = "modulus"
EXACT = "exact"
MATCHING_MODES = (MODULUS, EXACT)

MAX_WINDOWS = MAX_REPORT_WINDOWS
MAX_TRIGGER_DATA_VALUE = 2**32 - 1
DEFAULT_EXPIRY_SECONDS = MAX_EXPIRY_SECONDS
MAX_STATES = 2**32 - 1
MAX_EPSILON = MAX_EVENT_LEVEL_EPSILON
INFORMATION_GAIN_LIMITS = {NAVIGATION: 11.5, EVENT: 6.5}  # bits
DEFAULT_CARDINALITY = DEFAULT_TRIGGER_DATA_CARDINALITY
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
    return all(a < b for a, b in itertools.pairwise(values))


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
        """|O| (``outputs.count_outputs``), computed once per configuration: the client reads it at every
        registration. Only the count is kept on the configuration (it is pickled with every source that holds
        it); the table it comes from is cached by ``output_table``."""
        return output_table(self).total

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


@dataclass(frozen=True)
class OutputTable:
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
def output_table(config: EventLevelConfig) -> OutputTable:
    """The ``OutputTable`` of ``config``, built once per configuration."""
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
    return OutputTable(same, next_cap, cell_cap, tuple(table), total)
