"""Deliberately wrong variants of the mechanisms, which exist only here: the audit must catch every one of them.

Each is the kind of mistake published implementations have made (Lyu, Su and Li, "Understanding the Sparse
Vector Technique for Differential Privacy", VLDB 2017, list several for AboveThreshold) or an off-by-one a
reviewer could miss: a wrong noise scale, a wrong count in a probability, a budget check that lets the last
charge through, a threshold without its tail term, an Attribution API backend that deducts a filter it never
checked, an Attribution Reporting client that takes a named budget for the L1 budget, a storage that attributes one
trigger to every source its attribution scopes match.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from schemas.registrations import SourceRegistration, TriggerRegistration
from transforms.attribution_api.mechanisms.backend import Backend
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.core.mechanisms.ara_attribution import AttributionStorage, TriggerOutcome
from transforms.core.mechanisms.global_filters import GLOBAL, IMPRESSION_QUOTA, FilterId
from transforms.core.mechanisms.noise import RandomSource, TruncatedLaplace, randbelow_array
from transforms.event_level.mechanisms.config import EventLevelConfig
from transforms.event_level.mechanisms.outputs import count_outputs
from transforms.event_level.mechanisms.randomized_response import TRUTHFUL, truthful_threshold
from transforms.kanon.mechanisms.above_threshold import AboveThreshold, AboveThresholdInstance
from transforms.kanon.mechanisms.accounting import DrawParameters
from transforms.kanon.mechanisms.batch_replay import GroupJoins
from transforms.summary_reports.mechanisms.aggregation import AggregationParams
from transforms.summary_reports.mechanisms.ara_spec import SpecAggregatable, SpecAggregatableSource, named_budget


def double_epsilon_tlap(draw: DrawParameters) -> TruncatedLaplace:
    """TLap sampled at 2 eps (a Laplace scale of Delta / (2 eps)) for a draw that claims eps."""
    return TruncatedLaplace(2 * float(draw.epsilon), float(draw.delta))


class ThresholdRedrawingAboveThreshold(AboveThreshold):
    """AboveThreshold that draws a fresh threshold noise for every comparison instead of once per instance."""

    def compare(self, instance: AboveThresholdInstance, steps: np.ndarray, counts: np.ndarray, source: RandomSource,
                stream_key: tuple[Hashable, ...]) -> int | None:
        if instance.latched:
            return 0
        noises = self.step_noise.sample_keyed_array(source, stream_key, len(counts))
        thresholds = self.threshold_noise.sample_keyed_array(source, stream_key, len(counts))
        hits = np.flatnonzero(counts + noises >= self.k + thresholds)
        if hits.size == 0:
            return None
        instance.latched = True
        return int(hits[0])


def join_counts(joins: GroupJoins, window_steps: int) -> tuple[int, np.ndarray]:
    """``batch_replay.window_counts`` that counts joins in the window instead of distinct users, so a user who
    joins at every step adds up to w to a count."""
    first = int(joins.steps.min())
    length = int(joins.steps.max()) + window_steps - first + 1
    delta = (np.bincount(joins.steps - first, minlength=length)
             - np.bincount(joins.steps + window_steps - first, minlength=length))
    return first, np.cumsum(delta)[:-1]


@dataclass(frozen=True)
class HalfScaleAggregationParams(AggregationParams):
    """The Aggregation Service with a discrete Laplace scale of L1 / (2 eps) instead of L1 / eps."""

    @property
    def scale(self) -> Fraction:
        return Fraction(self.l1) / (2 * self.epsilon)


@dataclass(frozen=True)
class NoTailKeyDiscoveryParams(AggregationParams):
    """Key discovery with tau = L1, without its ln(L0 / delta) / eps term."""

    @property
    def tau(self) -> float:
        return float(self.l1)


def respond_with_one_state_too_few(config: EventLevelConfig, epsilon: Fraction, source: RandomSource,
                                   size: int) -> np.ndarray:
    """Randomized response whose truthful probability counts |O| - 1 states instead of |O|."""
    k = count_outputs(config)
    threshold = np.uint64(truthful_threshold(k - 1, epsilon))
    words = source.random_words(size)
    randomised = np.flatnonzero(words >= threshold)
    out = np.full(words.size, TRUTHFUL, dtype=np.int64)
    out[randomised] = randbelow_array(source, np.full(randomised.size, k, dtype=np.uint64))
    return out


class OverdrawingFilterTable(FilterTable):
    """A privacy filter that accepts a charge whenever some budget is left, so the last charge can overdraw."""

    def try_consume(self, key: Hashable, units: int) -> bool:
        spent = self.consumed.get(key, 0)
        if spent >= self.capacity_units:
            self.consumed.setdefault(key, 0)
            return False
        self.consumed[key] = spent + units
        return True

    def can_pay(self, key: Hashable, units: int) -> bool:
        return self.consumed.get(key, 0) < self.capacity_units


class _PartlyCheckedBackend(Backend):
    """An Attribution API backend whose filters of kind ``unchecked`` are charged outside its atomic check: the
    other charges go through the backend's own ``_deduct``, and when it pays, these are deducted whenever
    ``_lets_through`` admits them, however little they have left."""

    unchecked: str

    def _lets_through(self, filter_id: FilterId) -> bool:
        raise NotImplementedError

    def _deduct(self, charges: Mapping[FilterId, int]) -> bool:
        unchecked = {filter_id: units for filter_id, units in charges.items() if filter_id.kind == self.unchecked}
        if not all(map(self._lets_through, unchecked)) or not super()._deduct(
                {filter_id: units for filter_id, units in charges.items() if filter_id not in unchecked}):
            return False
        for filter_id, units in unchecked.items():
            self.filters.consumed[filter_id] = self.filters.consumed.get(filter_id, 0) + units
        return True


class UncheckedGlobalBudgetBackend(_PartlyCheckedBackend):
    """An Attribution API backend that checks the per-site budget and the quotas, then deducts the global budget
    without checking it (filters checked one at a time, with the global check dropped): the global budget of an
    epoch overdraws, and several sites together spend up to their per-site budgets' sum."""

    unchecked = GLOBAL

    def _lets_through(self, filter_id: FilterId) -> bool:
        return True


