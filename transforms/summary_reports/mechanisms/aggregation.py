"""The Aggregation Service's mathematics: budget units, noise and release rules (Ghazi et al. Alg. 1 and Alg. 6).

Alg. 1 (AggregationService) takes reports (r_i, k_i, v_i), adds discrete Laplace noise DLap(eps / L1) (pmf
proportional to e^{-(eps / L1) |x|}, i.e. scale L1 / eps) to the sum of every key, and releases:

* ``domain`` (without key discovery, blue in Alg. 1): every key of the querier's list L, noised, 0 when no
  report holds it. eps-DP for reports of L1 norm at most L1 (the discrete Laplace mechanism; end to end with
  the ledger, Thm. 4.3 and Cor. 4.4 with delta = 0).
* ``key-discovery`` (green in Alg. 1; Alg. 6 phase 3): L is the set of distinct keys among the reports, the
  noise is DLap truncated to [-tau, tau] and only keys whose noised sum exceeds
  tau = L1 (1 + ln(L0 / delta) / eps) are released. (eps, delta)-DP per query: a report changes at most L0 keys
  by at most L1 in total, and a key only one report holds has sum <= L1, so it passes tau with probability
  <= delta / L0 (Thm. 4.3's per-step (eps_{x,t}, delta_{x,t}) = (eps/L1 sum v, delta/L0 |Y|)).
* ``threshold`` (the shipped service's thresholding): keys of L always, keys found only in the reports when
  their noised sum reaches T = (L1 / eps)(eps + ln(1 / delta)) = L1 + (L1 / eps) ln(1 / delta). A key only one
  report holds (sum <= L1) reaches T with probability P[Z >= (L1 / eps) ln(1/delta)] <= delta for
  Z ~ DLap(eps / L1); a report makes at most L0 such keys, so a query is (eps, L0 delta)-DP.

Budget units (Alg. 1 "B_eps(r_i) + eps > eps_*"; footnote 2: the service tracks a shared report id instead of
each report): the budget key is the SHA-256 hex digest of the shared-ID fields joined by "-", as the public
service computes it, and a unit is (budget key, scheduled report time truncated to the hour).

Tau and T are real numbers computed in binary64 from exact inputs; sums and noise are integers, so the release
rules compare with floor(tau) (w > tau iff w > floor(tau)) and ceil(T) (w >= T iff w >= ceil(T)). No Beam
import here.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from schemas.limits import CONTRIBUTION_BUDGET, MAX_REPORT_CONTRIBUTIONS
from schemas.rows import ATTRIBUTION_APIS, SharedInfo, version_at_least
from schemas.time_units import SECONDS_PER_HOUR
from transforms.core.mechanisms.budget_units import as_fraction
from transforms.core.mechanisms.noise import DiscreteLaplace, RandomSource, TruncatedDiscreteLaplace

MODES = ("domain", "key-discovery", "threshold")
MAX_EPSILON = Fraction(64)
DEFAULT_L1 = CONTRIBUTION_BUDGET  # Lambda_1 = 2^16, Ghazi et al. Sec. 2.1
DEFAULT_L0 = MAX_REPORT_CONTRIBUTIONS  # contributions per report in the ARA payload


@dataclass(frozen=True)
class AggregationParams:
    """One aggregation request: the release mode and the privacy parameters of Alg. 1."""

    mode: str
    epsilon: Fraction
    delta: Fraction
    l1: int = DEFAULT_L1
    l0: int = DEFAULT_L0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", as_fraction(self.epsilon))
        object.__setattr__(self, "delta", as_fraction(self.delta))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not 0 < self.epsilon <= MAX_EPSILON:
            raise ValueError(f"epsilon must be in (0, 64], got {float(self.epsilon):g}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {float(self.delta):g}")
        if self.l1 < 1 or self.l0 < 1:
            raise ValueError(f"L1 and L0 must be positive integers, got L1 = {self.l1}, L0 = {self.l0}")

    @property
    def scale(self) -> Fraction:
        """The discrete Laplace scale L1 / eps (DLap(eps / L1) of Alg. 1)."""
        return Fraction(self.l1) / self.epsilon

    @property
    def tau(self) -> float:
        """Key discovery's threshold and truncation, L1 (1 + ln(L0 / delta) / eps) (Alg. 1, Alg. 6 phase 3)."""
        return self.l1 * (1 + math.log(self.l0 / self.delta) / float(self.epsilon))

    @property
    def public_threshold(self) -> float:
        """The shipped service's threshold for keys outside the domain, (L1 / eps)(eps + ln(1 / delta))."""
        return self.l1 / float(self.epsilon) * (float(self.epsilon) + math.log(1 / self.delta))

    def guarantee(self, noise: bool = True) -> str:
        """The differential-privacy guarantee of one release with these parameters, in words (Thm. 4.3)."""
        if not noise:
            return "none: exact sums (debug run without noise)"
        eps = float(self.epsilon)
        if self.mode == "domain":
            return f"({eps:g}, 0)-DP per report of L1 norm <= {self.l1} (discrete Laplace, Alg. 1 without key discovery)"
        if self.mode == "key-discovery":
            return (f"({eps:g}, {float(self.delta):g})-DP per report with <= {self.l0} contributions of L1 norm <= "
                    f"{self.l1} (Alg. 1 with key discovery, tau = {self.tau:.1f}; Thm. 4.3)")
        return (f"({eps:g}, {self.l0} x {float(self.delta):g})-DP per report with <= {self.l0} contributions of L1 "
                f"norm <= {self.l1} (thresholding, T = {self.public_threshold:.1f})")

    def noise(self, source: RandomSource, size: int) -> np.ndarray:
        """``size`` int64 noise draws: DLap truncated to [-floor(tau), floor(tau)] for key discovery, else DLap."""
        if self.mode == "key-discovery":
            return TruncatedDiscreteLaplace(self.scale, math.floor(self.tau)).sample_array(source, size)
        return DiscreteLaplace(self.scale).sample_array(source, size)

    def released(self, noised: np.ndarray, in_domain: np.ndarray) -> np.ndarray:
        """The release rule of the mode, per key: its noised sum and whether the domain holds it."""
        if self.mode == "domain":
            return np.asarray(in_domain, dtype=bool)
        if self.mode == "key-discovery":
            return np.asarray(noised) > math.floor(self.tau)
        return np.asarray(in_domain, dtype=bool) | (np.asarray(noised) >= math.ceil(self.public_threshold))


