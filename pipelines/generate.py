"""Synthetic input data for the pipelines: ``python -m pipelines.generate DATASET --output DIR [options]``.

Each dataset's model lives in its own module of ``synthetic/`` (documented in that module's docstring), which
defines its options (``add_arguments``) and its run (``run_cli``); this entry point only registers them:

* ``kanon`` (``synthetic/kanon.py``): interest-group join events for the k-anonymity server (k-anonymity note);
* ``microbenchmark`` (``synthetic/microbenchmark.py``): Cookie Monster's microbenchmark (Cookie Monster paper Sec. 8.1-8.2);
* ``patcg-like``, ``criteo-like`` (``synthetic/patcg.py``, ``synthetic/criteo.py``): the realistic datasets of
  Cookie Monster paper Sec. 8.3 and 8.4;
* ``ara``, ``paa`` (``synthetic/ara.py``, ``synthetic/paa.py``): the inputs of the summary-report clients
  (Ghazi et al. Alg. 2 and 3); ``reports`` (``synthetic/reports.py``): aggregatable reports and an output domain;
* ``event-level`` (``synthetic/event_level.py``): ARA sources and triggers for event-level reports.

Every generator is deterministic (same options and seed, same bytes) and writes ``DIR/generation.json``. A bad
option (a value outside its declared domain, ``schemas/option_values.py``, at parse time; or one the generator
rejects) is a one-line error with status 2, an unwritable output one with status 1.
"""
from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence

from pipelines.common import CliParser
from synthetic import ara, criteo, event_level, kanon, microbenchmark, paa, patcg, reports

DATASETS = (
    (kanon, "kanon", "interest-group join events for the k-anonymity server",
     "Interest-group join events for the k-anonymity server (model: see the docstring of synthetic/kanon.py)."),
    (microbenchmark, "microbenchmark", "impressions and conversions of the Cookie Monster microbenchmark",
     "Impressions and conversions of the synthetic microbenchmark of Cookie Monster paper Sec. 8.1-8.2 (model: see the "
     "docstring of synthetic/microbenchmark.py)."),
    (patcg, "patcg-like", "impressions and conversions like PATCG's (Cookie Monster Sec. 8.3)",
     "A PATCG-like dataset of Cookie Monster paper Sec. 8.3 at --scale times the paper's size (model: see the docstring of "
     "synthetic/patcg.py)."),
    (criteo, "criteo-like", "impressions and conversions like Criteo's, optionally augmented (Cookie Monster "
     "Sec. 8.4)",
     "A Criteo-like dataset of Cookie Monster paper Sec. 8.4 at --scale times the paper's size, with --augment synthetic "
     "impressions per conversion (Criteo++) (model: see the docstring of synthetic/criteo.py)."),
    (ara, "ara", "ARA sources and triggers for the summary-report client (Ghazi et al. Alg. 2)",
     "Attribution Reporting sources and triggers for python -m pipelines.summary_client ara (model: see the "
     "docstring of synthetic/ara.py)."),
    (paa, "paa", "Private Aggregation ad events for the summary-report client (Ghazi et al. Alg. 3)",
     "Private Aggregation ad events for python -m pipelines.summary_client paa (model: see the docstring of "
     "synthetic/paa.py)."),
    (reports, "reports", "aggregatable reports and an output domain for the Aggregation Service (python -m "
     "pipelines.aggregate)",
     "Synthetic aggregatable reports (Avro AggregatableReport) and an output domain (model: see the docstring "
     "of synthetic/reports.py)."),
    (event_level, "event-level", "ARA sources and triggers for event-level reports (Ghazi et al. Alg. 4 and 8)",
     "Attribution Reporting sources and triggers for event-level reports, default and custom trigger specs "
     "(model: see the docstring of synthetic/event_level.py)."),
)


def _fail(dataset: str, message: str, code: int) -> SystemExit:
    """A one-line error on stderr and the SystemExit to raise."""
    print(f"generate {dataset}: error: {message}", file=sys.stderr)
    return SystemExit(code)


class _Parser(CliParser):
    """A parser whose errors are one line, ``generate DATASET: error: ...`` (``generate: error: ...`` before the
    dataset is known), with status 2 (DESIGN.md, "Command-line conventions")."""

    def __init__(self, *args, dataset: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)  # never abbreviates; an unknown option names the closest real one
        self.dataset = dataset

    def error(self, message: str):
        if self.dataset is None:
            print(f"generate: error: {message}", file=sys.stderr)
            raise SystemExit(2)
        raise _fail(self.dataset, message, 2)


def _dataset_main(dataset: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a generator: a bad option (``ValueError``) is a one-line error with status 2, an unwritable output
    (``OSError``) one with status 1."""
    try:
        return run(args)
    except ValueError as error:
        raise _fail(dataset, str(error), 2) from None
    except OSError as error:
        raise _fail(dataset, str(error), 1) from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m pipelines.generate", description="Generate synthetic input data.")
    sub = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    for module, name, help_text, description in DATASETS:
        dataset_parser = sub.add_parser(name, help=help_text, description=description, dataset=module.DATASET)
        module.add_arguments(dataset_parser)
        dataset_parser.set_defaults(run=functools.partial(_dataset_main, module.DATASET, module.run_cli))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
