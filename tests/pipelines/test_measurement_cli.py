"""``python -m pipelines.measurement`` and ``pipelines.compare_policies`` end to end on small files."""
from __future__ import annotations

import glob
import json
import math

import pytest

from pipelines import compare_policies, measurement
from tests.support.cli import run_main
from tests.support.measurement_data import nike_example, random_population, write_jsonl


@pytest.fixture()
def nike(tmp_path):
    impressions, conversions = nike_example()
    return write_jsonl(tmp_path / "imps.jsonl", impressions), write_jsonl(tmp_path / "convs.jsonl", conversions)


def _run(capsys, impressions, conversions, output, *extra) -> tuple[int, dict, str]:
    return run_main(measurement.main, capsys,
                    ["--impressions", impressions, "--conversions", conversions, "--output", output, *extra])


def _lines(output, prefix) -> list[str]:
    return sorted(line for path in glob.glob(str(output / f"{prefix}-*")) for line in open(path) if line.strip())


def test_a_run_writes_its_outputs_and_a_summary(nike, tmp_path, capsys):
    with open(nike[1], "a") as handle:
        handle.write('{"device_id": "x", "value": -1}\n')
    status, summary, printed = _run(capsys, *nike, tmp_path / "out", "--batch-size", "2", "--seed", "3", "--emit-budgets",
                                    "--max-error-fraction", "0.2")  # 1 dead letter in 6 records
    assert status == 0
    counts = summary["counts"]
    assert (counts["read"], counts["parsed"], counts["dead_lettered"]) == (6, 5, 1)
    assert counts["dead_lettered_by_reason"] == {"missing_field:event_time_micros": 1}
    assert (counts["reports"], counts["queries_executed"], counts["queries_rejected"]) == (3, 1, 0)
    assert counts["reports_waiting_for_a_full_batch"] == 1
    assert summary["parameters"]["noise_source"] == "seeded" and summary["parameters"]["policy"] == "cookie_monster"
    # ann's epochs 0..3 (1, 0.35, 0, 0) and bob's five empty epochs: nine requested device-epochs
    assert summary["SENSITIVE_budget_statistics"] == {
        "device_epochs": 9, "average_epsilon": pytest.approx(1.35 / 9), "maximum_epsilon": 1.0
    }
    reports = [json.loads(line) for line in _lines(tmp_path / "out", "reports")]
    assert sorted(r["histogram"] for r in reports) == [[0.0, 0.0], [0.0, 70.0], [100.0, 0.0]]
    assert len({r["report_id"] for r in reports}) == 3
    (result,) = [json.loads(line) for line in _lines(tmp_path / "out", "query_results")]
    assert result["status"] == "executed" and result["report_count"] == 2 and result["epsilon"] == 0.5
    for paths in summary["outputs"].values():
        for path in [paths] if isinstance(paths, str) else paths:
            assert path in printed
    assert "dead letters 1 (missing_field:event_time_micros 1)" in printed


@pytest.mark.parametrize("policy", [("ipa_like",),
                                    ("big-bird", "--global-epsilon", "0.6", "--impression-quota-epsilon", "0.4",
                                     "--impression-site-cap", "1", "--conversion-site-cap", "1"),
                                    ("big_bird", "--global-epsilon", "0.4", "--impression-quota-epsilon", "0.3",
                                     "--scheduling-interval-hours", "48", "--scheduling-attempts", "3",
                                     "--global-releases", "6")])
def test_streaming_writes_the_same_outputs_as_batch(tmp_path, capsys, policy):
    impressions, conversions = random_population(seed=11)
    paths = write_jsonl(tmp_path / "i.jsonl", impressions), write_jsonl(tmp_path / "c.jsonl", conversions)
    options = ("--policy", *policy, "--batch-size", "3", "--seed", "5", "--emit-budgets")
    assert _run(capsys, *paths, tmp_path / "batch", *options)[0] == 0
    assert _run(capsys, *paths, tmp_path / "stream", *options, "--streaming")[0] == 0
    for prefix in ("reports", "query_results", "incomplete_batches", "SENSITIVE_device_epoch_budgets"):
        assert _lines(tmp_path / "batch", prefix) == _lines(tmp_path / "stream", prefix), prefix
    assert _lines(tmp_path / "batch", "query_results")