class KeyedSums(NamedTuple):
    """Alg. 1's w_k = sum of v_j over the contributions with k_j = k, one row per distinct key k, keys in
    increasing order. A 128-bit key is ``(high << 64) | low``; sums are exact (uint64)."""

    high: np.ndarray
    low: np.ndarray
    sums: np.ndarray

    @classmethod
    def of(cls, high: np.ndarray, low: np.ndarray, values: np.ndarray) -> KeyedSums:
        """The sums of ``values`` per key (keys may repeat, so sums of partial sums merge)."""
        high, low, values = (np.asarray(column, dtype=np.uint64) for column in (high, low, values))
        if not high.size:
            return cls(high, low, values)
        order = np.lexsort((low, high))
        high, low, values = high[order], low[order], values[order]
        starts = _group_starts(high, low)
        return cls(high[starts], low[starts], np.add.reduceat(values, starts))

    def buckets(self) -> list[int]:
        """The keys as Python ints."""
        return [(high << 64) | low for high, low in zip(self.high.tolist(), self.low.tolist(), strict=True)]


def _group_starts(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """Where each run of equal keys starts in sorted (high, low) arrays."""
    return np.flatnonzero(np.r_[True, (high[1:] != high[:-1]) | (low[1:] != low[:-1])])


def keys_of(buckets: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """128-bit keys as (high, low) uint64 arrays."""
    buckets = list(buckets)
    return (np.fromiter((bucket >> 64 for bucket in buckets), np.uint64, len(buckets)),
            np.fromiter((bucket & _LOW_MASK for bucket in buckets), np.uint64, len(buckets)))


_LOW_MASK = 2**64 - 1


class Outcomes(NamedTuple):
    """Every candidate key of Alg. 1 with its true sum (SENSITIVE), the noise drawn and the release decision."""

    high: np.ndarray
    low: np.ndarray
    unnoised: np.ndarray  # int64
    noise: np.ndarray  # int64
    in_domain: np.ndarray  # bool
    in_reports: np.ndarray  # bool
    released: np.ndarray  # bool

    @property
    def metric(self) -> np.ndarray:
        return self.unnoised + self.noise

    def buckets(self) -> list[int]:
        return KeyedSums(self.high, self.low, self.unnoised).buckets()


def candidates(params: AggregationParams, sums: KeyedSums, domain: tuple[np.ndarray, np.ndarray]) -> tuple:
    """The keys that get noise (Alg. 1's L), with their sums and whether the domain and the reports hold them:
    the domain for ``domain``; the distinct keys of the reports for ``key-discovery``; both for ``threshold``.
    Returns ``(KeyedSums, in_domain, in_reports)``, keys in increasing order."""
    domain_high, domain_low = (np.asarray(column, dtype=np.uint64) for column in domain)
    if params.mode == "key-discovery":
        domain_high, domain_low = domain_high[:0], domain_low[:0]
    high = np.concatenate([sums.high, domain_high])
    low = np.concatenate([sums.low, domain_low])
    from_reports = np.r_[np.ones(sums.high.size, bool), np.zeros(domain_high.size, bool)]
    values = np.concatenate([sums.sums, np.zeros(domain_high.size, np.uint64)])
    order = np.lexsort((low, high))
    high, low, values, from_reports = high[order], low[order], values[order], from_reports[order]
    if not high.size:
        return KeyedSums(high, low, values), from_reports, from_reports
    starts = _group_starts(high, low)
    in_reports = np.maximum.reduceat(from_reports, starts)
    in_domain = ~np.minimum.reduceat(from_reports, starts)
    keyed = KeyedSums(high[starts], low[starts], np.add.reduceat(values, starts))
    if params.mode == "domain":
        return KeyedSums(*(column[in_domain] for column in keyed)), in_domain[in_domain], in_reports[in_domain]
    return keyed, in_domain, in_reports


def aggregate(
    params: AggregationParams,
    sums: KeyedSums,
    domain: tuple[np.ndarray, np.ndarray],
    source: RandomSource | None,
) -> Outcomes:
    """Alg. 1's noisy summation for one shard of keys: every candidate with its noise and release decision.

    ``sums`` holds the (deduplicated) sums per key; ``domain`` the querier's keys as (high, low) arrays;
    ``source`` None means no noise (debug runs only: the output is then not private).
    """
    keyed, in_domain, in_reports = candidates(params, sums, domain)
    if keyed.sums.size and int(keyed.sums.max()) >= 2**63:
        raise ValueError("a bucket's sum exceeds 2^63 - 1, the range of a summary report's metric")
    unnoised = keyed.sums.astype(np.int64)
    noise = np.zeros(unnoised.size, np.int64)
    if source is not None and unnoised.size:
        noise = np.asarray(params.noise(source, unnoised.size), dtype=np.int64)
    return Outcomes(keyed.high, keyed.low, unnoised, noise, in_domain, in_reports, params.released(unnoised + noise, in_domain))


# ------------------------------------------------------------------------------------------------
# Budget units (Alg. 1's B_eps and B_delta, kept per shared report id)
# ------------------------------------------------------------------------------------------------


def report_identity(info: SharedInfo) -> tuple:
    """What decides a report's budget keys (the filtering ids are the job's): api, version, reporting origin,
    destination and source registration time as they appear in shared_info. A job has few distinct values, so
    it hashes each once (``budget_units``)."""
    return info.api, info.version, info.reporting_origin, info.attribution_destination, info.source_registration_time


def shared_id_fields(identity: tuple) -> tuple[str, ...]:
    """The shared-ID fields of a report identity, in the order the public service joins them: api, version,
    reporting origin, and for Attribution Reporting the destination and (when present) the source registration
    time."""
    api, version, origin, destination, registration = identity
    if api in ATTRIBUTION_APIS:
        return (api, version, origin, destination) + ((registration,) if registration is not None else ())
    return (api, version, origin)


def budget_key(fields: tuple[str, ...], version: str, filtering_id: int) -> str:
    """SHA-256 hex of the shared-ID fields joined by "-", plus the filtering id for version >= 1.0 or a
    non-zero filtering id."""
    if filtering_id != 0 or version_at_least(version, 1, 0):
        fields = fields + (str(filtering_id),)
    return hashlib.sha256("-".join(fields).encode("utf-8")).hexdigest()


def report_hour(info: SharedInfo) -> int:
    """The hour of the report's scheduled report time, the second half of its budget units."""
    return info.scheduled_report_time // SECONDS_PER_HOUR


def report_unit_group(info: SharedInfo) -> tuple[tuple, int]:
    """A report's (identity, hour): with the job's filtering ids, its budget units."""
    return report_identity(info), report_hour(info)


def budget_units(groups: Iterable[tuple], filtering_ids: Iterable[int]) -> set[tuple[str, int]]:
    """The units (budget key, hour) a job charges: one per (identity, hour) group and requested filtering id
    (every requested id is charged, whether or not a report holds a contribution with it)."""
    ids = sorted(set(filtering_ids))
    keys: dict[tuple, list[str]] = {}
    units: set[tuple[str, int]] = set()
    for identity, hour in groups:
        if identity not in keys:
            keys[identity] = [budget_key(shared_id_fields(identity), identity[1], fid) for fid in ids]
        units.update((key, hour) for key in keys[identity])
    return units
