"""ARA-Event-Client: the browser side of Attribution Reporting event-level reports (Ghazi et al. Sec. 2.2, Alg. 4).

State per device (Alg. 4): the registered sources S, and per source s the current values V(s, t), the last
reported buckets U(s, t) and the number of reports sent N(s).

* **Source registration.** S <- S ∪ {s}, N(s) <- 0, V(s, t) <- 0, U(s, t) <- 0 for every trigger data t.
  With noise on (an ``epsilon``), Alg. 8 also chooses s* at registration: ⊥ (truthful, probability
  (e^eps - 1) / (e^eps + |O| - 1)) or a uniform output of O (``event_level.randomized_response``).
* **Trigger registration.** A trigger with value > 0 goes to one source: among the sources that are
  active (registered at or before the trigger, the trigger before the source's expiry, and not marked
  inactive: "the source now gets marked as inactive and no further purchases get attributed to this
  source", see ``deactivation`` below), have the
  trigger's destination and reporting origin and whose filters intersect the trigger's (trigFilt ∩ srcFilt
  ≠ ∅) (``ara_matching.can_take``, plus the inactive mark), the one of highest priority, ties to the most
  recently registered (as ``ara_client``; with equal priorities this is Alg. 4's reverse chronological
  scan). Its trigger data is mapped to the source's spec (``EventLevelConfig.spec_index``); if none matches
  the trigger is ignored (one departure from the letter of Alg. 4, whose scan would go on to an older
  source; as in ARA, and as ``ara_client`` does for budgets, the source is chosen first). Then
  V(s, t) += value.
* **Passing of the window w of (s, t)** at registration time + end_w: for each summary bucket b_i of t in
  increasing order, if U(s, t) < b_i <= V(s, t): U(s, t) <- b_i, and if N(s) < M, N(s) += 1 and a report
  (srcId, t, b_i) is sent. A window covers the triggers registered before its end: a trigger at exactly
  the end time falls in the next window.

When a source is marked inactive (``EventLevelClient.deactivation``; Alg. 4 itself does not say, the
walk-through of Sec. 2.2 does on its day 7):

* ``"max_reports_sent"`` (the default): as soon as N(s) reaches M, so no trigger is attributed to a source
  that can no longer report;
* ``"report_withheld"``: when a window passes with a bucket crossed but N(s) = M (the "if N(s) < maxRep"
  of Alg. 4 failing). This reproduces the walk-through to the letter: the day-6 purchase is still
  attributed (V(s, sneakers) = 105) and the source is marked inactive at the end of day 7.

Both send the same reports for a single source; they differ in which source a later trigger goes to.

Noise (Alg. 8 / Alg. 9): a source with s* ≠ ⊥ sends, at the end of window w of trigger data t, the
n_{t,w} reports of s* (with the next summary buckets of t, ``fake_reports``) instead of its true ones. Its
true state (V, U, N, and so when it becomes inactive) evolves exactly as if it were truthful, so the
attribution of triggers, hence every other source's reports, does not depend on s* (Alg. 9 runs each
source's query on the data, independently of the other sources' s*). Real and fake reports have the
same shape; each carries the randomized trigger rate of its source (0 with noise off).

Times: event times in integer microseconds, windows and expiry in seconds (``event_level``). No Beam import.
"""
from __future__ import annotations

import enum
import heapq
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.ara_matching import can_take
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.mechanisms.config import EventLevelConfig
from transforms.event_level.mechanisms.information_gain import randomized_trigger_rate
from transforms.event_level.mechanisms.outputs import Output, count_outputs
from transforms.event_level.mechanisms.randomized_response import randomized_response

MAX_REPORTS_SENT = "max_reports_sent"
REPORT_WITHHELD = "report_withheld"
DEACTIVATION_POLICIES = (MAX_REPORTS_SENT, REPORT_WITHHELD)


class _Draw(enum.Enum):
    DRAW = "draw"


DRAW: Final = _Draw.DRAW  # ``register_source``'s default: draw s* from the client's random source


