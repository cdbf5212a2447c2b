"""Exact windowed distinct counts against a brute-force count (k-anonymity note Sec. 2.1, Observation 2.2)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.core.mechanisms.sliding_distinct import SlidingDistinctCount


def brute_force(joins: list[tuple[int, int]], step: int, window: int) -> int:
    """S_agg[t - w + 1, t]: distinct users with a join in the last w steps."""
    return len({user for join_step, user in joins if step - window + 1 <= join_step <= step})


@settings(max_examples=300, deadline=None)
@given(
    window=st.integers(min_value=1, max_value=12),
    joins=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=80),
    extra_steps=st.lists(st.integers(0, 80), max_size=20),
)
def test_counts_equal_brute_force_at_every_evaluated_step(window, joins, extra_steps):
    by_step: dict[int, set[int]] = {}
    for step, user in joins:
        by_step.setdefault(step, set()).add(user)
    # Evaluate at join steps and at arbitrary other steps, as the replay does (it skips quiet steps).
    steps = sorted(set(by_step) | set(extra_steps))
    counter = SlidingDistinctCount(window)
    for step in steps:
        count = counter.advance(step, by_step.get(step, ()))
        assert count == brute_force(joins, step, window)
        assert counter.has_users_at(step) == (count > 0)
        later = step + 1 + window // 2
        assert counter.has_users_at(later) == (brute_force(joins, later, window) > 0 and brute_force(
            [(s, u) for s, u in joins if s <= step], later, window) > 0)


def test_rejoining_user_counts_once_and_stays_until_its_last_join_expires():
    counter = SlidingDistinctCount(3)
    assert counter.advance(0, ["a", "b"]) == 2
    assert counter.advance(1, ["a"]) == 2
    assert counter.advance(2) == 2
    assert counter.advance(3) == 1  # b's only join (step 0) left the window [1, 3]
    assert counter.advance(4) == 0  # a's last join (step 1) left [2, 4]
    assert counter.last_join_step is None


def test_steps_must_not_decrease():
    counter = SlidingDistinctCount(2)
    counter.advance(5, ["a"])
    with pytest.raises(ValueError):
        counter.advance(4, ["b"])


def test_window_must_be_positive():
    with pytest.raises(ValueError):
        SlidingDistinctCount(0)
