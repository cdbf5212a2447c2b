"""Audit cases of the W3C Attribution API's privacy filters (``api.bs``, "deduct privacy and safety budgets"; Big
Bird: Tholoniat et al., "Beyond Per-Querier Budgets", arXiv 2506.05290, Sec. 4): one device-epoch added or removed
under conversions, from one conversion site or two taking turns, that spend the filter under audit to its end.

A run is the browser's: ``Backend.save_impression`` for the device's impressions, then ``Backend.measure_conversion``
for each conversion, which returns its histogram (all zeros when refused: reports have a fixed shape). The
aggregation service adds discrete Laplace noise of the scale ``api.bs`` defines, 2 maxValue / epsilon, to every
bucket of every histogram; each histogram is its own query (other devices' reports would only add constants). The
release audited is every conversion's noisy histogram, of every conversion site together, reduced to the
Neyman-Pearson statistic of ``audit.cases.statistics``: a bound on it bounds what all queriers learn together,
which is what the global budget claims (Big Bird's global device-epoch guarantee).

The neighbours sit at the worst case of the deductions (value = maxValue = 1, so each deduction equals the loss it
pays for):

* single-epoch lookback (``per_site``): the device-epoch holds one impression (D) or nothing (D'); a histogram is
  the value on D and zeros on D', an L1 difference of the value, which is what the per-site budget pays (the
  histogram's L1 norm over the scale);
* lookback over several epochs (the others): both sides hold an impression A in an earlier epoch, and the audited
  epoch one more recent impression X (D) or nothing (D'); last-touch attribution credits X on D and A on D', so
  the histograms differ by twice the value in L1, which is what every filter pays across epochs (2 value over the
  scale). A's epoch has the same budgets and pays the same charges on both sides, so it refuses exactly when the
  audited epoch does on D.

The claim is what the filters prove for a device-epoch whose impressions all come from one impression site: a
conversion that uses it pays at least its loss to the conversion site's per-site budget B (and conversion-site
quota C), to the epoch's global budget G and to the impression site's quota Q, so the loss over every site together
is at most min(sites x min(B, C), G, Q) (``FilterSetting.claimed_epsilon``). Each case makes a different filter the
smallest, at a multiple of the deduction, so that filter is spent exactly and the claim is tight.

The backend is deterministic given its delegate (the epoch start fixed; credit [1] draws no credit fraction), so one
run of it per call gives every run's histograms, and every run draws fresh noise.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from audit.case import D_PRIME, AuditCase, D
from audit.cases.statistics import shift_statistic
from transforms.attribution_api.mechanisms.backend import (
    MICRO,
    SECONDS_PER_DAY,
    SECONDS_PER_HOUR,
    ApiLimits,
    Backend,
    Delegate,
)
from transforms.attribution_api.sites import registrable_domain
from transforms.core.mechanisms.noise import DiscreteLaplace, RandomSource

SERVICE = "https://agg-service.example"
IMPRESSION_SITE = "publisher.example"
MAX_VALUE = 1  # the conversions' value and maxValue: every deduction is the loss it pays for
FIRST_CONVERSION = Fraction(400 * SECONDS_PER_DAY)  # a whole hour after 1970
EPOCH_START_FRACTION = Fraction(1, 2)  # the epoch starts 3.5 days before the first conversion: epoch 0 holds it
EARLIER_IMPRESSION_DAYS = 20  # A, in epoch -3 (the lookback of 30 days reaches epoch -4)

BackendFactory = Callable[[ApiLimits, Delegate], Backend]


@dataclass(frozen=True)
class FilterSetting:
    """The budgets of one case in epsilon (``ApiLimits`` holds micro-epsilon), how many conversion sites take turns,
    and whether the conversions' lookback lies in one epoch."""

    per_site: Fraction
    global_budget: Fraction
    impression_site_quota: Fraction
    conversion_site_quota: Fraction | None
    sites: int
    single_epoch: bool

    def claimed_epsilon(self) -> Fraction:
        """min(sites x min(B, C), G, Q): every conversion using the device-epoch pays at least its loss to each."""
        per_site = self.per_site if self.conversion_site_quota is None else min(self.per_site,
                                                                                self.conversion_site_quota)
        return min(self.sites * per_site, self.global_budget, self.impression_site_quota)

    def limits(self) -> ApiLimits:
        """The implementation-defined values (``api.bs``): these budgets, the e2e suite's limits otherwise."""
        def micro(epsilon: Fraction) -> int:
            return math.floor(epsilon * MICRO)

        return ApiLimits(
            aggregation_services={SERVICE: "dap-18-histogram"}, privacy_budget_epoch_days=7,
            per_site_privacy_budget=micro(self.per_site), global_privacy_budget_per_epoch=micro(self.global_budget),
            impression_site_quota_per_epoch=micro(self.impression_site_quota),
            max_conversion_sites_per_impression=3, max_conversion_callers_per_impression=3,
            max_impression_sites_for_conversion=3, max_impression_callers_for_conversion=3, max_credit_size=10,
            max_match_values=10, max_lookback_days=30, max_histogram_size=5,
            conversion_site_quota_per_epoch=None if self.conversion_site_quota is None
            else micro(self.conversion_site_quota))


