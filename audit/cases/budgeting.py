"""Audit cases of on-device budgeting (Cookie Monster: "Efficient On-device Budgeting for Differentially-Private
Ad-Measurement Systems", SOSP 2024): one device-epoch added or removed under a query sequence that drains its
privacy filter, for each policy (Cookie Monster, ARA-like, IPA-like).

The device has one impression in epoch 0 (D) or none (D'), and then converts ``queries`` times in epoch 1; each
conversion asks for a report over epoch 0 alone with value and sensitivities Delta, at ``query_epsilon``, and
each report is its own query (a batch of one: other devices' reports would only add constants). The filter of
(querier, epoch 0) has capacity eps_G = 1, so ``floor(eps_G / query_epsilon)`` reports carry the impression's
value and the next ones are refused (Cookie Monster Code Listing 1, Eq. 3). The run is the pipelines' code: the
device's ``replay`` with the policy, then ``run_queries`` (with IPA-like's ``CentralBudget``), whose
``execute`` adds the exact discretised Laplace noise of the measurement job.
"""
from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from audit.case import D_PRIME, AuditCase, D
from audit.cases.statistics import shift_statistic
from schemas.rows import AttributionRequest, Conversion, Impression
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_HOUR
from transforms.budgeting.mechanisms.device import DeviceState, MeasurementConfig, replay, sort_events
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.budgeting.mechanisms.queries import CentralBudget, make_batch, run_queries
from transforms.core.mechanisms.noise import RandomSource

CAPACITY = Fraction(1)  # eps_G, the paper's per-epoch capacity (Sec. 8.1)
SENSITIVITY = 1.0  # the value, and the report and query global sensitivities: every report at its cap
QUERIER, ADVERTISER = "querier.example", "advertiser.example"

FilterFactory = Callable[[int], FilterTable]  # capacity units -> an empty filter table


def _events(side: str, queries: int, query_epsilon: Fraction) -> list:
    impressions = [Impression("device", MICROS_PER_DAY, "i0", "publisher.example", ADVERTISER, "c0", "p0", ())]
    request = AttributionRequest(
        window_days=None, first_epoch=0, last_epoch=0, campaign_ids=("c0",), product_id="p0", filter_keys=(),
        logic="last_touch", last_n=1, dimension=1, requested_epsilon=float(query_epsilon),
        report_global_sensitivity=SENSITIVITY, query_global_sensitivity=SENSITIVITY, norm="L1", query_key="",
    )
    conversions = [
        Conversion("device", 8 * MICROS_PER_DAY + j * MICROS_PER_HOUR, f"c{j}", ADVERTISER, QUERIER, SENSITIVITY, "p0",
                   request._replace(query_key=f"q{j}"))
        for j in range(queries)
    ]
    return sort_events((impressions if side == D else []) + conversions)


def make_filter_case(policy: str, query_epsilon: Fraction = Fraction(1, 2), queries: int = 3,
                     filters_of: FilterFactory = FilterTable) -> AuditCase:
    """The device-epoch audit for ``policy``; ``filters_of`` makes the privacy filters (on the device, and
    IPA-like's central ones), which a test may replace by a broken filter."""
    config = MeasurementConfig(policy=policy, capacity_epsilon=CAPACITY)
    mechanism = make_policy(policy)

    def batches(side: str, source: RandomSource) -> list:
        state = DeviceState(filters_of(config.capacity_units))
        reports = replay("device", _events(side, queries, query_epsilon), state, config, mechanism, source)
        return [make_batch(QUERIER, report.query_key, 0, [report]) for report in reports]

    def answers(side: str, n: int, source: RandomSource) -> np.ndarray:
        query_batches = batches(side, source)
        out = np.zeros((n, len(query_batches)))
        for run in range(n):
            central = None
            if policy == "ipa_like":
                central = CentralBudget(config.capacity_units)
                central.filters = filters_of(config.capacity_units)
            runs = run_queries(query_batches, central, source.keyed_child(("run", run)))  # each run its own noise
            for index, result in enumerate(runs):
                out[run, index] = result.noisy_value[0] if result.noisy_value else 0.0  # rejected: nothing
        return out

    def true_sums(side: str, source: RandomSource) -> np.ndarray:
        return np.array([batch.sums[0] for batch in batches(side, source)])

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        lower, upper = true_sums(D_PRIME, source), true_sums(D, source)
        return shift_statistic(answers(side, n, source), lower, upper - lower)

    return AuditCase(
        name=f"budgeting.{policy}@eps_q={float(query_epsilon):g}",
        mechanism=f"on-device budgeting: {policy.replace('_', '-')} filters",
        neighbours=f"one device-epoch with one impression, or empty, under {queries} reports over it at "
                   f"eps = {float(query_epsilon):g} each (capacity eps_G = {float(CAPACITY):g})",
        statistic="the Neyman-Pearson statistic of the noisy answers (audit.cases.statistics)",
        claimed_epsilon=float(CAPACITY), claimed_delta=0.0,
        basis="Cookie Monster Thm. 1 (individual device-epoch DP, pure-DP filters, Eq. 3)", sample=sample,
        samples=200_000, quick_samples=3_000,
        tight="tight when eps_G is a multiple of the query epsilon: the answers that carry the impression spend "
              "the filter exactly, and {every such answer >= Delta} has probability ratio e^eps_G",
    )