def test_the_accuracy_target_sets_every_requested_epsilon(nike, tmp_path, capsys):
    status, summary, _ = _run(capsys, *nike, tmp_path / "out", "--alpha", "0.05", "--beta", "0.01", "--batch-size", "2")
    assert status == 0 and summary["parameters"]["accuracy_target"]["alpha"] == 0.05
    expected = 100 * math.log(100) / (0.05 * 2 * 100)  # Delta ln(1/beta) / (alpha B c~), c~ = Delta
    assert {json.loads(line)["requested_epsilon"] for line in _lines(tmp_path / "out", "reports")} == {expected}


def test_bias_detection_adds_the_count_and_the_bound(nike, tmp_path, capsys):
    status, summary, _ = _run(capsys, *nike, tmp_path / "out", "--batch-size", "2", "--seed", "3", "--bias-kappa",
                              "10", "--bias-count", "reports", "--bias-beta", "0.05", "--heartbeats")
    assert status == 0
    assert summary["parameters"]["bias_detection"] == {"kappa": "10", "count": "reports", "beta": 0.05,
                                                       "heartbeats": True}
    reports = [json.loads(line) for line in _lines(tmp_path / "out", "reports")]
    assert all(len(r["histogram"]) == 3 for r in reports)  # the counting coordinate and m = 2
    assert {r["histogram"][0] for r in reports} <= {0.0, 10.0}  # kappa x 1[some epoch empty] (Thm. 16)
    (result,) = [json.loads(line) for line in _lines(tmp_path / "out", "query_results")]
    assert len(result["noisy_value"]) == 2
    assert result["bias_bound"] >= 0 and result["empty_count_estimate"] is not None


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--bias-count", "reports"), "need --bias-kappa"),
        (("--bias-count", "epochs"), "need --bias-kappa"),
        (("--bias-beta", "0.01"), "need --bias-kappa"),
        (("--bias-kappa", "0"), "argument --bias-kappa: must be a number > 0"),
        (("--bias-kappa", "1", "--policy", "ipa_like"), "needs an on-device policy"),
        (("--alpha", "0.05"), "--alpha and --beta go together"),
        (("--expected-value", "3"), "--expected-value needs --alpha and --beta"),
        (("--epoch-days", "0"), "argument --epoch-days: must be an integer >= 1, got 0"),
        (("--batch-size", "0"), "argument --batch-size: must be an integer >= 1, got 0"),
        (("--epsilon-g", "0"), "argument --epsilon-g: must be a number > 0, got 0"),
        (("--epsilon-g", "x"), "argument --epsilon-g: must be a number > 0"),
        (("--epoch-origin", "yesterday"), "--epoch-origin must be an ISO date"),
        (("--policy", "bogus"), "invalid choice"),
        (("--attribution-window-days", "100"), "between 1 day and the longest allowed window"),
        (("--global-epsilon", "2"), "--global-epsilon applies to --policy attribution_api or big_bird"),
        (("--policy", "big-bird", "--impression-quota-epsilon", "0"), "must be a number > 0"),
        (("--conversion-site-cap", "2"), "--conversion-site-cap applies to --policy attribution_api or big_bird"),
        (("--scheduling-interval-hours", "24"), "--scheduling-interval-hours applies to --policy attribution_api"),
        (("--policy", "big_bird", "--global-releases", "2"), "--global-releases needs --scheduling-interval-hours"),
        (("--policy", "big_bird", "--scheduling-attempts", "2"), "--scheduling-attempts needs --scheduling-interval"),
        (("--policy", "big_bird", "--scheduling-interval-hours", "0"), "must be an integer >= 1, got 0"),
        (("--policy", "big_bird", "--scheduling-interval-hours", "24", "--conversion-site-cap", "1"),
         "conversion-site cap applies to reports answered at their user action"),
    ],
)
def test_bad_options_are_one_line_errors(nike, tmp_path, capsys, extra, message):
    status, _, printed = _run(capsys, *nike, tmp_path / "out", *extra)
    assert status == 2
    assert message in printed and len(printed.strip().splitlines()) == 1