# the filter each case spends (the smallest term of the claim), and the budgets that make it so
SETTINGS = {
    "per_site": FilterSetting(Fraction(1), Fraction(8), Fraction(4), None, sites=1, single_epoch=True),
    "global": FilterSetting(Fraction(1), Fraction(3, 2), Fraction(4), None, sites=2, single_epoch=False),
    "impression_site_quota": FilterSetting(Fraction(1), Fraction(8), Fraction(1), None, sites=2, single_epoch=False),
    "conversion_site_quota": FilterSetting(Fraction(1), Fraction(8), Fraction(4), Fraction(1, 2), sites=2,
                                           single_epoch=False),
}
TIGHT = {
    "per_site": "tight: the per-site budget pays each histogram's L1 norm over the scale, exactly the loss of an "
                "epoch holding the only impression, and its conversions spend it to the last unit",
    "global": "tight: across epochs every filter pays 2 value over the scale, exactly the loss of moving the last "
              "touch; the two sites' conversions spend G < 2B to the last unit, though one site has half its "
              "budget left",
    "impression_site_quota": "tight: the quota pays what the global budget pays; the two sites' conversions spend "
                             "it to the last unit, with each site's budget half left",
    "conversion_site_quota": "tight: each site's quota (half its per-site budget) is spent to the last unit, and "
                             "the site's next conversions are refused",
}


def _site(index: int) -> str:
    return f"shop-{index + 1}.example"


def conversion_sites(setting: FilterSetting, deduction: Fraction) -> list[str]:
    """The conversion sites in the order they convert: taking turns, each enough times to spend its own per-site
    budget and be refused once more."""
    rounds = math.floor(setting.per_site / deduction) + 1
    return [_site(index) for _ in range(rounds) for index in range(setting.sites)]


def query_epsilon(setting: FilterSetting, deduction: Fraction) -> Fraction:
    """The conversions' epsilon whose per-site deduction is ``deduction`` at value = maxValue: the L1 norm (the
    value) over the scale in one epoch, twice the value over it across epochs."""
    return deduction * (2 if setting.single_epoch else 1)


