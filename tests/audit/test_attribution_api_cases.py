"""The Attribution API's audit cases (``audit.cases.attribution_api``) are built as they say: each sound backend's
neighbours lose exactly the claimed epsilon (the filter under audit is spent to its last unit, so the audit can be
tight), the broken backends of ``broken.py`` lose more, and the signed shift statistic the cases need is exact.
Deterministic (the backend's histograms, no noise): no false-failure probability to state; the statistical tests
of these cases are in ``test_quick_audit.py`` and ``test_broken_variants.py``."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from audit.case import D_PRIME, D
from audit.cases.attribution_api import (
    MAX_VALUE,
    SETTINGS,
    BackendFactory,
    histograms,
    make_attribution_case,
    query_epsilon,
)
from audit.cases.statistics import shift_statistic
from tests.audit import broken
from transforms.attribution_api.mechanisms.backend import Backend


def _loss(filter_name: str, deduction: Fraction, backend_of: BackendFactory = Backend) -> Fraction:
    """The privacy loss of the neighbours' releases: the L1 distance of their histograms over the scale
    2 maxValue / epsilon."""
    setting = SETTINGS[filter_name]
    on_d, on_d_prime = (histograms(setting, side, deduction, backend_of) for side in (D, D_PRIME))
    return int(np.abs(on_d - on_d_prime).sum()) * query_epsilon(setting, deduction) / (2 * MAX_VALUE)


@pytest.mark.parametrize("filter_name", list(SETTINGS))
def test_the_neighbours_lose_exactly_the_claimed_epsilon(filter_name: str) -> None:
    case = make_attribution_case(filter_name)
    claim = SETTINGS[filter_name].claimed_epsilon()
    assert _loss(filter_name, Fraction(1, 2)) == claim and case.claimed_epsilon == float(claim)


def test_the_smallest_term_of_each_claim_is_the_filter_the_case_is_named_after() -> None:
    conversion_quota = SETTINGS["conversion_site_quota"].conversion_site_quota
    assert conversion_quota is not None
    spent = {name: setting.claimed_epsilon() for name, setting in SETTINGS.items()}
    assert spent == {"per_site": SETTINGS["per_site"].per_site, "global": SETTINGS["global"].global_budget,
                     "impression_site_quota": SETTINGS["impression_site_quota"].impression_site_quota,
                     "conversion_site_quota": 2 * conversion_quota}
    assert SETTINGS["global"].global_budget < 2 * SETTINGS["global"].per_site  # Big Bird: G below the sites' sum


@pytest.mark.parametrize(("filter_name", "deduction", "backend_of", "loss"), [
    ("global", Fraction(1), Backend, Fraction(1)),  # the second site's conversion would overdraw G = 1.5: refused
    ("global", Fraction(1), broken.UncheckedGlobalBudgetBackend, Fraction(2)),
    ("impression_site_quota", Fraction(9, 10), Backend, Fraction(9, 10)),
    ("impression_site_quota", Fraction(9, 10), broken.OverdrawingQuotaBackend, Fraction(9, 5)),
], ids=["global", "global-unchecked", "quota", "quota-overdrawing"])
def test_the_broken_backends_lose_more_than_the_claim_where_the_backend_keeps_it(
        filter_name: str, deduction: Fraction, backend_of: BackendFactory, loss: Fraction) -> None:
    assert _loss(filter_name, deduction, backend_of) == loss
    assert (loss > SETTINGS[filter_name].claimed_epsilon()) == (backend_of is not Backend)


def test_the_shift_statistic_measures_towards_d_on_every_coordinate_of_either_sign() -> None:
    lower, shift = np.array([1.0, 0.0, 5.0]), np.array([-1.0, 1.0, 0.0])  # D is [0, 1, 5], D' is [1, 0, 5]
    noisy = np.array([[0.0, 1.0, 9.0], [1.0, 0.0, -9.0], [-3.0, 0.5, 5.0], [2.0, 4.0, 5.0]])
    assert shift_statistic(noisy, lower, shift).tolist() == [2.0, 0.0, 1.5, 1.0]
