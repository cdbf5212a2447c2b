"""Test statistics shared by the cases: the Neyman-Pearson statistic of a shift in Laplace-noised outputs.

For outputs y_i = x_i + Z_i with independent (discrete) Laplace Z_i of one scale, and neighbours whose true
outputs differ by s_i = x_i - x'_i on coordinate i (either sign: D above or below D' there), the log-likelihood
ratio of D against D' is a sum of terms increasing in clip(sign(s_i) (y_i - x'_i), 0, |s_i|) with the same slope,
so its threshold sets are those of S = sum_i clip(sign(s_i) (y_i - x'_i), 0, |s_i|): the most powerful events
(Neyman-Pearson lemma). {S = sum |s_i|} is the event "every coordinate at or beyond D's value, away from D'",
whose probability ratio is exactly e^(sum |s_i| / scale).
"""
from __future__ import annotations

import numpy as np


def shift_statistic(noisy: np.ndarray, lower: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """S per run: ``noisy`` is (runs, coordinates), ``lower`` the true outputs on D' and ``shift`` D's outputs
    minus them (of either sign; a coordinate with no shift adds nothing)."""
    noisy = np.asarray(noisy, dtype=np.float64).reshape(len(noisy), -1)
    shift = np.asarray(shift, dtype=np.float64)
    towards_d = np.sign(shift) * (noisy - np.asarray(lower, dtype=np.float64))
    return np.clip(towards_d, 0, np.abs(shift)).sum(axis=1)
