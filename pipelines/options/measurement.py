"""The options of on-device budgeting (Cookie Monster, Cookie Monster paper) and their reading into a ``MeasurementConfig``.

Four groups, each mapping one to one onto the configuration: budgeting (policy, epochs, attribution windows,
the filters' capacity eps_G; defaults of Cookie Monster paper Sec. 8.1), the Attribution API's global budget,
quotas, caps and batched scheduling (Big Bird), queries (batch size B and the accuracy target that sets every
epsilon, Sec. 4.2) and bias detection (Appendix D).
"""
from __future__ import annotations

import argparse
from fractions import Fraction

from pipelines.common import CliError, CliParser
from schemas.option_values import OPEN_PROBABILITY, POSITIVE_EXACT, POSITIVE_INTEGER, Real
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_HOUR, parse_start
from transforms.budgeting.mechanisms.accuracy import AccuracyTarget
from transforms.budgeting.mechanisms.bias import BIAS_COUNTS, DEFAULT_BIAS_BETA, BiasDetection
from transforms.budgeting.mechanisms.device import (
    DEFAULT_MAX_WINDOW_DAYS,
    DEFAULT_WINDOW_DAYS,
    MeasurementConfig,
    Scheduling,
)
from transforms.budgeting.mechanisms.policies import POLICIES
from transforms.budgeting.mechanisms.queries import DEFAULT_BATCH_SIZE
from transforms.core.mechanisms.time_steps import DEFAULT_EPOCH_DAYS, EpochClock


def add_measurement_options(parser: CliParser, *, policy: bool = True) -> None:
    """Declares the budgeting (with ``policy``, the ``--policy`` option too), query and bias-detection groups."""
    budget = parser.add_argument_group("budgeting (defaults: Cookie Monster paper Sec. 8.1)")
    if policy:
        budget.add_argument("--policy", type=policy_name, choices=tuple(POLICIES), default="cookie_monster",
                            help="default cookie_monster; attribution_api and big_bird: the W3C Attribution API's "
                            "budgets (docs/attribution-api.md); '-' may stand for '_'")
    budget.add_argument("--epoch-days", type=POSITIVE_INTEGER, default=DEFAULT_EPOCH_DAYS,
                        help="epoch length in days (default 7)")
    budget.add_argument("--epoch-origin", default="1970-01-01", help="UTC start of epoch 0 (default 1970-01-01)")
    budget.add_argument(
        "--attribution-window-days", type=POSITIVE_INTEGER, default=DEFAULT_WINDOW_DAYS,
        help="window of requests that name none (default 30)",
    )
    budget.add_argument(
        "--max-attribution-window-days", type=POSITIVE_INTEGER, default=DEFAULT_MAX_WINDOW_DAYS,
        help="longest window a request may ask for; longer requests are dead letters (default 90)",
    )
    budget.add_argument("--epsilon-g", type=POSITIVE_EXACT, default=Fraction(1),
                        help="capacity eps_G of each (querier, device, epoch) filter (default 1)")
    api = parser.add_argument_group(
        "the Attribution API's budgets (--policy attribution_api or big_bird; Big Bird, Tholoniat et al. Sec. 4)")
    api.add_argument("--global-epsilon", type=optional_epsilon,
                     help=f"global budget of each device-epoch, over every site (default {GLOBAL_TIMES} x "
                     "--epsilon-g, the ratio of the specification's test configuration; 'none': no global budget)")
    api.add_argument("--impression-quota-epsilon", type=optional_epsilon,
                     help=f"quota of the global budget per (device-epoch, impression site) (default {IMPRESSION_TIMES} "
                     "x --epsilon-g; 'none': no quota)")
    api.add_argument("--conversion-quota-epsilon", type=optional_epsilon,
                     help=f"quota of the global budget per (device-epoch, conversion site) (big_bird: default "
                     f"{CONVERSION_TIMES} x --epsilon-g; attribution_api: none, as the specification)")
    api.add_argument("--impression-site-cap", type=POSITIVE_INTEGER,
                     help="Big Bird's per-user-action cap: of one device's events at one time (a user action), only "
                     "the impressions of the first N impression sites are saved (default: no cap)")
    api.add_argument("--conversion-site-cap", type=POSITIVE_INTEGER,
                     help="Big Bird's per-user-action cap: of one device's conversions at one time, at most N "
                     "conversion sites draw from each epoch's quotas; the others' epochs are refused (default: no cap)")
    api.add_argument("--scheduling-interval-hours", type=POSITIVE_INTEGER,
                     help="Big Bird's batched scheduling: conversions are allocated in batches at the end of each "
                     "interval of H hours (from 1970-01-01 UTC), fairest first, and their reports released at the end "
                     "of their last attempt's interval (default: every report answered at once)")
    api.add_argument("--scheduling-attempts", type=POSITIVE_INTEGER,
                     help="with --scheduling-interval-hours: the intervals a conversion may wait for budget before it "
                     "is allocated with what the device has (default 1)")
    api.add_argument("--global-releases", type=POSITIVE_INTEGER,
                     help="with --scheduling-interval-hours: each epoch's global budget is released in N equal slices, "
                     "one per interval from the first that reads it (default 1: all at once)")
    query = parser.add_argument_group("queries")
    query.add_argument("--batch-size", type=POSITIVE_INTEGER, default=DEFAULT_BATCH_SIZE,
                       help="reports per query, B (default 2000)")
    query.add_argument("--alpha", type=Real(0, low_open=True),
                       help="accuracy target: relative error alpha (with --beta) sets every epsilon")
    query.add_argument("--beta", type=OPEN_PROBABILITY, help="accuracy target: failure probability beta (with --alpha)")
    query.add_argument(
        "--expected-value", type=Real(0, low_open=True),
        help="c~, the querier's guess of the average conversion value (default: the query global sensitivity)",
    )
    bias = parser.add_argument_group("bias detection (Cookie Monster paper Appendix D; on-device policies)")
    bias.add_argument(
        "--bias-kappa", type=POSITIVE_EXACT,
        help="turn bias detection on: each report gets a coordinate kappa x its empty-epoch count, every requested "
        "device-epoch holding data pays epsilon kappa / Delta more (Thm. 17), results carry a bias bound",
    )
    bias.add_argument(
        "--bias-count", choices=BIAS_COUNTS,
        help="count empty epochs (Thm. 15) or reports with one (Thm. 16) (default epochs)",
    )
    bias.add_argument("--bias-beta", type=OPEN_PROBABILITY,
                      help=f"failure probability of the bias bound (default {DEFAULT_BIAS_BETA})")
    bias.add_argument(
        "--heartbeats", action="store_true",
        help="a heartbeat event in every device-epoch: the count is then exactly the out-of-budget epochs",
    )


