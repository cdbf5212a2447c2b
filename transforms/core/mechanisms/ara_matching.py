"""Which registered source can take a trigger: the Attribution Reporting API's matching rule (Ghazi et al. Alg. 2
step 1 and Sec. 2.2), shared by the ARA summary-report client and the event-level client. Beam-free."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class Registered(Protocol):
    """A registered source: the source event (destination, reporting origin, time, filter data) and the
    microsecond it expires."""

    source: Any
    expires_micros: int


def filters_match(trigger_filters: Iterable[str], source_filters: Iterable[str]) -> bool:
    """trigFilt ∩ srcFilt ≠ ∅ (Alg. 2), with an empty trigFilt matching every source."""
    trigger_filters = set(trigger_filters)
    return not trigger_filters or not trigger_filters.isdisjoint(source_filters)


def can_take(registered: Registered, trigger: Any) -> bool:
    """Matching (Ghazi et al. Alg. 2 step 1): the source has the trigger's destination and reporting origin, is active
    at the trigger's time (registered at or before it, not expired) and its filters match. ``trigger`` is an ARA
    or an event-level trigger: both have these fields."""
    source = registered.source
    return (
        source.destination == trigger.destination
        and source.reporting_origin == trigger.reporting_origin
        and source.event_time_micros <= trigger.event_time_micros < registered.expires_micros
        and filters_match(trigger.filters, source.filter_data)
    )
