"""``python -m pipelines.evaluate`` end to end at the tiny size: CSVs, PNGs, results.json and report.md."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from pipelines.evaluate import build_parser, main
from synthetic.files import SIDECAR_DIR
from synthetic.microbenchmark import generate_microbenchmark

REQUIRED = ("policy", "avg_budget_converted", "avg_budget_all", "max_budget", "queries_total", "queries_executed",
            "rmsre_median", "rmsre_max")


def _results(out) -> dict:
    return json.loads((out / "results.json").read_text())["experiments"]


def _events_written(directories) -> int:
    """The events the generators wrote under ``directories``, counted from their column side-cars."""
    return sum(np.load(sidecar)["time"].size for directory in directories
               for sidecar in directory.glob(f"{SIDECAR_DIR}/*.npz"))


def _rows(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_microbenchmark_experiments(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["microbenchmark-knob1", "microbenchmark-knob2", "--tiny", "--output", str(out), "--quiet"]) == 0
    results = _results(out)
    for knob, letters in (("knob1", "ab"), ("knob2", "cd")):
        entry = results[f"microbenchmark-{knob}"]
        assert (out / f"fig4{letters}_microbenchmark-{knob}.png").stat().st_size > 10_000
        points = entry["points"]
        assert len(points) == 2 * 3  # two knob values x three policies
        assert all(all(key in p for key in (*REQUIRED, "knob1", "knob2", "epoch_days")) for p in points)
        for p in points:  # IPA-like pays centrally, the same on every knob value; on-device never above it
            ipa = next(q for q in points if q["policy"] == "ipa_like" and q[knob] == p[knob])
            assert p["avg_budget_requested"] <= ipa["avg_budget_requested"] + 1e-12
            assert 0 <= p["max_budget"] <= 1.0
        table = _rows(out / f"microbenchmark-{knob}_budget.csv")
        assert {row["policy"] for row in table} == {"ipa_like", "ara_like", "cookie_monster"}
        other = "k2" if knob == "knob1" else "k1"  # the other knob stays at its default in this sweep
        datasets = [d for d in (out / "data").iterdir() if f"-{other}-0.1" in d.name]
        assert len(datasets) == 2 and entry["settings"]["events_read"] == _events_written(datasets) > 0
    report = (out / "report.md").read_text()
    assert "## Microbenchmark, knob1 (Fig. 4a-b)" in report and "## Microbenchmark, knob2 (Fig. 4c-d)" in report
    assert "fig4ab_microbenchmark-knob1.png" in report
    printed = capsys.readouterr().out
    assert "2 experiment(s)" in printed and "report.md" in printed


def test_bias_detection_experiment(tmp_path):
    out = tmp_path / "out"
    assert main(["bias-detection", "--tiny", "--output", str(out), "--quiet", "--repetitions", "50"]) == 0
    entry = _results(out)["bias-detection"]
    assert (out / "bias_detection.png").exists() and (out / "bias-detection.csv").exists()
    assert len(entry["points"]) == 2 * 3  # two kappas x three variants
    for point in entry["points"]:
        assert point["coverage"] >= 1 - entry["headline"]["beta"]  # the bound holds on every query but rarely
        assert point["nominal_extra_loss"] > 0
    assert "## Bias detection (Appendix D)" in (out / "report.md").read_text()


def test_patcg_and_criteo_experiments(tmp_path):
    out = tmp_path / "out"
    assert main(["patcg", "criteo", "--tiny", "--output", str(out), "--quiet", "--repetitions", "20"]) == 0
    results = _results(out)
    patcg, criteo = results["patcg"], results["criteo"]
    assert {(p["policy"], p["epoch_days"]) for p in patcg["points"]} == {
        (policy, days) for policy in ("ipa_like", "ara_like", "cookie_monster") for days in (7, 30)}
    assert patcg["settings"]["noise_factor"] == patcg["settings"]["scale"]  # full-size relative noise
    assert [p["augment"] for p in criteo["points"] if p["augment"]] == [3]  # Cookie Monster on Criteo++ +3
    data = patcg["settings"]["data"]
    assert patcg["settings"]["events_read"] == data["impressions"] + data["conversions"]
    assert criteo["settings"]["events_read"] == _events_written((out / "data").glob("criteo-like-*")) > (
        criteo["settings"]["data"]["impressions"] + criteo["settings"]["data"]["conversions"])  # with Criteo++ +3
    for name in ("fig5_patcg.png", "fig6_criteo.png", "fig6d_criteo_augmented.png", "patcg_queries.csv",
                 "criteo_device_budget_cdf.csv", "criteo_augmented_device_budget_cdf.csv"):
        assert (out / name).stat().st_size > 0, name
    for entry in (patcg, criteo):
        for point in entry["points"]:
            assert all(key in point for key in REQUIRED)
            assert point["policy"] == "ipa_like" or point["queries_executed"] == point["queries_total"]
    report = (out / "report.md").read_text()
    assert "## PATCG-like (Fig. 5)" in report and "## Criteo-like (Fig. 6)" in report and "209x" in report


def test_compare_with_puts_another_runs_numbers_beside_ours(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["bias-detection", "--tiny", "--output", str(first), "--quiet", "--repetitions", "10"]) == 0
    assert main(["bias-detection", "--tiny", "--output", str(second), "--quiet", "--repetitions", "10",
                 "--compare-with", str(first / "results.json")]) == 0
    report = (second / "report.md").read_text()
    assert "| what | paper | ours | tiny size | why they differ |" in report
    row = next(line for line in report.splitlines() if line.startswith("| Appendix D"))
    assert row.split(" | ")[2] == row.split(" | ")[3]  # the same seed and size: the same number in both columns


def test_experiments_accumulate_in_one_directory(tmp_path):
    out = tmp_path / "out"
    assert main(["bias-detection", "--tiny", "--output", str(out), "--quiet", "--repetitions", "10"]) == 0
    assert main(["microbenchmark-knob1", "--tiny", "--output", str(out), "--quiet"]) == 0
    assert set(_results(out)) == {"bias-detection", "microbenchmark-knob1"}
    # running an experiment again reuses the datasets it generated (same parameters): no file is rewritten
    before = {p: p.stat().st_mtime_ns for p in (out / "data").rglob("*.npz")}
    assert before and not list((out / "data").rglob("*.avro"))  # columns only, by default
    assert main(["microbenchmark-knob1", "--tiny", "--output", str(out), "--quiet"]) == 0
    assert {p: p.stat().st_mtime_ns for p in (out / "data").rglob("*.npz")} == before
    # with --event-files the datasets are written again, with their Avro files, and give the same results
    points = _results(out)["microbenchmark-knob1"]["points"]
    assert main(["microbenchmark-knob1", "--tiny", "--output", str(out), "--quiet", "--event-files"]) == 0
    avro = list((out / "data").rglob("*.avro"))
    assert avro and all(p.with_name("columns") / f"{p.name}.npz" in set((out / "data").rglob("*.npz")) for p in avro)
    assert [{**p, "seconds": 0} for p in _results(out)["microbenchmark-knob1"]["points"]] == \
        [{**p, "seconds": 0} for p in points]


def test_custom_data(tmp_path):
    data = tmp_path / "data"
    generate_microbenchmark(data, knob1=0.5, knob2=0.1, batch_size=40, products=2, progress=False)
    out = tmp_path / "out"
    assert main(["custom", "--impressions", str(data / "impressions-*"), "--conversions", str(data / "conversions-*"),
                 "--batch-size", "40", "--epochs", "7,30", "--output", str(out), "--quiet", "--repetitions", "20"]) == 0
    entry = _results(out)["custom"]
    assert {(p["policy"], p["epoch_days"]) for p in entry["points"]} == {
        (policy, days) for policy in ("ipa_like", "ara_like", "cookie_monster") for days in (7, 30)}
    for name in ("custom_budget.csv", "custom_queries.csv", "custom_rmsre_by_epoch.csv", "custom_cumulative_budget.csv",
                 "custom_device_budget_cdf.csv", "custom.png"):
        assert (out / name).exists(), name
    queries = _rows(out / "custom_queries.csv")
    assert len(queries) == 6 * 4  # 2 products x 2 batches per run
    assert all(float(q["rmsre"]) > 0 for q in queries if q["executed"] == "True" and q["rmsre"])
    assert "## Your data" in (out / "report.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["nope", "--output", "x"], "unknown experiment 'nope'"),
    (["custom", "--output", "x"], "custom needs --impressions"),
    (["patcg", "--output", "x", "--scale", "2"], "error: argument --scale: must be a number in (0, 1], got 2"),
    (["patcg", "--output", "x", "--repetitions", "0"], "error: argument --repetitions: must be an integer >= 1, got 0"),
    (["patcg", "--output", "x", "--compare-with", "missing.json"], "--compare-with missing.json: not a readable"),
])
def test_bad_options(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--out", "d"], ["--out=d"]], ids=["separate", "joined"])
def test_out_is_a_deprecated_spelling_of_output(argv, capsys):
    assert build_parser().parse_args(["patcg", *argv]).output == "d"
    assert capsys.readouterr().err == "warning: --out is deprecated and will be removed; use --output\n"
    assert build_parser().parse_args(["patcg", "--output", "d"]).output == "d"
    assert capsys.readouterr().err == ""


def test_a_run_with_out_writes_into_it_with_one_warning(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["microbenchmark-knob1", "--tiny", "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("deprecated") == 1 and "warning: --out is deprecated and will be removed; use --output\n" in err
    assert "microbenchmark-knob1" in _results(out)