GLOBAL_TIMES, IMPRESSION_TIMES, CONVERSION_TIMES = 8, 4, 2  # defaults, in multiples of eps_G
_NONE = "none"
_SCHEDULING_OPTIONS = ("scheduling_interval_hours", "scheduling_attempts", "global_releases")
API_BUDGET_OPTIONS = ("global_epsilon", "impression_quota_epsilon", "conversion_quota_epsilon", "impression_site_cap",
                      "conversion_site_cap", *_SCHEDULING_OPTIONS)


def policy_name(text: str) -> str:
    """A policy's name, with '-' read as '_' (``--policy big-bird``)."""
    return text.replace("-", "_")


def optional_epsilon(text: str) -> Fraction | str:
    """A positive exact epsilon, or 'none'."""
    return _NONE if text.strip().lower() == _NONE else POSITIVE_EXACT(text)


def _api_budgets(args: argparse.Namespace) -> dict:
    """The Attribution API policies' global budget, quotas, per-user-action caps and batched scheduling
    (``MeasurementConfig`` fields): the budgets' defaults as multiples of eps_G, 'none' as no filter, no cap and no
    scheduling by default; for the other policies, none (and an error if one was given)."""
    given = {name: getattr(args, name) for name in API_BUDGET_OPTIONS}
    named = [name for name, value in given.items() if value is not None]
    if not POLICIES[args.policy].global_filters:
        if named:
            raise CliError(f"--{_flag(named[0])} applies to --policy attribution_api or big_bird")
        return {}
    if args.scheduling_interval_hours is None and (args.scheduling_attempts or args.global_releases):
        raise CliError(f"--{_flag('scheduling_attempts' if args.scheduling_attempts else 'global_releases')} needs "
                       "--scheduling-interval-hours")
    defaults = {"global_epsilon": GLOBAL_TIMES, "impression_quota_epsilon": IMPRESSION_TIMES,
                "conversion_quota_epsilon": CONVERSION_TIMES if args.policy == "big_bird" else None}
    budgets: dict = {}
    for name, value in given.items():
        if name in _SCHEDULING_OPTIONS:
            continue
        if value is None and defaults.get(name) is not None:
            value = defaults[name] * args.epsilon_g
        budgets[name] = None if value == _NONE else value
    if args.scheduling_interval_hours is not None:
        budgets["scheduling"] = Scheduling(args.scheduling_interval_hours * MICROS_PER_HOUR,
                                           args.scheduling_attempts or 1, args.global_releases or 1)
    return budgets


def _flag(name: str) -> str:
    return name.replace("_", "-")


def _origin_micros(text: str) -> int:
    """An ISO date or date-time, read as UTC, in microseconds since the Unix epoch."""
    try:
        return parse_start(text)
    except ValueError:
        raise CliError(f"--epoch-origin must be an ISO date such as 2024-01-01, got {text!r}") from None


def measurement_config(args: argparse.Namespace) -> MeasurementConfig:
    """The configuration the options describe; ``CliError`` for bad or inconsistent values."""
    if (args.alpha is None) != (args.beta is None):
        raise CliError("--alpha and --beta go together")
    if args.expected_value is not None and args.alpha is None:
        raise CliError("--expected-value needs --alpha and --beta")
    if args.bias_kappa is None and (args.heartbeats or args.bias_count or args.bias_beta is not None):
        raise CliError("--bias-count, --bias-beta and --heartbeats need --bias-kappa")
    try:
        bias = None
        if args.bias_kappa is not None:
            beta = DEFAULT_BIAS_BETA if args.bias_beta is None else args.bias_beta
            bias = BiasDetection(args.bias_kappa, args.bias_count or "epochs", beta, args.heartbeats)
        accuracy = None
        if args.alpha is not None:
            accuracy = AccuracyTarget(args.alpha, args.beta, args.batch_size, args.expected_value)
        return MeasurementConfig(
            policy=args.policy,
            clock=EpochClock(args.epoch_days * MICROS_PER_DAY, _origin_micros(args.epoch_origin)),
            capacity_epsilon=args.epsilon_g,
            default_window_days=args.attribution_window_days,
            max_window_days=args.max_attribution_window_days,
            accuracy=accuracy,
            bias=bias,
            **_api_budgets(args),
        )
    except ValueError as error:
        raise CliError(str(error)) from None
