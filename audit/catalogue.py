"""Every audit case ``pm-beam audit`` runs: each mechanism the project prints a guarantee for, at the settings
the pipelines use by default and at a few other epsilons (for the figure of claimed against audited epsilon)."""
from __future__ import annotations

from fractions import Fraction

from audit.case import AuditCase
from audit.cases.aggregation import make_key_discovery_case, make_noisy_sum_case, make_threshold_case
from audit.cases.attribution_api import SETTINGS as ATTRIBUTION_FILTERS
from audit.cases.attribution_api import make_attribution_case
from audit.cases.attribution_reporting import make_named_budget_case, make_scopes_case
from audit.cases.budgeting import make_filter_case
from audit.cases.event_level import make_randomized_response_case
from audit.cases.kanon import make_instance_case, make_stream_case, make_tlap_case
from audit.cases.summary_clients import make_ara_case, make_paa_case
from transforms.kanon.mechanisms.accounting import DrawParameters

KEY_DISCOVERY_DELTA = Fraction(1, 10**5)


def all_cases() -> list[AuditCase]:
    """The cases in the order of the report: k-anonymity, Aggregation Service, summary reports end to end,
    event-level, on-device budgeting, the W3C Attribution API's filters, Attribution Reporting's named budgets and
    attribution scopes."""
    draws = [DrawParameters(Fraction(epsilon), Fraction(1, 10**7)) for epsilon in ("1/4", "3/4", "2")]
    return [
        *(make_tlap_case(draw) for draw in draws),
        make_instance_case(),
        make_stream_case(),
        *(make_noisy_sum_case(Fraction(epsilon)) for epsilon in (1, 4, 10)),
        *(make_key_discovery_case(Fraction(epsilon), KEY_DISCOVERY_DELTA) for epsilon in (1, 10)),
        make_threshold_case(Fraction(1), KEY_DISCOVERY_DELTA),
        *(make_ara_case(Fraction(epsilon)) for epsilon in (1, 10)),
        *(make_paa_case(Fraction(epsilon)) for epsilon in (1, 10)),
        *(make_randomized_response_case(source_type, Fraction(epsilon))
          for source_type in ("navigation", "event") for epsilon in (1, 14)),
        *(make_filter_case(policy) for policy in ("cookie_monster", "ara_like", "ipa_like")),
        *(make_attribution_case(filter_name) for filter_name in ATTRIBUTION_FILTERS),
        *(make_named_budget_case(Fraction(epsilon)) for epsilon in (1, 10)),
        *(make_scopes_case(Fraction(epsilon)) for epsilon in (1, 14)),
    ]
