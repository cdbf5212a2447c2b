"""Audit cases of what the Attribution Reporting specification's newer features change about privacy, run through
the attribution storage and the clients' specification modes the browser simulation uses
(``transforms.core.mechanisms.ara_attribution``, the ``ara_spec`` parts):

* **Named budgets and the L1 budget** (``attribution_reporting.named_budgets``): named budgets only add limits;
  a source's aggregatable contributions stay within L1 = 65,536 whatever its named budgets sum to. The source has
  two named budgets of L1 each and two triggers of L1, one charged to each: the first fills L1, the second is
  refused though its named budget is untouched, so the source's contributions sit exactly at L1. The release is
  the summary report of its contributions through the Aggregation Service's noisy sums at scale L1 / eps
  (``audit.cases.summary_clients.make_summary_case``): eps-DP, tight.
* **Attribution scopes and the event-level output** (``attribution_reporting.scopes``): a trigger whose scopes
  match several sources of one reporting origin is attributed to one of them, and the others are deactivated
  (spec "find matching sources": "to avoid creating multiple attribution reports from a single cross-site user
  interaction"), so the trigger moves the true output of one source, and the event-level release (every
  source's randomized response, each eps-DP over its own outputs, Ghazi et al. Thm. 5.1) stays eps-DP. Two event
  sources of scope "1" and "2", and a trigger of scopes {"1", "2"}, present or not. The storage decides each
  source's true output on either side (a replay with randomized response off: its decisions do not depend on the
  noise, which each source draws at registration); each source's report is then its randomized response, drawn
  as the batch pipeline draws it (``randomized_response_array``). The statistic counts the sources that report
  the output they would report truthfully on D, among those whose truth differs between D and D'.

A broken variant of each (``tests/audit/broken.py``) loses 2 eps: a client that charges the named budget in place
of L1, a storage that attributes a trigger to every source its scopes match.
"""
from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from audit.case import AuditCase, D
from audit.cases.event_level import reported_outputs, samples_for
from audit.cases.summary_clients import make_summary_case
from schemas.limits import CONTRIBUTION_BUDGET
from schemas.registrations import (
    EVENT,
    NAVIGATION,
    AggregatableTriggerData,
    AggregatableValues,
    AttributionScopes,
    EventTriggerData,
    NamedBudgetCandidate,
    SourceRegistration,
    TriggerRegistration,
)
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.ara_attribution import AttributionStorage, replay
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.mechanisms.ara_spec import SpecEventLevel, SpecEventReport, source_config, window_index
from transforms.event_level.mechanisms.outputs import count_outputs, rank_output
from transforms.event_level.mechanisms.randomized_response import randomized_response_array
from transforms.summary_reports.mechanisms.ara_spec import SpecAggregatable

ORIGIN, SITE, DESTINATION = "https://adtech.example", "https://news.example", "https://shop.example"
KEY = 1 << 64


def _source(event_id: int, time_s: int, source_type: str, **fields: object) -> SourceRegistration:
    return SourceRegistration(
        time_micros=time_s * MICROS_PER_SECOND, source_site=SITE, source_origin=SITE, reporting_origin=ORIGIN,
        reporting_site=ORIGIN, source_type=source_type, source_event_id=event_id, destination_sites=(DESTINATION,),
        expiry_seconds=30 * 86_400, event_report_window_ends=(30 * 86_400,), aggregatable_report_window_seconds=30 * 86_400,
        max_event_level_reports=1, trigger_data=(0, 1), **fields)  # type: ignore[arg-type]


def _trigger(time_s: int, **fields: object) -> TriggerRegistration:
    return TriggerRegistration(time_micros=time_s * MICROS_PER_SECOND, destination_site=DESTINATION,
                               reporting_origin=ORIGIN, reporting_site=ORIGIN, **fields)  # type: ignore[arg-type]


def named_budget_events() -> list[SourceRegistration | TriggerRegistration]:
    """A source with two named budgets of L1 each, and two triggers of L1, one charged to each."""
    source = _source(1, 0, NAVIGATION, aggregation_keys=(("campaign", KEY),),
                     named_budgets=(("a", CONTRIBUTION_BUDGET), ("b", CONTRIBUTION_BUDGET)))
    return [source, *(
        _trigger(10 + j, aggregatable_trigger_data=(AggregatableTriggerData(5, ("campaign",)),),
                 aggregatable_values=(AggregatableValues((("campaign", CONTRIBUTION_BUDGET),)),),
                 named_budgets=(NamedBudgetCandidate(name),))
        for j, name in enumerate("ab"))]


