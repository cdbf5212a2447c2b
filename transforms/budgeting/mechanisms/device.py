"""One device's on-device logic, replayed in event-time order (Cookie Monster paper Appendix A Alg. 1, per device).

``MeasurementConfig`` is the job's side of every request: the epoch clock,
the per-epoch capacity eps_G, the default and longest attribution windows,
and the accuracy target that may set the requested epsilon (Sec. 8.1).
``resolve_request`` applies it to one conversion (or names why the request
is unusable, for the dead-letter sink). ``DeviceState`` holds what a device
keeps between events: its impressions by epoch and its privacy filters.
``replay`` feeds it events in order and yields one ``ReportRecord`` per
conversion: at once, or, with Big Bird's batched scheduling (``Scheduling``),
at the end of the scheduling interval in which its attempts run out. The batch
path replays a device's whole history in one call; the streaming path calls
``replay`` from a timer with the events that became final, up to its cut, and
keeps the state in Beam state; both give the same reports.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import NamedTuple

from schemas.rows import AttributionReport, AttributionRequest, Conversion, DeviceEpochBudget, Impression
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_HOUR
from transforms.budgeting.mechanisms.accuracy import AccuracyTarget
from transforms.budgeting.mechanisms.attribution import select_relevant
from transforms.budgeting.mechanisms.bias import BiasDetection, bias_weight
from transforms.budgeting.mechanisms.policies import AttributionApi, BudgetPolicy, ReportOutcome, make_policy
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.core.mechanisms.batch_scheduling import BatchSchedule, Released
from transforms.core.mechanisms.budget_units import epsilon_units, units_float
from transforms.core.mechanisms.global_filters import SITE, FilterCapacities, FilterId, FilterSet, UserActionContext
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.mechanisms.time_steps import EpochClock

DEFAULT_WINDOW_DAYS = 30
DEFAULT_MAX_WINDOW_DAYS = 90


@dataclass(frozen=True)
class Scheduling:
    """Big Bird's batched scheduling of the Attribution API's reports (Tholoniat et al., arXiv 2506.05290v1,
    "batched scheduling"; ``transforms.core.mechanisms.batch_scheduling``): time is cut into intervals of
    ``interval_micros`` from the Unix epoch; a conversion is registered in its interval, gets ``attempts``
    intervals to be allocated, and its report is released at the end of the last of them; each epoch's global
    budget is released in ``releases`` slices, one per interval from the first that reads it."""

    interval_micros: int
    attempts: int = 1
    releases: int = 1

    def __post_init__(self) -> None:
        for name in ("interval_micros", "attempts", "releases"):
            if getattr(self, name) < 1:
                raise ValueError(f"batched scheduling's {name} must be >= 1, got {getattr(self, name)}")

    def interval_of(self, time_micros: int) -> int:
        """The scheduling interval holding ``time_micros``."""
        return time_micros // self.interval_micros

    def interval_end_micros(self, interval: int) -> int:
        """When ``interval`` ends: its batch runs once every event before then is replayed."""
        return (interval + 1) * self.interval_micros


@dataclass(frozen=True)
class MeasurementConfig:
    """Job parameters of on-device budgeting (defaults: Cookie Monster paper Sec. 8.1)."""

    policy: str = "cookie_monster"
    clock: EpochClock = field(default_factory=EpochClock)
    capacity_epsilon: Fraction = Fraction(1)
    default_window_days: int = DEFAULT_WINDOW_DAYS
    max_window_days: int = DEFAULT_MAX_WINDOW_DAYS
    accuracy: AccuracyTarget | None = None
    bias: BiasDetection | None = None
    # the Attribution API's policies (attribution_api, big_bird): per device-epoch, the global budget, each
    # impression site's and each conversion site's quota of it (Big Bird); None: no such filter
    global_epsilon: Fraction | None = None
    impression_quota_epsilon: Fraction | None = None
    conversion_quota_epsilon: Fraction | None = None
    # Big Bird's per-user-action caps (attribution_api, big_bird): of one device's events at one time (one user
    # action), at most so many impression sites' impressions are saved, and per epoch at most so many conversion
    # sites draw from their quotas; None: no cap
    impression_site_cap: int | None = None
    conversion_site_cap: int | None = None
    # Big Bird's batched scheduling (attribution_api, big_bird); None: every report is answered at once
    scheduling: Scheduling | None = None

    def __post_init__(self) -> None:
        policy = make_policy(self.policy)
        if self.bias is not None and not policy.supports_bias_detection:
            raise ValueError(f"bias detection (Appendix D) needs an on-device policy of the Cookie Monster paper "
                             f"(cookie_monster, ara_like), not {self.policy}")
        if self.capacity_epsilon <= 0:
            raise ValueError(f"the per-epoch capacity eps_G must be > 0, got {self.capacity_epsilon}")
        for name in ("global_epsilon", "impression_quota_epsilon", "conversion_quota_epsilon", "impression_site_cap",
                     "conversion_site_cap"):
            value = getattr(self, name)
            if value is not None and not policy.global_filters:
                raise ValueError(f"{name} applies to the Attribution API's policies (attribution_api, big_bird), "
                                 f"not {self.policy}")
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if self.scheduling is not None and not policy.global_filters:
            raise ValueError(f"batched scheduling applies to the Attribution API's policies (attribution_api, "
                             f"big_bird), not {self.policy}")
        if self.scheduling is not None and self.conversion_site_cap is not None:
            raise ValueError("the per-user-action conversion-site cap applies to reports answered at their user "
                             "action; with batched scheduling they are allocated later, outside it")
        if not 1 <= self.default_window_days <= self.max_window_days:
            raise ValueError(
                f"the default attribution window ({self.default_window_days} days) must be between 1 day and the "
                f"longest allowed window ({self.max_window_days} days)"
            )

    @cached_property
    def capacity_units(self) -> int:
        return epsilon_units(self.capacity_epsilon, "down")

    @cached_property
    def capacity_float(self) -> float:
        return float(self.capacity_epsilon)

    @cached_property
    def filter_capacities(self) -> FilterCapacities:
        """The Attribution API policies' filters in budget units (capacities rounded down)."""
        def units(epsilon: Fraction | None) -> int | None:
            return None if epsilon is None else epsilon_units(epsilon, "down")

        return FilterCapacities(self.capacity_units, units(self.global_epsilon), units(self.impression_quota_epsilon),
                                units(self.conversion_quota_epsilon))

    def new_filters(self, consumed: dict | None = None) -> FilterTable | FilterSet:
        """A device's filters: (querier, epoch) filters of capacity eps_G, or, for the Attribution API's policies,
        the per-site, global and quota filters of ``filter_capacities``."""
        if make_policy(self.policy).global_filters:
            return FilterSet(self.filter_capacities, consumed)
        return FilterTable(self.capacity_units, consumed)

    @property
    def max_window_micros(self) -> int:
        return self.max_window_days * MICROS_PER_DAY

    def parameters(self) -> dict:
        """The configuration as a run's summary records it (JSON values; exact epsilons as strings)."""
        accuracy, bias = self.accuracy, self.bias
        return {
            "policy": self.policy,
            "epoch_days": self.clock.length_micros // MICROS_PER_DAY,
            "epoch_origin_micros": self.clock.origin_micros,
            "attribution_window_days": self.default_window_days,
            "max_attribution_window_days": self.max_window_days,
            "epsilon_g": str(self.capacity_epsilon),
            "accuracy_target": None if accuracy is None else {
                "alpha": accuracy.alpha, "beta": accuracy.beta, "expected_value": accuracy.expected_value,
            },
            "bias_detection": None if bias is None else {
                "kappa": str(bias.kappa), "count": bias.count, "beta": bias.beta, "heartbeats": bias.heartbeats,
            },
            **({"global_epsilon": _text(self.global_epsilon),
                "impression_quota_epsilon": _text(self.impression_quota_epsilon),
                "conversion_quota_epsilon": _text(self.conversion_quota_epsilon),
                "impression_site_cap": self.impression_site_cap, "conversion_site_cap": self.conversion_site_cap,
                "scheduling": None if self.scheduling is None else {
                    "interval_hours": self.scheduling.interval_micros / MICROS_PER_HOUR,
                    "attempts": self.scheduling.attempts, "global_releases": self.scheduling.releases}}
               if make_policy(self.policy).global_filters else {}),
        }

    def oldest_reachable_epoch(self, time_micros: int) -> int:
        """The oldest epoch a conversion at ``time_micros`` may read: the epoch of t minus the longest window.
        Filters and impressions of older epochs can never be used again by conversions at or after t."""
        return self.clock.epoch_of(time_micros - self.max_window_micros)


