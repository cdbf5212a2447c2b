"""Run the measurement job under each budgeting policy on the same data and compare them side by side.

    python -m pipelines.compare_policies --impressions PATH --conversions PATH --output DIR
        [--policies cookie_monster,ara_like,ipa_like] [any pipelines.measurement option] [Beam options]

Each policy's run goes to ``DIR/<policy>/`` with ``--emit-budgets`` (the
per device-epoch consumption is SENSITIVE: an evaluation output, never what a
querier sees). Prints the table of Cookie Monster paper Fig. 4: the average and maximum
budget consumed over the device-epochs the queries requested, with the
reports and queries each policy produced; writes it to ``DIR/comparison.csv``
and ``DIR/results.json``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys

from pipelines.common import CliParser, InputError, configure_logging, fail
from pipelines.measurement import add_job_options, job_of, run
from pipelines.options.measurement import API_BUDGET_OPTIONS, policy_name
from transforms.budgeting.mechanisms.policies import POLICIES

COLUMNS = (
    "policy", "reports", "queries_executed", "queries_rejected", "requested_device_epochs",
    "average_epsilon", "maximum_epsilon", "read", "dead_lettered",
)


def policy_list(text: str) -> list[str]:
    """The value of ``--policies``: some of the policies, comma-separated."""
    chosen = [policy_name(policy.strip()) for policy in text.split(",") if policy.strip()]
    if not chosen or any(policy not in POLICIES for policy in chosen):
        raise argparse.ArgumentTypeError(f"must list some of {', '.join(POLICIES)}, got {text!r}")
    return chosen


def build_parser() -> CliParser:
    parser = CliParser(
        beam_options=True,
        prog="python -m pipelines.compare_policies",
        description="The measurement job once per budgeting policy on the same data, side by side (Cookie Monster paper Fig. 4). "
        "Every option of pipelines.measurement applies, except --policy; the Attribution API's budget options "
        "apply to its policies only.",
    )
    parser.add_argument("--policies", type=policy_list, default=",".join(POLICIES),
                        help=f"comma-separated policies to compare (default {','.join(POLICIES)})")
    add_job_options(parser, policy=False)
    return parser


def compare(argv: list[str]) -> tuple[list[dict], str]:
    """One measurement run per policy, each into OUTPUT/<policy>/ with --emit-budgets; the comparison rows and
    the output directory."""
    args, beam_args = build_parser().parse_known_args(argv)
    rows = []
    for policy in args.policies:
        api_budgets = {} if POLICIES[policy].global_filters else dict.fromkeys(API_BUDGET_OPTIONS)
        options = argparse.Namespace(**{**vars(args), **api_budgets, "policy": policy, "emit_budgets": True,
                                        "output": os.path.join(args.output, policy)})
        summary = run(job_of(options), beam_args)
        counts, stats = summary["counts"], summary["SENSITIVE_budget_statistics"] or {}
        rows.append({
            "policy": policy,
            "reports": counts["reports"],
            "queries_executed": counts["queries_executed"],
            "queries_rejected": counts["queries_rejected"],
            "requested_device_epochs": stats.get("device_epochs", 0),
            "average_epsilon": stats.get("average_epsilon", 0.0),
            "maximum_epsilon": stats.get("maximum_epsilon", 0.0),
            "read": counts["read"],
            "dead_lettered": counts["dead_lettered"],
        })
    with open(os.path.join(args.output, "comparison.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    with open(os.path.join(args.output, "results.json"), "w", encoding="utf-8") as handle:
        json.dump({"comparison": rows}, handle, indent=2)
    return rows, args.output


def table_lines(rows: list[dict]) -> list[str]:
    lines = [
        "SENSITIVE budget consumption per requested device-epoch (Cookie Monster paper Fig. 4), and what the querier got:",
        f"{'policy':<16}{'average eps':>12}{'maximum eps':>12}{'device-epochs':>15}"
        f"{'reports':>9}{'executed':>10}{'rejected':>10}",
    ]
    for row in rows:
        lines.append(
            f"{row['policy']:<16}{row['average_epsilon']:>12.4f}{row['maximum_epsilon']:>12.4f}"
            f"{row['requested_device_epochs']:>15}{row['reports']:>9}{row['queries_executed']:>10}{row['queries_rejected']:>10}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    argv = sys.argv[1:] if argv is None else argv
    try:
        rows, output = compare(argv)
    except InputError as error:
        return fail(error)
    print()
    print("\n".join(table_lines(rows)))
    print(f"input: {rows[0]['read']} records read, {rows[0]['dead_lettered']} dead letters (reasons in each summary.json)")
    print(f"each policy's outputs (reports, query results, budgets, dead letters, summary.json): {output}/<policy>/")
    print(f"table: {os.path.join(output, 'comparison.csv')}, {os.path.join(output, 'results.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
