"""Hour steps and epoch numbering of ``transforms/core/mechanisms/time_steps.py``
(Cookie Monster paper Sec. 3.1, 4.1, 8.1: 7-day epochs, UTC)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.time_units import MICROS_PER_DAY
from transforms.core.mechanisms.time_steps import DEFAULT_EPOCH_DAYS, EpochClock

WEEK = 7 * MICROS_PER_DAY


def test_defaults_are_seven_days_from_the_unix_epoch():
    clock = EpochClock()
    assert DEFAULT_EPOCH_DAYS == 7 and MICROS_PER_DAY == 86_400_000_000
    assert clock.length_micros == WEEK and clock.origin_micros == 0


def test_epoch_boundaries_by_hand():
    clock = EpochClock()
    assert clock.epoch_of(0) == 0
    assert clock.epoch_of(WEEK - 1) == 0
    assert clock.epoch_of(WEEK) == 1
    assert clock.epoch_of(-1) == -1  # floor, not truncation toward zero
    assert clock.epoch_of(-WEEK) == -1
    assert clock.epoch_of(-WEEK - 1) == -2
    assert clock.epoch_start_micros(0) == 0
    assert clock.epoch_start_micros(3) == 3 * WEEK
    assert clock.epoch_start_micros(-2) == -2 * WEEK


def test_origin_shifts_the_numbering():
    clock = EpochClock(length_micros=MICROS_PER_DAY, origin_micros=10)
    assert clock.epoch_of(9) == -1
    assert clock.epoch_of(10) == 0
    assert clock.epoch_of(10 + MICROS_PER_DAY - 1) == 0
    assert clock.epoch_of(10 + MICROS_PER_DAY) == 1
    assert clock.epoch_start_micros(1) == 10 + MICROS_PER_DAY


@pytest.mark.parametrize("length", [0, -1, -WEEK])
def test_non_positive_length_is_refused(length):
    with pytest.raises(ValueError, match="must be positive"):
        EpochClock(length_micros=length)


def test_window_epochs_by_hand():
    clock = EpochClock()
    # A conversion 3 days into epoch 10 with a 30-day window: t - 30 days is 27 days before the start of
    # epoch 10, i.e. 1 day into epoch 6 (10 - 4 weeks = 6, minus 27 days rounds into epoch 6).
    t = 10 * WEEK + 3 * MICROS_PER_DAY
    assert clock.window_epochs(t, 30) == (6, 10)
    # A window ending exactly on an epoch start.
    assert clock.window_epochs(10 * WEEK, 7) == (9, 10)
    # One day, mid-epoch: the single epoch of the conversion.
    assert clock.window_epochs(t, 1) == (10, 10)


@settings(max_examples=200, deadline=None)
@given(
    t=st.integers(min_value=-(10**15), max_value=10**15),
    length=st.integers(min_value=1, max_value=30 * MICROS_PER_DAY),
    origin=st.integers(min_value=-(10**14), max_value=10**14),
    days=st.integers(min_value=0, max_value=120),
)
def test_epoch_contains_its_time_and_windows_are_ordered(t, length, origin, days):
    clock = EpochClock(length_micros=length, origin_micros=origin)
    epoch = clock.epoch_of(t)
    assert clock.epoch_start_micros(epoch) <= t < clock.epoch_start_micros(epoch + 1)
    first, last = clock.window_epochs(t, days)
    assert last == epoch
    assert first == clock.epoch_of(t - days * MICROS_PER_DAY) <= last
