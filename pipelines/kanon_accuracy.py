"""Seed 004 Sec. 5 by simulation: the additive error of AboveThreshold with TLap noise.

    python -m pipelines.kanon_accuracy --epsilon 3 --delta 1e-5 --window-hours 168 --k 50 --output DIR
    python -m pipelines.kanon_accuracy --noise-epsilon 0.75 --noise-delta 4.7375e-5 --output DIR

Alg. 2 outputs true at step t iff c_t + nu_t >= k + nu, i.e. iff
nu_t - nu >= k - c_t, with nu the threshold draw (rho_1) and nu_t the step
draws (rho_2), all TLap(eps, delta) of Sec. 4.1. Hence (Sec. 5):

* Sec. 5.1, false positives: a group of constant size k - x is reported true
  at some step of the window iff max_t nu_t - nu >= x (the max window error);
* Sec. 5.2, false negatives: a group of size k + x is reported false at the
  first step of the window iff nu_t - nu < -x (the one-step error).

Both errors lie in [-2A, 2A] (Cor. 4.4). The simulation draws, per repetition,
one nu and w step draws with the same ``TruncatedLaplace.sample_array`` as the
pipelines, from a ``SeededSource`` (vectorised, in chunks to keep memory
small); the one-step error uses the first step draw of the same repetition.

Writes Figure 1 (``figure1_error_cdfs.png``), the error rates against x
(``error_rates.png``), the CSV tables and ``results.json`` under ``--output``.
"""
from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evaluation import figures
from evaluation.output import write_csv
from pipelines.common import CliParser, InputError, fail
from pipelines.kanon_privacy import add_privacy_arguments, describe, draw_from_args, report_lines
from schemas.option_values import POSITIVE_INTEGER, SEED
from transforms.core.mechanisms.noise import SeededSource, TruncatedLaplace
from transforms.kanon.mechanisms.accounting import DrawParameters

# The note's headline numbers (Sec. 5.1 and 5.2, Figure 1).
PAPER_P99_MAX_WINDOW_ERROR = 15.0  # "with 99% probability, the noise is below 15"
PAPER_P01_ONE_STEP_ERROR = -8.0  # "with 99% probability the noise is not smaller than -8"

_DRAWS_PER_CHUNK = 2_000_000  # about 16 MB of float64 per chunk of step draws
_CDF_POINTS = 1001


