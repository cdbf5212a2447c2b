"""What ``make demo`` produced, for a person: one static page and the top of the summary report.

    python -m pipelines.demo_report [--demo-dir demo-output] [--top 10]

Reads the outputs of the demo's jobs under ``--demo-dir`` (``kanon/``, ``measurement/``, ``ara-reports/``,
``summary-report/`` and ``event-level/``, as the Makefile's ``demo`` target writes them) and writes
``<demo-dir>/index.html``: per pipeline the headline numbers and a chart (k-anonymous interest groups over time; the
budget each policy consumed, Cookie Monster paper Fig. 4; the summary report's error against the true sums, with its
95 % interval; event-level reports per trigger data value). The charts' ticks are round values.
Prints the summary report's largest buckets with their 95 % intervals and true sums, and where the page is.
Time steps are printed as UTC dates, never as hours since the epoch.
"""
from __future__ import annotations

import datetime as dt
import glob
import json
import os
import sys
from collections import Counter, defaultdict

from evaluation.html_page import Section, band_chart, bar_chart, line_chart, page
from pipelines.common import CliError, CliParser, fail, read_records
from schemas.aggregatable import bucket_from_bytes, decode_payload, parse_shared_info
from schemas.option_values import POSITIVE_INTEGER
from schemas.time_units import SECONDS_PER_HOUR
from transforms.core.mechanisms.noise import DiscreteLaplace
from transforms.summary_reports.mechanisms.aggregation import AggregationParams

CONFIDENCE = 0.95