def _text(epsilon: Fraction | None) -> str | None:
    return None if epsilon is None else str(epsilon)


def resolve_request(conversion: Conversion, config: MeasurementConfig) -> tuple[AttributionRequest, range] | str:
    """The request with the job's defaults applied and its window as a range of epochs, or the reason
    (a dead-letter reason) it cannot be served: ``window_too_long`` (more days than allowed, or explicit epochs
    reaching further back than the longest allowed window), ``window_in_future`` (epochs after the
    conversion's) or ``missing_field:requested_epsilon`` (no epsilon and no accuracy target)."""
    request = conversion.attribution_request
    if request.first_epoch is not None:
        first, last = request.first_epoch, request.last_epoch
        assert last is not None  # epochs come in pairs (the codecs refuse half of one: incomplete_epochs)
        if last > config.clock.epoch_of(conversion.event_time_micros):
            return "window_in_future"
        if first < config.oldest_reachable_epoch(conversion.event_time_micros):
            return "window_too_long"
    else:
        days = config.default_window_days if request.window_days is None else request.window_days
        if days > config.max_window_days:
            return "window_too_long"
        first, last = config.clock.window_epochs(conversion.event_time_micros, days)
    if config.accuracy is not None:
        epsilon = config.accuracy.epsilon(request.query_global_sensitivity)
    elif request.requested_epsilon is None:
        return "missing_field:requested_epsilon"
    else:
        epsilon = request.requested_epsilon
    if epsilon != request.requested_epsilon:
        request = request._replace(requested_epsilon=epsilon)
    return request, range(first, last + 1)


