"""Tests of the exact privacy accounting (k-anonymity note Cor. 4.4 and Cor. 3.1)."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.core.mechanisms.noise import TruncatedLaplace
from transforms.kanon.mechanisms.accounting import (
    DrawParameters,
    Guarantee,
    instance_guarantee,
    solve_draw_parameters,
    stream_guarantee,
)


def test_hand_example():
    # Per draw TLap(1/2, 1/1000), w = 168:
    #   Cor. 4.4: one instance is (2 * 1/2, 2 * 1/1000 * 169) = (1, 338/1000 = 169/500)-DP;
    #   Cor. 3.1: the stream is (2 * 1, 2 * 169/500) = (2, 169/250)-DP.
    draw = DrawParameters(Fraction(1, 2), Fraction(1, 1000))
    instance = instance_guarantee(draw, 168)
    stream = stream_guarantee(draw, 168)
    assert (instance.epsilon, instance.delta) == (Fraction(1), Fraction(169, 500))
    assert (stream.epsilon, stream.delta) == (Fraction(2), Fraction(169, 250))
    assert "Cor. 4.4" in instance.basis and "Cor. 3.1" in stream.basis
    assert isinstance(instance, Guarantee)


def test_solve_sec5_target_exactly():
    # eps = 3, delta = 1e-5 for the stream, w = 168: eps = 3/4, delta = 1e-5 / (4 * 169) = 1/67,600,000.
    draw = solve_draw_parameters(3, 1e-5, 168)
    assert draw == DrawParameters(Fraction(3, 4), Fraction(1, 67_600_000))
    stream = stream_guarantee(draw, 168)
    assert stream.epsilon == 3 and stream.delta == Fraction(1, 100_000)


@given(
    epsilon=st.fractions(min_value=Fraction(1, 10**6), max_value=100, max_denominator=10**6),
    delta=st.fractions(min_value=Fraction(1, 10**12), max_value=Fraction(999_999, 10**6), max_denominator=10**12),
    window=st.integers(min_value=1, max_value=10_000),
)
def test_round_trip_is_exact(epsilon, delta, window):
    stream = stream_guarantee(solve_draw_parameters(epsilon, delta, window), window)
    assert (stream.epsilon, stream.delta) == (epsilon, delta)


def test_floats_become_exact_decimals():
    draw = DrawParameters(0.1, 1e-5)
    assert draw.epsilon == Fraction(1, 10) and draw.delta == Fraction(1, 100_000)
    assert solve_draw_parameters("3", "1e-5", 720).delta == Fraction(1, 100_000 * 4 * 721)


def test_noise_view_and_bounds():
    draw = DrawParameters(Fraction(3, 4), Fraction(1, 67_600_000))
    noise = draw.noise()
    assert noise == TruncatedLaplace(0.75, 1 / 67_600_000)
    assert draw.A == noise.A
    assert draw.total_bound == 2 * noise.A


@pytest.mark.parametrize("window", [0, -1, 1.5, True])
def test_rejects_bad_window(window):
    draw = DrawParameters(1, Fraction(1, 10**6))
    with pytest.raises(ValueError, match="window_steps"):
        instance_guarantee(draw, window)
    with pytest.raises(ValueError, match="window_steps"):
        stream_guarantee(draw, window)
    with pytest.raises(ValueError, match="window_steps"):
        solve_draw_parameters(3, 1e-5, window)


@pytest.mark.parametrize("epsilon,delta", [(0, 1e-5), (-1, 1e-5), (3, 0), (3, 1), (3, 1.5), (3, -1e-5)])
def test_solve_rejects_bad_targets(epsilon, delta):
    with pytest.raises(ValueError, match="total"):
        solve_draw_parameters(epsilon, delta, 168)


@pytest.mark.parametrize("epsilon,delta", [(0, 1e-5), (-0.5, 1e-5), (1, 0), (1, 1), (1, 2)])
def test_draw_parameters_reject_bad_values(epsilon, delta):
    with pytest.raises(ValueError, match="per-draw"):
        DrawParameters(epsilon, delta)


def test_rejects_non_finite_floats():
    with pytest.raises(ValueError):
        DrawParameters(float("inf"), 1e-5)
    with pytest.raises(ValueError):
        solve_draw_parameters(3, float("nan"), 168)