def test_missing_input_is_a_one_line_error(nike, tmp_path, capsys):
    status, _, printed = _run(capsys, str(tmp_path / "none-*.jsonl"), nike[1], tmp_path / "out")
    assert status == 2 and "no input file matches" in printed


def test_compare_policies_prints_and_writes_the_table(nike, tmp_path, capsys):
    output = tmp_path / "cmp"
    argv = ["--impressions", nike[0], "--conversions", nike[1], "--output", str(output), "--batch-size", "2", "--seed", "1"]
    assert compare_policies.main(argv) == 0
    printed = capsys.readouterr().out
    rows = {row["policy"]: row for row in json.loads((output / "results.json").read_text())["comparison"]}
    assert set(rows) == {"cookie_monster", "ara_like", "ipa_like", "attribution_api", "big_bird"}
    assert rows["cookie_monster"]["average_epsilon"] == pytest.approx(1.35 / 9)
    # the default global budget (8) and quotas (4; big_bird's conversion quota 2) do not bind on ann's 1.35
    assert rows["attribution_api"]["average_epsilon"] == rows["big_bird"]["average_epsilon"] == pytest.approx(1.35 / 9)
    assert rows["ara_like"]["average_epsilon"] == pytest.approx((1.0 + 5 * 0.5) / 9)  # see test_measurement.py
    assert rows["ipa_like"]["maximum_epsilon"] == 0.5
    assert "cookie_monster" in printed and (output / "comparison.csv").exists()
    assert all((output / policy / "summary.json").exists() for policy in rows)


def test_compare_policies_rejects_an_unknown_policy(nike, tmp_path, capsys):
    argv = ["--impressions", nike[0], "--conversions", nike[1], "--output", str(tmp_path), "--policies", "cm"]
    assert compare_policies.main(argv) == 2
    assert "argument --policies: must list some of" in capsys.readouterr().err


def test_the_attribution_api_fields_of_generated_data_are_read_and_budgeted(tmp_path, capsys):
    """criteo-like --api-fields: the fields change nothing under Cookie Monster (each impression lets its own
    advertiser, the querier, measure it); under big_bird every device-epoch's per-site filter stays within eps_G
    and tight quotas refuse epochs that Cookie Monster pays."""
    from synthetic.criteo import generate_criteo

    plain = generate_criteo(tmp_path / "plain", scale=0.0005, seed=3, fmt="jsonl", progress=False)
    api = generate_criteo(tmp_path / "api", scale=0.0005, seed=3, fmt="jsonl", progress=False, api_fields=True)
    inputs = {name: (stats.impression_files[0], stats.conversion_files[0]) for name, stats in (("plain", plain),
                                                                                               ("api", api))}
    options = ("--batch-size", "20", "--seed", "2", "--emit-budgets")
    for name in inputs:
        assert _run(capsys, *inputs[name], tmp_path / f"cm-{name}", *options)[0] == 0
    assert _lines(tmp_path / "cm-api", "reports") == _lines(tmp_path / "cm-plain", "reports") != []
    status, summary, _ = _run(capsys, *inputs["api"], tmp_path / "bb", *options, "--policy", "big-bird",
                              "--global-epsilon", "0.7", "--impression-quota-epsilon", "0.5")
    assert status == 0 and summary["counts"]["dead_lettered"] == 0
    budgets = [json.loads(line) for line in _lines(tmp_path / "bb", "SENSITIVE_device_epoch_budgets")]
    assert budgets and all(row["consumed_epsilon"] <= row["capacity_epsilon"] for row in budgets)
    spent = {name: sum(json.loads(line)["consumed_epsilon"] for line in _lines(tmp_path / name,
                                                                              "SENSITIVE_device_epoch_budgets"))
             for name in ("cm-api", "bb")}
    assert spent["bb"] < spent["cm-api"]  # the quota of 0.5 refuses epochs that each ask 0.658
