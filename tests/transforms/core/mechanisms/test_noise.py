"""Tests of the random sources and noise samplers (k-anonymity note Sec. 4.1; CKS 2020 for the discrete ones).

Statistical tests compare a sample with the exact CDF through the
Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant, valid for any
distribution (continuous or not): P(sup_x |F_n(x) - F(x)| > t) <= 2 exp(-2 n t^2).
With t = sqrt(ln(2 / alpha) / (2 n)) and alpha = 1e-6, each such assertion fails
by chance with probability at most 1e-6. The seeds are fixed, so a run is
reproducible.
"""
from __future__ import annotations

import math
import pickle
from fractions import Fraction

import numpy as np
import pytest

from tests.support.sources import ConstantSource, ReproducibleSource
from transforms.core.mechanisms.budget_units import as_fraction
from transforms.core.mechanisms.noise import (
    DEFAULT_GRANULARITY,
    MAX_RANDBELOW_BOUND,
    DiscreteLaplace,
    GridLaplace,
    Laplace,
    RandomSource,
    SecretSource,
    SecureSource,
    SeededSource,
    TruncatedDiscreteLaplace,
    TruncatedLaplace,
    bernoulli_exp_array,
    laplace_scale_for,
    make_source,
    randbelow_array,
)

ALPHA = 1e-6  # false-failure probability of each statistical assertion
SMALLEST_U = 2.0**-53  # the grid of uniforms is m / 2**53, 1 <= m < 2**53
LARGEST_U = 1 - 2.0**-53


def dkw_threshold(n: int, alpha: float = ALPHA) -> float:
    """t with P(sup |F_n - F| > t) <= alpha (DKW-Massart)."""
    return math.sqrt(math.log(2 / alpha) / (2 * n))


def ks_statistic(samples: np.ndarray, cdf) -> float:
    """sup_x |F_n(x) - F(x)| for a continuous F: checked on both sides of every jump of F_n."""
    ordered = np.sort(samples)
    n = ordered.size
    f = np.asarray(cdf(ordered))
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))


def discrete_ks_statistic(samples: np.ndarray, pmf, support: range) -> float:
    """sup_x |F_n(x) - F(x)| for an integer-valued F: both are constant on [x, x + 1), so integers suffice.

    F is built from ``pmf`` over ``support``, which must hold all samples; the
    mass outside it must be negligible against the DKW threshold (checked by the callers).
    """
    xs = np.arange(support.start, support.stop)
    assert samples.min() >= xs[0] and samples.max() <= xs[-1]
    f = np.cumsum([pmf(int(x)) for x in xs])
    f_n = np.searchsorted(np.sort(samples), xs, side="right") / samples.size
    return float(np.max(np.abs(f_n - f)))


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------


def test_make_source_kinds():
    assert isinstance(make_source(None), SecureSource) and make_source(None).kind == "secure"
    seeded = make_source(7)
    assert isinstance(seeded, SeededSource) and seeded.kind == "seeded" and seeded.seed == 7


def test_seeded_source_rejects_bad_seed():
    with pytest.raises(ValueError):
        SeededSource(-1)
    with pytest.raises(ValueError):
        SeededSource(1.5)


def test_keyed_uniform_is_a_function_of_seed_and_key():
    a, b = SeededSource(11), SeededSource(11)
    key = ("interest-group", "step", 493_000)
    assert a.keyed_uniform(key) == b.keyed_uniform(key)
    # Independent of prior generator use, and does not advance the generator.
    before = a.keyed_uniform(key)
    a.uniforms(1000)
    a.uniform()
    a.randbelow(10**30)
    assert a.keyed_uniform(key) == before
    fresh = SeededSource(11)
    fresh.keyed_uniform(("anything",))
    assert fresh.uniform() == SeededSource(11).uniform()
    # numpy integers are key elements like Python ints.
    assert a.keyed_uniform(("g", np.int64(3))) == a.keyed_uniform(("g", 3))


def test_keyed_uniform_differs_across_keys_and_seeds():
    source = SeededSource(11)
    values = {source.keyed_uniform(("g", "step", t)) for t in range(10_000)}
    assert len(values) == 10_000
    # The encoding is typed and self-delimiting: none of these keys collide.
    keys = [("g", 1), ("g", "1"), ("ab",), ("a", "b"), ("a", "b", ""), (), (1,), ("",)]
    assert len({source.keyed_uniform(key) for key in keys}) == len(keys)
    assert source.keyed_uniform(("g", 1)) != SeededSource(12).keyed_uniform(("g", 1))
    with pytest.raises(TypeError):
        source.keyed_uniform(("g", 1.5))
    with pytest.raises(TypeError):
        source.keyed_uniform(("g", True))


def test_keyed_uniforms_are_uniform():
    """DKW against U(0, 1) over 50,000 keys; false-failure probability <= 1e-6."""
    source = SeededSource(3)
    n = 50_000
    values = np.array([source.keyed_uniform(("g", "step", t)) for t in range(n)])
    assert np.all((values > 0) & (values < 1))
    assert ks_statistic(values, lambda x: x) <= dkw_threshold(n)


def test_seeded_uniforms_are_uniform_and_on_the_grid():
    """DKW against U(0, 1); false-failure probability <= 1e-6."""
    source = SeededSource(4)
    n = 200_000
    values = source.uniforms(n)
    assert np.all((values > 0) & (values < 1))
    assert np.all(values * 2.0**53 == np.floor(values * 2.0**53))
    assert ks_statistic(values, lambda x: x) <= dkw_threshold(n)
    scalars = [source.uniform() for _ in range(1000)]
    assert all(0 < u < 1 for u in scalars)


def test_seeded_source_pickles_to_an_equal_behaving_object():
    source = SeededSource(2024)
    source.uniforms(17)  # advance the generator: the state, not just the seed, must travel
    clone = pickle.loads(pickle.dumps(source))
    assert clone.kind == "seeded" and clone.seed == source.seed
    assert clone.uniform() == source.uniform()
    assert np.array_equal(clone.uniforms(100), source.uniforms(100))
    assert clone.randbelow(2**100) == source.randbelow(2**100)
    assert clone.keyed_uniform(("g", 5)) == source.keyed_uniform(("g", 5))


def test_secure_source_values_strictly_inside_unit_interval():
    source = SecureSource()
    assert all(0 < source.uniform() < 1 for _ in range(10_000))
    assert all(0 < source.keyed_uniform(("g", t)) < 1 for t in range(1000))
    values = source.uniforms(100_000)
    assert values.shape == (100_000,) and np.all((values > 0) & (values < 1))
    assert pickle.loads(pickle.dumps(source)).kind == "secure"


SECRET = bytes(range(32))


def test_secret_source_is_a_function_of_the_secret_and_the_key():
    """A retry with the job's secret draws exactly the same values; another secret or key draws others."""
    def draws(source: RandomSource) -> tuple:
        return (source.uniforms(5).tolist(), source.random_words(3).tolist(), source.randbelow(10**30),
                source.uniform(), source.keyed_token(("r", 1)), source.keyed_uniforms(("g", 2), 4).tolist())

    first = draws(SecretSource(SECRET).keyed_child(("aggregation", "job", 3)))
    assert draws(SecretSource(SECRET).keyed_child(("aggregation", "job", 3))) == first
    assert draws(SecretSource(SECRET).keyed_child(("aggregation", "job", 4))) != first
    assert draws(SecretSource(bytes(32)).keyed_child(("aggregation", "job", 3))) != first
    source = SecretSource(SECRET)
    source.uniforms(11)  # the position in the stream travels with the source (workers, retries)
    clone = pickle.loads(pickle.dumps(source))
    assert clone.kind == "secure" and draws(clone) == draws(source)
    with pytest.raises(ValueError):
        SecretSource(b"short")
    assert len(SecretSource.new_secret()) == 32 and SecretSource.new_secret() != SecretSource.new_secret()


