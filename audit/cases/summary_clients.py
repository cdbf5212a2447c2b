"""Audit cases of summary reports end to end (Ghazi et al. Alg. 6: the browser clients' contribution bounding,
Alg. 2 and Alg. 3, then the Aggregation Service's noisy sums, Alg. 1): one privacy unit's events present or
not, the summary report out.

* ARA (Cor. 4.4): the unit is a source; its device registers it and then three triggers whose values
  (40,000, 25,536, 40,000) would exceed the source's budget L1 = 65,536: ARA-SR-Client sends the first two
  and a null report for the third, so the source's contributions sit exactly at L1.
* PAA (Cor. 4.6): the unit is (device, reporting origin, 10-minute window); the device sees three campaigns
  in one window, reach counting gives L1 / 2 to each first sighting, and PAA-SR-Client sends two of them.

A run is the client's replay (``replay`` of the pipelines' clients; its contributions do not depend on the
random source, which only draws report ids and delays, so one replay per side gives them), then ``aggregate``
over the querier's domain. As in ``audit.cases.aggregation``, run i uses its own copy of the buckets, so one
aggregation gives n runs; the statistic is the Neyman-Pearson one of ``audit.cases.statistics``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction

import numpy as np

from audit.case import AuditCase, D
from audit.cases.aggregation import released_metrics
from audit.cases.statistics import shift_statistic
from schemas.rows import API_SHARED_STORAGE, AggregatableTriggerData, AggregatableValue, AraSource, AraTrigger, PaaEvent
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_MINUTE
from transforms.core.mechanisms.noise import RandomSource
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L1, AggregationParams
from transforms.summary_reports.mechanisms.ara_client import AraSummaryClient
from transforms.summary_reports.mechanisms.contributions import ContributionLimits, SummaryClient
from transforms.summary_reports.mechanisms.paa_client import PaaSummaryClient

ORIGIN, DESTINATION = "https://adtech.example", "https://advertiser.example"
TRIGGER_VALUES = (40_000, 25_536, 40_000)


def ara_events() -> list:
    """A source with one aggregation key, then three triggers that would overspend its L1 budget."""
    source = AraSource("device", MICROS_PER_DAY, "s0", ORIGIN, DESTINATION, 30 * 86_400, 0, (), (("campaign", 1 << 64),))
    triggers = [
        AraTrigger("device", 2 * MICROS_PER_DAY + j, f"t{j}", ORIGIN, DESTINATION, (),
                   (AggregatableTriggerData(5, ("campaign",)),), (AggregatableValue("campaign", value),))
        for j, value in enumerate(TRIGGER_VALUES)
    ]
    return [source, *triggers]


def paa_events() -> list:
    """Three first sightings of campaigns within one 10-minute window."""
    return [PaaEvent("device", MICROS_PER_DAY + j * MICROS_PER_MINUTE, f"e{j}", ORIGIN, API_SHARED_STORAGE, f"campaign-{j}")
            for j in range(3)]


def contribution_totals(client: SummaryClient, events: Iterable, source: RandomSource) -> dict[int, int]:
    """The device's total contribution per bucket after its client's replay (the input of the service)."""
    ordered = sorted(events, key=client.order)
    totals: dict[int, int] = {}
    for report in client.replay("device", ordered, client.new_state(), source):
        for bucket, value in report.contributions:
            totals[bucket] = totals.get(bucket, 0) + value
    return totals


def make_summary_case(name: str, mechanism: str, neighbours: str, basis: str,
                      totals_of: Callable[[RandomSource], dict[int, int]], epsilon: Fraction) -> AuditCase:
    """A summary report of one unit's contributions (``totals_of``: per bucket, on D; none on D') through the
    Aggregation Service's noisy sums at ``epsilon``."""
    params = AggregationParams(mode="domain", epsilon=epsilon, delta=Fraction(1, 10**9))

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        totals = totals_of(source)
        buckets = sorted(set(totals) | {0})  # at least one bucket of the querier's domain
        shift = np.array([totals.get(bucket, 0) for bucket in buckets])
        sums = np.tile(shift if side == D else np.zeros_like(shift), n)
        noisy = released_metrics(params, sums, True, source).reshape(n, len(buckets))
        return shift_statistic(noisy, np.zeros(len(buckets)), shift)

    return AuditCase(
        name=f"{name}@eps={float(epsilon):g}", mechanism=mechanism, neighbours=neighbours,
        statistic="the Neyman-Pearson statistic of the summary report (audit.cases.statistics)",
        claimed_epsilon=float(epsilon), claimed_delta=0.0, basis=basis, sample=sample,
        samples=4_000_000, quick_samples=100_000,
        tight="tight: the unit's contributions sit at L1, so {every bucket at or above its share} has probability "
              "ratio e^eps",
    )


def make_ara_case(epsilon: Fraction, limits: ContributionLimits = ContributionLimits()) -> AuditCase:
    """ARA summary reports end to end; ``limits`` are the client's budgets (a test passes broken ones)."""
    client, events = AraSummaryClient(limits), ara_events()
    return make_summary_case(
        "summary_reports.ara", "summary reports: ARA client bounding + Aggregation Service",
        f"one source with triggers worth {sum(TRIGGER_VALUES)} > L1 = {DEFAULT_L1}, present or not",
        "Ghazi et al. Alg. 2 and 6, Cor. 4.4", lambda source: contribution_totals(client, events, source), epsilon)


def make_paa_case(epsilon: Fraction, limits: ContributionLimits = ContributionLimits()) -> AuditCase:
    """PAA summary reports end to end (reach counting); ``limits`` as for ``make_ara_case``."""
    client, events = PaaSummaryClient(limits=limits), paa_events()
    return make_summary_case(
        "summary_reports.paa", "summary reports: PAA client bounding + Aggregation Service",
        "one device's three first campaign sightings in one 10-minute window (L1 / 2 each), present or not",
        "Ghazi et al. Alg. 3 and 6, Cor. 4.6", lambda source: contribution_totals(client, events, source), epsilon)
