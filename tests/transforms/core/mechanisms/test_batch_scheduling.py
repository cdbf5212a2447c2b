"""Big Bird's batched scheduling over any report computation (``transforms/core/mechanisms/batch_scheduling.py``;
pdslib ``batch_pds.rs``): results released when their attempts are over, the global budget unlocked over the
intervals, a request on its last attempt computed whatever the public filters say. Deterministic."""
from __future__ import annotations

import pytest

from transforms.core.mechanisms.batch_scheduling import BatchSchedule, Released
from transforms.core.mechanisms.global_filters import GLOBAL, SITE, FilterCapacities, FilterId, FilterSet


def _charges(epoch: int, site: str, units: int) -> dict[FilterId, int]:
    return {FilterId(SITE, epoch, site): units, FilterId(GLOBAL, epoch): units}


def test_requests_wait_for_the_global_budgets_release_and_the_last_attempt_is_always_computed():
    """Global 10 released over 2 intervals: a request of 4 fits the first half, a second of 4 waits for the
    second; a third of 6 with one attempt cannot fit the public filters but, on its last attempt, is computed
    anyway (the device's own filters decide what its report holds)."""
    device = FilterSet(FilterCapacities(site=10, global_=10))
    schedule: BatchSchedule[str, str] = BatchSchedule(device, releases=2)
    first = schedule.register("a", [1], _charges(1, "a.example", 4), frozenset(), 4, attempts=1)
    second = schedule.register("b", [1], _charges(1, "b.example", 4), frozenset(), 4, attempts=2)
    third = schedule.register("c", [1], _charges(1, "c.example", 6), frozenset(), 6, attempts=1)
    computed: list[str] = []

    def allocate(payload: str) -> str:
        computed.append(payload)
        return payload.upper()

    assert schedule.schedule_batch(allocate) == [Released(first, "A"), Released(third, "C")]
    assert computed == ["a", "c"] and device.limits[FilterId(GLOBAL, 1)] == 5
    assert schedule.schedule_batch(allocate) == [Released(second, "B")]
    assert computed == ["a", "c", "b"] and device.limits[FilterId(GLOBAL, 1)] == 10
    assert schedule.schedule_batch(allocate) == []


def test_attempts_and_releases_are_checked():
    with pytest.raises(ValueError, match="at least one interval"):
        BatchSchedule(FilterSet(FilterCapacities(site=1)), releases=0)
    schedule: BatchSchedule[str, str] = BatchSchedule(FilterSet(FilterCapacities(site=1)), releases=1)
    with pytest.raises(ValueError, match="at least one scheduling attempt"):
        schedule.register("a", [1], {}, frozenset(), 0, attempts=0)