def test_secret_source_uniforms_are_uniform_and_on_the_grid():
    """DKW against U(0, 1); false-failure probability <= 1e-6."""
    n = 200_000
    values = SecretSource(SECRET).uniforms(n)
    assert np.all((values > 0) & (values < 1)) and np.all(values * 2.0**53 == np.floor(values * 2.0**53))
    assert ks_statistic(values, lambda x: x) <= dkw_threshold(n)


def test_secret_source_keyed_draws_are_functions_of_secret_and_key_and_uniform():
    """Keyed uniforms and tokens: the same for the same secret and key, another for another key or secret, on the
    grid, and uniform over keys (DKW; false-failure probability <= 1e-6)."""
    source, other = SecretSource(SECRET), SecretSource(bytes(32))
    assert source.keyed_uniform(("g", 3)) == SecretSource(SECRET).keyed_uniform(("g", 3)) != other.keyed_uniform(("g", 3))
    assert source.keyed_token(("r", 1)) == SecretSource(SECRET).keyed_token(("r", 1)) != source.keyed_token(("r", 2))
    assert len(source.keyed_token(("r", 1))) == 32 and source.keyed_token(("r", 1)) != other.keyed_token(("r", 1))
    n = 100_000
    values = np.array([source.keyed_uniform(("group", "step", t)) for t in range(n)])
    assert np.all((values > 0) & (values < 1)) and np.all(values * 2.0**53 == np.floor(values * 2.0**53))
    assert ks_statistic(values, lambda x: x) <= dkw_threshold(n)


def test_secret_source_discrete_laplace_has_its_variance():
    """DLap(b) on the secret stream: the sample variance within 6 standard errors of 2 e^(-1/b) / (1 - e^(-1/b))^2.
    False-failure probability about 2e-9 by the central limit theorem (200,000 draws), and at most 1/36 by
    Chebyshev's inequality whatever the distribution of the estimate."""
    b = Fraction(50)
    n = 200_000
    draws = DiscreteLaplace(b).sample_array(SecretSource(SECRET), n).astype(np.float64)
    q = math.exp(-1 / float(b))
    variance = 2 * q / (1 - q) ** 2
    fourth = np.mean((draws - draws.mean()) ** 4)
    standard_error = math.sqrt((fourth - variance**2) / n)
    assert abs(draws.var() - variance) <= 6 * standard_error


@pytest.mark.parametrize("source", [SeededSource(5), SecureSource(), SecretSource(SECRET)],
                         ids=["seeded", "secure", "secret"])
def test_randbelow_exact_range(source):
    assert all(source.randbelow(1) == 0 for _ in range(100))
    huge = 2**100
    draws = [source.randbelow(huge) for _ in range(2000)]
    assert all(isinstance(d, int) and 0 <= d < huge for d in draws)
    assert max(draws) > 2**99  # a draw that used fewer than 100 bits would stay below 2**64
    odd = 2**100 + 1
    assert all(0 <= source.randbelow(odd) < odd for _ in range(2000))
    with pytest.raises(ValueError):
        source.randbelow(0)
    with pytest.raises(TypeError):
        source.randbelow(2.0)


