"""How reliably the audit catches each broken variant: ``python -m tests.audit.power [RUNS]`` repeats the audit
of every test of ``test_broken_variants.py`` (same case, same sample size) and prints the mean and standard
deviation of the epsilon lower bound and how many standard deviations the claim lies below the mean."""
from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from unittest import mock

from audit.auditor import run_audit
from audit.case import AuditCase
from tests.audit import test_broken_variants as tests
from transforms.kanon.mechanisms import batch_replay


def _captured(test: Callable[..., None], *args: object) -> tuple[AuditCase, int]:
    """The case and sample size ``test`` audits (its ``_caught`` call, intercepted)."""
    seen: list[tuple[AuditCase, int]] = []
    with mock.patch.object(tests, "_caught", lambda case, samples: seen.append((case, samples))):
        test(*args)
    return seen[0]


def _monkeypatch() -> object:
    class Patch:  # the one use of pytest's monkeypatch in the tests, applied for the whole run
        @staticmethod
        def setattr(target: object, name: str, value: object) -> None:
            setattr(target, name, value)
    return Patch()


def main(runs: int) -> None:
    window_counts = batch_replay.window_counts
    audits = [
        ("tlap", _captured(tests.test_tlap_at_twice_the_epsilon)),
        ("above_threshold", _captured(tests.test_above_threshold_redrawing_its_threshold_noise)),
        ("noisy_sum", _captured(tests.test_noisy_sums_at_half_the_discrete_laplace_scale)),
        ("key_discovery", _captured(tests.test_key_discovery_without_the_tail_term_of_its_threshold)),
        ("ara", _captured(tests.test_a_client_checking_its_contributions_against_twice_l1, tests.make_ara_case)),
        ("paa", _captured(tests.test_a_client_checking_its_contributions_against_twice_l1, tests.make_paa_case)),
        ("randomized_response", _captured(tests.test_randomized_response_counting_one_state_too_few)),
        *((f"filter[{policy}]", _captured(tests.test_a_filter_that_lets_the_last_charge_overdraw, policy))
          for policy in ("cookie_monster", "ara_like", "ipa_like")),
        ("attribution_api[global]", _captured(tests.test_an_attribution_api_backend_deducting_the_global_budget_unchecked)),
        ("attribution_api[quota]",
         _captured(tests.test_an_attribution_api_impression_site_quota_that_lets_the_last_charge_overdraw)),
        ("attribution_reporting[named]",
         _captured(tests.test_an_attribution_reporting_client_charging_a_named_budget_in_place_of_l1)),
        ("attribution_reporting[scopes]", _captured(
            tests.test_an_attribution_reporting_storage_attributing_a_trigger_to_every_source_its_scopes_match)),
    ]
    stream = _captured(tests.test_the_stream_counting_joins_instead_of_distinct_users, _monkeypatch())
    for name, (case, samples) in [*audits, ("stream", stream)]:
        if name == "stream":
            batch_replay.window_counts = tests.broken.join_counts
        bounds = [run_audit(case, samples, tests.CONFIDENCE).bound.lower for _ in range(runs)]
        batch_replay.window_counts = window_counts
        mean, sd = statistics.mean(bounds), statistics.stdev(bounds)
        print(f"{name:28} claim {case.claimed_epsilon:<5g} bound mean {mean:.3f} sd {sd:.3f} min {min(bounds):.3f} "
              f"claim at {(mean - case.claimed_epsilon) / sd:.1f} sd below ({runs} runs of {samples:,} samples)",
              flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
