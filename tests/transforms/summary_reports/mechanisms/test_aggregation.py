"""Alg. 1's release rules, thresholds, noise and budget units (transforms/summary_reports/mechanisms/aggregation.py)."""
from __future__ import annotations

import hashlib
import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

from schemas.aggregatable import parse_shared_info, shared_info_json
from transforms.core.mechanisms.noise import SeededSource
from transforms.summary_reports.mechanisms.aggregation import (
    AggregationParams,
    KeyedSums,
    aggregate,
    budget_key,
    budget_units,
    candidates,
    keys_of,
    report_identity,
    report_unit_group,
    shared_id_fields,
)

RID = "6b3f1e0c-1d2a-4c5b-9e8f-0a1b2c3d4e5f"


def _params(mode: str, epsilon="10", delta="1e-5", l1=65536, l0=20) -> AggregationParams:
    return AggregationParams(mode, epsilon, delta, l1, l0)


def test_parameters_are_exact_and_checked():
    params = _params("domain", epsilon="0.7")
    assert params.epsilon == Fraction(7, 10) and params.scale == Fraction(655360, 7)
    for bad in ("0", "64.5", "-1"):
        with pytest.raises(ValueError, match="epsilon"):
            _params("domain", epsilon=bad)
    with pytest.raises(ValueError, match="delta"):
        _params("threshold", delta="1")
    with pytest.raises(ValueError, match="mode"):
        _params("everything")
    with pytest.raises(ValueError, match="L1"):
        _params("domain", l1=0)
    assert _params("domain", epsilon="64").epsilon == 64


def _ln(x: Decimal) -> Decimal:
    getcontext().prec = 40
    return x.ln()


def test_key_discovery_threshold_matches_its_closed_form():
    # tau = L1 (1 + ln(L0 / delta) / eps), evaluated in 40-digit decimal arithmetic.
    for epsilon, delta, l0 in (("10", "1e-5", 20), ("1", "1e-9", 1), ("0.5", "0.001", 100)):
        exact = 65536 * (1 + _ln(Decimal(l0) / Decimal(delta)) / Decimal(epsilon))
        assert _params("key-discovery", epsilon, delta, l0=l0).tau == pytest.approx(float(exact), rel=1e-12)
    # The default setting by hand: ln(2e6) = 14.50865773852447..., tau = 65536 * 2.450865773852447 = 160,619.94
    assert _params("key-discovery").tau == pytest.approx(160_619.94, abs=0.01)


def test_public_threshold_matches_its_closed_form():
    # T = (L1 / eps)(eps + ln(1 / delta)) = L1 + (L1 / eps) ln(1 / delta)
    for epsilon, delta in (("10", "1e-5"), ("1", "1e-9"), ("0.3", "0.01")):
        exact = Decimal(65536) / Decimal(epsilon) * (Decimal(epsilon) + _ln(1 / Decimal(delta)))
        assert _params("threshold", epsilon, delta).public_threshold == pytest.approx(float(exact), rel=1e-12)
    assert _params("threshold").public_threshold == pytest.approx(65536 + 6553.6 * math.log(1e5), rel=1e-15)


def _dlap_tail(scale: Fraction, k: int) -> float:
    """P[Z >= k] for Z ~ DLap with pmf (1 - q) / (1 + q) q^|z|, k >= 1: q^k / (1 + q)."""
    q = math.exp(-1 / float(scale))
    return q**k / (1 + q)


@pytest.mark.parametrize("epsilon, delta", [("10", "1e-5"), ("1", "1e-6"), ("0.5", "1e-3")])
def test_a_bucket_of_one_report_passes_the_public_threshold_with_probability_at_most_delta(epsilon, delta):
    params = _params("threshold", epsilon, delta)
    needed = math.ceil(params.public_threshold) - params.l1  # noise that lifts a sum of L1 to the threshold
    assert _dlap_tail(params.scale, needed) <= float(delta)


@pytest.mark.parametrize("epsilon, delta, l0", [("10", "1e-5", 20), ("1", "1e-6", 5), ("0.5", "1e-3", 1)])
def test_a_bucket_of_one_report_passes_tau_with_probability_at_most_delta_over_l0(epsilon, delta, l0):
    params = _params("key-discovery", epsilon, delta, l0=l0)
    bound = math.floor(params.tau)
    needed = bound + 1 - params.l1  # the released noised sum must exceed floor(tau)
    q = math.exp(-1 / float(params.scale))
    mass = (1 + q - 2 * q ** (bound + 1)) / (1 - q)  # sum of q^|z| over |z| <= bound
    tail = sum(q**z for z in range(needed, bound + 1)) / mass
    assert tail <= float(delta) / l0


def test_release_rules_at_their_boundaries():
    domain = _params("domain")
    assert domain.released(np.array([-10**9, 10**12]), np.array([True, False])).tolist() == [True, False]
    discovery = _params("key-discovery")
    floor_tau = math.floor(discovery.tau)
    assert discovery.released(np.array([floor_tau + 1, floor_tau]), np.array([False, True])).tolist() == [True, False]
    threshold = _params("threshold")
    ceil_t = math.ceil(threshold.public_threshold)
    noised, in_domain = np.array([ceil_t, ceil_t - 1, -5]), np.array([False, False, True])
    assert threshold.released(noised, in_domain).tolist() == [True, False, True]


def _sums(pairs: dict[int, int]) -> KeyedSums:
    high, low = keys_of(pairs)
    return KeyedSums.of(high, low, np.fromiter(pairs.values(), np.uint64))


def test_sums_per_key_merge_repeated_128_bit_keys():
    buckets = [2**127 + 5, 3, 2**127 + 5, 2**64, 3, 2**64 + 1]
    high, low = keys_of(buckets)
    sums = KeyedSums.of(high, low, np.array([1, 2, 3, 4, 5, 6], np.uint64))
    assert sums.buckets() == [3, 2**64, 2**64 + 1, 2**127 + 5] and sums.sums.tolist() == [7, 4, 6, 4]
    assert KeyedSums.of(*keys_of([]), np.empty(0, np.uint64)).buckets() == []


def test_candidates_per_mode():
    sums, domain = _sums({3: 10, 5: 7}), keys_of([1, 3, 3])
    for mode, expected in (("domain", [1, 3]), ("key-discovery", [3, 5]), ("threshold", [1, 3, 5])):
        keyed, in_domain, in_reports = candidates(_params(mode), sums, domain)
        assert keyed.buckets() == expected
    keyed, in_domain, in_reports = candidates(_params("threshold"), sums, domain)
    assert keyed.sums.tolist() == [0, 10, 7]
    assert in_domain.tolist() == [True, True, False] and in_reports.tolist() == [False, True, True]


def test_aggregate_without_noise_annotates_and_releases_per_mode():
    sums, domain = _sums({3: 10, 5: 200_000}), keys_of([1, 3])
    out = aggregate(_params("threshold"), sums, domain, None)
    rows = dict(zip(out.buckets(), zip(out.unnoised.tolist(), out.noise.tolist(), out.in_domain.tolist(),
                                        out.in_reports.tolist(), out.released.tolist(), strict=True), strict=True))
    assert rows == {1: (0, 0, True, False, True), 3: (10, 0, True, True, True),
                    5: (200_000, 0, False, True, True)}  # 200,000 >= T = 140,987.1
    discovered = aggregate(_params("key-discovery"), sums, domain, None)
    assert dict(zip(discovered.buckets(), discovered.released.tolist(), strict=True)) == {3: False, 5: True}  # tau = 160,619.9
    domain_only = aggregate(_params("domain"), sums, domain, None)
    assert domain_only.buckets() == [1, 3] and domain_only.metric.tolist() == [0, 10]


def test_aggregate_draws_one_noise_per_candidate():
    out = aggregate(_params("threshold", epsilon="1"), _sums({3: 10, 5: 7}), keys_of([1]), SeededSource(2))
    assert out.noise.shape == (3,) and out.noise.dtype == np.int64 and np.any(out.noise != 0)
    assert (out.metric == out.unnoised + out.noise).all()


def test_noise_draws_are_integers_of_the_right_spread():
    params = _params("key-discovery", epsilon="1", delta="1e-6", l1=100)
    draws = params.noise(SeededSource(5), 20_000)
    assert draws.dtype == np.int64 and np.abs(draws).max() <= math.floor(params.tau)
    # DLap(scale 100): standard deviation about 141; the sample mean of 20,000 draws has sd about 1.
    # |mean| > 7 has probability below 1e-11 (normal tail at 7 sd; the tail is sub-exponential but 20,000 draws
    # make the normal approximation tight far beyond 1e-6).
    assert abs(draws.mean()) < 7
    assert 120 < draws.std() < 162


def test_budget_key_is_the_sha256_of_the_shared_id_fields():
    text = shared_info_json(api="attribution-reporting", report_id=RID, reporting_origin="https://adtech.test",
                            scheduled_report_time=1_700_003_599, attribution_destination="https://shop.test",
                            source_registration_time=1_699_920_000)
    info = parse_shared_info(text)
    fields = shared_id_fields(report_identity(info))
    assert fields == ("attribution-reporting", "1.0", "https://adtech.test", "https://shop.test", "1699920000")
    joined = "attribution-reporting-1.0-https://adtech.test-https://shop.test-1699920000-0"
    assert budget_key(fields, "1.0", 0) == hashlib.sha256(joined.encode()).hexdigest()
    assert budget_key(fields, "0.1", 0) == hashlib.sha256(joined[:-2].encode()).hexdigest()  # no id before 1.0
    assert budget_key(fields, "0.1", 3) == hashlib.sha256(joined[:-1].encode() + b"3").hexdigest()
    group = report_unit_group(info)
    assert group == (report_identity(info), 1_700_003_599 // 3600)
    units = budget_units({group}, [0, 7])
    assert units == {(budget_key(fields, "1.0", 0), 472_223), (budget_key(fields, "1.0", 7), 472_223)}


def test_private_aggregation_budget_key_has_no_destination():
    text = shared_info_json(api="shared-storage", report_id=RID, reporting_origin="https://adtech.test",
                            scheduled_report_time=1_700_000_000)
    fields = shared_id_fields(report_identity(parse_shared_info(text)))
    assert fields == ("shared-storage", "1.0", "https://adtech.test")
    assert budget_key(fields, "1.0", 0) == hashlib.sha256(b"shared-storage-1.0-https://adtech.test-0").hexdigest()