def histograms(setting: FilterSetting, side: str, deduction: Fraction, backend_of: BackendFactory = Backend
               ) -> np.ndarray:
    """What ``measure_conversion`` returns on ``side`` (one row per conversion): the device's impressions saved,
    then the conversions of ``conversion_sites``, an hour apart, through a backend ``backend_of`` makes."""
    clock = {"now": FIRST_CONVERSION}
    backend = backend_of(setting.limits(), Delegate(now=lambda: clock["now"],
                                                    epoch_start_fraction=lambda: EPOCH_START_FRACTION,
                                                    credit_fraction=lambda: Fraction(1, 2), site_of=registrable_domain))
    impressions = [] if setting.single_epoch else [FIRST_CONVERSION - EARLIER_IMPRESSION_DAYS * SECONDS_PER_DAY]
    if side == D:
        impressions.append(FIRST_CONVERSION - SECONDS_PER_HOUR)  # the audited epoch's, the most recent
    for bucket, saved_at in enumerate(impressions):
        clock["now"] = saved_at
        backend.save_impression(IMPRESSION_SITE, None, {"histogramIndex": bucket})
    options = {"aggregationService": SERVICE, "epsilon": float(query_epsilon(setting, deduction)),
               "histogramSize": 1 if setting.single_epoch else 2, "lookbackDays": 1 if setting.single_epoch else 30,
               "value": MAX_VALUE, "maxValue": MAX_VALUE}
    rows = []
    for index, site in enumerate(conversion_sites(setting, deduction)):
        clock["now"] = FIRST_CONVERSION + index * SECONDS_PER_HOUR
        rows.append(backend.measure_conversion(site, None, options))
    return np.array(rows, dtype=np.int64)


def make_attribution_case(filter_name: str, deduction: Fraction = Fraction(1, 2),
                          backend_of: BackendFactory = Backend) -> AuditCase:
    """The device-epoch audit of the filter ``filter_name`` (a key of ``SETTINGS``), every conversion deducting
    ``deduction`` from it; ``backend_of`` makes the browser's backend, which a test may replace by a broken one."""
    setting = SETTINGS[filter_name]
    epsilon = query_epsilon(setting, deduction)
    if Fraction(str(float(epsilon))) != epsilon:
        raise ValueError(f"the API takes epsilon as a double: {epsilon} must be a decimal one")
    noise = DiscreteLaplace(Fraction(2 * MAX_VALUE) / epsilon)  # api.bs: scale 2 maxValue / epsilon

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        on_d, on_d_prime = (histograms(setting, neighbour, deduction, backend_of).ravel() for neighbour in (D, D_PRIME))
        true = on_d if side == D else on_d_prime
        noisy = true + noise.sample_array(source, n * true.size).reshape(n, true.size)
        return shift_statistic(noisy, on_d_prime, on_d - on_d_prime)

    sites = conversion_sites(setting, deduction)
    conversion_quota = ("" if setting.conversion_site_quota is None
                        else f", conversion-site quota C = {float(setting.conversion_site_quota):g}")
    earlier = ("" if setting.single_epoch
               else "beside an impression of the same site in an earlier epoch (last touch moves between them), ")
    return AuditCase(
        name=f"attribution_api.{filter_name}@eps_q={float(epsilon):g}",
        mechanism=f"W3C Attribution API: {filter_name.replace('_', '-')} filter",
        neighbours=f"one device-epoch with one impression, or empty, {earlier}under {len(sites)} conversions from "
                   f"{'one site' if setting.sites == 1 else f'{setting.sites} sites taking turns'} at eps = {float(epsilon):g} "
                   f"each (per-site B = {float(setting.per_site):g}, global G = {float(setting.global_budget):g}, "
                   f"impression-site quota Q = {float(setting.impression_site_quota):g}{conversion_quota})",
        statistic="the Neyman-Pearson statistic of every conversion's noisy histogram (audit.cases.statistics)",
        claimed_epsilon=float(setting.claimed_epsilon()), claimed_delta=0.0,
        basis="api.bs, deduct privacy and safety budgets; Cookie Monster Thm. 1 per site; Big Bird Sec. 4 globally "
              "(min(sites x min(B, C), G, Q))",
        sample=sample, samples=2_000_000, quick_samples=50_000, tight=TIGHT[filter_name],
    )