class ReportRecord(NamedTuple):
    """A generated report with what the query stage needs besides the public fields: its order key
    (conversion time, device, conversion id) and the epochs it read (for IPA-like central budgets)."""

    querier_site: str
    query_key: str
    conversion_time_micros: int
    device_id: str
    conversion_id: str
    report_id: str
    histogram: tuple
    requested_epsilon: float
    query_global_sensitivity: float
    first_epoch: int
    last_epoch: int
    charged_units: int = 0  # SENSITIVE (evaluation only), like the two below: budget units charged on the device
    dropped_epochs: int = 0  # epochs of the window that could not pay
    bias_weight: float = 0.0  # Thm. 18's Delta of the report when bias detection is on, else 0

    def public(self) -> AttributionReport:
        """What the querier receives: no time, device, epochs or budget state."""
        return AttributionReport(
            self.report_id, self.querier_site, self.query_key, self.histogram, self.requested_epsilon,
            self.query_global_sensitivity,
        )


class DeviceState:
    """What a device keeps: impressions per epoch (time ordered), its filters (``MeasurementConfig.new_filters``:
    keyed (querier, epoch), or ``FilterId``s whose second item is the epoch too), the epochs in which it holds
    any event (``occupied``, for Appendix D bias detection) and, with batched scheduling, its schedule of
    conversions (``schedule``: created at its first conversion, over ``filters``)."""

    __slots__ = ("impressions", "filters", "occupied", "schedule")

    def __init__(self, filters: FilterTable | FilterSet, impressions: dict | None = None) -> None:
        self.impressions: dict[int, list[Impression]] = {} if impressions is None else impressions
        self.filters = filters
        self.occupied: set[int] = set()
        self.schedule: BatchSchedule[Conversion, ReportRecord] | None = None

    def oldest_needed_epoch(self, config: MeasurementConfig, cut_micros: int) -> int:
        """The oldest epoch whose filters and impressions must be kept once events before ``cut_micros`` are
        replayed: the oldest a later conversion may read, or an older one a scheduled conversion reads."""
        oldest = config.oldest_reachable_epoch(cut_micros)
        scheduled = None if self.schedule is None else self.schedule.oldest_epoch()
        return oldest if scheduled is None else min(oldest, scheduled)

    def forget_before(self, epoch: int) -> None:
        """Drop impressions, occupancy and what the schedule keeps of epochs before ``epoch`` (no window can reach
        them any more; the filters' consumption is the caller's, who reports it first), and the schedule itself once
        it keeps nothing (so that a device with nothing left can be dropped)."""
        for old in [e for e in self.impressions if e < epoch]:
            del self.impressions[old]
        self.occupied.difference_update([e for e in self.occupied if e < epoch])
        if self.schedule is not None:
            self.schedule.forget_before(epoch)
            if self.schedule.idle:  # the next conversion makes a new one, the same as this one skipped to it
                self.schedule = None


