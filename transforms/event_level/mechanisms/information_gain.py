"""ARA event-level reports: information gain and the configuration check (Ghazi et al. Sec. 2.2).

* **Information gain**: the capacity of the k-ary symmetric channel the mechanism is, with the limits
  used by ARA (11.5 bits for navigation sources, 6.5 bits for event sources); ``check_configuration``
  rejects a configuration above its limit or with |O| > 2**32 - 1.

No Beam import here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from transforms.event_level.mechanisms.config import (
    INFORMATION_GAIN_LIMITS,
    MAX_EPSILON,
    MAX_EPSILON_TOLERANCE,
    MAX_STATES,
    ConfigurationError,
    EventLevelConfig,
)
from transforms.event_level.mechanisms.outputs import count_outputs


def randomized_trigger_rate(k: int, epsilon: float) -> float:
    """k / (k - 1 + e^eps), rounded to 7 decimals: the probability that a source takes a random output
    (1 - Alg. 8's truthful probability), as carried by its reports."""
    if k < 1:
        raise ValueError(f"the number of states must be >= 1, got {k}")
    if epsilon < 0 or not math.isfinite(epsilon):
        raise ConfigurationError("epsilon_out_of_range", f"epsilon must be a finite number >= 0, got {epsilon}")
    # k / (k - 1 + e^eps) = k e^-eps / ((k - 1) e^-eps + 1): no overflow for large eps
    decay = math.exp(-epsilon)
    return round(k * decay / ((k - 1) * decay + 1), 7)


# --------------------------------------------------------------------------------------------
# Information gain
# --------------------------------------------------------------------------------------------


def _binary_entropy(p: float) -> float:
    if p <= 0 or p >= 1:
        return 0.0
    return -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def information_gain(k: int, epsilon: float) -> float:
    """Capacity in bits of the k-ary symmetric channel: log2 k - h(p) - p log2(k - 1), where
    p = randomized_trigger_rate(k, eps) (k - 1) / k is the probability that the output is not the truth
    and h the binary entropy. 0 for k = 1. Non-decreasing in eps (p decreases towards 0, and the
    capacity decreases in p on [0, (k - 1) / k]); not monotone in k: at eps = 14 it peaks near 15 bits
    around k = 10**5 and falls again (0.005 bits at k = 2**32 - 1), which is why ``check_configuration``
    also caps k. p uses the rounded rate, the value reports carry."""
    if k <= 1:
        return 0.0
    p = randomized_trigger_rate(k, epsilon) * (k - 1) / k
    return max(0.0, math.log2(k) - _binary_entropy(p) - p * math.log2(k - 1))


def information_gain_limit(config: EventLevelConfig) -> float:
    """11.5 bits for navigation sources, 6.5 bits for event sources."""
    return INFORMATION_GAIN_LIMITS[config.source_type]


@dataclass(frozen=True)
class ConfigurationCheck:
    """What ``check_configuration`` found for an accepted configuration."""

    states: int
    epsilon: float
    randomized_trigger_rate: float
    information_gain_bits: float
    limit_bits: float


def check_configuration(config: EventLevelConfig, epsilon: float, limit_bits: float | None = None) -> ConfigurationCheck:
    """Accept ``config`` at ``epsilon`` or raise ``ConfigurationError``: ``epsilon_out_of_range`` outside
    [0, 14], ``too_many_states`` when |O| > 2**32 - 1, ``information_gain_too_high`` above ``limit_bits``
    (default: the source type's limit, ``information_gain_limit``)."""
    if not (math.isfinite(epsilon) and 0 <= epsilon <= MAX_EPSILON):
        raise ConfigurationError("epsilon_out_of_range", f"epsilon must be in [0, 14], got {epsilon}")
    k = count_outputs(config)
    if k > MAX_STATES:
        raise ConfigurationError("too_many_states", f"|O| = {k} exceeds 2**32 - 1")
    limit = information_gain_limit(config) if limit_bits is None else limit_bits
    gain = information_gain(k, epsilon)
    if gain > limit:
        raise ConfigurationError("information_gain_too_high",
                                 f"{gain:.4f} bits at epsilon {epsilon} with {k} states exceeds {limit} bits")
    return ConfigurationCheck(k, epsilon, randomized_trigger_rate(k, epsilon), gain, limit)


def max_epsilon(config: EventLevelConfig, limit_bits: float | None = None, eps_max: float = MAX_EPSILON,
                tolerance: float = MAX_EPSILON_TOLERANCE) -> float:
    """The largest eps in [0, eps_max] whose information gain meets ``limit_bits``, to within ``tolerance``.

    Returns ``eps_max`` when it meets the limit. Otherwise bisection on [0, eps_max] keeping
    gain(lo) <= limit < gain(hi) (gain(0) = 0: the output is then uniform on O) until hi - lo <= tolerance,
    and returns lo: it meets the limit, and (the gain being non-decreasing in eps) every eps >= lo +
    tolerance exceeds it.
    """
    limit = information_gain_limit(config) if limit_bits is None else limit_bits
    if limit < 0:
        raise ValueError(f"the limit must be >= 0 bits, got {limit}")
    k = count_outputs(config)
    if information_gain(k, eps_max) <= limit:
        return eps_max
    lo, hi = 0.0, float(eps_max)
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        if information_gain(k, mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo
