"""The experiments of ``python -m pipelines.evaluate``: Cookie Monster paper Sec. 8 (Fig. 4, 5, 6) and Appendix D
(Big Bird's depletion attack is ``evaluation.bigbird``).

Each experiment generates (or reuses) its datasets under ``DIR/data``, loads
each once, runs its points (``runs.Runner``) and writes its CSVs and PNG into
``DIR``; it returns an ``ExperimentOutput`` whose points and headline numbers
``pipelines.evaluate`` merges into ``DIR/results.json`` and ``DIR/report.md``.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np

from evaluation import figures
from evaluation.data import Dataset, load_dataset
from evaluation.output import Progress, write_csv, write_dict_csv
from evaluation.runs import POLICY_ORDER, Runner, RunResult, RunSpec
from synthetic import microbenchmark as microbenchmark_model
from synthetic.microbenchmark import MICRO_BATCH_SIZE, MICRO_VALUE, generate_microbenchmark
from transforms.budgeting.mechanisms.bias import BiasDetection
from transforms.core.mechanisms.noise import DEFAULT_GRANULARITY, DiscreteLaplace, SeededSource

BUDGET_COLUMNS = ("avg_budget_requested", "avg_budget_converted", "avg_budget_all", "max_budget")
QUERY_COLUMNS = ("policy", "epoch_days", "querier_site", "query_key", "batch_index", "executed", "true_value",
                 "biased_value", "noise_scale", "rmsre", "rmsre_empirical")
EPOCH_SWEEP = (1, 7, 14, 30, 60)


@dataclass(frozen=True)
class Sizes:
    """The sizes of one run mode: ``tiny`` (tests and smoke runs, seconds), ``quick`` (the default, minutes here)
    or ``full`` (the paper's sweeps; larger datasets)."""

    micro_batch: int  # B of the microbenchmark (the paper's 2,000)
    micro_products: int  # products, each queried twice
    knob1: tuple
    knob2: tuple
    bias_batch: int
    bias_kappas: tuple
    epoch_sweep: tuple
    patcg_scale: float  # of the paper's 24M conversions
    criteo_scale: float  # of the paper's 12M impressions
    criteo_augment: tuple
    big_bird_quotas: tuple  # impression-site quotas swept (epsilon; Big Bird Fig. 5)
    big_bird_globals: tuple  # global budgets swept (epsilon)
    big_bird_ranks: tuple  # popularity rank of the first hijacked site, swept (Big Bird Fig. 6c)
    big_bird_caps: tuple  # per-user-action caps (conversion sites per user action and epoch), swept (Big Bird Fig. 6a)


SIZES = {
    "tiny": Sizes(50, 2, (0.1, 1.0), (0.1, 1.0), 50, (1.0, 10.0), (7, 30), 0.0002, 0.01, (0, 3), (0.5, 2.0, 8.0),
                  (1.0, 8.0), (1, 11), (1, 2)),
    "quick": Sizes(2000, 10, (0.01, 0.1, 0.5, 1.0), (0.01, 0.1, 0.5, 1.0), 200, (0.5, 1.0, 2.0, 5.0, 10.0, 20.0),
                   EPOCH_SWEEP, 0.005, 0.05, (0, 3, 6, 9), (0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 8.0),
                   (1.0, 2.0, 4.0, 8.0, 16.0, 32.0), (1, 11, 21, 31, 41), (1, 2, 3, 4)),
    "full": Sizes(2000, 10, (0.001, 0.01, 0.1, 0.5, 1.0), (0.001, 0.01, 0.1, 0.5, 1.0), 200,
                  (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0), EPOCH_SWEEP, 0.1, 0.5, (0, 3, 6, 9),
                  (0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.5, 8.0), (1.0, 2.0, 4.0, 8.0, 16.0, 32.0),
                  (1, 11, 21, 31, 41), (1, 2, 3, 4)),
}


@dataclass
class Settings:
    """What every experiment is run with (``pipelines.evaluate`` options)."""

    out: Path
    size: str = "quick"
    seed: int = 0
    repetitions: int = 200
    quiet: bool = False
    scale: float | None = None  # None: the size's default for patcg and criteo
    data_dir: Path | None = None
    event_files: bool = False  # also write the generated datasets as Avro event files (else their columns only)

    @property
    def data(self) -> Path:
        return self.data_dir or self.out / "data"

    @property
    def sizes(self) -> Sizes:
        return SIZES[self.size]


@dataclass
class ExperimentOutput:
    name: str
    points: list[dict]
    files: list[str]
    headline: dict
    settings: dict
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def generated_dataset(path: Path, parameters: dict, write: Callable[[], object], generator: ModuleType) -> Path:
    """``path`` holding the dataset of ``parameters``, reused when it was written with the same parameters by
    the same ``generator`` source (its SHA-256, recorded in ``evaluation-key.json``; a changed model is never
    silently reused), else (re)written by ``write``."""
    key = {"parameters": parameters,
           "generator_sha256": hashlib.sha256(Path(inspect.getfile(generator)).read_bytes()).hexdigest()}
    marker = path / "evaluation-key.json"
    if (path / "generation.json").exists() and marker.exists() and json.loads(marker.read_text()) == key:
        return path
    write()
    marker.write_text(json.dumps(key, sort_keys=True), encoding="utf-8")
    return path


def microbenchmark_data(settings: Settings, knob1: float, knob2: float, batch_size: int = MICRO_BATCH_SIZE,
                        products: int = 10) -> Dataset:
    """The Sec. 8.1 microbenchmark for (knob1, knob2), generated once under ``DIR/data`` and loaded."""
    path = settings.data / f"microbenchmark-b{batch_size}-p{products}-k1-{knob1}-k2-{knob2}-s{settings.seed}"
    parameters = {"knob1": knob1, "knob2": knob2, "batch_size": batch_size, "products": products,
                  "seed": settings.seed, "event_files": settings.event_files}
    generated_dataset(path, parameters, lambda: generate_microbenchmark(
        path, knob1=knob1, knob2=knob2, batch_size=batch_size, products=products, seed=settings.seed,
        progress=not settings.quiet, sidecars=True, event_files=settings.event_files), microbenchmark_model)
    return load_dataset(path.name, str(path / "impressions-*"), str(path / "conversions-*"), progress=not settings.quiet)


def describe_run(result: RunResult) -> str:
    row = result.row()
    params = ", ".join(f"{name}={value}" for name, value in result.spec.params)
    return (f"{params + ', ' if params else ''}{result.spec.policy}, {result.spec.epoch_days}-day epochs: average "
            f"{row['avg_budget_requested']:.4f} (requested) {row['avg_budget_all']:.4f} (all devices), maximum "
            f"{row['max_budget']:.4f}, {row['queries_executed']}/{row['queries_total']} queries executed "
            f"in {row['seconds']:.1f} s")


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


# --------------------------------------------------------------------------- Fig. 4: microbenchmark knobs

KNOB_DEFAULT = 0.1  # the other knob's value (Cookie Monster paper Sec. 8.2)


def microbenchmark(settings: Settings, knob: str) -> ExperimentOutput:
    """Fig. 4 a-b (``knob1``) or c-d (``knob2``): average and maximum budget per policy as the knob varies."""
    name = f"microbenchmark-{knob}"
    progress = Progress(name, settings.quiet)
    points = []
    sizes = settings.sizes
    values = getattr(sizes, knob)
    events_read = 0
    for value in values:
        knob1, knob2 = (value, KNOB_DEFAULT) if knob == "knob1" else (KNOB_DEFAULT, value)
        dataset = microbenchmark_data(settings, knob1, knob2, sizes.micro_batch, sizes.micro_products)
        events_read += dataset.read
        runner = Runner(dataset, sizes.micro_batch, seed=settings.seed, repetitions=settings.repetitions)
        for policy in POLICY_ORDER:
            result = runner.run(RunSpec(policy, params=(("knob1", knob1), ("knob2", knob2))))
            progress(describe_run(result))
            points.append(result.row())
    out = settings.out
    csv_path = write_dict_csv(out / f"{name}_budget.csv", points, ("policy", "knob1", "knob2", *BUDGET_COLUMNS))
    letters = "ab" if knob == "knob1" else "cd"
    png = figures.save(out / f"fig4{letters}_{name}.png", [
        figures.sweep_panel(points, knob, "avg_budget_requested", f"({letters[0]}) average budget vs {knob} "
                            "(dotted: over all devices)", "epsilon consumed", dashed="avg_budget_all", log_y=True),
        figures.sweep_panel(points, knob, "max_budget", f"({letters[1]}) maximum budget vs {knob}", "epsilon consumed",
                            log_y=True),
    ])
    default = [p for p in points if p["knob1"] == KNOB_DEFAULT and p["knob2"] == KNOB_DEFAULT]
    by_policy = {p["policy"]: p for p in default}
    headline = {
        "at_default_knobs": {p["policy"]: {c: p[c] for c in BUDGET_COLUMNS} for p in default},
        "ipa_over_cookie_monster_average": ratio(by_policy.get("ipa_like", {}).get("avg_budget_requested"),
                                                  by_policy.get("cookie_monster", {}).get("avg_budget_requested")),
        "ara_over_cookie_monster_average": ratio(by_policy.get("ara_like", {}).get("avg_budget_requested"),
                                                  by_policy.get("cookie_monster", {}).get("avg_budget_requested")),
        "cookie_monster_lowest_everywhere": _lowest_everywhere(points, knob),
    }
    return ExperimentOutput(name, points, [csv_path.name, png.name], headline,
                            {"batch_size": sizes.micro_batch, "products": sizes.micro_products, "values": list(values),
                             "other_knob": KNOB_DEFAULT, "events_read": events_read}, progress.elapsed())


def _lowest_everywhere(points: list[dict], knob: str) -> bool:
    """Whether Cookie Monster's average is the lowest of the three policies at every value of ``knob``."""
    for value in {p[knob] for p in points}:
        here = {p["policy"]: p["avg_budget_requested"] for p in points if p[knob] == value}
        if here.get("cookie_monster", 0.0) > min(here.values()):
            return False
    return True


# --------------------------------------------------------------------------- Appendix D: bias detection

BIAS_VARIANTS = (("epochs", True), ("reports", True), ("epochs", False))  # (count, heartbeats)
BIAS_BETA = 0.05
BIAS_KNOBS = {"knob1": 0.5, "knob2": 0.1}  # with small batches (large epsilon): devices run out of budget
BIAS_VALUE = MICRO_VALUE  # the microbenchmark's query global sensitivity Delta


def _request_epsilon(result: RunResult) -> float:
    """The epsilon the run's reports requested (one value in the microbenchmark)."""
    return result.record.first_requested_epsilon


def _bound_draws(result: RunResult, bias: BiasDetection, repetitions: int, seed: int) -> list[dict]:
    """Per executed query: the true L1 bias, the noise-free count, and the bound over ``repetitions`` draws of
    the counting coordinate's noise (discrete Laplace on the release grid, the query's own scale)."""
    source = SeededSource(seed)
    batches = {(b.querier_site, b.query_key, b.batch_index): b for b in result.record.batches}
    rows = []
    for query in result.queries:
        if not query.executed:
            continue
        batch = batches[(query.querier_site, query.query_key, query.batch_index)]
        scale = query.noise_scale
        grid = DiscreteLaplace(Fraction(scale) / DEFAULT_GRANULARITY)
        noise = grid.sample_array(source, repetitions) * float(DEFAULT_GRANULARITY)
        counted = batch.sums[0]
        bounds = np.maximum(0.0, (counted + noise + scale * math.log(1 / bias.beta)) / float(bias.kappa)
                            * batch.bias_weight)
        true_bias = float(np.abs(np.array(query.true_value) - np.array(query.biased_value)).sum())
        rows.append({
            "count_covered": float(np.mean(noise >= -scale * math.log(1 / bias.beta))),
            "true_bias": true_bias,
            "true_value": float(np.abs(np.array(query.true_value)).sum()),
            "count": counted / float(bias.kappa),
            "covered": float(np.mean(bounds >= true_bias - 1e-9)),
            "bound_median": float(np.median(bounds)),
        })
    return rows


def bias_detection(settings: Settings) -> ExperimentOutput:
    """Appendix D evaluated: for each kappa and variant, coverage of the bound (over noise repetitions),
    tightness (bound / true bias) and the extra budget the counting query costs."""
    name = "bias-detection"
    progress = Progress(name, settings.quiet)
    sizes = settings.sizes
    dataset = microbenchmark_data(settings, BIAS_KNOBS["knob1"], BIAS_KNOBS["knob2"], sizes.bias_batch,
                                  sizes.micro_products)
    runner = Runner(dataset, sizes.bias_batch, seed=settings.seed)
    baseline = runner.run(RunSpec("cookie_monster"))
    progress(describe_run(baseline))
    base_budget = baseline.row()["avg_budget_converted"]
    repetitions = max(settings.repetitions, 100)
    points = []
    for count, heartbeats in BIAS_VARIANTS:
        for kappa in sizes.bias_kappas:
            bias = BiasDetection(Fraction(kappa), count, BIAS_BETA, heartbeats)
            result = runner.run(RunSpec("cookie_monster", bias=bias, params=(("kappa", kappa), ("count", count),
                                                                            ("heartbeats", heartbeats))))
            queries = _bound_draws(result, bias, repetitions, settings.seed)
            biased = [q for q in queries if q["true_bias"] > 0]
            row = result.row()
            point = {
                **row,
                "coverage": float(np.mean([q["covered"] for q in queries])) if queries else None,
                "count_coverage": float(np.mean([q["count_covered"] for q in queries])) if queries else None,
                "target_coverage": 1 - BIAS_BETA,
                "nominal_extra_loss": float(bias.kappa) * _request_epsilon(result) / BIAS_VALUE,
                "tightness_median": float(np.median([q["bound_median"] / q["true_bias"] for q in biased])) if biased else None,
                "queries_with_bias": len(biased),
                "bound_relative_median": float(np.median([q["bound_median"] / q["true_value"] for q in queries
                                                          if q["true_value"]])) if queries else None,
                "mean_relative_bias": float(np.mean([q["true_bias"] / q["true_value"] for q in queries if q["true_value"]]))
                if queries else None,
                "extra_budget_converted": row["avg_budget_converted"] - base_budget,
            }
            points.append(point)
            progress(f"kappa={kappa} count={count} heartbeats={heartbeats}: coverage {point['coverage']:.4f}, "
                     f"tightness {point['tightness_median'] or float('nan'):.2f}, extra budget "
                     f"{point['extra_budget_converted']:.4f}")
    out = settings.out
    columns = ("kappa", "count", "heartbeats", "coverage", "count_coverage", "target_coverage", "nominal_extra_loss",
               "tightness_median", "bound_relative_median", "queries_with_bias", "queries_executed", "mean_relative_bias",
               "avg_budget_converted", "extra_budget_converted")
    csv_path = write_dict_csv(out / f"{name}.csv", points, columns)
    png = figures.save(out / "bias_detection.png", [
        figures.kappa_panel(points, BIAS_VARIANTS, "coverage", "(a) coverage of the bound (target 1 - beta dashed)",
                            1 - BIAS_BETA),
        figures.kappa_panel(points, BIAS_VARIANTS, "tightness_median", "(b) tightness: median bound / true bias",
                            log_y=True),
        figures.kappa_panel(points, BIAS_VARIANTS, "extra_budget_converted",
                            "(c) extra average budget (devices that converted)"),
    ])
    headline = {
        "beta": BIAS_BETA,
        "baseline_avg_budget_converted": base_budget,
        "baseline_mean_relative_bias": float(np.mean([
            abs(sum(q.true_value) - sum(q.biased_value)) / sum(q.true_value)
            for q in baseline.queries if q.executed and sum(q.true_value)])),
        "min_coverage": min(p["coverage"] for p in points if p["coverage"] is not None),
    }
    return ExperimentOutput(name, points, [csv_path.name, png.name], headline,
                            {**BIAS_KNOBS, "batch_size": sizes.bias_batch, "products": sizes.micro_products,
                             "beta": BIAS_BETA, "repetitions": repetitions, "kappas": list(sizes.bias_kappas),
                             "events_read": dataset.read},
                            progress.elapsed())


def query_rows(result: RunResult) -> list[list]:
    """The per-query CSV rows of one run (``QUERY_COLUMNS``)."""
    return [[result.spec.policy, result.spec.epoch_days, q.querier_site, q.query_key, q.batch_index, q.executed,
             ";".join(f"{v:g}" for v in q.true_value), ";".join(f"{v:g}" for v in q.biased_value), q.noise_scale,
             q.rmsre, q.rmsre_empirical] for q in result.queries]


def write_query_csv(path: Path, results: list[RunResult]) -> Path:
    return write_csv(path, QUERY_COLUMNS, [row for result in results for row in query_rows(result)])