class _EveryEpoch:
    """Heartbeats (Appendix D): an event in every device-epoch, so every epoch holds data."""

    def __contains__(self, epoch: object) -> bool:
        return True


EVERY_EPOCH = _EveryEpoch()


def _relevant_by_epoch(state: DeviceState, conversion: Conversion, request: AttributionRequest, epochs: range) -> dict:
    """Step 1 of Code Listing 1 over the window: relevant impressions at or before the conversion, per epoch."""
    found = {}
    for epoch in epochs:
        impressions = state.impressions.get(epoch)
        if impressions:
            relevant = select_relevant(impressions, conversion.advertiser_site, request, conversion.event_time_micros,
                                       conversion.querier_site)
            if relevant:
                found[epoch] = relevant
    return found


def event_order(event: Impression | Conversion) -> tuple:
    """The replay order: event time, impressions before conversions at the same time, then the id."""
    if isinstance(event, Impression):
        return (event.event_time_micros, 0, event.impression_id)
    return (event.event_time_micros, 1, event.conversion_id)


def replay(
    device_id: str,
    events: Iterable[Impression | Conversion],
    state: DeviceState,
    config: MeasurementConfig,
    policy: BudgetPolicy,
    source: RandomSource,
    report_ids: bool = True,
    until_micros: int | None = None,
) -> Iterator[ReportRecord]:
    """Feed ``events`` (already in ``event_order``) to the device; one report per servable conversion.

    A conversion whose request ``resolve_request`` refuses produces no report
    (the reading stage dead-letters it with the same check). ``report_ids=False``
    leaves the report ids empty: for the evaluation, which releases no report
    and never reads them (``source`` is then not used). With batched scheduling,
    a conversion is registered and its report comes when the scheduling interval
    in which its attempts run out has ended: an interval's batch runs before the
    first event at or after its end, and after the events, for every interval that
    ended by ``until_micros`` (None: the end of the input, every report released).
    """
    epoch_of = config.clock.epoch_of
    bias = config.bias
    occupied = EVERY_EPOCH if bias is not None and bias.heartbeats else state.occupied
    caps = (config.impression_site_cap, config.conversion_site_cap)
    capped = caps != (None, None)
    action, action_time = None, None
    scheduling = config.scheduling

    def report(conversion: Conversion, request: AttributionRequest, epochs: range,
               action: UserActionContext | None = None) -> ReportRecord:
        relevant = _relevant_by_epoch(state, conversion, request, epochs)
        outcome = policy.generate_report(
            state.filters, conversion.querier_site, epochs, relevant, request, conversion.value, occupied, bias, action
        )
        return _record(device_id, conversion, request, epochs, outcome, config, source, report_ids)

    def allocate(conversion: Conversion) -> ReportRecord:  # a scheduled conversion, as of its own time
        return report(conversion, *servable_request(conversion, config))

    for event in events:
        if state.schedule is not None:
            assert scheduling is not None
            yield from _results(state.schedule.run_until(scheduling.interval_of(event.event_time_micros), allocate))
        epoch = epoch_of(event.event_time_micros)
        if bias is not None:
            state.occupied.add(epoch)
        if capped and event.event_time_micros != action_time:  # a user action: the device's events at one time
            action, action_time = UserActionContext(*caps), event.event_time_micros
        if isinstance(event, Impression):
            if action is None or action.admit_impression_site(event.publisher_site):
                state.impressions.setdefault(epoch, []).append(event)
            continue
        resolved = resolve_request(event, config)
        if isinstance(resolved, str):
            continue
        if scheduling is None:
            yield report(event, *resolved, action)
            continue
        if state.schedule is None:
            assert isinstance(state.filters, FilterSet)  # MeasurementConfig: scheduling needs global filters
            state.schedule = BatchSchedule(state.filters, scheduling.releases,
                                           interval=scheduling.interval_of(event.event_time_micros))
        request, epochs = resolved
        charges, impression_sites, units = scheduled_terms(event, request, epochs, policy)
        state.schedule.register(event, epochs, charges, impression_sites, units, scheduling.attempts)
    if state.schedule is not None:
        assert scheduling is not None
        until = None if until_micros is None else scheduling.interval_of(until_micros)
        yield from _results(state.schedule.run_until(until, allocate))