def utc(step_or_seconds: float, *, hours: bool = True) -> str:
    """An hour step (or seconds since the epoch) as a UTC date and time."""
    seconds = step_or_seconds * SECONDS_PER_HOUR if hours else step_or_seconds
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _summary(directory: str) -> dict:
    path = os.path.join(directory, "summary.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError:
        raise CliError(f"no {path}: run `make demo` first (or give --demo-dir)") from None


def _records(pattern: str):
    """The records of every file matching ``pattern`` (JSON Lines or Avro, as the jobs write them)."""
    for path in sorted(glob.glob(pattern)):
        yield from read_records(path)


def kanon_section(directory: str) -> Section:
    """k-anonymous groups per hour step, rebuilt from the verdict changes (every group starts not k-anonymous)."""
    summary = _summary(directory)
    changes: dict[int, int] = defaultdict(int)  # step -> change of the number of k-anonymous groups
    state: dict[str, bool] = {}
    for row in sorted(_records(os.path.join(directory, "verdicts-*")), key=lambda r: (r["interest_group"], r["step"])):
        was = state.get(row["interest_group"], False)
        if row["k_anonymous"] != was:
            changes[row["step"]] += 1 if row["k_anonymous"] else -1
            state[row["interest_group"]] = row["k_anonymous"]
    series, count = [], 0
    for step in sorted(changes):
        count += changes[step]
        series.append((float(step), float(count)))
    counts, privacy = summary["counts"], summary["privacy"]
    last = counts["last_step"]
    return Section(
        "k-anonymity server (Protected Audience)",
        "Differentially private k-anonymity verdicts per interest group and hour (AboveThreshold with periodic "
        "restart).",
        [("joins read", f"{counts['read']:,}"), ("dead letters", f"{counts['dead_lettered']:,}"),
         ("groups", f"{counts['groups']:,}"),
         ("k-anonymous at the last hour", f"{counts['groups_k_anonymous_at_last_step']:,} "
                                          f"({utc(last) if last is not None else 'none'})"),
         ("guarantee of the verdict stream", f"({privacy['stream_epsilon']:g}, {privacy['stream_delta']:g})-DP")],
        [line_chart("k-anonymous interest groups over time", {"k-anonymous groups": series}, "hour (UTC)",
                    "groups", x_text=lambda step: utc(step)[:10], steps=True, x_unit=24)],
    )


def measurement_section(directory: str) -> Section:
    """The budget each policy consumed per requested device-epoch (Cookie Monster paper, Fig. 4)."""
    path = os.path.join(directory, "results.json")
    try:
        with open(path, encoding="utf-8") as handle:
            rows = json.load(handle)["comparison"]
    except OSError:
        raise CliError(f"no {path}: run `make demo` first (or give --demo-dir)") from None
    policies = [row["policy"] for row in rows]
    return Section(
        "On-device budgeting (Cookie Monster, ARA-like, IPA-like)",
        "The same impressions and conversions under each budgeting policy: the privacy budget consumed per "
        "requested device-epoch (SENSITIVE: for evaluation only) and what the querier got.",
        [(f"{row['policy']}: queries executed / rejected", f"{row['queries_executed']} / {row['queries_rejected']}")
         for row in rows],
        [bar_chart("budget consumed per device-epoch", policies,
                   {"average epsilon": [row["average_epsilon"] for row in rows],
                    "maximum epsilon": [row["maximum_epsilon"] for row in rows]}, "epsilon")],
        (("policy", "reports", "average eps", "maximum eps", "device-epochs"),
         [(row["policy"], f"{row['reports']:,}", f"{row['average_epsilon']:.4f}", f"{row['maximum_epsilon']:.4f}",
           f"{row['requested_device_epochs']:,}") for row in rows]),
    )


def event_level_section(directory: str) -> Section:
    """Event-level reports per trigger data value, and the sources randomized response answered (Ghazi et al.
    Alg. 8)."""
    summary = _summary(directory)
    counts = summary["counts"]
    per_value = Counter(row["trigger_data"] for row in _records(os.path.join(directory, "reports-*")))
    values = sorted(per_value)
    sources = counts["sources"]
    return Section(
        "Event-level reports (Attribution Reporting)",
        "Each source's reports through randomized response: with a small probability the source sends a random "
        "output instead of its true reports.",
        [("events read", f"{counts['read']:,}"), ("dead letters", f"{counts['dead_lettered']:,}"),
         ("sources", f"{sources:,}"),
         ("answered by randomized response", f"{counts['randomized_sources']:,} "
                                             f"({counts['randomized_sources'] / max(sources, 1):.3%})"),
         ("reports", f"{counts['reports']:,}"),
         ("guarantee", f"{summary['parameters']['epsilon']:g}-DP per source (Ghazi et al. Thm. 5.1)")],
        [bar_chart("event-level reports per trigger data value", [str(value) for value in values],
                   {"reports": [per_value[value] for value in values]}, "reports")],
    )


def true_sums(reports_pattern: str, filtering_ids: set[int]) -> dict[int, int]:
    """The exact sum per bucket of clear-text reports (each report id once), as the aggregation sums them."""
    sums: dict[int, int] = defaultdict(int)
    seen: set[str] = set()
    for record in _records(reports_pattern):
        report_id = parse_shared_info(record["shared_info"]).report_id
        if report_id in seen:
            continue
        seen.add(report_id)
        for bucket, value, filtering_id in decode_payload(record["payload"]):
            if filtering_id in filtering_ids:
                sums[bucket] += value
    return sums


def summary_report_section(directory: str, reports_directory: str, top: int) -> tuple[Section, list[str]]:
    """Released buckets against their true sums, with the 95 % interval of the noise; the top buckets' lines."""
    summary = _summary(directory)
    parameters = summary["parameters"]
    if parameters["encrypted_payloads"]:
        raise CliError("the demo report needs clear-text reports to compute the true sums")
    params = AggregationParams(parameters["mode"], parameters["epsilon"], parameters["delta"], parameters["l1"],
                               parameters["l0"])
    half_width = DiscreteLaplace(params.scale).half_width(CONFIDENCE) if parameters["noise"] else 0
    released = {bucket_from_bytes(row["bucket"]): row["metric"]
                for row in _records(os.path.join(directory, "summary_report-*.avro"))}
    truth = true_sums(os.path.join(reports_directory, "reports-*.avro"), set(parameters["filtering_ids"]))
    inside = sum(abs(metric - truth.get(bucket, 0)) <= half_width for bucket, metric in released.items())
    largest = sorted(released.items(), key=lambda item: (-item[1], item[0]))[:top]
    rows = [(f"0x{bucket:x}", f"{metric:,}", f"[{metric - half_width:,}, {metric + half_width:,}]",
             f"{truth.get(bucket, 0):,}") for bucket, metric in largest]
    lines = [f"summary report: the {len(rows)} largest of {len(released)} released buckets, with their "
             f"{CONFIDENCE:.0%} intervals (noise scale {float(params.scale):,.0f}) and the true sums:"]
    lines += [f"  {bucket:>10}  {metric:>12}  {interval:>28}  true {true}" for bucket, metric, interval, true in rows]
    section = Section(
        "Aggregation Service: summary report",
        "Noisy sums per bucket from the ARA client's aggregatable reports (discrete Laplace noise).",
        [("released buckets", f"{len(released):,}"), ("guarantee", summary["privacy"]["guarantee"]),
         (f"{CONFIDENCE:.0%} interval of the noise", f"± {half_width:,}"),
         ("buckets within their interval", f"{inside:,} of {len(released):,}"),
         ("budget", f"{summary['receipt'].get('charge', summary['status'])}")],
        [band_chart("error of the released sums against the truth",
                    [(float(truth.get(bucket, 0)), float(metric - truth.get(bucket, 0))) for bucket, metric in
                     released.items()], half_width, "true sum", "released - true")],
        (("bucket", "released", f"{CONFIDENCE:.0%} interval", "true sum"), rows),
    )
    return section, lines


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m pipelines.demo_report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo-dir", default="demo-output", help="where `make demo` wrote (default demo-output)")
    parser.add_argument("--top", type=POSITIVE_INTEGER, default=10, help="largest buckets to print (default 10)")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        root = args.demo_dir
        report, lines = summary_report_section(os.path.join(root, "summary-report"), os.path.join(root, "ara-reports"),
                                               args.top)
        sections = [kanon_section(os.path.join(root, "kanon")), measurement_section(os.path.join(root, "measurement")),
                    report, event_level_section(os.path.join(root, "event-level"))]
    except CliError as error:
        return fail(error)
    path = os.path.join(root, "index.html")
    generated = utc(dt.datetime.now(dt.timezone.utc).timestamp(), hours=False)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(page("Privacy-preserving measurement on Beam: the demo", f"Outputs under {root}, read {generated}.",
                          sections))
    print("\n".join(lines))
    print(f"demo page: {path} (open it in a browser; static, no server)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
