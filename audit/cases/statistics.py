"""Test statistics shared by the cases: the Neyman-Pearson statistic of a shift in Laplace-noised outputs.

For outputs y_i = x_i + Z_i with independent (discrete) Laplace Z_i of one scale, and neighbours whose true
outputs differ by s_i >= 0 on coordinate i (D above D'), the log-likelihood ratio of D against D' is a sum of
terms increasing in clip(y_i - x'_i, 0, s_i) with the same slope, so its threshold sets are those of
S = sum_i clip(y_i - x'_i, 0, s_i): the most powerful events (Neyman-Pearson lemma). {S = sum s_i} is the
event "every coordinate at or above D's value", whose probability ratio is exactly e^(sum s_i / scale).
"""
from __future__ import annotations

import numpy as np


def shift_statistic(noisy: np.ndarray, lower: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """S per run: ``noisy`` is (runs, coordinates), ``lower`` the true outputs on D' and ``shift`` D's excess."""
    noisy = np.asarray(noisy, dtype=np.float64).reshape(len(noisy), -1)
    return np.clip(noisy - np.asarray(lower, dtype=np.float64), 0, np.asarray(shift, dtype=np.float64)).sum(axis=1)
