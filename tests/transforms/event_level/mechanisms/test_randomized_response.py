"""ARA event-level reports (Ghazi et al. Sec. 2.2, Alg. 8, Thm. 5.1): configuration, |O|, ranking, randomized
response, information gain. The client of Alg. 4 is tested in test_event_level_client.py.

Statistical tests use fixed seeds; each states its false-failure probability (at most 1e-7 each)."""
from __future__ import annotations

import decimal
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from schemas.time_units import SECONDS_PER_DAY
from tests.support.event_level import enumerate_outputs, seed_example
from transforms.core.mechanisms.budget_units import as_fraction
from transforms.core.mechanisms.noise import RandomSource, SeededSource
from transforms.event_level.mechanisms import outputs as output_set
from transforms.event_level.mechanisms.config import (
    MAX_EPSILON_TOLERANCE,
    REASONS,
    ConfigurationError,
    EventLevelConfig,
    TriggerDataSpec,
    event_config,
    navigation_config,
    uniform_config,
)
from transforms.event_level.mechanisms.information_gain import (
    check_configuration,
    information_gain,
    information_gain_limit,
    max_epsilon,
    randomized_trigger_rate,
)
from transforms.event_level.mechanisms.outputs import (
    count_outputs,
    count_outputs_by_polynomial,
    count_outputs_closed_form,
    rank_output,
    unrank_output,
    unrank_outputs_array,
)
from transforms.event_level.mechanisms.randomized_response import (
    TRUTHFUL,
    exp_lower_bound,
    randomized_response,
    randomized_response_array,
    truthful_threshold,
)

DAY = SECONDS_PER_DAY


def small_configs() -> list[EventLevelConfig]:
    """Small configurations, including unequal windows and buckets per trigger data and buckets below M."""
    configs = [seed_example(), event_config(), navigation_config(DAY)]
    for t, w, m in itertools.product((1, 2, 3), (1, 2, 3), (0, 1, 2, 3)):
        configs.append(uniform_config("navigation", trigger_data=range(t), max_event_level_reports=m,
                                      window_ends=tuple(DAY * (i + 1) for i in range(w))))
    windows = [(DAY,), (DAY, 2 * DAY, 3 * DAY), (2 * DAY, 5 * DAY)]
    buckets = [(1,), (), (5, 6, 7, 8), (2, 3)]
    for m in (1, 2, 4):
        specs = tuple(TriggerDataSpec(v, windows[v % 3], buckets[v % 4]) for v in range(4))
        configs.append(EventLevelConfig("event", 10 * DAY, m, specs))
    return configs


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


def test_navigation_and_event_defaults():
    nav, ev = navigation_config(), event_config()
    assert nav.max_event_level_reports == 3 and ev.max_event_level_reports == 1
    assert nav.trigger_data_values == tuple(range(8)) and ev.trigger_data_values == (0, 1)
    assert {spec.window_ends for spec in nav.trigger_specs} == {(2 * DAY, 7 * DAY, 30 * DAY)}
    assert {spec.summary_buckets for spec in nav.trigger_specs} == {(1, 2, 3)}
    assert {spec.window_ends for spec in ev.trigger_specs} == {(30 * DAY,)}
    assert {spec.summary_buckets for spec in ev.trigger_specs} == {(1,)}
    assert nav.matching == ev.matching == "modulus"


@pytest.mark.parametrize("expiry, windows", [
    (DAY, (DAY,)), (3 * DAY, (2 * DAY, 3 * DAY)), (7 * DAY, (2 * DAY, 7 * DAY)),
    (10 * DAY, (2 * DAY, 7 * DAY, 10 * DAY)), (2 * DAY, (2 * DAY,)),
])
def test_default_windows_degrade_with_short_expiries(expiry, windows):
    assert navigation_config(expiry).trigger_specs[0].window_ends == windows
    assert event_config(expiry).trigger_specs[0].window_ends == (expiry,)


def test_windows_beyond_the_expiry_are_dropped_and_the_expiry_is_the_last_end():
    config = uniform_config("event", expiry_seconds=10 * DAY, window_ends=(DAY, 5 * DAY, 12 * DAY, 20 * DAY))
    assert config.trigger_specs[0].window_ends == (DAY, 5 * DAY, 10 * DAY)
    kept = uniform_config("event", expiry_seconds=10 * DAY, window_ends=(DAY, 5 * DAY))
    assert kept.trigger_specs[0].window_ends == (DAY, 5 * DAY)


def test_specs_are_sorted_and_matched_by_modulus_or_exactly():
    specs = (TriggerDataSpec(1, (DAY,), (1,)), TriggerDataSpec(0, (2 * DAY,), (1,)))
    config = EventLevelConfig("event", 30 * DAY, 1, specs)
    assert config.trigger_data_values == (0, 1)
    assert config.spec_for(5).value == 1 and config.spec_for(4).value == 0
    exact = EventLevelConfig("event", 30 * DAY, 1, (TriggerDataSpec(3, (DAY,), (1,)), TriggerDataSpec(7, (DAY,), (1,))),
                             "exact")
    assert exact.spec_for(7).value == 7 and exact.spec_for(3).value == 3
    assert exact.spec_for(4) is None and exact.spec_for(11) is None


def _spec(value=0, windows=(DAY,), buckets=(1,)):
    return TriggerDataSpec(value, windows, buckets)


@pytest.mark.parametrize("build, reason", [
    (lambda: uniform_config("navigation", trigger_data=range(33)), "too_many_trigger_data"),
    (lambda: EventLevelConfig("event", DAY, 1, tuple(_spec(v) for v in range(33))), "too_many_trigger_data"),
    (lambda: _spec(windows=tuple(DAY * (i + 1) for i in range(6))), "too_many_windows"),
    (lambda: uniform_config("navigation", max_event_level_reports=21), "max_reports_out_of_range"),
    (lambda: EventLevelConfig("event", DAY, -1, (_spec(),)), "max_reports_out_of_range"),
    (lambda: _spec(windows=(2 * DAY, 2 * DAY)), "windows_not_increasing"),
    (lambda: _spec(windows=(3 * DAY, 2 * DAY)), "windows_not_increasing"),
    (lambda: _spec(windows=(0, DAY)), "window_out_of_range"),
    (lambda: _spec(windows=()), "no_windows"),
    (lambda: _spec(buckets=(5, 3)), "buckets_not_increasing"),
    (lambda: _spec(buckets=(2, 2)), "buckets_not_increasing"),
    (lambda: _spec(buckets=(0, 3)), "bucket_out_of_range"),
    (lambda: navigation_config(DAY - 1), "expiry_out_of_range"),
    (lambda: event_config(31 * DAY), "expiry_out_of_range"),
    (lambda: EventLevelConfig("event", DAY, 1, ()), "no_trigger_data"),
    (lambda: EventLevelConfig("event", DAY, 1, (_spec(0), _spec(0))), "duplicate_trigger_data"),
    (lambda: EventLevelConfig("event", DAY, 1, (_spec(0), _spec(2))), "modulus_needs_values_0_to_n_minus_1"),
    (lambda: EventLevelConfig("event", DAY, 1, (_spec(0),), "fuzzy"), "unknown_matching_mode"),
    (lambda: EventLevelConfig("click", DAY, 1, (_spec(0),)), "unknown_source_type"),
    (lambda: _spec(value=2**32), "trigger_data_out_of_range"),
    (lambda: _spec(windows=(1.5 * DAY,)), "not_an_integer"),
    (lambda: EventLevelConfig("event", DAY, True, (_spec(0),)), "not_an_integer"),
])
def test_invalid_configurations_raise_a_value_error_starting_with_a_stable_reason(build, reason):
    with pytest.raises(ValueError) as caught:
        build()
    assert str(caught.value).startswith(reason + ":")
    assert isinstance(caught.value, ConfigurationError) and caught.value.reason == reason
    assert reason in REASONS


def test_exact_matching_accepts_any_distinct_values_and_configs_are_hashable():
    config = EventLevelConfig("event", DAY, 1, (_spec(0), _spec(2)), "exact")
    assert config.trigger_data_values == (0, 2)
    assert hash(config) == hash(EventLevelConfig("event", DAY, 1, (_spec(2), _spec(0)), "exact"))


