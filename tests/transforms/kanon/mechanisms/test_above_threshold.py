"""AboveThreshold (k-anonymity note Alg. 2) and its periodic restart (Alg. 1) with a no-noise source."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.sources import ConstantSource
from transforms.core.mechanisms.noise import TruncatedLaplace
from transforms.kanon.mechanisms.above_threshold import (
    AboveThreshold,
    AboveThresholdInstance,
    AboveThresholdWithPeriodicRestart,
    PeriodicRestartState,
    instance_start_step,
)

NOISE = TruncatedLaplace(epsilon=2.0, delta=0.1)  # A = 0.5 ln(1 + (e^2 - 1) / 0.2) = 1.747...
KEY = ("group-1",)


def make(k: int = 10, w: int = 4) -> AboveThresholdWithPeriodicRestart:
    return AboveThresholdWithPeriodicRestart(AboveThreshold(k=k, window_steps=w, threshold_noise=NOISE, step_noise=NOISE))


def outputs(mechanism, counts_by_step: dict[int, int], source) -> dict[int, bool]:
    state = PeriodicRestartState()
    return {t: mechanism.output(state, t, c, source, KEY) for t, c in sorted(counts_by_step.items())}


def test_without_noise_the_verdict_is_count_at_least_k_until_the_latch():
    got = outputs(make(k=10, w=4), {0: 9, 1: 10, 2: 3, 3: 0}, ConstantSource())
    assert got == {0: False, 1: True, 2: True, 3: True}  # latched at step 1, true until the instance ends


def test_restart_at_multiples_of_w_falls_back_to_false():
    got = outputs(make(k=10, w=4), {1: 10, 2: 3, 3: 3, 4: 3, 5: 12, 6: 0, 7: 0, 8: 9}, ConstantSource())
    assert got == {1: True, 2: True, 3: True, 4: False, 5: True, 6: True, 7: True, 8: False}


def test_instance_alignment_is_floor_of_t_over_w_in_hours_since_the_epoch():
    assert instance_start_step(0, 168) == 0
    assert instance_start_step(167, 168) == 0
    assert instance_start_step(168, 168) == 168
    assert instance_start_step(492_000, 168) == 491_904  # 2026: 2928 whole weeks of hours since 1970
    state = PeriodicRestartState()
    make(k=10, w=168).output(state, 492_000, 50, ConstantSource(), KEY)
    assert state.instance.start_step == 491_904


def test_noise_is_drawn_once_per_instance_at_its_first_comparison():
    source = ConstantSource()
    got = outputs(make(k=10, w=4), {0: 9, 1: 9, 2: 10, 3: 10, 4: 9}, source)
    assert got == {0: False, 1: False, 2: True, 3: True, 4: False}
    # nu and the block of w step noises of AT_0, then of AT_4; nothing else (no draw while latched at step 3).
    assert source.keys == [
        ("group-1", "threshold", 0),
        ("group-1", "steps", 0),
        ("group-1", "threshold", 4),
        ("group-1", "steps", 4),
    ]


def test_each_step_uses_its_own_noise_from_the_block():
    at = make(k=10, w=4).above_threshold
    instance = at.start(8)
    instance.threshold_noise = 0.0
    instance.step_noises = np.array([-1.0, -0.5, 0.5, 1.0])
    assert at.step(instance, 9, 10, ConstantSource(), KEY) is False  # 10 - 0.5 < 10
    assert at.step(instance, 10, 10, ConstantSource(), KEY) is True  # 10 + 0.5 >= 10
    fresh = at.start(8)
    fresh.threshold_noise = 0.0
    fresh.step_noises = np.array([-1.0, -0.5, 0.5, 1.0])
    index = at.compare(fresh, np.array([8, 9, 10, 11]), np.array([10, 10, 10, 10]), ConstantSource(), KEY)
    assert index == 2 and fresh.latched


def test_exact_skip_draws_nothing_below_k_minus_total_bound():
    mechanism = make(k=10, w=100)
    bound = mechanism.above_threshold.total_bound
    assert bound == pytest.approx(2 * NOISE.A)
    below = 10 - int(bound) - 2  # c_t < k - (A_1 + A_2): the comparison cannot succeed
    # Even the most favourable noise (threshold noise at -A, step noise at +A) cannot latch it.
    for u in (1e-12, 0.5, 1 - 1e-12):
        source = ConstantSource(u)
        got = outputs(mechanism, dict.fromkeys(range(20), below), source)
        assert not any(got.values())
        assert source.keys == []


def test_counts_inside_the_band_are_compared_with_noise():
    # Threshold noise at -A and step noise at +A: a count of k - 3 latches (k - 2A = k - 3.49...).
    source = ConstantSource(1 - 1e-15)
    mechanism = make(k=10, w=100)
    state = PeriodicRestartState(instance=AboveThresholdInstance(start_step=0, threshold_noise=-NOISE.A))
    assert mechanism.output(state, 0, 7, source, KEY) is True
    assert source.keys == [("group-1", "steps", 0)]


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError):
        AboveThreshold(k=0, window_steps=4, threshold_noise=NOISE, step_noise=NOISE)
    with pytest.raises(ValueError):
        AboveThreshold(k=5, window_steps=0, threshold_noise=NOISE, step_noise=NOISE)


def test_steps_before_the_running_instance_are_rejected():
    mechanism = make(k=10, w=4)
    state = PeriodicRestartState()
    mechanism.output(state, 9, 1, ConstantSource(), KEY)
    with pytest.raises(ValueError):
        mechanism.output(state, 3, 1, ConstantSource(), KEY)