def aggregatable_totals(events: list, aggregatable: Callable[[], SpecAggregatable]) -> dict[int, int]:
    """Each bucket's total over the source's reports, by the storage and ``aggregatable`` (truthful: no noise)."""
    storage = AttributionStorage([aggregatable()])
    totals: dict[int, int] = {}
    for report in replay(storage, [(event, None) for event in events]).reports:
        for key, value, _ in report.contributions:
            totals[key] = totals.get(key, 0) + value
    return totals


def make_named_budget_case(epsilon: Fraction, aggregatable: Callable[[], SpecAggregatable] = SpecAggregatable
                           ) -> AuditCase:
    """Named budgets and L1 end to end; ``aggregatable`` builds the client (a test passes a broken one)."""
    totals = aggregatable_totals(named_budget_events(), aggregatable)
    return make_summary_case(
        "attribution_reporting.named_budgets",
        "Attribution Reporting: named budgets within L1, aggregatable client + Aggregation Service",
        f"one source with named budgets of L1 each and two triggers of L1 = {CONTRIBUTION_BUDGET}, one per budget, "
        "present or not", "W3C/WICG Attribution Reporting, named budgets; Ghazi et al. Alg. 2 and 6, Cor. 4.4",
        lambda source: totals, epsilon)


def scoped_events() -> tuple[list[SourceRegistration], TriggerRegistration]:
    """Two event sources of one reporting origin and destination, of scopes "1" and "2", and a trigger of both."""
    sources = [_source(index + 1, index, EVENT, attribution_scopes=AttributionScopes(2, (value,), 3))
               for index, value in enumerate("12")]
    trigger = _trigger(10, event_trigger_data=(EventTriggerData(1),), attribution_scopes=("1", "2"))
    return sources, trigger


def true_outputs(sources: list[SourceRegistration], trigger: TriggerRegistration | None,
                 storage_type: type[AttributionStorage]) -> list[int]:
    """The rank of each source's truthful output when the trigger is there (or not), by ``storage_type``."""
    storage = storage_type([SpecEventLevel()])
    events = [(source, None) for source in sources] + ([(trigger, None)] if trigger is not None else [])
    reports = [report for report in replay(storage, events).reports if isinstance(report, SpecEventReport)]
    ranks = []
    for source in sources:
        config = source_config(source)
        counts = [0] * len(config.cells)
        for report in reports:
            if report.source_event_id == source.source_event_id:
                window = window_index(source, report.trigger_time_micros)
                counts[config.cells.index((config.spec_index(report.trigger_data), window))] += 1
        ranks.append(rank_output(config, counts))
    return ranks


def make_scopes_case(epsilon: Fraction, storage_type: type[AttributionStorage] = AttributionStorage) -> AuditCase:
    """Attribution scopes and the event-level release; ``storage_type`` is the storage (a test passes a broken
    one)."""
    sources, trigger = scoped_events()
    truth_d, truth_d_prime = true_outputs(sources, trigger, storage_type), true_outputs(sources, None, storage_type)
    moved = [index for index, (a, b) in enumerate(zip(truth_d, truth_d_prime, strict=True)) if a != b]
    configs = [source_config(source) for source in sources]

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        truths = truth_d if side == D else truth_d_prime
        hits = np.zeros(n)
        for index in moved:
            reported = reported_outputs(randomized_response_array, configs[index], epsilon, truths[index], n, source)
            hits += reported == truth_d[index]
        return hits

    return AuditCase(
        name=f"attribution_reporting.scopes@eps={float(epsilon):g}",
        mechanism="Attribution Reporting: attribution scopes, event-level randomized response of a reporting origin's "
                  "scoped sources",
        neighbours="two event sources of scopes 1 and 2, and a trigger of scopes {1, 2} matching both, present or not",
        statistic="the sources reporting what they would truthfully report with the trigger, among those it moves",
        claimed_epsilon=float(epsilon), claimed_delta=0.0,
        basis="W3C/WICG Attribution Reporting, find matching sources; Ghazi et al. Alg. 8, Thm. 5.1",
        sample=sample, samples=samples_for(epsilon, max(count_outputs(config) for config in configs)),
        quick_samples=200_000,
        tight="tight: the trigger moves one source's true output, whose randomized response has probability ratio "
              "e^eps on it",
    )