# --------------------------------------------------------------------------------------------
# Counting O
# --------------------------------------------------------------------------------------------


def test_the_counts_of_the_seed_and_of_the_defaults():
    assert count_outputs(seed_example()) == 27  # Sec. 2.2: 36 - 9 = 27
    assert count_outputs(navigation_config()) == 2925 == count_outputs_closed_form(8, 3, 3)
    assert count_outputs(event_config()) == 3 == count_outputs_closed_form(2, 1, 1)


def test_table_1_lists_the_six_options_for_sandals():
    sandals_only = EventLevelConfig("navigation", 30 * DAY, 3, (TriggerDataSpec(0, (DAY, 5 * DAY), (10, 50)),))
    assert [unrank_output(sandals_only, i) for i in range(count_outputs(sandals_only))] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)]


@pytest.mark.parametrize("t, w, m", [(t, w, m) for t in (1, 2, 5, 8, 32) for w in (1, 3, 5) for m in (0, 1, 3, 7, 20)])
def test_the_general_count_equals_the_closed_form_when_windows_are_shared_and_buckets_at_least_m(t, w, m):
    ends = tuple(DAY * (i + 1) for i in range(w))
    for buckets in (tuple(range(1, m + 1)), tuple(range(1, m + 4))):
        config = uniform_config("navigation", trigger_data=range(t), window_ends=ends,
                                max_event_level_reports=m, summary_buckets=buckets)
        assert count_outputs(config) == count_outputs_closed_form(t, w, m) == count_outputs_by_polynomial(config)


def test_counts_equal_brute_force_enumeration():
    for config in small_configs():
        brute = enumerate_outputs(config)
        assert count_outputs(config) == len(brute) == count_outputs_by_polynomial(config)


def test_counts_are_exact_beyond_64_bits():
    big = uniform_config("navigation", trigger_data=range(32), window_ends=tuple(DAY * (i + 1) for i in range(5)),
                         max_event_level_reports=20)
    assert count_outputs(big) == math.comb(180, 20) > 2**64


def test_polynomial_and_table_agree_on_random_unequal_configurations():
    rng = np.random.default_rng(3)
    for _ in range(100):
        t = int(rng.integers(1, 33))
        m = int(rng.integers(0, 21))
        specs = []
        for v in range(t):
            w = int(rng.integers(1, 6))
            b = int(rng.integers(0, 25))
            specs.append(TriggerDataSpec(v, tuple(DAY * (i + 1) for i in range(w)), tuple(range(1, b + 1))))
        config = EventLevelConfig("navigation", 30 * DAY, m, tuple(specs))
        assert count_outputs(config) == count_outputs_by_polynomial(config)


# --------------------------------------------------------------------------------------------
# Ranking and unranking
# --------------------------------------------------------------------------------------------


def test_unrank_is_a_bijection_onto_o_in_lexicographic_order():
    for config in small_configs():
        brute = enumerate_outputs(config)
        unranked = [unrank_output(config, i) for i in range(count_outputs(config))]
        assert unranked == brute  # all of O, each once, in lexicographic order
        assert [rank_output(config, output) for output in brute] == list(range(len(brute)))


def test_index_zero_is_no_report_and_bad_arguments_are_rejected():
    config = navigation_config()
    assert unrank_output(config, 0) == (0,) * 24
    for bad in (-1, 2925):
        with pytest.raises(ValueError):
            unrank_output(config, bad)
    for output in [(0,) * 23, (1,) * 24, (4,) + (0,) * 23, (-1,) + (0,) * 23]:
        with pytest.raises(ValueError):
            rank_output(config, output)
    assert unrank_output(config, 2924) == (3,) + (0,) * 23


