"""End-to-end tests of the k-anonymity note Sec. 5 simulation and of the privacy CLI it reuses."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from pipelines import kanon_accuracy, kanon_privacy
from transforms.core.mechanisms.noise import SeededSource
from transforms.kanon.mechanisms.accounting import DrawParameters

OUTPUT_FILES = [
    "figure1_error_cdfs.png",
    "error_rates.png",
    "max_window_error_cdf.csv",
    "one_step_error_cdf.csv",
    "error_rates.csv",
    "results.json",
]


def test_end_to_end(tmp_path, capsys):
    out = tmp_path / "accuracy"
    code = kanon_accuracy.main(
        ["--epsilon", "3", "--delta", "1e-5", "--window-hours", "168", "--k", "50",
         "--output", str(out), "--repetitions", "3000", "--seed", "1"]
    )
    assert code == 0
    for name in OUTPUT_FILES:
        assert (out / name).stat().st_size > 0, name
    results = json.loads((out / "results.json").read_text())
    for key in ["p99_max_window_error", "p01_one_step_error", "privacy", "repetitions", "seed", "noise_source",
                "error_rates", "window_steps", "k"]:
        assert key in results, key
    assert results["p99_max_window_error"] >= 0 >= results["p01_one_step_error"]
    assert results["noise_source"] == "seeded" and results["repetitions"] == 3000 and results["seed"] == 1
    assert results["privacy"] == kanon_privacy.describe(DrawParameters("3/4", "1/67600000"), 168)
    with (out / "error_rates.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(results["error_rates"]) == int(np.ceil(results["privacy"]["total_bound"])) + 1
    printed = capsys.readouterr().out
    assert "99% quantile" in printed and "below 15" in printed and "-8" in printed and "elapsed" in printed


def test_same_seed_same_results(tmp_path):
    args = ["--noise-epsilon", "0.75", "--noise-delta", "4.7375e-5", "--repetitions", "500", "--seed", "7"]
    kanon_accuracy.main([*args, "--output", str(tmp_path / "a")])
    kanon_accuracy.main([*args, "--output", str(tmp_path / "b")])
    first = json.loads((tmp_path / "a" / "results.json").read_text())
    second = json.loads((tmp_path / "b" / "results.json").read_text())
    assert first["p99_max_window_error"] == second["p99_max_window_error"]
    assert first["error_rates"] == second["error_rates"]



def test_out_is_a_deprecated_spelling_of_output(tmp_path, capsys):
    args = ["--noise-epsilon", "0.75", "--noise-delta", "4.7375e-5", "--repetitions", "200", "--seed", "7"]
    assert kanon_accuracy.main([*args, "--out", str(tmp_path / "old")]) == 0
    assert capsys.readouterr().err.splitlines() == ["warning: --out is deprecated and will be removed; use --output"]
    assert kanon_accuracy.main([*args, f"--output={tmp_path / 'new'}"]) == 0
    assert capsys.readouterr().err == ""
    old = json.loads((tmp_path / "old" / "results.json").read_text())
    new = json.loads((tmp_path / "new" / "results.json").read_text())
    assert old["error_rates"] == new["error_rates"]

def test_simulated_errors_respect_cor_4_4_and_the_rates_are_monotone():
    draw = DrawParameters("3/4", "4.7375e-5")
    bound = draw.total_bound
    max_window, one_step = kanon_accuracy.simulate_errors(draw.noise(), 24, 5000, SeededSource(3))
    assert np.all(max_window >= one_step)  # the max over the window includes the first step
    assert np.all(np.abs(max_window) <= bound) and np.all(np.abs(one_step) <= bound)
    rates = kanon_accuracy.error_rates(max_window, one_step, 50, int(np.ceil(bound)))
    fp = [row["false_positive_rate"] for row in rates]
    fn = [row["false_negative_rate"] for row in rates]
    assert fp == sorted(fp, reverse=True) and fn == sorted(fn, reverse=True)
    assert fp[-1] == 0.0 and fn[-1] == 0.0  # nothing beyond 2A
    assert rates[3]["size_below"] == 47 and rates[3]["size_above"] == 53


@pytest.mark.parametrize(
    "argv",
    [
        ["--output", "x"],  # no privacy parameters
        ["--epsilon", "3", "--output", "x"],  # half a pair
        ["--epsilon", "3", "--delta", "1e-5", "--noise-epsilon", "1", "--noise-delta", "1e-8", "--output", "x"],
        ["--epsilon", "3", "--delta", "1e-5", "--output", "x", "--repetitions", "0"],
        ["--epsilon", "3", "--delta", "1e-5"],  # no --output
    ],
)
def test_bad_options_exit_with_one_line(argv, capsys):
    assert kanon_accuracy.main(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_privacy_cli_both_directions(capsys):
    assert kanon_privacy.main(["--epsilon", "3", "--delta", "1e-5", "--json"]) == 0
    forward = json.loads(capsys.readouterr().out)
    assert forward["noise_epsilon"] == 0.75 and forward["stream_epsilon"] == 3.0 and forward["stream_delta"] == 1e-5
    assert forward["instance_epsilon"] == 1.5 and forward["total_bound"] == pytest.approx(2 * forward["A"])
    assert kanon_privacy.main(["--noise-epsilon", "0.75", "--noise-delta", str(forward["noise_delta"]), "--json"]) == 0
    backward = json.loads(capsys.readouterr().out)
    assert backward["stream_epsilon"] == 3.0 and backward["stream_delta"] == pytest.approx(1e-5, rel=1e-12)
    assert kanon_privacy.main(["--noise-epsilon", "3/4", "--noise-delta", "1/67600000"]) == 0
    text = capsys.readouterr().out
    assert "Cor. 4.4" in text and "Cor. 3.1" in text and "(3, 1e-05 (= 1/100000))-DP" in text


def test_privacy_cli_rejects_bad_input(capsys):
    assert kanon_privacy.main(["--epsilon", "3", "--delta", "2"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: argument --delta: must be a number in (0, 1), got 2"
    ]
