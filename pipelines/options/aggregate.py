"""The options of the Aggregation Service job (Ghazi et al. Alg. 1) and their reading into an ``AggregationJob``.

Two groups: the release (mode, epsilon, delta, the contribution bounds L1 and L0 and the per-report limits that
enforce them, which filtering ids, the error threshold, the job time) and the privacy-budget ledger (job id, ledger
URL, per-unit capacity and uses, decryption keys), each option one field of ``AggregationJob``,
``AggregationParams``, ``PayloadLimits`` or ``LedgerLimits``.
"""
from __future__ import annotations

import argparse
import os
import time
import uuid
from fractions import Fraction

from pipelines.common import CliError, CliParser
from pipelines.options.run import DEFAULT_MAX_ERROR_FRACTION, add_key_options, key_location
from schemas.aggregatable import PayloadLimits
from schemas.limits import UNBOUNDED_VALUE_SUM
from schemas.option_values import NONNEGATIVE_INTEGER, POSITIVE_EXACT, POSITIVE_INTEGER, PROBABILITY, Exact, location
from transforms.core.mechanisms.budget_units import epsilon_units
from transforms.core.private_files import SharedFile, check_private
from transforms.core.secrets import SecretUnavailable, is_environment
from transforms.summary_reports.aggregation import AggregationJob, read_private_keys
from transforms.summary_reports.ledger import LedgerConfigError, LedgerLimits, sqlite_ledger_path
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L0, DEFAULT_L1, MAX_EPSILON, MODES, AggregationParams

DEFAULT_LEDGER = "sqlite:///.pm-beam/ledger.db"


def add_aggregation_options(parser: CliParser) -> None:
    """Declares the release and ledger groups."""
    release = parser.add_argument_group("release (Ghazi et al. Alg. 1)")
    release.add_argument("--mode", choices=MODES, default="domain",
                         help="domain: the domain's buckets only (default); key-discovery: Alg. 1's tau threshold, no "
                         "domain; threshold: the shipped service's rule (domain always, other buckets above a threshold)")
    release.add_argument("--epsilon", type=Exact(0, MAX_EPSILON, low_open=True), default=Fraction(10),
                         help="epsilon of this job, in (0, 64] (default 10)")
    release.add_argument("--delta", type=Exact(0, 1, low_open=True, high_open=True), default=Fraction(1, 100_000),
                         help="delta of key discovery and thresholding (default 1e-5)")
    release.add_argument("--l1", type=POSITIVE_INTEGER, default=DEFAULT_L1, help=f"contribution budget L1 (default {DEFAULT_L1})")
    release.add_argument("--l0", type=POSITIVE_INTEGER, default=DEFAULT_L0,
                         help=f"contributions per report L0 (default {DEFAULT_L0})")
    release.add_argument("--max-contributions-per-report", type=POSITIVE_INTEGER,
                         help="a report with more non-null contributions is a dead letter too_many_contributions "
                         "(default: --l0; at most --l0, which the guarantee assumes)")
    release.add_argument("--max-report-value-sum", type=POSITIVE_INTEGER,
                         help="a report whose values sum to more is a dead letter value_sum_over_bound "
                         "(default: --l1; at most --l1, which the guarantee assumes)")
    release.add_argument("--filtering-ids", type=filtering_ids, default="0",
                         help="comma-separated filtering ids to aggregate (default 0)")
    release.add_argument("--max-error-fraction", type=PROBABILITY, default=DEFAULT_MAX_ERROR_FRACTION,
                         help="fail, spending no budget and releasing nothing, when more than this share of the "
                         f"reports has errors (default {DEFAULT_MAX_ERROR_FRACTION:g}); a truncated or unreadable "
                         "report file, or no valid report, always fails the job")
    parser.add_alias("--error-threshold", "--max-error-fraction")
    release.add_argument("--now", type=NONNEGATIVE_INTEGER,
                         help="job time in seconds since the epoch (default: the clock); reports "
                         "scheduled more than 90 days earlier are dead letters")
    release.add_argument("--debug", action="store_true", help="debug run: debug-mode reports only, a debug output "
                         "with unnoised sums (SENSITIVE), no budget charged")
    release.add_argument("--no-noise", action="store_true", help="with --debug or --local-test: release exact sums")
    release.add_argument("--local-test", action="store_true",
                         help="the Aggregation Service's local testing mode (its Local Testing Tool): NOTHING IN THE "
                         "RUN IS PRIVATE; clear-text payloads (key id no_key), --no-noise without --debug, no ledger "
                         "opened and no budget charged, no per-report value-sum bound unless given")
    ledger = parser.add_argument_group("privacy-budget ledger")
    ledger.add_argument("--job-id", help="job id; re-running the same id after a crash never charges twice (default: a new UUID)")
    ledger.add_argument("--ledger",
                        help="privacy-budget ledger: sqlite:///PATH or postgresql://... "
                        f"(default $PM_BEAM_LEDGER or {DEFAULT_LEDGER})")
    ledger.add_argument("--epsilon-star", type=POSITIVE_EXACT, default=Fraction(64),
                        help="per-unit capacity eps_* of the ledger (default 64)")
    ledger.add_argument("--max-uses", type=POSITIVE_INTEGER, default=1,
                        help="per-unit number of uses l_* (default 1: no requerying)")
    ledger.add_argument("--private-key", metavar="LOCATION", type=location,
                        help='where the workers read the key file {"keys": [{"id", "key"}]} of raw X25519 private keys '
                        "(HPKE payloads): a path or Beam file system URL (gs://...), or env:NAME, an environment "
                        "variable of the workers; read by each worker when it starts, never carried in the job's "
                        "graph (a path or URL is also checked here first; env:NAME only on the workers)")
    add_key_options(ledger, state=False)


