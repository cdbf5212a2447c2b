"""Run the measurement job under each budgeting policy on the same data and compare them side by side.

    python -m pipelines.compare_policies --impressions PATH --conversions PATH --output DIR
        [--policies cookie_monster,ara_like,ipa_like] [any pipelines.measurement option] [Beam options]

Each policy's run goes to ``DIR/<policy>/`` with ``--emit-budgets`` (the
per device-epoch consumption is SENSITIVE: an evaluation output, never what a
querier sees). Prints the table of seed 003 Fig. 4: the average and maximum
budget consumed over the device-epochs the queries requested, with the
reports and queries each policy produced; writes it to ``DIR/comparison.csv``
and ``DIR/results.json``.
"""
from __future__ import annotations

import csv
import json
import os
import sys

from pipelines.common import CliError, InputError, configure_logging, fail
from pipelines.measurement import parse_job, run
from transforms.budgeting.mechanisms.policies import POLICIES

COLUMNS = (
    "policy", "reports", "queries_executed", "queries_rejected", "requested_device_epochs",
    "average_epsilon", "maximum_epsilon", "read", "dead_lettered",
)


def _split(argv: list[str]) -> tuple[list[str], str, list[str]]:
    """(policies, output directory, the other arguments) from the command line."""
    policies, output, rest = ",".join(POLICIES), None, []
    arguments = iter(argv)
    for argument in arguments:
        name, _, value = argument.partition("=")
        if name in ("--policies", "--output", "--policy"):
            value = value or next(arguments, None)
            if value is None:
                raise CliError(f"{name} needs a value")
            if name == "--policy":
                raise CliError("use --policies with pipelines.compare_policies")
            if name == "--policies":
                policies = value
            else:
                output = value
        else:
            rest.append(argument)
    if output is None:
        raise CliError("--output is required")
    chosen = [policy.strip() for policy in policies.split(",") if policy.strip()]
    unknown = [policy for policy in chosen if policy not in POLICIES]
    if unknown or not chosen:
        raise CliError(f"--policies must list some of {', '.join(POLICIES)}, got {policies!r}")
    return chosen, output, rest


def compare(argv: list[str]) -> list[dict]:
    """One measurement run per policy; the comparison rows."""
    policies, output, rest = _split(argv)
    rows = []
    for policy in policies:
        job, beam_args = parse_job([*rest, "--policy", policy, "--output", os.path.join(output, policy), "--emit-budgets"])
        summary = run(job, beam_args)
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
    with open(os.path.join(output, "comparison.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    with open(os.path.join(output, "results.json"), "w", encoding="utf-8") as handle:
        json.dump({"comparison": rows}, handle, indent=2)
    return rows


def table_lines(rows: list[dict]) -> list[str]:
    lines = [
        "SENSITIVE budget consumption per requested device-epoch (seed 003 Fig. 4), and what the querier got:",
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
        rows = compare(argv)
        output = _split(argv)[1]
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
