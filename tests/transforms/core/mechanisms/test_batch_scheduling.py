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
    assert computed == ["a", "c", "b"] and device.capacity(FilterId(GLOBAL, 1)) == 10
    assert schedule.schedule_batch(allocate) == []


def test_attempts_and_releases_are_checked():
    with pytest.raises(ValueError, match="at least one interval"):
        BatchSchedule(FilterSet(FilterCapacities(site=1)), releases=0)
    schedule: BatchSchedule[str, str] = BatchSchedule(FilterSet(FilterCapacities(site=1)), releases=1)
    with pytest.raises(ValueError, match="at least one scheduling attempt"):
        schedule.register("a", [1], {}, frozenset(), 0, attempts=0)


def _state(schedule: BatchSchedule) -> tuple:
    return (schedule.interval, dict(schedule.released), dict(schedule.filters.limits), dict(schedule.public.limits),
            dict(schedule.public.consumed), dict(schedule.filters.consumed), schedule.outstanding)


def test_running_until_an_interval_skips_idle_ones_at_once_as_one_batch_each_would():
    """Global 12 released over 4 intervals; one request in interval 0. ``run_until(9)`` runs the request's batch,
    then jumps the idle intervals 1..8 in one step: the same state as a batch per interval."""
    def make() -> BatchSchedule[str, str]:
        schedule: BatchSchedule[str, str] = BatchSchedule(FilterSet(FilterCapacities(site=12, global_=12)), releases=4)
        schedule.register("a", [1, 2], {**_charges(1, "a.example", 2), **_charges(2, "a.example", 2)}, frozenset(),
                          2, attempts=1)
        return schedule

    def allocate(payload: str) -> str:
        return payload.upper()

    skipped, stepped = make(), make()
    assert skipped.run_until(9, allocate) == [Released(1, "A")]
    released = []
    while stepped.interval < 9:
        released += stepped.schedule_batch(allocate)
    assert released == [Released(1, "A")]
    assert _state(skipped) == _state(stepped)
    assert skipped.released == {1: 4, 2: 4} and skipped.filters.capacity(FilterId(GLOBAL, 1)) == 12 and not skipped.filters.limits
    assert skipped.run_until(None, allocate) == [] and skipped.interval == 9  # nothing outstanding: no batch


def test_run_until_none_runs_every_interval_a_request_still_needs():
    schedule: BatchSchedule[str, str] = BatchSchedule(FilterSet(FilterCapacities(site=10, global_=10)), releases=1)
    request = schedule.register("a", [1], _charges(1, "a.example", 4), frozenset(), 4, attempts=3)
    assert schedule.oldest_epoch() == 1 and schedule.outstanding
    assert schedule.run_until(None, str.upper) == [Released(request, "A")]
    assert schedule.interval == 3 and not schedule.outstanding and schedule.oldest_epoch() is None
    schedule.forget_before(2)
    assert schedule.released == {} and schedule.public.consumed == {} and schedule.filters.limits == {}