@dataclass(frozen=True)
class EventSource:
    """A source registration s = (srcId, dest, expDate, srcFilt, maxRep, trigSpec) (Sec. 2.2); expDate is
    ``event_time_micros`` + ``config.expiry_seconds``, maxRep and trigSpec are in ``config``."""

    source_id: str
    destination: str
    event_time_micros: int
    config: EventLevelConfig
    filter_data: tuple[str, ...] = ()
    priority: int = 0
    reporting_origin: str = ""


@dataclass(frozen=True)
class EventTrigger:
    """A trigger registration (dest, trigId, trigFilt, trigData, trigValue) (Sec. 2.2). ``value`` defaults
    to 1, so the default summary buckets [1, ..., M] send one report per trigger."""

    trigger_id: str
    destination: str
    event_time_micros: int
    trigger_data: int
    value: int = 1
    filters: tuple[str, ...] = ()
    reporting_origin: str = ""


@dataclass(frozen=True)
class EventLevelReport:
    """An event-level report (srcId, trigData, b_i) of Alg. 4, with its window and the time it is sent."""

    source_id: str
    trigger_data: int
    window_index: int
    summary_bucket: int
    report_time_micros: int
    randomized_trigger_rate: float = 0.0


def window_time_micros(source: EventSource, window_end_seconds: int) -> int:
    return source.event_time_micros + window_end_seconds * MICROS_PER_SECOND


def fake_reports(source: EventSource, output: Sequence[int], rate: float = 0.0) -> list[EventLevelReport]:
    """The reports of an output of O (the counts n_{t,w} in ``config.cells`` order): for trigger data t and
    window w, n_{t,w} reports with the next summary buckets of t in order, sent at the source time plus
    the window end. Ordered by cell (trigger data, then window)."""
    config = source.config
    if len(output) != len(config.cells):
        raise ValueError(f"an output of this configuration has {len(config.cells)} counts, got {len(output)}")
    reports, used = [], [0] * len(config.trigger_specs)
    # lengths checked above; per randomized source, where any keyword to zip (strict=False as much as strict=True)
    # costs 5 to 20 % of the call (measured)
    for (t, w), n in zip(config.cells, output):  # noqa: B905
        spec = config.trigger_specs[t]
        for _ in range(n):
            reports.append(EventLevelReport(
                source.source_id, spec.value, w, spec.summary_buckets[used[t]],
                window_time_micros(source, spec.window_ends[w]), rate,
            ))
            used[t] += 1
    return reports


class RegisteredEventSource:
    """A source in S with V(s, ·), U(s, ·), N(s) (indexed by spec position) and its choice s* of Alg. 8."""

    __slots__ = ("source", "index", "expires_micros", "values", "last_bucket", "sent", "fake", "fake_by_window", "rate",
                 "counts", "inactive", "scheduled", "revision")

    def __init__(self, source: EventSource, index: int, fake: Output | None, rate: float) -> None:
        self.source = source
        self.index = index  # registration order, for "most recent" ties
        self.expires_micros = window_time_micros(source, source.config.expiry_seconds)
        specs = len(source.config.trigger_specs)
        self.values = [0] * specs  # V(s, t)
        self.last_bucket = [0] * specs  # U(s, t)
        self.sent = 0  # N(s)
        self.counts = [0] * len(source.config.cells)  # the truthful run's n_{t,w}: an element of O (sensitive)
        self.inactive = False
        self.scheduled = [False] * specs  # per t: are the windows of (s, t) queued in the client?
        self.revision = 0  # changes with V, U, N, the counts, inactive or scheduled (a codec keeps what stays)
        self.fake = fake  # s*: None is ⊥ (truthful)
        self.rate = rate
        self.fake_by_window: dict[tuple[int, int], list[EventLevelReport]] = {}
        if fake is not None:
            for report in fake_reports(source, fake, rate):
                self.fake_by_window.setdefault((report.trigger_data, report.window_index), []).append(report)