def test_rank_and_unrank_round_trip_on_large_configurations():
    big = uniform_config("navigation", trigger_data=range(32), window_ends=tuple(DAY * (i + 1) for i in range(5)),
                         max_event_level_reports=20)
    unequal = EventLevelConfig("navigation", 30 * DAY, 12, tuple(
        TriggerDataSpec(v, tuple(DAY * (i + 1) for i in range(1 + v % 5)), tuple(range(1, 2 + v % 9))) for v in range(32)))
    source = SeededSource(7)
    for config in (big, unequal):
        k = count_outputs(config)
        for index in [0, 1, k - 1, k // 2] + [source.randbelow(k) for _ in range(200)]:
            output = unrank_output(config, index)
            assert output_set.is_output(config, output)
            assert rank_output(config, output) == index


def test_vectorised_unranking_equals_the_scalar_one():
    mid = uniform_config("navigation", trigger_data=range(8), window_ends=tuple(DAY * (i + 1) for i in range(5)),
                         max_event_level_reports=6)  # |O| = C(46, 6) > 2**16: the lane-by-lane path
    assert count_outputs(mid) > output_set._ALL_OUTPUTS_LIMIT
    unequal = small_configs()[-1]
    source = SeededSource(11)
    for config in (mid, navigation_config(), unequal, seed_example()):
        k = count_outputs(config)
        indices = np.array([source.randbelow(k) for _ in range(300)] + [0, k - 1], dtype=np.int64)
        counts = unrank_outputs_array(config, indices)
        assert counts.shape == (indices.size, len(config.cells))
        assert [tuple(int(c) for c in row) for row in counts] == [unrank_output(config, int(i)) for i in indices]
    with pytest.raises(ValueError):
        unrank_outputs_array(seed_example(), np.array([27]))


# --------------------------------------------------------------------------------------------
# Randomized response (Alg. 8, Thm. 5.1)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 10), Fraction(1), Fraction(69, 10), Fraction(14), Fraction(40)])
def test_exp_lower_bound_is_a_tight_lower_bound(x):
    with decimal.localcontext() as context:
        context.prec = 80
        exact = (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp()  # correctly rounded to 80 digits
        lower = exp_lower_bound(x)
        bound = decimal.Decimal(lower.numerator) / decimal.Decimal(lower.denominator)
        assert bound <= exact * (1 + decimal.Decimal(10) ** -75)
        assert bound >= exact * (1 - decimal.Decimal(2) ** -79)


def _truthful_probability(k: int, eps) -> Fraction:
    return Fraction(truthful_threshold(k, eps), 2**64)


def _distribution(k: int, truthful: Fraction, truth: int) -> list[Fraction]:
    """P[o | truth] for every o in O (by rank): truthful with probability p, else uniform on O."""
    return [truthful * (o == truth) + (1 - truthful) / k for o in range(k)]


@pytest.mark.parametrize("config", [event_config(), seed_example(), navigation_config()], ids=["event", "seed", "nav"])
@pytest.mark.parametrize("eps", [0, 0.05, 0.5, 1, 3.7, 14, Fraction(1, 3)])
def test_the_output_distributions_on_two_inputs_are_eps_indistinguishable(config, eps):
    k = count_outputs(config)
    exact_eps = as_fraction(eps)
    p = _truthful_probability(k, eps)
    for truth, other in [(0, k - 1), (1, 2)]:
        if truth == other:
            continue
        px, py = _distribution(k, p, truth), _distribution(k, p, other)
        ratio = max(max(a / b, b / a) for a, b in zip(px, py, strict=True))
        assert ratio <= exp_lower_bound(exact_eps)  # <= e^eps, exactly
        assert math.isclose(float(ratio), math.exp(float(exact_eps)), rel_tol=1e-12)
        # with Alg. 8's exact q (e^eps replaced by the rational L) the ratio is exactly L: the bound is tight
        lower = exp_lower_bound(exact_eps)
        q = (lower - 1) / (lower + k - 1)
        qx, qy = _distribution(k, q, truth), _distribution(k, q, other)
        assert max(max(a / b, b / a) for a, b in zip(qx, qy, strict=True)) == lower


def test_the_truthful_threshold_rounds_q_down_by_less_than_2_to_the_minus_63():
    for k in (1, 3, 27, 2925, 2**32 - 1):
        for eps in (0.01, 1, 7.5, 14):
            q = (math.exp(eps) - 1) / (math.exp(eps) + k - 1)
            p = float(_truthful_probability(k, eps))
            assert p <= q * (1 + 1e-12) and q - p < 2**-52 + 1e-12 * q
    assert truthful_threshold(2925, 0) == 0  # eps = 0: always a uniform random output


class ScriptedSource(RandomSource):
    """Returns scripted values from ``randbelow`` (checking the bound) and ``random_words``."""

    kind = "seeded"

    def __init__(self, values, words=()):
        self.values = list(values)
        self.words = np.array(words, dtype=np.uint64)
        self.bounds = []

    def randbelow(self, n):
        self.bounds.append(n)
        value = self.values.pop(0)
        assert 0 <= value < n
        return value

    def random_words(self, size):
        words, self.words = self.words[:size], self.words[size:]
        assert words.size == size
        return words

    def uniform(self):
        raise NotImplementedError

    keyed_uniform = uniforms = keyed_uniforms = keyed_token = keyed_child = uniform


def test_randomized_response_compares_one_word_with_the_threshold_then_unranks_a_uniform_index():
    config = seed_example()
    threshold = truthful_threshold(27, 2.0)
    source = ScriptedSource([threshold - 1])
    assert randomized_response(config, 2.0, source) is None
    assert source.bounds == [2**64]
    source = ScriptedSource([threshold, 13])
    assert randomized_response(config, 2.0, source) == unrank_output(config, 13)
    assert source.bounds == [2**64, 27]


def test_randomized_response_array_marks_truthful_lanes_by_their_word():
    config = seed_example()
    threshold = truthful_threshold(27, 2.0)
    tail = SeededSource(5).random_words(64)  # feeds randbelow_array
    source = ScriptedSource([], np.concatenate([np.array([threshold - 1, 0, threshold, 2**64 - 1], dtype=np.uint64), tail]))
    out = randomized_response_array(config, 2.0, source, 4)
    assert out[0] == out[1] == TRUTHFUL
    assert 0 <= out[2] < 27 and 0 <= out[3] < 27


def _hoeffding_width(n: int, failure: float) -> float:
    """t with P(|X - n p| >= t) <= failure for a Binomial(n, p) X (Hoeffding: 2 exp(-2 t^2 / n))."""
    return math.sqrt(n * math.log(2 / failure) / 2)


def _chi_square_limit(df: int, failure: float) -> float:
    """Laurent and Massart (2000): P(X >= df + 2 sqrt(df x) + 2 x) <= e^{-x} for X ~ chi^2(df)."""
    x = math.log(1 / failure)
    return df + 2 * math.sqrt(df * x) + 2 * x


@pytest.mark.parametrize("vectorised", [True, False], ids=["array", "scalar"])
def test_sampler_truthful_rate_and_uniformity(vectorised):
    """False failure <= 3e-7 per run: two Hoeffding bounds (1e-7 each) and one chi-square bound (1e-7; the
    chi-square law of Pearson's statistic is an approximation, good here with >= 1000 expected per cell)."""
    config = seed_example()
    k = 27
    eps = math.log(k + 1)  # q = 1/2
    n = 200_000 if vectorised else 60_000
    source = SeededSource(20241123 + vectorised)
    if vectorised:
        draws = randomized_response_array(config, eps, source, n)
        truthful = int((draws == TRUTHFUL).sum())
        ranks = draws[draws != TRUTHFUL]
    else:
        outputs = [randomized_response(config, eps, source) for _ in range(n)]
        truthful = sum(output is None for output in outputs)
        ranks = np.array([rank_output(config, output) for output in outputs if output is not None])
    p = float(_truthful_probability(k, eps))
    assert abs(p - 0.5) < 1e-15
    assert abs(truthful - n * p) <= _hoeffding_width(n, 1e-7)
    observed = np.bincount(ranks, minlength=k)
    expected = ranks.size / k
    assert expected >= 1000
    chi_square = float(((observed - expected) ** 2 / expected).sum())
    assert chi_square <= _chi_square_limit(k - 1, 1e-7)


def test_vectorised_sampler_on_the_navigation_defaults():
    """False failure <= 2e-7: Hoeffding on the truthful count and on the count of one fixed output."""
    config = navigation_config()
    eps = 8.0
    n = 500_000
    draws = randomized_response_array(config, eps, SeededSource(99), n)
    p = float(_truthful_probability(2925, eps))
    assert abs(int((draws == TRUTHFUL).sum()) - n * p) <= _hoeffding_width(n, 1e-7)
    assert abs(int((draws == 0).sum()) - n * (1 - p) / 2925) <= _hoeffding_width(n, 1e-7)
    counts = unrank_outputs_array(config, draws[draws >= 0])
    assert counts.sum(axis=1).max() <= 3


@pytest.mark.parametrize("k, eps, rate", [(2925, 14, 0.0024263), (3, 14, 0.0000025), (1, 0, 1.0), (27, 0, 1.0)])
def test_randomized_trigger_rate(k, eps, rate):
    assert randomized_trigger_rate(k, eps) == rate


# --------------------------------------------------------------------------------------------
# Information gain
# --------------------------------------------------------------------------------------------


def test_information_gain_of_the_defaults_at_eps_14():
    nav = information_gain(count_outputs(navigation_config()), 14)
    ev = information_gain(count_outputs(event_config()), 14)
    assert 11.46 < nav < 11.5 and abs(nav - 11.4617) < 1e-4
    assert 1.58 < ev < 1.59 < 6.5
    checked = check_configuration(navigation_config(), 14)
    assert (checked.states, checked.randomized_trigger_rate, checked.limit_bits) == (2925, 0.0024263, 11.5)
    assert check_configuration(event_config(), 14).limit_bits == 6.5


def test_information_gain_is_monotone_in_epsilon_and_at_most_log2_k():
    for k in (2, 3, 27, 2925, 10**6):
        gains = [information_gain(k, eps) for eps in np.linspace(0, 14, 281)]
        assert gains[0] == 0
        assert all(a <= b for a, b in itertools.pairwise(gains))
        assert gains[-1] <= math.log2(k)


def test_check_configuration_rejects_too_much_information_and_too_many_states():
    wide = uniform_config("navigation", window_ends=(DAY, 2 * DAY, 3 * DAY, 4 * DAY))  # 6545 states, 12.56 bits at 14
    with pytest.raises(ValueError, match="^information_gain_too_high: "):
        check_configuration(wide, 14)
    wide_event = uniform_config("event", trigger_data=range(8), window_ends=(DAY, 2 * DAY), max_event_level_reports=3)
    with pytest.raises(ValueError, match="^information_gain_too_high: "):
        check_configuration(wide_event, 14)
    huge = uniform_config("navigation", trigger_data=range(32), window_ends=(DAY, 2 * DAY, 3 * DAY, 4 * DAY, 5 * DAY),
                          max_event_level_reports=20)
    with pytest.raises(ValueError, match="^too_many_states: "):
        check_configuration(huge, 0.1)
    for eps in (-0.1, 14.5, math.inf):
        with pytest.raises(ValueError, match="^epsilon_out_of_range: "):
            check_configuration(event_config(), eps)


def test_max_epsilon_meets_its_limit_and_slightly_more_does_not():
    assert max_epsilon(navigation_config()) == 14.0
    assert max_epsilon(event_config()) == 14.0
    configs = [
        uniform_config("navigation", window_ends=(DAY, 2 * DAY, 3 * DAY, 4 * DAY)),  # 6545 states
        uniform_config("event", trigger_data=range(8), window_ends=(DAY, 2 * DAY), max_event_level_reports=3),
        navigation_config(),
    ]
    for config, limit in [(configs[0], None), (configs[1], None), (configs[2], 8.0), (configs[2], 0.5)]:
        eps = max_epsilon(config, limit)
        limit = information_gain_limit(config) if limit is None else limit
        k = count_outputs(config)
        assert 0 < eps < 14
        assert information_gain(k, eps) <= limit
        assert information_gain(k, eps + 2 * MAX_EPSILON_TOLERANCE) > limit
        check_configuration(config, eps, limit)