class OverdrawingQuotaBackend(_PartlyCheckedBackend):
    """An Attribution API backend whose impression-site quotas accept a charge whenever some quota is left, so the
    last charge overdraws (as ``OverdrawingFilterTable`` does to a privacy filter)."""

    unchecked = IMPRESSION_QUOTA

    def _lets_through(self, filter_id: FilterId) -> bool:
        left = self.filters.remaining(filter_id)
        return left is None or left > 0


class NamedBudgetOnlyAggregatable(SpecAggregatable):
    """An aggregatable client that charges a report to the named budget its trigger names in place of the L1
    budget (as if named budgets partitioned L1, whatever they sum to)."""

    def _charge(self, source: SourceRegistration, state: SpecAggregatableSource, trigger: TriggerRegistration,
                values: list[int]) -> str | None:
        named = named_budget(source, trigger)
        if named is None:
            return super()._charge(source, state, trigger, values)
        if state.named_spent.get(named[0], 0) + sum(values) > named[1]:
            return "insufficient_named_budget"
        state.named_spent[named[0]] = state.named_spent.get(named[0], 0) + sum(values)
        return None


class EveryScopeAttributingStorage(AttributionStorage):
    """A storage that attributes a trigger to every source its attribution scopes match, instead of to the best
    of them (deactivating the others)."""

    def attribute_trigger(self, trigger: TriggerRegistration, choices=None) -> TriggerOutcome:
        matching = [stored for stored in self.matching_sources(trigger) if stored.matches_scopes(trigger)]
        if not matching:
            return super().attribute_trigger(trigger, choices)
        for stored in matching:
            for part, state in zip(self.parts, stored.states, strict=True):
                part.attribute(stored.registration, state, trigger, None)
        return TriggerOutcome(trigger, matching[-1], True)