@dataclass
class EventLevelClient:
    """ARA-Event-Client (Alg. 4) for one device; with ``epsilon`` set, with Alg. 8's randomized response
    drawn from ``random_source`` at each source registration (``epsilon=None``: the noiseless version).

    Drive it with ``register_source``, ``register_trigger`` and ``advance_to`` in time order, or with
    ``replay``. Each registered source's ``counts`` are the counts n_{t,w} its truthful run produced (an
    element of O), for evaluation and tests; they are sensitive and never part of a report.
    """

    epsilon: float | None = None
    random_source: RandomSource | None = None
    deactivation: str = MAX_REPORTS_SENT
    sources: list[RegisteredEventSource] = field(default_factory=list, init=False)
    reports: list[EventLevelReport] = field(default_factory=list, init=False)  # every report sent, in order
    windows: list[tuple[int, int, int, int]] = field(default_factory=list, init=False)  # heap (time, index, t, w)
    now_micros: int | None = field(default=None, init=False)
    # changes whenever a registered source's revision or the list of sources does (not the windows): a codec
    # keeps the encoding of a client whose sources are as they were
    revision: int = field(default=0, init=False, compare=False)

    def __post_init__(self) -> None:
        if self.deactivation not in DEACTIVATION_POLICIES:
            raise ValueError(f"deactivation must be one of {DEACTIVATION_POLICIES}, got {self.deactivation!r}")
        if self.epsilon is not None and self.random_source is None:
            raise ValueError("randomized response needs a random_source")

    def register_source(
        self, source: EventSource, randomized: Output | None | Literal[_Draw.DRAW] = DRAW
    ) -> RegisteredEventSource:
        """Alg. 4, "Source registration" (and Alg. 8's choice of s* when noise is on), after passing the
        windows that end at or before the registration. ``randomized``: s* chosen by the caller (None for ⊥,
        or an output of O, e.g. drawn for many sources at once with ``randomized_response_array``) rather
        than drawn here from ``random_source``; only with noise on."""
        self.advance_to(source.event_time_micros)
        fake, rate = None, 0.0
        if self.epsilon is not None:
            if randomized is DRAW:
                assert self.random_source is not None  # __post_init__: noise on needs a source
                fake = randomized_response(source.config, self.epsilon, self.random_source)
            else:
                fake = None if randomized is None else tuple(int(count) for count in randomized)
            rate = randomized_trigger_rate(count_outputs(source.config), self.epsilon)
        elif randomized is not DRAW and randomized is not None:
            raise ValueError("a randomized output needs noise on (an epsilon)")
        registered = RegisteredEventSource(source, len(self.sources), fake, rate)
        registered.inactive = self.deactivation == MAX_REPORTS_SENT and source.config.max_event_level_reports == 0
        self.sources.append(registered)
        self.revision += 1
        if fake is not None:  # s*'s reports go out at its windows' ends, whatever the triggers
            for t in range(len(source.config.trigger_specs)):
                self._schedule(registered, t, source.event_time_micros)
        return registered

    def _schedule(self, registered: RegisteredEventSource, t: int, after_micros: int) -> None:
        """Queue the windows of (s, t) that end after ``after_micros``. A window of (s, t) does nothing while
        V(s, t) = 0, so a truthful source's windows of t are queued only at the first trigger attributed to t
        (the earlier ones have passed, with nothing to do): most sources never get a trigger for most t."""
        if registered.scheduled[t]:
            return
        registered.scheduled[t] = True
        registered.revision += 1
        self.revision += 1
        source = registered.source
        for w, end in enumerate(source.config.trigger_specs[t].window_ends):
            time = window_time_micros(source, end)
            if time > after_micros:
                heapq.heappush(self.windows, (time, registered.index, t, w))

    def attribute(self, trigger: EventTrigger) -> RegisteredEventSource | None:
        """The source ``trigger`` goes to (see the module docstring), or None."""
        best = None
        for registered in self.sources:
            if not registered.inactive and can_take(registered, trigger) and (
                best is None or (registered.source.priority, registered.index) > (best.source.priority, best.index)
            ):
                best = registered
        return best

    def register_trigger(self, trigger: EventTrigger) -> RegisteredEventSource | None:
        """Alg. 4, "Trigger registration": passes the windows ending at or before the trigger first, then
        adds its value to V(s, t) of the source it is attributed to; returns that source (None: ignored)."""
        self.advance_to(trigger.event_time_micros)
        value = trigger.value
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"trigger value must be an integer, got {value!r}")
        if value <= 0:
            return None
        chosen = self.attribute(trigger)
        if chosen is None:
            return None
        t = chosen.source.config.spec_index(trigger.trigger_data)
        if t is None:
            return None  # exact matching and a trigger data the source does not list: ignored
        chosen.values[t] += value
        chosen.revision += 1
        self.revision += 1
        self._schedule(chosen, t, trigger.event_time_micros)
        return chosen

    def advance_to(self, time_micros: int) -> list[EventLevelReport]:
        """Pass every window ending at or before ``time_micros`` (in time order) and return their reports."""
        self._check_time(time_micros)
        reports = []
        while self.windows and self.windows[0][0] <= time_micros:
            _, index, t, w = heapq.heappop(self.windows)
            reports.extend(self._pass_window(self.sources[index], t, w))
        self.reports.extend(reports)
        return reports

    def flush(self) -> list[EventLevelReport]:
        """Pass every remaining window (the end of time) and return their reports."""
        last = max((entry[0] for entry in self.windows), default=self.now_micros or 0)
        return self.advance_to(last)

    def _pass_window(self, registered: RegisteredEventSource, t: int, w: int) -> list[EventLevelReport]:
        """Alg. 4, "At passing of time window for (s, trigData)"; a randomized source sends s*'s reports."""
        source = registered.source
        config = source.config
        spec = config.trigger_specs[t]
        true_reports = []
        if registered.values[t] > registered.last_bucket[t]:  # otherwise no bucket is crossed (most windows)
            registered.revision += 1
            self.revision += 1
            time = window_time_micros(source, spec.window_ends[w])
            cell = config.cells.index((t, w))
            for bucket in spec.summary_buckets:
                if registered.last_bucket[t] < bucket <= registered.values[t]:
                    registered.last_bucket[t] = bucket
                    if registered.sent < config.max_event_level_reports:
                        registered.sent += 1
                        registered.counts[cell] += 1
                        true_reports.append(EventLevelReport(source.source_id, spec.value, w, bucket, time, registered.rate))
                        if self.deactivation == MAX_REPORTS_SENT and registered.sent == config.max_event_level_reports:
                            registered.inactive = True
                    elif self.deactivation == REPORT_WITHHELD:
                        registered.inactive = True
        if registered.fake is None:
            return true_reports
        return registered.fake_by_window.get((spec.value, w), [])

    def forget_expired(self) -> list[RegisteredEventSource]:
        """Drop the sources that expired at or before ``now_micros``: no trigger can go to them any more and
        their windows (which end at the expiry at the latest) have passed. The remaining sources keep their
        order, so attribution ties go as before; returns the dropped ones. For long-running devices."""
        now = self.now_micros
        if now is None:
            return []
        kept = [registered for registered in self.sources if registered.expires_micros > now]
        if len(kept) == len(self.sources):
            return []
        renumber = {registered.index: new for new, registered in enumerate(kept)}
        for registered in kept:
            registered.index = renumber[registered.index]
        dropped = [registered for registered in self.sources if registered.expires_micros <= now]
        self.sources = kept
        self.revision += 1
        # a monotone renumbering keeps the heap ordered; every pending window belongs to a kept source
        self.windows = [(time, renumber[index], t, w) for time, index, t, w in self.windows]
        return dropped

    def _check_time(self, time_micros: int) -> None:
        if self.now_micros is not None and time_micros < self.now_micros:
            raise ValueError(f"events must come in time order: {time_micros} < {self.now_micros}")
        self.now_micros = time_micros

    def replay(self, events: Iterable[EventSource | EventTrigger]) -> list[EventLevelReport]:
        """Replay ``events`` (sorted here by time, sources before triggers at the same time, then id) and
        pass every window to the end; all the reports, in the order they are sent."""
        start = len(self.reports)
        for event in sorted(events, key=event_order):
            if isinstance(event, EventSource):
                self.register_source(event)
            else:
                self.register_trigger(event)
        self.flush()
        return self.reports[start:]


def event_order(event: EventSource | EventTrigger) -> tuple:
    """Replay order: event time, sources before triggers at the same time, then the id."""
    if isinstance(event, EventSource):
        return (event.event_time_micros, 0, event.source_id)
    return (event.event_time_micros, 1, event.trigger_id)