def _results(released: list[Released[ReportRecord]]) -> list[ReportRecord]:
    return [item.result for item in released]


def servable_request(conversion: Conversion, config: MeasurementConfig) -> tuple[AttributionRequest, range]:
    """The request and window of a conversion ``resolve_request`` accepted before (a scheduled one)."""
    resolved = resolve_request(conversion, config)
    assert not isinstance(resolved, str), resolved
    return resolved


def scheduled_terms(conversion: Conversion, request: AttributionRequest, epochs: range,
                    policy: BudgetPolicy) -> tuple[dict[FilterId, int], frozenset[str], int]:
    """What batched scheduling knows of a servable conversion (its resolved ``request`` and window ``epochs``),
    all of it public (its request's parameters, never the device's data): the most its report costs each filter,
    the impression sites it names and its size (Big Bird, "batched scheduling"; pdslib's public filters)."""
    assert isinstance(policy, AttributionApi)  # MeasurementConfig: scheduling needs the API's policies
    charges, units = policy.public_charges(conversion.querier_site, epochs, request)
    return charges, frozenset(request.impression_sites), units


def _record(device_id: str, conversion: Conversion, request: AttributionRequest, epochs: range,
            outcome: ReportOutcome, config: MeasurementConfig, source: RandomSource, report_ids: bool) -> ReportRecord:
    assert request.requested_epsilon is not None  # resolve_request sets it
    bias = config.bias
    return ReportRecord(
        querier_site=conversion.querier_site,
        query_key=request.query_key,
        conversion_time_micros=conversion.event_time_micros,
        device_id=device_id,
        conversion_id=conversion.conversion_id,
        report_id=source.keyed_token(("report", device_id, conversion.conversion_id)) if report_ids else "",
        histogram=outcome.histogram,
        requested_epsilon=request.requested_epsilon,
        query_global_sensitivity=request.query_global_sensitivity,
        first_epoch=epochs.start,
        last_epoch=epochs.stop - 1,
        charged_units=outcome.charged_units,
        dropped_epochs=outcome.dropped_epochs,
        bias_weight=0.0 if bias is None else bias_weight(request, len(epochs)),
    )


def sort_events(events: Iterable[Impression | Conversion]) -> list:
    """``events`` in replay order."""
    return sorted(events, key=event_order)



def budget_rows(
    device_id: str, consumed: dict, config: MeasurementConfig, keys: Iterable | None = None
) -> list[DeviceEpochBudget]:
    """SENSITIVE: a device's consumption per (querier, epoch) it was asked about (all of ``consumed``, or ``keys``);
    of a ``FilterSet``, its per-site filters (the querier's)."""
    capacity = config.capacity_float
    rows = []
    for key in (consumed if keys is None else keys):
        if type(key) is FilterId:
            if key.kind == SITE:
                rows.append(DeviceEpochBudget(key.site, device_id, key.epoch, units_float(consumed[key]), capacity))
        else:
            rows.append(DeviceEpochBudget(key[0], device_id, key[1], units_float(consumed[key]), capacity))
    return rows


def with_central(row: DeviceEpochBudget, central_consumed: dict) -> DeviceEpochBudget:
    """IPA-like: a device-epoch pays what the central filter of its (querier, epoch) paid."""
    return row._replace(consumed_epsilon=units_float(central_consumed.get((row.querier_site, row.epoch), 0)))