def test_seeded_randbelow_is_uniform_on_a_huge_range():
    """n = 3 * 2**98: v // 2**98 is uniform on {0, 1, 2}.

    Hoeffding per class with a union bound over the 3 classes:
    P(|p_hat - 1/3| > sqrt(ln(2 * 3 / 1e-6) / (2 n))) <= 1e-6.
    """
    source = SeededSource(6)
    n = 30_000
    classes = np.array([source.randbelow(3 * 2**98) // 2**98 for _ in range(n)])
    tolerance = math.sqrt(math.log(2 * 3 / ALPHA) / (2 * n))
    for c in range(3):
        assert abs(np.mean(classes == c) - 1 / 3) <= tolerance


# ---------------------------------------------------------------------------------------------
# Truncated Laplace (Sec. 4.1)
# ---------------------------------------------------------------------------------------------


def test_truncated_laplace_A_and_B_hand_computed():
    # eps = 1, delta = 0.1 (Sec. 4.1):
    #   (e^1 - 1) / (2 * 0.1) = 1.718281828459045 / 0.2 = 8.591409142295226
    #   A = ln(1 + 8.591409142295226) = ln(9.591409142295226) = ln 9 + ln(1.065712126921692)
    #     = 2.197224577336219 + 0.063643239481608 = 2.260867816817827
    #   e^{-A} = 1 / 9.591409142295226 = 0.104259964..., so
    #   B = 1 / (2 (1 - 0.104259964...)) = 1 / 1.791480070... = 0.558197670686933
    noise = TruncatedLaplace(1.0, 0.1)
    assert noise.A == pytest.approx(2.260867816817827, rel=1e-14)
    assert noise.B == pytest.approx(0.558197670686933, rel=1e-14)
    # eps = ln 3, delta = 1/4: e^eps - 1 = 2, so A = ln(1 + 2 / (1/2)) / ln 3 = ln 5 / ln 3
    # = 1.464973520717927 and B = ln 3 / (2 (1 - 1/5)) = (5/8) ln 3 = 0.686632680417569.
    noise = TruncatedLaplace(math.log(3), 0.25)
    assert noise.A == pytest.approx(1.464973520717927, rel=1e-14)
    assert noise.B == pytest.approx(0.686632680417569, rel=1e-14)


@pytest.mark.parametrize("eps,delta", [(1.0, 0.1), (0.75, 1e-5), (1.5, 1.25e-8), (3.0, 1e-5), (0.01, 0.3)])
def test_truncated_laplace_B_is_the_paper_formula_and_normalises(eps, delta):
    noise = TruncatedLaplace(eps, delta)
    assert noise.B == pytest.approx(eps / (2 * (1 - math.exp(-eps * noise.A))), rel=1e-12)
    x = np.concatenate([np.linspace(-noise.A, 0, 200_001), np.linspace(0, noise.A, 200_001)[1:]])
    assert np.trapezoid(noise.pdf(x), x) == pytest.approx(1.0, abs=1e-8)
    assert noise.cdf(-noise.A) == 0.0 and noise.cdf(noise.A) == 1.0 and noise.cdf(0.0) == pytest.approx(0.5)


def test_truncated_laplace_numerically_careful_at_extremes():
    tiny = TruncatedLaplace(1e-8, 1e-5)  # A = ln(1 + eps / (2 delta)) / eps to first order in eps
    assert tiny.A == pytest.approx(math.log1p(1e-8 / 2e-5) / 1e-8, rel=1e-6)
    assert tiny.B == pytest.approx(1e-8 / 2 * (1 + 2e-5 / 1e-8), rel=1e-6)
    huge = TruncatedLaplace(800.0, 1e-5)  # e^800 overflows a double; A = 1 - ln(2 delta) / 800
    assert huge.A == pytest.approx(1 - math.log(2e-5) / 800, rel=1e-12)
    assert huge.B == pytest.approx(400.0, rel=1e-12)
    assert abs(huge.sample(SeededSource(0))) <= huge.A


@pytest.mark.parametrize("eps,delta", [(1.0, 0.1), (0.75, 1e-5), (2.0, 1e-3)])
def test_theorem_4_3_on_a_grid_of_intervals(eps, delta):
    """Thm. 4.3: P(S) <= delta + e^eps P(S + i) for i = +-1, checked for every interval S on a grid.

    Intervals with endpoints on the grid (which contains +-A and +-(A - 1)) include the
    worst set S = [A - 1, A] (for i = +1): there the excess is P(X > A - 1) = delta exactly,
    so the bound is also tight.
    """
    noise = TruncatedLaplace(eps, delta)
    a = noise.A
    grid = np.unique(np.concatenate([np.linspace(-a - 2, a + 2, 801), [-a, a, 1 - a, a - 1]]))
    f = noise.cdf(grid)
    for shift in (1, -1):
        g = noise.cdf(grid + shift)
        p_s = f[None, :] - f[:, None]  # P(X in [grid[i], grid[j]]) for i < j
        p_shifted = g[None, :] - g[:, None]  # the integral of f(x + shift) over the same interval
        excess = np.triu(p_s - math.exp(eps) * p_shifted, k=1).max()
        assert excess <= delta * (1 + 1e-9)
        assert excess >= delta * (1 - 1e-6)


@pytest.mark.parametrize("eps,delta", [(1.0, 0.1), (0.75, 1e-5), (1.5, 1.25e-8), (50.0, 0.5)])
def test_truncated_laplace_always_within_support(eps, delta):
    noise = TruncatedLaplace(eps, delta)
    a = noise.A
    extremes = [0.0, SMALLEST_U, 1e-300, 0.5, LARGEST_U, 1.0]
    assert np.all(np.abs(noise.quantile(extremes)) <= a)
    assert noise.quantile(0.0) == -a and noise.quantile(1.0) == a
    for u in (SMALLEST_U, LARGEST_U):
        assert -a <= noise.sample(ConstantSource(u)) <= a
        assert -a <= noise.sample(ConstantSource(u), key=("g", 1)) <= a
        assert np.all(np.abs(noise.sample_array(ConstantSource(u), 3)) <= a)
    assert np.all(np.abs(noise.sample_array(SeededSource(1), 100_000)) <= a)


def test_truncated_laplace_quantile_is_symmetric_and_inverts_the_cdf():
    noise = TruncatedLaplace(0.75, 1e-5)
    u = SeededSource(2).uniforms(10_000)
    assert np.array_equal(noise.quantile(1 - u), -noise.quantile(u))
    for eps, delta in [(0.75, 1e-5), (1.5, 1.25e-8), (1e-6, 0.5), (700.0, 1e-300)]:
        assert TruncatedLaplace(eps, delta).quantile(0.5) == 0.0  # a source serving u = 1/2 means no noise
    assert np.allclose(noise.cdf(noise.quantile(u)), u, rtol=1e-9, atol=1e-15)
    assert isinstance(noise.quantile(0.3), float) and isinstance(noise.pdf(0.3), float)


@pytest.mark.parametrize("eps,delta", [(1.0, 0.1), (0.75, 1e-5)])
def test_truncated_laplace_sample_array_matches_cdf(eps, delta):
    """KS with DKW threshold; false-failure probability <= 1e-6."""
    noise = TruncatedLaplace(eps, delta)
    n = 200_000
    assert ks_statistic(noise.sample_array(SeededSource(10), n), noise.cdf) <= dkw_threshold(n)


def test_truncated_laplace_scalar_samples_match_cdf():
    """Keyed draws (the pipelines' path) and unkeyed draws; each KS test has false-failure probability <= 1e-6."""
    noise = TruncatedLaplace(0.75, 1e-5)
    n = 20_000
    source = SeededSource(12)
    keyed = np.array([noise.sample(source, key=("g", "step", t)) for t in range(n)])
    assert ks_statistic(keyed, noise.cdf) <= dkw_threshold(n)
    unkeyed = np.array([noise.sample(source) for _ in range(n)])
    assert ks_statistic(unkeyed, noise.cdf) <= dkw_threshold(n)


@pytest.mark.parametrize(
    "args", [(0.0, 0.1), (-1.0, 0.1), (math.inf, 0.1), (math.nan, 0.1), (1.0, 0.0), (1.0, 1.0), (1.0, -0.1)]
)
def test_truncated_laplace_rejects_bad_parameters(args):
    with pytest.raises(ValueError):
        TruncatedLaplace(*args)


def test_quantile_rejects_u_outside_unit_interval():
    with pytest.raises(ValueError):
        TruncatedLaplace(1.0, 0.1).quantile(1.5)
    with pytest.raises(ValueError):
        Laplace(1.0).quantile(-0.1)


# ---------------------------------------------------------------------------------------------
# Laplace
# ---------------------------------------------------------------------------------------------


def test_laplace_sampler_matches_cdf():
    """KS for sample_array and keyed sample; each has false-failure probability <= 1e-6."""
    noise = Laplace(4.0 / 3.0)
    n = 200_000
    assert ks_statistic(noise.sample_array(SeededSource(20), n), noise.cdf) <= dkw_threshold(n)
    m = 20_000
    source = SeededSource(21)
    keyed = np.array([noise.sample(source, key=("g", t)) for t in range(m)])
    assert ks_statistic(keyed, noise.cdf) <= dkw_threshold(m)


def test_laplace_pdf_cdf_quantile_consistent():
    noise = Laplace(2.0)
    assert noise.pdf(0.0) == pytest.approx(0.25)
    assert noise.cdf(0.0) == 0.5 and noise.cdf(-2.0) == pytest.approx(0.5 * math.exp(-1))
    u = np.array([SMALLEST_U, 0.1, 0.5, 0.9, LARGEST_U])
    assert np.allclose(noise.cdf(noise.quantile(u)), u, rtol=1e-12)
    assert np.all(np.isfinite(noise.quantile(u)))
    with pytest.raises(ValueError):
        Laplace(0.0)


# ---------------------------------------------------------------------------------------------
# Discrete Laplace (exact, CKS 2020)
# ---------------------------------------------------------------------------------------------


def _wide_support(scale: Fraction) -> range:
    """[-M, M] with mass outside below 1e-12 (P(|X| > M) = 2 q^{M+1} / (1 + q) <= 2 e^{-M / scale})."""
    m = math.ceil(float(scale) * math.log(2e12))
    return range(-m, m + 1)


def test_discrete_laplace_pmf():
    noise = DiscreteLaplace(Fraction(7, 3))
    support = _wide_support(noise.scale)
    assert sum(noise.pmf(x) for x in support) == pytest.approx(1.0, abs=1e-11)
    q = math.exp(-3 / 7)
    assert noise.pmf(0) == pytest.approx((1 - q) / (1 + q), rel=1e-14)
    assert noise.pmf(-4) == noise.pmf(4) == pytest.approx((1 - q) / (1 + q) * q**4, rel=1e-14)


def test_discrete_laplace_scale_is_exact():
    assert DiscreteLaplace(0.1).scale == Fraction(1, 10)
    assert DiscreteLaplace("7/3").scale == Fraction(7, 3)
    assert as_fraction(1e-5) == Fraction(1, 100_000)
    for bad in (0, -1, Fraction(-1, 2)):
        with pytest.raises(ValueError):
            DiscreteLaplace(bad)


@pytest.mark.parametrize("scale", [Fraction(7, 3), Fraction(1, 2), Fraction(5)])
def test_exact_discrete_laplace_matches_pmf(scale):
    """Exact CKS sampler (seeded randbelow) against the pmf: DKW, false-failure probability <= 1e-6.

    The support holds all but 1e-12 of the mass, far below the threshold (about 0.013).
    """
    noise = DiscreteLaplace(scale)
    source = SeededSource(30)
    n = 40_000
    samples = np.array([noise.sample(source) for _ in range(n)])
    assert all(isinstance(noise.sample(source), int) for _ in range(10))
    assert discrete_ks_statistic(samples, noise.pmf, _wide_support(scale)) <= dkw_threshold(n) - 1e-12


def test_discrete_laplace_sample_array_matches_pmf():
    """Vectorised seeded path (numpy geometric differences): DKW, false-failure probability <= 1e-6."""
    noise = DiscreteLaplace(Fraction(7, 3))
    n = 200_000
    samples = noise.sample_array(SeededSource(31), n)
    assert samples.dtype == np.int64 and samples.shape == (n,)
    assert discrete_ks_statistic(samples, noise.pmf, _wide_support(noise.scale)) <= dkw_threshold(n) - 1e-12


def test_discrete_laplace_secure_path_is_exact_integers():
    samples = DiscreteLaplace(Fraction(3, 2)).sample_array(SecureSource(), 200)
    assert samples.dtype == np.int64 and samples.shape == (200,)


def test_truncated_discrete_laplace_pmf_and_validation():
    noise = TruncatedDiscreteLaplace(Fraction(3), 4)
    assert sum(noise.pmf(x) for x in range(-4, 5)) == pytest.approx(1.0, abs=1e-14)
    assert noise.pmf(5) == 0.0 and noise.pmf(-5) == 0.0
    untruncated = DiscreteLaplace(Fraction(3))
    mass = sum(untruncated.pmf(x) for x in range(-4, 5))
    assert noise.pmf(2) == pytest.approx(untruncated.pmf(2) / mass, rel=1e-12)
    assert TruncatedDiscreteLaplace(5, 0).sample(SeededSource(0)) == 0
    with pytest.raises(ValueError):
        TruncatedDiscreteLaplace(3, -1)
    with pytest.raises(ValueError):
        TruncatedDiscreteLaplace(0, 3)


def test_truncated_discrete_laplace_samplers_match_pmf():
    """Exact rejection sampler and vectorised sample_array: DKW, each false-failure probability <= 1e-6."""
    noise = TruncatedDiscreteLaplace(Fraction(5, 2), 3)
    support = range(-3, 4)
    source = SeededSource(40)
    n = 30_000
    exact = np.array([noise.sample(source) for _ in range(n)])
    assert discrete_ks_statistic(exact, noise.pmf, support) <= dkw_threshold(n)
    m = 200_000
    vectorised = noise.sample_array(source, m)
    assert vectorised.dtype == np.int64 and vectorised.shape == (m,)
    assert discrete_ks_statistic(vectorised, noise.pmf, support) <= dkw_threshold(m)
    secure = noise.sample_array(SecureSource(), 100)
    assert secure.shape == (100,) and np.all(np.abs(secure) <= 3)


# ---------------------------------------------------------------------------------------------
# Keyed tokens and keyed children (report identifiers, per-query noise)
# ---------------------------------------------------------------------------------------------


def test_seeded_keyed_token_is_a_function_of_seed_and_key():
    token = SeededSource(3).keyed_token(("report", "ann", "c1"))
    assert len(token) == 32 and int(token, 16) >= 0 and token == token.lower()
    assert SeededSource(3).keyed_token(("report", "ann", "c1")) == token
    assert SeededSource(4).keyed_token(("report", "ann", "c1")) != token
    assert SeededSource(3).keyed_token(("report", "ann", "c2")) != token
    assert SeededSource(3).keyed_token(("report", "ann", "c", "1")) != SeededSource(3).keyed_token(("report", "ann", "c1"))
    assert SeededSource(3).keyed_token((1,)) != SeededSource(3).keyed_token(("1",))  # typed key elements
    # a token is not a draw: the generator does not move, and the token does not depend on its state
    source, fresh = SeededSource(3), SeededSource(3)
    source.uniforms(5)
    assert source.keyed_token(("report", "ann", "c1")) == token
    source = SeededSource(3)
    source.keyed_token(("x",))
    assert source.uniform() == fresh.uniform()


def test_secure_keyed_token_is_fresh():
    source = SecureSource()
    tokens = {source.keyed_token(("report", "ann", "c1")) for _ in range(20)}
    assert len(tokens) == 20 and all(len(t) == 32 and int(t, 16) >= 0 for t in tokens)


def test_seeded_keyed_child_is_a_function_of_seed_and_key():
    key = ("query", "nike.com", "product=shoe", 0)
    child = SeededSource(5).keyed_child(key)
    assert isinstance(child, SeededSource) and child.kind == "seeded"
    expected = child.uniforms(8)
    parent = SeededSource(5)
    parent.uniforms(100)  # the parent's state does not matter
    assert np.array_equal(parent.keyed_child(key).uniforms(8), expected)
    assert not np.array_equal(SeededSource(5).keyed_child(key[:3] + (1,)).uniforms(8), expected)
    assert not np.array_equal(SeededSource(6).keyed_child(key).uniforms(8), expected)
    # deriving a child is not a draw on the parent
    parent, fresh = SeededSource(5), SeededSource(5)
    parent.keyed_child(key)
    assert parent.uniform() == fresh.uniform()


def test_secure_keyed_child_is_itself():
    source = SecureSource()
    assert source.keyed_child(("query", "q", 1)) is source


# ---------------------------------------------------------------------------------------------
# GridLaplace (the query noise of Cookie Monster paper Alg. 1 AnswerQuery)
# ---------------------------------------------------------------------------------------------


def test_grid_laplace_validation_and_exact_parameters():
    mechanism = GridLaplace(0.5, "0.25")
    assert mechanism.scale == Fraction(1, 2) and mechanism.granularity == Fraction(1, 4)
    assert GridLaplace(1).granularity == DEFAULT_GRANULARITY == Fraction(1, 2**20)
    for bad in ({"scale": 0}, {"scale": -1}, {"scale": 1, "granularity": 0}, {"scale": 1, "granularity": -0.5}):
        with pytest.raises(ValueError):
            GridLaplace(**bad)


def test_laplace_scale_for_adds_the_grid_step():
    assert laplace_scale_for(Fraction(100), Fraction(1, 2)) == (100 + Fraction(1, 2**20)) * 2
    assert laplace_scale_for(5, "0.1", Fraction(1, 4)) == Fraction(21, 4) * 10
    assert laplace_scale_for(5.0, 0.1, 0.25) == Fraction(105, 2)  # floats read as their decimal repr


@pytest.mark.parametrize("value", [10.3, 0.125, -7.9, 1e6 + 0.2, 0.0])
def test_grid_laplace_rounds_the_value_to_the_grid_then_adds_the_same_noise(value):
    """Same seed, same noise: release(v) - release(0) is v rounded to the grid (within g / 2 of v)."""
    g = Fraction(1, 4)
    mechanism = GridLaplace(3, g)
    shifted, centred = mechanism.release(value, SeededSource(21)), mechanism.release(0.0, SeededSource(21))
    rounded = Fraction(shifted) - Fraction(centred)
    assert (rounded / g).denominator == 1
    assert abs(rounded - Fraction(value)) <= g / 2


def _discrete_laplace_log_mgfs(t: float):
    """ln E[e^{lam Y}] and ln E[e^{lam |Y|}] of the discrete Laplace P(y) ∝ q^|y|, q = e^{-1/t}, as functions of
    u = lam t (|u| < 1 for the first, u < 1 for the second), and E|Y| = 2q / (1 - q^2) = 1 / sinh(1/t).

    E[e^{lam Y}] = (1 - q)^2 / ((1 - q e^lam)(1 - q e^-lam)) and E[e^{lam |Y|}] = (1 - q)(1 + q e^lam) /
    ((1 + q)(1 - q e^lam)) (geometric series); 1 - q e^lam = -expm1(-(1 - u) / t) keeps the precision.
    """
    log_one_minus_q = math.log(-math.expm1(-1 / t))

    def log_one_minus_q_e(u: float) -> float:  # ln(1 - q e^{u/t})
        return math.log(-math.expm1(-(1 - u) / t))

    def signed(u: float) -> float:
        return 2 * log_one_minus_q - log_one_minus_q_e(u) - log_one_minus_q_e(-u)

    def absolute(u: float) -> float:
        return (log_one_minus_q + math.log1p(math.exp(-(1 - u) / t)) - math.log1p(math.exp(-1 / t))
                - log_one_minus_q_e(u))

    return signed, absolute, 1 / math.sinh(1 / t)


def _chernoff_tolerance(rates, n: int, alpha: float) -> float:
    """The least s (found by bisection, rounded up) with exp(-n rate(s)) <= alpha for every one-sided rate in
    ``rates``: rate(s) = max over a grid of lam > 0 of (lam s - ln E[e^{lam Z}]) for the centred variable Z, a
    valid Chernoff exponent for any lam (the grid only makes the bound looser)."""
    target = math.log(1 / alpha) / n
    low, high = 0.0, 1.0
    while min(rate(high) for rate in rates) < target:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (low, middle) if min(rate(middle) for rate in rates) >= target else (middle, high)
    return high


@pytest.mark.parametrize("scale, granularity", [(Fraction(5, 2), DEFAULT_GRANULARITY), (Fraction(3), Fraction(1, 4))])
def test_grid_laplace_noise_has_mean_zero_and_mean_absolute_value_b(scale, granularity):
    """n releases of 0.0 with scale b: g times discrete Laplace draws of scale t = b / g.

    Tolerances come from Chernoff bounds on the exact discrete distribution (``_discrete_laplace_log_mgfs``),
    each tail given ALPHA / 2, so each of the two assertions fails by chance with probability at most 1e-6.
    E|X| = g / sinh(g / b), within g^2 / (6 b) of b (exactly b in the continuous limit). Values lie on g Z.
    """
    n, g = 20_000, granularity
    t = float(scale / g)
    signed, absolute, mean_abs_y = _discrete_laplace_log_mgfs(t)
    us = [k / 400 for k in range(1, 400)]  # lam t in (0, 1)

    def rate_signed(s_over_t: float) -> float:  # symmetric: both tails have this rate
        return max(u * s_over_t - signed(u) for u in us)

    def rate_abs_upper(s_over_t: float) -> float:  # Z = |Y| - E|Y|, lam > 0
        return max(u * s_over_t - (absolute(u) - u * mean_abs_y / t) for u in us)

    def rate_abs_lower(s_over_t: float) -> float:  # -Z, lam > 0 (any lam > 0 is allowed here)
        return max(u * s_over_t - (absolute(-u) + u * mean_abs_y / t) for u in [k / 100 for k in range(1, 400)])

    tolerance_mean = _chernoff_tolerance([rate_signed], n, ALPHA / 2) * float(scale)
    tolerance_abs = _chernoff_tolerance([rate_abs_upper, rate_abs_lower], n, ALPHA / 2) * float(scale)
    assert tolerance_mean < 0.06 * float(scale) and tolerance_abs < 0.045 * float(scale)  # ~ 5.4 and 5.4 std errors

    mechanism = GridLaplace(scale, g)
    source = SeededSource(2024)
    draws = [mechanism.release(0.0, source) for _ in range(n)]
    assert all((Fraction(x) / g).denominator == 1 for x in draws)
    expected_abs = float(g) * mean_abs_y
    assert abs(expected_abs - float(scale)) <= float(g) ** 2 / (6 * float(scale)) * 1.01
    assert abs(math.fsum(draws) / n) <= tolerance_mean
    assert abs(math.fsum(abs(x) for x in draws) / n - expected_abs) <= tolerance_abs


# ---------------------------------------------------------------------------------------------
# Exact vectorised sampling: random words, randbelow_array, bernoulli_exp_array (CKS 2020 Alg. 1),
# DiscreteLaplace.sample_exact_array (Alg. 2) and the truncated version built on it
# ---------------------------------------------------------------------------------------------
#
# Chi-square tests. Pearson's statistic X^2 = sum (O - E)^2 / E over k bins is asymptotically
# chi-square with k - 1 degrees of freedom. Every test below uses bins with expected counts >= 100
# (most far above) and rejects only beyond the chi-square quantile at ALPHA / 100 = 1e-8: the
# hundredfold margin covers the error of the chi-square approximation in that tail, so each
# chi-square assertion fails by chance with probability at most 1e-6. Every such test also has a
# rigorous companion (DKW, Hoeffding, Chernoff or Bernstein) with false-failure probability <= 1e-6.

CHI_SQUARE_ALPHA = ALPHA / 100
MIN_EXPECTED = 100


def chi_square_sf(x: float, df: int) -> float:
    """P(chi^2_df > x) in closed form: Q(df / 2, x / 2) = e^{-x/2} sum_{j < df/2} (x/2)^j / j! for even df,
    erfc(sqrt(x / 2)) + e^{-x/2} sum_{j < (df - 1)/2} (x/2)^{j + 1/2} / Gamma(j + 3/2) for odd df."""
    if x <= 0:
        return 1.0
    half = x / 2
    if df % 2 == 0:
        head, logs = 0.0, [j * math.log(half) - math.lgamma(j + 1) for j in range(df // 2)]
    else:
        head, logs = math.erfc(math.sqrt(half)), [(j + 0.5) * math.log(half) - math.lgamma(j + 1.5) for j in range(df // 2)]
    return head + math.fsum(math.exp(term - half) for term in logs)


def chi_square_quantile(df: int, alpha: float) -> float:
    """The x with P(chi^2_df > x) = alpha (bisection, rounded up)."""
    low, high = 0.0, 1.0
    while chi_square_sf(high, df) > alpha:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if chi_square_sf(middle, df) > alpha else (low, middle)
    return high


def test_chi_square_sf_against_table_values():
    # 95 % and 99.9 % points of the chi-square table
    for df, x, p in [(1, 3.841458820694124, 0.05), (2, 5.991464547107979, 0.05), (3, 7.814727903251178, 0.05),
                     (10, 18.30703805327515, 0.05), (1, 10.827566170662733, 0.001), (6, 22.457744484825323, 0.001)]:
        assert chi_square_sf(x, df) == pytest.approx(p, rel=1e-9)
    assert chi_square_sf(chi_square_quantile(7, 1e-8), 7) == pytest.approx(1e-8, rel=1e-9)


def pearson(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * np.asarray(probabilities, dtype=np.float64)
    assert expected.min() >= MIN_EXPECTED
    return float(np.sum((counts - expected) ** 2 / expected))


def binned_chi_square(samples: np.ndarray, cdf, candidates) -> tuple[float, int]:
    """Pearson's statistic of integer ``samples`` against the integer CDF ``cdf`` (vectorised, P(X <= x)).

    Bins are (-inf, e_0), [e_0, e_1), ..., [e_m, inf) for the sorted integer ``candidates`` e_i; then the
    least likely bin is merged with its less likely neighbour until every expected count is >= MIN_EXPECTED
    (so far in the tails the bins pool). Bin edges depend on the distribution only, never on the sample.
    Returns (statistic, degrees of freedom).
    """
    n = samples.size
    edges = sorted({int(c) for c in candidates})

    def probabilities(edges: list[int]) -> np.ndarray:
        below = cdf(np.array(edges, dtype=np.float64) - 1) if edges else np.empty(0)  # P(X < e) = F(e - 1)
        return np.diff(np.concatenate([[0.0], below, [1.0]]))

    p = probabilities(edges)
    while p.min() * n < MIN_EXPECTED:
        i = int(np.argmin(p))
        if i == 0:
            del edges[0]
        elif i == p.size - 1:
            del edges[-1]
        else:
            del edges[i - 1 if p[i - 1] < p[i + 1] else i]
        p = probabilities(edges)
    ordered = np.sort(samples)
    counts = np.diff(np.concatenate([[0], np.searchsorted(ordered, edges, side="left"), [n]]))
    return pearson(counts, p), p.size - 1


def integer_ks_statistic(samples: np.ndarray, cdf) -> float:
    """sup_x |F_n(x) - F(x)| for integer samples and an integer CDF ``cdf`` (vectorised, P(X <= x)).

    Both are constant on [k, k + 1), and between consecutive sample values F_n is constant while F
    grows, so the supremum is attained at a sample value x or at x - 1: no support needs listing.
    """
    values, counts = np.unique(samples, return_counts=True)
    n = samples.size
    at = np.cumsum(counts) / n  # F_n(x)
    before = at - counts / n  # F_n(x - 1)
    return float(max(np.max(np.abs(at - cdf(values.astype(np.float64)))),
                     np.max(np.abs(before - cdf(values.astype(np.float64) - 1)))))


def discrete_laplace_cdf(scale: Fraction):
    """P(X <= x) of the discrete Laplace law, q = e^{-1/scale}: q^{-x} / (1 + q) for x < 0, else 1 - q^{x+1} / (1 + q)."""
    inverse = 1 / float(scale)
    q = math.exp(-inverse)

    def cdf(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        lower = np.exp(-inverse * np.abs(x)) / (1 + q)
        upper = 1 - np.exp(-inverse * (x + 1)) / (1 + q)
        return np.where(x < 0, lower, upper)

    return cdf


def truncated_discrete_laplace_cdf(scale: Fraction, bound: int):
    """P(X <= x | |X| <= bound) from ``discrete_laplace_cdf``."""
    cdf = discrete_laplace_cdf(scale)
    below, top = float(cdf(-bound - 1)), float(cdf(bound))

    def truncated(x: np.ndarray) -> np.ndarray:
        x = np.clip(np.asarray(x, dtype=np.float64), -bound - 1, bound)
        return np.clip((cdf(x) - below) / (top - below), 0.0, 1.0)

    return truncated


def distribution_candidates(scale: Fraction, bound: int | None = None) -> list[int]:
    """Candidate bin edges: every integer in [-60, 60] (the central values of small scales) and the points
    scale * z for the continuous Laplace quantiles z at levels k / 40 (wide scales); clipped to the support."""
    levels = [k / 40 for k in range(1, 40)]
    z = [math.log(2 * p) if p < 0.5 else -math.log(2 * (1 - p)) for p in levels]
    candidates = set(range(-60, 61)) | {round(float(scale) * v) for v in z}
    if bound is not None:
        candidates = {c for c in candidates if -bound <= c <= bound + 1}
    return sorted(candidates)


def discrete_laplace_moments(scale: Fraction) -> tuple[float, float, float]:
    """(q, E[X^2], E[X^4]) of the discrete Laplace law, q = e^{-1/scale}: E[X^2] = 2q / (1 - q)^2 and
    E[X^4] = 2q (1 + 10q + q^2) / (1 - q)^4 (from sum_k k^4 q^k = q (1 + q)(1 + 10q + q^2) / (1 - q)^5)."""
    inverse = 1 / float(scale)
    q, one_minus_q = math.exp(-inverse), -math.expm1(-inverse)
    return q, 2 * q / one_minus_q**2, 2 * q * (1 + 10 * q + q * q) / one_minus_q**4


def second_moment_tolerance(scale: Fraction, n: int) -> float:
    """A tolerance s with P(|mean(X_i^2) - E[X^2]| > s) <= 1e-6 for n i.i.d. discrete Laplace draws.

    Split ALPHA = 1e-7 + 9e-7. (1) Truncation: with M = ceil(scale ln(2n / 1e-7)), P(|X| > M) =
    2 q^{M+1} / (1 + q) <= 2 e^{-(M+1)/scale} < 1e-7 / n, so P(some |X_i| > M) <= 1e-7 (union bound).
    (2) On the complement, X_i^2 = Z_i = min(X_i^2, M^2), i.i.d. in [0, M^2] with Var Z <= E[Z^2] <= E[X^4];
    Bernstein: P(|mean Z - E Z| >= e) <= 2 exp(-n e^2 / (2 E[X^4] + 2 M^2 e / 3)) = 9e-7 for
    e = (2 L M^2 / 3 + sqrt((2 L M^2 / 3)^2 + 8 n L E[X^4])) / (2n), L = ln(2 / 9e-7). (3) The truncation
    bias E[X^2] - E Z <= E[X^2 1{|X| > M}] <= sqrt(E[X^4] P(|X| > M)) (Cauchy-Schwarz). s = e + bias.
    """
    _, _, m4 = discrete_laplace_moments(scale)
    truncation_alpha, bernstein_alpha = 1e-7, ALPHA - 1e-7
    m = math.ceil(float(scale) * math.log(2 * n / truncation_alpha))
    tail = 2 * math.exp(-(m + 1) / float(scale))
    assert n * tail <= truncation_alpha
    log_term = math.log(2 / bernstein_alpha)
    linear = 2 * log_term * m * m / 3
    bernstein = (linear + math.sqrt(linear**2 + 8 * n * log_term * m4)) / (2 * n)
    return bernstein + math.sqrt(m4 * tail)


def mean_tolerance(scale: Fraction, n: int) -> float:
    """A tolerance s with P(|mean(X_i)| > s) <= 1e-6: the Chernoff bound of the exact discrete law
    (``_discrete_laplace_log_mgfs``, ``_chernoff_tolerance``), ALPHA / 2 per tail."""
    t = float(scale)
    signed, _, _ = _discrete_laplace_log_mgfs(t)
    us = [k / 400 for k in range(1, 400)]

    def rate(s_over_t: float) -> float:
        return max(u * s_over_t - signed(u) for u in us)

    return _chernoff_tolerance([rate], n, ALPHA / 2) * t


# ---- random words ----------------------------------------------------------------------------


def test_random_words_of_the_sources():
    seeded = SeededSource(1).random_words(5)
    assert seeded.dtype == np.uint64 and seeded.shape == (5,)
    assert np.array_equal(seeded, np.random.Generator(np.random.PCG64(1)).bit_generator.random_raw(5))
    assert SeededSource(1).random_words(0).shape == (0,)
    secure = SecureSource().random_words(7)
    assert secure.dtype == np.uint64 and secure.shape == (7,) and secure.flags.writeable
    for source in (SeededSource(1), SecureSource()):
        with pytest.raises(ValueError):
            source.random_words(-1)
    # The base-class default: one randbelow(2**64) per word.
    source = ReproducibleSource(3)
    words = RandomSource.random_words(source, 4)
    assert words.dtype == np.uint64 and words.shape == (4,) and source.randbelow_calls == 4
    with pytest.raises(NotImplementedError):
        ConstantSource().random_words(3)


@pytest.mark.parametrize("source", [SeededSource(8), SecureSource()], ids=["seeded", "secure"])
def test_random_words_have_fair_independent_bits(source):
    """Every one of the 64 bit positions is 1 with frequency 1/2: Hoeffding with a union bound over the
    64 positions, tolerance sqrt(ln(2 * 64 / 1e-6) / (2n)), so the assertion fails by chance with probability
    at most 1e-6. The bits of a pair of positions agree half of the time too (same bound, 63 adjacent pairs)."""
    n = 100_000
    words = source.random_words(n)
    bits = ((words[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).astype(np.float64)
    tolerance = math.sqrt(math.log(2 * 64 / ALPHA) / (2 * n))
    assert np.max(np.abs(bits.mean(axis=0) - 0.5)) <= tolerance
    agree = (bits[:, 1:] == bits[:, :-1]).mean(axis=0)
    assert np.max(np.abs(agree - 0.5)) <= math.sqrt(math.log(2 * 63 / ALPHA) / (2 * n))


def test_reproducible_source_is_not_seeded_and_reproducible():
    a, b = ReproducibleSource(4), ReproducibleSource(4)
    assert not isinstance(a, SeededSource) and a.kind == "seeded"
    assert np.array_equal(a.random_words(10), b.random_words(10))
    assert a.randbelow(10**20) == b.randbelow(10**20)
    assert a.words_drawn == 10 and a.randbelow_calls == 1
    child = a.keyed_child(("q", 1))
    assert isinstance(child, ReproducibleSource)
    assert np.array_equal(child.random_words(3), b.keyed_child(("q", 1)).random_words(3))


# ---- randbelow_array -------------------------------------------------------------------------


def test_randbelow_array_respects_bounds():
    source = ReproducibleSource(9)
    assert np.array_equal(randbelow_array(source, np.ones(1000, dtype=np.int64)), np.zeros(1000))
    bounds = np.array([1, 2, 3, 7, 2**32, 2**32 + 1, 3 * 2**61, 2**62 + 1, 2**63 - 1, 2**63], dtype=np.uint64)
    many = np.tile(bounds, 5000)
    draws = randbelow_array(source, many)
    assert draws.dtype == np.int64 and draws.shape == many.shape
    assert np.all(draws >= 0) and np.all(draws.astype(np.uint64) < many)
    assert np.all(draws[many == 1] == 0)
    # the top bit is used: of 5000 draws below 2**63 (or 2**63 - 1), none above 2**62 has probability about 2**-5000
    assert draws[many == 2**63].max() > 2**62 and draws[many == 2**63 - 1].max() > 2**62
    # shapes, Python-int lists (including 2**63, beyond int64), numpy scalars, empty input
    grid = randbelow_array(source, np.full((3, 4), 10, dtype=np.int64))
    assert grid.shape == (3, 4) and np.all((grid >= 0) & (grid < 10))
    listed = randbelow_array(source, [2**63, 5, np.int64(3)])
    assert listed.shape == (3,) and 0 <= listed[0] < 2**63 and 0 <= listed[1] < 5 and 0 <= listed[2] < 3
    assert randbelow_array(source, []).shape == (0,)
    assert MAX_RANDBELOW_BOUND == 2**63
    for bad in ([0], [5, -1], [2**63 + 1], np.array([0, 4])):
        with pytest.raises(ValueError):
            randbelow_array(source, bad)
    for bad in ([2.0], [True], np.array([1.5])):
        with pytest.raises(TypeError):
            randbelow_array(source, bad)


def test_randbelow_array_is_uniform():
    """Chi-square (see CHI_SQUARE_ALPHA: each assertion's false-failure probability <= 1e-6), seeded.

    n = 7 and n = 13 (one bound for all lanes: 8-bit pieces of the words, where skipping the rejection
    would give the residues below 256 mod n an excess of 1.2 % and 1.6 %, a statistic near 126 and 700,
    far above the thresholds 48 and 54); per-lane bounds 3, 10 and 1000 mixed in one call (1000 pooled
    in 10 classes v // 100); n = 3 * 2**61 (64-bit words; also per lane, alternating with n - 1, whose
    class 2 is short by one value in 2**61), classes v // 2**61 on which naive w mod n would be biased
    (3/8, 3/8, 1/4): the same statistic on the naive residues is far above the threshold.
    """
    source = SeededSource(12)
    sevens = randbelow_array(source, np.full(700_000, 7))
    threshold = chi_square_quantile(6, CHI_SQUARE_ALPHA)
    assert pearson(np.bincount(sevens, minlength=7), np.full(7, 1 / 7)) <= threshold
    thirteens = randbelow_array(source, np.full(1_300_000, 13))
    assert pearson(np.bincount(thirteens, minlength=13), np.full(13, 1 / 13)) <= chi_square_quantile(12, CHI_SQUARE_ALPHA)

    pattern = np.tile(np.array([3, 10, 1000], dtype=np.int64), 100_000)
    mixed = randbelow_array(source, pattern)
    for n, classes, divisor in [(3, 3, 1), (10, 10, 1), (1000, 10, 100)]:
        counts = np.bincount(mixed[pattern == n] // divisor, minlength=classes)
        assert counts.size == classes
        assert pearson(counts, np.full(classes, 1 / classes)) <= chi_square_quantile(classes - 1, CHI_SQUARE_ALPHA)

    n = 3 * 2**61
    size = 300_000
    threshold = chi_square_quantile(2, CHI_SQUARE_ALPHA)
    for bounds in (np.full(size, n, dtype=np.uint64), np.tile(np.array([n, n - 1], dtype=np.uint64), size // 2)):
        large = randbelow_array(ReproducibleSource(13), bounds)  # one bound for all lanes, then per-lane bounds
        assert pearson(np.bincount(large // 2**61, minlength=3), np.full(3, 1 / 3)) <= threshold
    naive = ReproducibleSource(13).random_words(size) % np.uint64(n) // np.uint64(2**61)
    assert pearson(np.bincount(naive.astype(np.int64), minlength=3), np.full(3, 1 / 3)) > 100 * threshold


def test_randbelow_array_secure_is_uniform():
    """The secure source through randbelow_array: chi-square, false-failure probability <= 1e-6."""
    draws = randbelow_array(SecureSource(), np.full(300_000, 6))
    assert pearson(np.bincount(draws, minlength=6), np.full(6, 1 / 6)) <= chi_square_quantile(5, CHI_SQUARE_ALPHA)


# ---- bernoulli_exp_array (CKS 2020 Alg. 1) ----------------------------------------------------


def test_bernoulli_exp_array_is_bernoulli_exp_minus_gamma():
    """P(True) = e^{-gamma} for gamma in {1/3, 1, 5/2, 7, 12345/1000} (per-lane numerators and denominators in
    one call). Hoeffding with a union bound over the 5 gammas: |p_hat - e^{-gamma}| <= sqrt(ln(2 * 5 / 1e-6) / (2n))
    fails by chance with probability at most 1e-6. gamma = 0 is always True."""
    gammas = [(1, 3), (1, 1), (5, 2), (7, 1), (12345, 1000)]
    n = 100_000
    numerators = np.repeat([g[0] for g in gammas], n)
    denominators = np.repeat([g[1] for g in gammas], n)
    source = ReproducibleSource(14)
    draws = bernoulli_exp_array(source, numerators, denominators)
    assert draws.dtype == bool and draws.shape == (5 * n,) and source.randbelow_calls == 0
    tolerance = math.sqrt(math.log(2 * len(gammas) / ALPHA) / (2 * n))
    for i, (a, b) in enumerate(gammas):
        assert abs(draws[i * n:(i + 1) * n].mean() - math.exp(-a / b)) <= tolerance
    assert bernoulli_exp_array(source, np.zeros(1000, dtype=np.int64), 7).all()
    assert bernoulli_exp_array(source, [[0, 0], [0, 0]], [[1, 2], [3, 4]]).shape == (2, 2)
    with pytest.raises(ValueError):
        bernoulli_exp_array(source, [-1], [1])
    with pytest.raises(ValueError):
        bernoulli_exp_array(source, [1], [0])


def test_bernoulli_exp_array_huge_denominators_finish_in_python_integers():
    """gamma = (2**62 - 1) / (2**62 + 1): from K = 2 the bound denominator * K exceeds 2**63, so the lanes finish
    the loop of Alg. 1 with exact Python integers (randbelow). Hoeffding: |p_hat - e^{-gamma}| <=
    sqrt(ln(2 / 1e-6) / (2n)) fails by chance with probability at most 1e-6."""
    n = 20_000
    source = ReproducibleSource(15)
    draws = bernoulli_exp_array(source, np.full(n, 2**62 - 1), np.full(n, 2**62 + 1))
    assert source.randbelow_calls > 0
    gamma = (2**62 - 1) / (2**62 + 1)
    assert abs(draws.mean() - math.exp(-gamma)) <= math.sqrt(math.log(2 / ALPHA) / (2 * n))


# ---- DiscreteLaplace.sample_exact_array (CKS 2020 Alg. 2, vectorised) --------------------------

VECTORISED_SCALES = [Fraction(1, 2), Fraction(7, 3), Fraction(32768, 5), Fraction(655360, 7)]


@pytest.mark.parametrize("scale", VECTORISED_SCALES, ids=str)
@pytest.mark.parametrize("kind", ["reproducible", "secure"])
def test_exact_vectorised_discrete_laplace_distribution(scale, kind):
    """n = 200,000 draws of ``sample_array`` from a non-seeded source (the exact vectorised path).

    Four assertions, each failing by chance with probability at most 1e-6 (for the reproducible source
    the seed is fixed, so a run is reproducible):
    * mean within the Chernoff tolerance of the exact law (``mean_tolerance``);
    * mean of X^2 within the Bernstein-with-truncation tolerance of 2q / (1 - q)^2 (``second_moment_tolerance``);
    * pmf: chi-square over the central values (bins of single integers for small scales, integer
      intervals for wide ones) with pooled tails (``binned_chi_square``, CHI_SQUARE_ALPHA);
    * CDF: DKW (``integer_ks_statistic``, rigorous for discrete laws).
    """
    n = 200_000
    source = ReproducibleSource(50) if kind == "reproducible" else SecureSource()
    noise = DiscreteLaplace(scale)
    draws = noise.sample_array(source, n)
    assert draws.dtype == np.int64 and draws.shape == (n,)
    if kind == "reproducible":
        assert source.randbelow_calls == 0 and source.words_drawn > 0  # fully vectorised, no per-draw fallback

    assert abs(draws.mean()) <= mean_tolerance(scale, n)

    _, second_moment, _ = discrete_laplace_moments(scale)
    tolerance = second_moment_tolerance(scale, n)
    assert tolerance <= 0.06 * second_moment  # informative: under 9 standard errors of mean(X^2)
    assert abs(np.mean(draws.astype(np.float64) ** 2) - second_moment) <= tolerance

    cdf = discrete_laplace_cdf(scale)
    statistic, df = binned_chi_square(draws, cdf, distribution_candidates(scale))
    assert df >= 6
    assert statistic <= chi_square_quantile(df, CHI_SQUARE_ALPHA)
    assert integer_ks_statistic(draws, cdf) <= dkw_threshold(n)


def test_exact_vectorised_pmf_agrees_with_the_pmf_method():
    """``discrete_laplace_cdf`` (used above) against the sum of ``DiscreteLaplace.pmf``."""
    scale = Fraction(7, 3)
    cdf = discrete_laplace_cdf(scale)
    noise = DiscreteLaplace(scale)
    for x in (-40, -3, -1, 0, 2, 9):
        assert float(cdf(x)) == pytest.approx(math.fsum(noise.pmf(y) for y in range(-200, x + 1)), abs=1e-13)


def test_exact_vectorised_discrete_laplace_is_reproducible_and_seeded_path_unchanged():
    noise = DiscreteLaplace(Fraction(32768, 5))
    assert np.array_equal(noise.sample_array(ReproducibleSource(7), 1000), noise.sample_array(ReproducibleSource(7), 1000))
    # sample_exact_array takes the exact path from a SeededSource too (reproducibly)
    assert np.array_equal(noise.sample_exact_array(SeededSource(7), 1000), noise.sample_array(ReproducibleSource(7), 1000))
    # the SeededSource path of sample_array is still the numpy geometric difference
    p = -math.expm1(-float(1 / noise.scale))
    generator = np.random.Generator(np.random.PCG64(31))
    expected = generator.geometric(p, 500) - generator.geometric(p, 500)
    assert np.array_equal(noise.sample_array(SeededSource(31), 500), expected)
    assert noise.sample_array(SecureSource(), 0).shape == (0,)
    with pytest.raises(ValueError):
        noise.sample_exact_array(SecureSource(), -1)


def test_exact_vectorised_discrete_laplace_huge_numerator_uses_exact_python_fallbacks():
    """scale (2**62 - 1) / 2**20: t K > 2**63 from K = 3 in Alg. 1 and t (V + 1) > 2**63 from V = 2, so those
    lanes finish in Python integers; the draws still follow the law (DKW, false-failure probability <= 1e-6)."""
    scale = Fraction(2**62 - 1, 2**20)
    n = 20_000
    source = ReproducibleSource(16)
    draws = DiscreteLaplace(scale).sample_array(source, n)
    assert source.randbelow_calls > 0 and draws.dtype == np.int64
    assert integer_ks_statistic(draws, discrete_laplace_cdf(scale)) <= dkw_threshold(n)


def test_absurd_scales_fall_back_per_draw_or_raise_clearly():
    """t > 2**62: per-draw exact ``sample`` (DKW, false-failure probability <= 1e-6); draws beyond int64
    raise an OverflowError with a clear message on both paths."""
    scale = Fraction(2**62 + 1, 2**40)  # about 2**22
    n = 3000
    source = ReproducibleSource(17)
    draws = DiscreteLaplace(scale).sample_array(source, n)
    assert source.words_drawn == 0 and source.randbelow_calls > 0 and draws.dtype == np.int64
    assert integer_ks_statistic(draws, discrete_laplace_cdf(scale)) <= dkw_threshold(n)
    # vectorised (t = 2**62 <= the limit), but X = U + t V >= 2**63 whenever V >= 2 (probability e^{-2} per lane)
    with pytest.raises(OverflowError, match="int64"):
        DiscreteLaplace(2**62).sample_array(ReproducibleSource(18), 1000)
    with pytest.raises(OverflowError, match="int64"):
        DiscreteLaplace(2**70).sample_array(ReproducibleSource(19), 10)


# ---- TruncatedDiscreteLaplace through the exact vectorised sampler -----------------------------


@pytest.mark.parametrize(
    "scale, bound",
    [(Fraction(5, 2), 3), (Fraction(1, 2), 2), (Fraction(32768, 5), 25 * 32768 // 5), (Fraction(655360, 7), 3 * 655360 // 7)],
    ids=["5/2-3", "1/2-2", "32768/5-25scales", "655360/7-3scales"],
)
@pytest.mark.parametrize("kind", ["reproducible", "secure"])
def test_truncated_exact_vectorised_within_bound_and_matches_pmf(scale, bound, kind):
    """n = 200,000 draws from a non-seeded source: never beyond the bound; chi-square on the bins of the
    truncated law (CHI_SQUARE_ALPHA) and DKW, each failing by chance with probability at most 1e-6."""
    n = 200_000
    noise = TruncatedDiscreteLaplace(scale, bound)
    source = ReproducibleSource(60) if kind == "reproducible" else SecureSource()
    draws = noise.sample_array(source, n)
    assert draws.dtype == np.int64 and draws.shape == (n,)
    assert np.abs(draws).max() <= bound
    if kind == "reproducible":
        assert source.randbelow_calls == 0
    cdf = truncated_discrete_laplace_cdf(scale, bound)
    if bound <= 3:
        assert float(cdf(0)) - float(cdf(-1)) == pytest.approx(noise.pmf(0), rel=1e-12)
    statistic, df = binned_chi_square(draws, cdf, distribution_candidates(scale, bound))
    assert df >= 3
    assert statistic <= chi_square_quantile(df, CHI_SQUARE_ALPHA)
    assert integer_ks_statistic(draws, cdf) <= dkw_threshold(n)


def test_truncated_exact_vectorised_edge_cases():
    source = ReproducibleSource(61)
    assert np.array_equal(TruncatedDiscreteLaplace(Fraction(1, 3), 0).sample_array(source, 500), np.zeros(500))
    assert TruncatedDiscreteLaplace(Fraction(3), 5).sample_array(source, 0).shape == (0,)
    assert np.array_equal(
        TruncatedDiscreteLaplace(Fraction(7, 2), 9).sample_array(ReproducibleSource(62), 100),
        TruncatedDiscreteLaplace(Fraction(7, 2), 9).sample_array(ReproducibleSource(62), 100),
    )


@pytest.mark.parametrize(("key", "encoded"), [
    ((), b"i1:0"),
    (("report", 7), b"i1:2s6:reporti1:7"),
    (("é☃", -12, np.int64(5)), b"i1:3s5:\xc3\xa9\xe2\x98\x83i3:-12i1:5"),
    ((10**20,), b"i1:1i21:100000000000000000000"),
])
def test_key_encoding_is_the_documented_self_delimiting_form(key, encoded):
    """Every keyed draw of a seeded run hashes this encoding: it must never change (a change would change every
    seeded result)."""
    from transforms.core.mechanisms.noise.sources import _encode_key  # noqa: PLC0415 - private, tested here only
    assert _encode_key(key) == encoded


@pytest.mark.parametrize("bad", [True, 1.5, None, b"x"])
def test_key_elements_are_str_or_int(bad):
    from transforms.core.mechanisms.noise.sources import _encode_key  # noqa: PLC0415
    with pytest.raises(TypeError):
        _encode_key(("x", bad))
