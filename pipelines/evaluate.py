"""Reproduce the Cookie Monster evaluation (Cookie Monster paper Sec. 8), Appendix D bias detection and Big Bird's
depletion attack (arXiv 2506.05290 Sec. 7).

    python -m pipelines.evaluate EXPERIMENT [EXPERIMENT ...] --output DIR [--full] [--scale S] [--seed N]
        [--repetitions R] [--data-dir D] [--event-files] [--compare-with RESULTS_JSON] [--quiet]
    python -m pipelines.evaluate custom --impressions PATH --conversions PATH --batch-size B --output DIR
        [--epochs 1,7,14,30,60] [--seed N] [--repetitions R] [--quiet]

EXPERIMENT is ``microbenchmark-knob1`` and ``microbenchmark-knob2`` (Fig. 4),
``patcg`` (Fig. 5), ``criteo`` (Fig. 6), ``bias-detection`` (Appendix D),
``big-bird`` (Big Bird's depletion attack on the W3C Attribution API, its Fig. 5)
or ``all``. ``custom`` runs the Fig. 5/6 panels on your own files. Each
experiment writes its CSVs and PNGs into DIR, merges its points and headline
numbers into ``DIR/results.json`` and rewrites ``DIR/report.md`` from it, so
experiments can be run one at a time into the same directory. Generated
datasets go to ``DIR/data`` (or ``--data-dir``) as columns (``columns/*.npz``:
encoding Avro would be most of the cost of generating them; ``--event-files``
writes the Avro event files too) and are reused when their parameters match.
Runs use the in-memory reference of the measurement job, computed column-wise
(``evaluation.columnar``); ``big-bird`` replays the Attribution API backend's
budgets column-wise (``evaluation.depletion``); all with seeded randomness
(simulation mode), like every evaluation output.

The figures need matplotlib, from the ``eval`` extra
(``pip install 'privacy-measurement-beam[eval]'``); without it ``--help`` works
and a run stops before any work with that one line (exit 2).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from evaluation import bigbird, figures, realistic
from evaluation.data import load_dataset
from evaluation.experiments import (
    EPOCH_SWEEP,
    ExperimentOutput,
    Settings,
    bias_detection,
    microbenchmark,
)
from evaluation.output import merge_results
from evaluation.report import write_report
from pipelines.common import CliError, CliParser, InputError, configure_logging, fail
from schemas.option_values import POSITIVE_INTEGER, SEED, Real

EXPERIMENTS: dict[str, Callable[[Settings], ExperimentOutput]] = {
    "microbenchmark-knob1": lambda settings: microbenchmark(settings, "knob1"),
    "microbenchmark-knob2": lambda settings: microbenchmark(settings, "knob2"),
    "patcg": realistic.patcg,
    "criteo": realistic.criteo,
    "bias-detection": bias_detection,
    "big-bird": bigbird.big_bird,
}
PAPER = {"patcg": realistic.PATCG_PAPER, "criteo": realistic.CRITEO_PAPER, "custom": ["n/a", "n/a", "n/a"]}


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m pipelines.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiments", nargs="+", metavar="EXPERIMENT",
                        help=f"one or more of {', '.join(EXPERIMENTS)}, all, or custom")
    parser.add_argument("--output", required=True, help="output directory (CSV, PNG, results.json, report.md)")
    parser.add_alias("--out", "--output")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="size", action="store_const", const="quick", default="quick",
                      help="sizes that run here in minutes (the default)")
    size.add_argument("--full", dest="size", action="store_const", const="full",
                      help="the paper's sweeps (knob values down to 0.001) at larger default scales")
    size.add_argument("--tiny", dest="size", action="store_const", const="tiny",
                      help="the smallest sizes, seconds per experiment (tests and smoke runs)")
    parser.add_argument("--scale", type=Real(0, 1, low_open=True),
                        help="dataset scale for patcg (of 24M conversions) and criteo and big-bird (of 12M impressions); "
                             "1 is the paper's size (default: 0.005 / 0.05 quick, 0.1 / 0.5 full)")
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the data and of the simulation (default 0)")
    parser.add_argument("--repetitions", type=POSITIVE_INTEGER, default=200,
                        help="noise draws per query for the empirical RMSRE and the bias bound (default 200)")
    parser.add_argument("--data-dir", help="where generated datasets are kept (default DIR/data)")
    parser.add_argument("--event-files", action="store_true",
                        help="also write the generated datasets as Avro event files (to run the measurement job on "
                             "them); by default only their columns are kept (DIR/data/*/columns/*.npz)")
    parser.add_argument("--compare-with", metavar="RESULTS_JSON",
                        help="another run's results.json (e.g. docs/results/results.json): the report's headline "
                             "table gets a column with its numbers")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    own = parser.add_argument_group("custom: your own data")
    own.add_argument("--impressions", help="file or glob of impressions")
    own.add_argument("--conversions", help="file or glob of conversions with their attribution requests")
    own.add_argument("--batch-size", type=POSITIVE_INTEGER, help="reports per query B")
    own.add_argument("--epochs", default=",".join(str(d) for d in EPOCH_SWEEP),
                     help="epoch lengths in days to sweep (default 1,7,14,30,60)")
    return parser


def _chosen(names: list[str]) -> list[str]:
    if "all" in names:
        return list(EXPERIMENTS)
    unknown = [name for name in names if name not in EXPERIMENTS and name != "custom"]
    if unknown:
        raise CliError(f"unknown experiment {unknown[0]!r}; expected one of {', '.join(EXPERIMENTS)}, all, custom")
    return list(dict.fromkeys(names))


def _custom(args: argparse.Namespace, settings: Settings) -> ExperimentOutput:
    if not (args.impressions and args.conversions and args.batch_size):
        raise CliError("custom needs --impressions, --conversions and --batch-size")
    try:
        epochs = tuple(int(days) for days in args.epochs.split(","))
    except ValueError:
        raise CliError(f"--epochs must be a comma-separated list of days, got {args.epochs!r}") from None
    if not epochs or min(epochs) < 1:
        raise CliError(f"--epochs must list positive numbers of days, got {args.epochs!r}")
    dataset = load_dataset("custom", args.impressions, args.conversions, progress=not args.quiet)
    return realistic.custom(settings, dataset, args.batch_size, epochs)


def _comparison(path: str) -> tuple[str, dict]:
    """The label and content of the ``--compare-with`` results: "<size> size" (the size its runs used)."""
    try:
        other = json.loads(Path(path).read_text(encoding="utf-8"))
        sizes = {entry.get("size", "quick") for entry in other["experiments"].values()}
    except (OSError, ValueError, KeyError, AttributeError) as error:
        raise CliError(f"--compare-with {path}: not a readable results.json ({error})") from None
    return (" / ".join(sorted(sizes)) + " size", other)


def run(argv: list[str] | None) -> tuple[Path, list[ExperimentOutput]]:
    args = build_parser().parse_args(argv)
    names = _chosen(args.experiments)
    figures.require_matplotlib("eval")  # every experiment draws its figures: stop before any work without them
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings(out=out, size=args.size, seed=args.seed, repetitions=args.repetitions, quiet=args.quiet,
                        scale=args.scale, data_dir=Path(args.data_dir) if args.data_dir else None,
                        event_files=args.event_files)
    compare = _comparison(args.compare_with) if args.compare_with else None
    outputs = []
    for name in names:
        began = time.monotonic()
        output = _custom(args, settings) if name == "custom" else EXPERIMENTS[name](settings)
        output.seconds = time.monotonic() - began
        results = merge_results(out / "results.json", name, {
            "points": output.points, "headline": output.headline, "settings": output.settings,
            "files": output.files, "seconds": round(output.seconds, 1), "size": settings.size, "seed": settings.seed,
        })
        write_report(out, results, PAPER, compare=compare)
        print(f"{name}: done in {output.seconds:.0f} s; " + ", ".join(output.files), flush=True)
        outputs.append(output)
    return out, outputs


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    began = time.monotonic()
    try:
        out, outputs = run(sys.argv[1:] if argv is None else argv)
    except InputError as error:
        return fail(error)
    print(f"{len(outputs)} experiment(s) in {time.monotonic() - began:.0f} s; results: {out / 'results.json'}, "
          f"report: {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
