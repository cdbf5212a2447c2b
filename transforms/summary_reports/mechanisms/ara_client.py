"""ARA-SR-Client: the browser side of Attribution Reporting summary reports (Ghazi et al. Sec. 2.1.2, Alg. 2).

A device registers sources (ad views or clicks) and triggers (conversions). Each source s starts with
L_0(s) = L_1(s) = 0 (Alg. 2, "Source registration"). Each trigger yields exactly one report (Alg. 2, "Trigger
registration"):

1. **Matching.** A source can take the trigger if it is *active* (registered at or before the trigger, and the
   trigger falls before its expiry, ``event_time + expiry_seconds``), has the trigger's destination (dest) and
   reporting origin (the ad-tech: a trigger only ever reads its own ad-tech's sources, as in ARA), and its
   filters intersect the trigger's, trigFilt ∩ srcFilt ≠ ∅. A trigger with no filters matches every source
   (it does not filter); a source without filter data matches only such triggers.
2. **Attribution.** Among the matching sources the trigger goes to the one of highest ``priority``, ties to
   the most recently registered (Remark 2.3: ARA's rule; with equal priorities this is Alg. 2's last touch).
   A trigger is attributed to at most one source, which is what the analysis (Thm. 4.3) needs.
3. **Contributions.** For each named source key of that source for which the trigger has a value v > 0, one
   contribution (k, v) with k = the source key OR every key piece of the trigger that names it ("bit-wise OR of
   srcKey and trigKey"). Values for names the source does not have are ignored.
4. **Budgets.** The report is sent only if L_0(s) + (number of contributions) <= Lambda_0 and
   L_1(s) + (sum of their values) <= Lambda_1; then both are charged. Otherwise, and when nothing matched or
   nothing would be contributed (Alg. 2's trigValue = 0), the trigger gets a null report (r, ⊥, ⊥).

One departure from the letter of Alg. 2, whose loop would go on to an *older* matching source when the chosen
one's budget is exhausted: as in ARA (and as Remark 2.3 allows, any rule attributing a trigger to one source),
attribution picks the source first and an exhausted budget gives a null report.

Every report, null or not, has the trigger's reporting origin and destination, a random id and a random delay
(``contributions.make_report``), so its metadata says nothing about attribution. No Beam import here.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from schemas.rows import API_ATTRIBUTION_REPORTING, AraSource, AraTrigger
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.ara_matching import can_take
from transforms.core.mechanisms.noise import RandomSource
from transforms.summary_reports.mechanisms.contributions import ClientReport, ContributionBudget, ContributionLimits, make_report


class RegisteredSource:
    """A source in the set S of Alg. 2 with its trackers L_0(s), L_1(s) and the time it expires."""

    __slots__ = ("source", "expires_micros", "budget")

    def __init__(self, source: AraSource) -> None:
        self.source = source
        self.expires_micros = source.event_time_micros + source.expiry_seconds * MICROS_PER_SECOND
        self.budget = ContributionBudget()


@dataclass
class AraDevice:
    """One device's state: its registered sources, in registration order."""

    sources: list[RegisteredSource] = field(default_factory=list)


def attribute(device: AraDevice, trigger: AraTrigger) -> RegisteredSource | None:
    """The source ``trigger`` is attributed to: among the sources that can take it (``can_take``), the one of
    highest priority, then the most recently registered; None if none matches."""
    best, best_rank = None, None
    for index, registered in enumerate(device.sources):
        if can_take(registered, trigger):
            rank = (registered.source.priority, index)
            if best_rank is None or rank > best_rank:
                best, best_rank = registered, rank
    return best


def contributions(source: AraSource, trigger: AraTrigger) -> list[tuple[int, int]]:
    """(k, v) for every source key with a positive value in the trigger: k = the source key OR the key pieces
    that name it, v = the trigger's value for it; in the source's key order."""
    values = {value.name: value.value for value in trigger.aggregatable_values}
    out = []
    for name, key in source.aggregation_keys:
        value = values.get(name, 0)
        if value > 0:
            for piece in trigger.aggregatable_trigger_data:
                if name in piece.source_keys:
                    key |= piece.key_piece
            out.append((key, value))
    return out


def event_order(event: AraSource | AraTrigger) -> tuple:
    """Replay order: event time, sources before triggers at the same time, then the id."""
    if isinstance(event, AraSource):
        return (event.event_time_micros, 0, event.source_id)
    return (event.event_time_micros, 1, event.trigger_id)


class AraSummaryClient:
    """ARA-SR-Client (Alg. 2) with budgets ``limits``, as a ``SummaryClient``."""

    def __init__(self, limits: ContributionLimits = ContributionLimits()) -> None:
        self.limits = limits
        self.refused = 0

    def new_state(self) -> AraDevice:
        return AraDevice()

    def order(self, event: AraSource | AraTrigger) -> tuple:
        return event_order(event)

    def trigger(self, device_id: str, device: AraDevice, trigger: AraTrigger, source: RandomSource) -> ClientReport:
        """Alg. 2, "Trigger registration": the trigger's report, null unless attributed within budget."""
        chosen = attribute(device, trigger)
        found = contributions(chosen.source, trigger) if chosen is not None else []
        values = [value for _, value in found]
        refused = chosen is not None and bool(values) and not chosen.budget.charge(values, self.limits)
        if chosen is None or not values or refused:
            found = []
        self.refused += refused
        return make_report(
            source, ("ara", device_id, trigger.trigger_id), api=API_ATTRIBUTION_REPORTING,
            reporting_origin=trigger.reporting_origin, destination=trigger.destination,
            event_time_micros=trigger.event_time_micros, contributions=found,
        )

    def replay(
        self, device_id: str, events: Iterable[AraSource | AraTrigger], state: AraDevice, source: RandomSource
    ) -> Iterator[ClientReport]:
        for event in events:
            if isinstance(event, AraSource):
                state.sources.append(RegisteredSource(event))  # Alg. 2, "Source registration"
            else:
                yield self.trigger(device_id, state, event, source)

    def forget_before(self, state: AraDevice, time_micros: int) -> None:
        """Drop the sources that have expired by ``time_micros``: no later trigger can match them."""
        state.sources = [registered for registered in state.sources if registered.expires_micros > time_micros]
