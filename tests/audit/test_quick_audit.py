"""The quick audit of every mechanism (the catalogue's quick sample sizes): no bound above its claim.

Each bound holds with confidence 1 - 1e-6 (``CONFIDENCE``): for a mechanism that keeps its claim, the bound
exceeds the claimed epsilon with probability at most 1e-6, so a case fails falsely with probability at most
1e-6, and this file (one test per case and source) with probability at most 1e-6 times twice the number of cases.
Each case runs twice: with the OS CSPRNG, and with noise derived from a noise key as the pipelines draw it
(``transforms.core.noise_key``: keyed draws are a function of their key, so the audit's runs must each have their
own, as each job has its own nonce). The runs are not reproducible; the statement holds for every run.
"""
from __future__ import annotations

import secrets

import pytest

from audit.auditor import run_audit
from audit.case import AuditCase
from audit.catalogue import all_cases
from tests.support.keys import run_key
from transforms.core.mechanisms.noise import RandomSource, SecureSource

CONFIDENCE = 1 - 1e-6
CASES = all_cases()


def test_the_catalogue_covers_every_mechanism_the_issue_names() -> None:
    subjects = {case.name.split("@")[0] for case in CASES}
    assert subjects == {
        "kanon.tlap", "kanon.above_threshold", "kanon.stream", "aggregation.noisy_sum", "aggregation.key_discovery",
        "aggregation.threshold", "summary_reports.ara", "summary_reports.paa", "event_level.navigation",
        "event_level.event", "budgeting.cookie_monster", "budgeting.ara_like", "budgeting.ipa_like",
        "attribution_api.per_site", "attribution_api.global", "attribution_api.impression_site_quota",
        "attribution_api.conversion_site_quota", "attribution_reporting.named_budgets", "attribution_reporting.scopes",
    }
    assert len({case.name for case in CASES}) == len(CASES)


def _source(kind: str, case: AuditCase) -> RandomSource:
    if kind == "os":
        return SecureSource()
    return run_key().source("audit", case.name, salt=secrets.token_bytes(16))


@pytest.mark.parametrize("kind", ["os", "derived"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_mechanism_keeps_its_claim(case: AuditCase, kind: str) -> None:
    result = run_audit(case, case.quick_samples, CONFIDENCE, _source(kind, case))
    assert result.samples == case.quick_samples and result.hits_given <= result.samples
    assert result.bound.lower <= case.claimed_epsilon, result.to_json()
    assert result.consistent