def filtering_ids(text: str) -> tuple[int, ...]:
    """The value of ``--filtering-ids``: distinct integers in [0, 2^64), comma-separated, sorted."""
    try:
        ids = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}") from None
    if not ids or any(not 0 <= fid < 2**64 for fid in ids):
        raise argparse.ArgumentTypeError(f"must name integers in [0, 2^64), got {text!r}")
    return ids


def _params(args: argparse.Namespace) -> AggregationParams:
    try:
        return AggregationParams(args.mode, args.epsilon, args.delta, args.l1, args.l0)
    except ValueError as error:
        raise CliError(str(error)) from None


def payload_limits(args: argparse.Namespace, params: AggregationParams) -> PayloadLimits:
    """The per-report limits: ``--max-contributions-per-report`` and ``--max-report-value-sum``, by default L0 and L1,
    never above them (the release's guarantee holds for reports within L0 and L1, docs/aggregation.md "Limits").
    A local test, which guarantees nothing, has no value-sum bound unless one is given (the service's own test data
    sums millions per report), and may give one above L1."""
    if args.local_test:
        return PayloadLimits(
            params.l0 if args.max_contributions_per_report is None else args.max_contributions_per_report,
            UNBOUNDED_VALUE_SUM if args.max_report_value_sum is None else args.max_report_value_sum,
        )
    limits = PayloadLimits(
        params.l0 if args.max_contributions_per_report is None else args.max_contributions_per_report,
        params.l1 if args.max_report_value_sum is None else args.max_report_value_sum,
    )
    for option, value, bound, name in (("--max-contributions-per-report", limits.max_contributions, params.l0, "--l0"),
                                       ("--max-report-value-sum", limits.max_value_sum, params.l1, "--l1")):
        if value > bound:
            raise CliError(f"{option} {value} is above {name} {bound}, which the guarantee assumes of every report: "
                           f"raise {name} with it")
    return limits


def _private_key(location: str | None) -> str | None:
    """``--private-key``: a path or URL is read and checked here, before any work, and dropped (the workers read
    it again); an ``env:NAME`` location exists only where the workers run, so they alone check it."""
    if location is not None and not is_environment(location):
        try:
            read_private_keys(location)
        except SecretUnavailable as error:
            raise CliError(str(error)) from None
    return location


def _check_ledger_file(url: str, accept_shared: bool) -> None:
    """A ``CliError`` (exit 2) when a SQLite ledger exists readable by group or others (docs/security.md)."""
    try:
        path = sqlite_ledger_path(url)
        if path is not None:
            check_private(path, "the ledger", accept_shared)
    except (SharedFile, LedgerConfigError) as error:
        raise CliError(f"ledger: {error}") from None


def ledger_url(given: str | None) -> str:
    """``--ledger``, else ``$PM_BEAM_LEDGER``, else the default file (resolved here, so that a ledger given
    explicitly can be told from the default)."""
    return given if given is not None else os.environ.get("PM_BEAM_LEDGER", DEFAULT_LEDGER)


def aggregation_job(args: argparse.Namespace, has_domain: bool) -> AggregationJob:
    """The job the options describe; ``CliError`` for bad or inconsistent values."""
    params = _params(args)
    if args.mode == "domain" and not has_domain:
        raise CliError("--mode domain needs --domain (or choose --mode key-discovery or threshold)")
    if args.mode == "key-discovery" and has_domain:
        raise CliError("--mode key-discovery discovers its keys from the reports: drop --domain or choose another mode")
    if args.no_noise and not (args.debug or args.local_test):
        raise CliError("--no-noise is for debug runs and local tests only: add --debug or --local-test")
    if args.local_test and args.ledger is not None:
        raise CliError("--local-test never opens a ledger (nothing is charged): drop --ledger")
    ledger = None if args.debug or args.local_test else ledger_url(args.ledger)
    if ledger is not None:
        _check_ledger_file(ledger, args.accept_shared)
    return AggregationJob(
        params=params,
        job_id=args.job_id or str(uuid.uuid4()),
        filtering_ids=args.filtering_ids,
        ledger_url=ledger,
        limits=LedgerLimits(epsilon_units(args.epsilon_star, "down"), args.max_uses),
        private_key=_private_key(args.private_key),
        noise_key=None if ledger is None else key_location(args.noise_key, args.accept_shared),
        now_seconds=int(time.time()) if args.now is None else args.now,
        max_error_fraction=args.max_error_fraction,
        debug=args.debug,
        local_test=args.local_test,
        noise=not args.no_noise,
        payload_limits=payload_limits(args, params),
    )