def simulate_errors(
    noise: TruncatedLaplace, window_steps: int, repetitions: int, source: SeededSource
) -> tuple[np.ndarray, np.ndarray]:
    """(max window error, one-step error) for each of ``repetitions`` independent AboveThreshold instances.

    max window error = max_{t < w} nu_t - nu (Sec. 5.1); one-step error = nu_0 - nu (Sec. 5.2).
    """
    chunk = max(1, _DRAWS_PER_CHUNK // window_steps)
    max_window = np.empty(repetitions)
    one_step = np.empty(repetitions)
    for start in range(0, repetitions, chunk):
        n = min(chunk, repetitions - start)
        threshold_noise = noise.sample_array(source, n)
        step_noise = noise.sample_array(source, n * window_steps).reshape(n, window_steps)
        max_window[start : start + n] = step_noise.max(axis=1) - threshold_noise
        one_step[start : start + n] = step_noise[:, 0] - threshold_noise
    return max_window, one_step


def empirical_cdf(values: np.ndarray, points: int = _CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF P(error <= e) on an even grid of ``points`` values e covering the observed range."""
    ordered = np.sort(values)
    grid = np.linspace(math.floor(ordered[0]), math.ceil(ordered[-1]), points)
    return grid, np.searchsorted(ordered, grid, side="right") / ordered.size


def error_rates(max_window: np.ndarray, one_step: np.ndarray, k: int, max_x: int) -> list[dict]:
    """Per x in 0..max_x: P(true at some step | constant size k - x) and P(false at the first step | size k + x).

    The first is a false-positive rate for x >= 1; at x = 0 (size exactly k) it
    is the probability of a correct true, shown as the boundary of the curve.
    """
    max_sorted, one_sorted = np.sort(max_window), np.sort(one_step)
    n = max_sorted.size
    xs = np.arange(max_x + 1)
    false_positive = 1.0 - np.searchsorted(max_sorted, xs, side="left") / n  # P(max error >= x)
    false_negative = np.searchsorted(one_sorted, -xs, side="left") / n  # P(one-step error < -x)
    return [
        {
            "x": int(x),
            "size_below": k - int(x),
            "false_positive_rate": float(fp),
            "size_above": k + int(x),
            "false_negative_rate": float(fn),
        }
        for x, fp, fn in zip(xs, false_positive, false_negative, strict=True)
    ]


def plot_figure1(
    path: Path,
    max_cdf: tuple[np.ndarray, np.ndarray],
    one_cdf: tuple[np.ndarray, np.ndarray],
    p99: float,
    p01: float,
    window_steps: int,
) -> None:
    """Figure 1 of the note: (a) CDF of the max window error, (b) CDF of the one-step error."""
    figure = figures.new_figure(11, 4.2)
    left, right = figure.subplots(1, 2)
    panels = [
        (left, max_cdf, p99, 0.99, PAPER_P99_MAX_WINDOW_ERROR, "99%",
         f"(a) CDF of the max additive error over w = {window_steps} steps (false positives)"),
        (right, one_cdf, p01, 0.01, PAPER_P01_ONE_STEP_ERROR, "1%",
         "(b) Additive error in one step (false negatives)"),
    ]
    for axes, (grid, cdf), quantile, level, paper, label, title in panels:
        axes.plot(grid, cdf, color="tab:blue", label="simulated CDF")
        axes.axhline(level, color="gray", linewidth=0.8, linestyle=":")
        axes.axvline(quantile, color="tab:orange", linestyle="--", label=f"simulated {label} quantile = {quantile:.2f}")
        axes.axvline(paper, color="tab:red", linestyle=":", label=f"note Sec. 5: {paper:g}")
        axes.set_title(title, fontsize=9)
        axes.set_xlabel("additive error (sum of the 2 noise variables)")
        axes.set_ylabel("CDF")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def plot_error_rates(path: Path, rates: list[dict], k: int) -> None:
    """False-positive rate for constant size k - x and false-negative rate for size k + x (log y; zeros omitted)."""
    figure = figures.new_figure(7, 4.2)
    axes = figure.subplots()
    for column, marker, label in [
        ("false_positive_rate", "o", f"false positive: constant size k - x, true at some step (k = {k})"),
        ("false_negative_rate", "s", f"false negative: size k + x, false at the first step (k = {k})"),
    ]:
        points = [(row["x"], row[column]) for row in rates if row[column] > 0]
        axes.plot([x for x, _ in points], [rate for _, rate in points], marker=marker, markersize=3, label=label)
    axes.set_yscale("log")
    axes.set_xlabel("x")
    axes.set_ylabel("empirical rate")
    axes.set_title("Error rates of one AboveThreshold window (k-anonymity note Sec. 5)", fontsize=10)
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def run(draw: DrawParameters, window_steps: int, k: int, out_dir: Path, repetitions: int, seed: int) -> dict:
    """Simulate, write the figures, tables and results.json under ``out_dir``; return the results."""
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    noise = draw.noise()
    max_window, one_step = simulate_errors(noise, window_steps, repetitions, SeededSource(seed))
    p99 = float(np.quantile(max_window, 0.99))
    p01 = float(np.quantile(one_step, 0.01))
    max_cdf, one_cdf = empirical_cdf(max_window), empirical_cdf(one_step)
    rates = error_rates(max_window, one_step, k, min(math.ceil(draw.total_bound), k))  # both errors are 0 beyond 2A

    paths = {
        "figure1": out_dir / "figure1_error_cdfs.png",
        "error_rates_plot": out_dir / "error_rates.png",
        "max_window_error_cdf": out_dir / "max_window_error_cdf.csv",
        "one_step_error_cdf": out_dir / "one_step_error_cdf.csv",
        "error_rates": out_dir / "error_rates.csv",
        "results": out_dir / "results.json",
    }
    plot_figure1(paths["figure1"], max_cdf, one_cdf, p99, p01, window_steps)
    plot_error_rates(paths["error_rates_plot"], rates, k)
    write_csv(paths["max_window_error_cdf"], ["max_window_error", "cdf"], list(zip(*max_cdf, strict=True)))
    write_csv(paths["one_step_error_cdf"], ["one_step_error", "cdf"], list(zip(*one_cdf, strict=True)))
    write_csv(paths["error_rates"], list(rates[0]), [list(row.values()) for row in rates])

    results = {
        "p99_max_window_error": p99,
        "p01_one_step_error": p01,
        "paper_p99_max_window_error_below": PAPER_P99_MAX_WINDOW_ERROR,
        "paper_p01_one_step_error_not_below": PAPER_P01_ONE_STEP_ERROR,
        "privacy": describe(draw, window_steps),
        "window_steps": window_steps,
        "k": k,
        "repetitions": repetitions,
        "seed": seed,
        "noise_source": "seeded",
        "error_rates": rates,
        "files": {name: str(path) for name, path in paths.items()},
    }
    results["elapsed_seconds"] = time.perf_counter() - started
    paths["results"].write_text(json.dumps(results, indent=2) + "\n")
    return results


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m pipelines.kanon_accuracy", description=__doc__.split("\n\n")[0])
    add_privacy_arguments(parser)
    parser.add_argument("--k", type=POSITIVE_INTEGER, default=50, help="threshold k (default 50)")
    parser.add_argument("--output", type=Path, required=True, help="output directory")
    parser.add_alias("--out", "--output")
    parser.add_argument("--repetitions", type=POSITIVE_INTEGER, default=200_000, help="simulated windows (default 200000)")
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the simulation source (default 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        draw = draw_from_args(args)
        figures.require_matplotlib("plots")  # before any work: a run without the extra stops at once
    except InputError as error:
        return fail(error)
    try:
        results = run(draw, args.window_hours, args.k, args.output, args.repetitions, args.seed)
    except OSError as exc:
        print(f"error: cannot write to {args.output}: {exc}", file=sys.stderr)
        return 1

    print("\n".join(report_lines(draw, args.window_hours, args.k)))
    print(
        f"max additive error over a window of {args.window_hours} steps: 99% quantile = "
        f"{results['p99_max_window_error']:.2f} (note Sec. 5.1: below {PAPER_P99_MAX_WINDOW_ERROR:g})"
    )
    print(
        f"one-step additive error: 1% quantile = {results['p01_one_step_error']:.2f} "
        f"(note Sec. 5.2: not smaller than {PAPER_P01_ONE_STEP_ERROR:g})"
    )
    print(f"{args.repetitions} repetitions, seeded source, seed {args.seed}; wrote:")
    for path in results["files"].values():
        print(f"  {path}")
    print(f"elapsed {results['elapsed_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
