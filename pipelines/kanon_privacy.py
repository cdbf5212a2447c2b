"""The privacy parameters of the k-anonymity server (k-anonymity note), in both directions.

From a target guarantee for the whole verdict stream to the per-draw noise::

    python -m pipelines.kanon_privacy --epsilon 3 --delta 1e-5 [--window-hours 168] [--k 50] [--json]

From per-draw noise TLap(eps, delta) (Sec. 4.1) to the guarantees::

    python -m pipelines.kanon_privacy --noise-epsilon 0.75 --noise-delta 1e-8 [--window-hours 168] [--k 50] [--json]

Both print the per-draw (eps, delta, A), the total bound 2A (Cor. 4.4), the
guarantee of one AboveThreshold instance (Cor. 4.4) and of the restarted
stream (Cor. 3.1 applied to Cor. 4.4). Steps are one hour, so w is the window
in hours.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from fractions import Fraction

from pipelines.common import CliError, CliParser, fail
from schemas.option_values import POSITIVE_EXACT, POSITIVE_INTEGER, Exact
from transforms.kanon.mechanisms.accounting import (
    DrawParameters,
    instance_guarantee,
    solve_draw_parameters,
    stream_guarantee,
)

OPEN_UNIT_EXACT = Exact(0, 1, low_open=True, high_open=True)  # a delta


def add_privacy_arguments(parser: argparse.ArgumentParser) -> None:
    """The two ways to give the noise: a stream target (--epsilon/--delta) or per-draw TLap (--noise-*)."""
    target = parser.add_argument_group("target guarantee of the whole verdict stream (Cor. 3.1 applied to Cor. 4.4)")
    target.add_argument("--epsilon", type=POSITIVE_EXACT, help="total epsilon of the stream, > 0, e.g. 3")
    target.add_argument("--delta", type=OPEN_UNIT_EXACT, help="total delta of the stream, in (0, 1), e.g. 1e-5")
    noise = parser.add_argument_group("per-draw noise TLap(eps, delta) of Sec. 4.1 (used for rho_1 and rho_2)")
    noise.add_argument("--noise-epsilon", type=POSITIVE_EXACT, help="per-draw epsilon, > 0")
    noise.add_argument("--noise-delta", type=OPEN_UNIT_EXACT, help="per-draw delta, in (0, 1)")
    parser.add_argument("--window-hours", type=POSITIVE_INTEGER, default=168,
                        help="window w in one-hour steps (default 168)")


def draw_from_args(args: argparse.Namespace) -> DrawParameters:
    """The per-draw parameters from exactly one of the two pairs; a CliError otherwise."""
    target_given = [v is not None for v in (args.epsilon, args.delta)]
    noise_given = [v is not None for v in (args.noise_epsilon, args.noise_delta)]
    if any(target_given) == any(noise_given):
        raise CliError(
            "give exactly one of --epsilon/--delta (stream target) or --noise-epsilon/--noise-delta (per draw)"
        )
    if any(target_given) and not all(target_given):
        raise CliError("--epsilon and --delta go together")
    if any(noise_given) and not all(noise_given):
        raise CliError("--noise-epsilon and --noise-delta go together")
    if any(target_given):
        draw = solve_draw_parameters(args.epsilon, args.delta, args.window_hours)
    else:
        draw = DrawParameters(args.noise_epsilon, args.noise_delta)
    try:  # the exact values are in their domains; their float view (the sampled noise) may still be out of range
        draw.noise()
    except (ValueError, OverflowError) as exc:
        raise CliError(f"the per-draw noise TLap(eps, delta) cannot be sampled in floating point: {exc}") from exc
    return draw


def describe(draw: DrawParameters, window_steps: int) -> dict:
    """The noise and both guarantees as a JSON-ready dict of floats (reused by the pipelines' summary.json)."""
    instance = instance_guarantee(draw, window_steps)
    stream = stream_guarantee(draw, window_steps)
    return {
        "noise_epsilon": float(draw.epsilon),
        "noise_delta": float(draw.delta),
        "A": draw.A,
        "total_bound": draw.total_bound,
        "instance_epsilon": float(instance.epsilon),
        "instance_delta": float(instance.delta),
        "stream_epsilon": float(stream.epsilon),
        "stream_delta": float(stream.delta),
        "basis": f"instance: {instance.basis}; stream: {stream.basis}",
    }


def _exact(value: Fraction) -> str:
    """A float for reading and, unless it is an integer, the exact Fraction."""
    return str(value) if value.denominator == 1 else f"{float(value):.6g} (= {value})"


def report_lines(draw: DrawParameters, window_steps: int, k: int) -> list[str]:
    """A few human lines: the per-draw noise, the bound 2A against k, and both guarantees."""
    instance = instance_guarantee(draw, window_steps)
    stream = stream_guarantee(draw, window_steps)
    bound = draw.total_bound
    return [
        f"per-draw noise TLap(eps, delta) (Sec. 4.1): eps = {_exact(draw.epsilon)}, delta = {_exact(draw.delta)}, "
        f"A = {draw.A:.4f}",
        f"total bound 2A = {bound:.4f} (Cor. 4.4): with k = {k}, a true verdict has count >= {k - bound:.2f} "
        f"and a false verdict has count <= {k + bound:.2f}",
        f"one AboveThreshold instance, w = {window_steps}: ({_exact(instance.epsilon)}, {_exact(instance.delta)})-DP "
        f"[{instance.basis}]",
        f"whole verdict stream: ({_exact(stream.epsilon)}, {_exact(stream.delta)})-DP [{stream.basis}]",
    ]


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m pipelines.kanon_privacy", description=__doc__.split("\n\n")[0])
    add_privacy_arguments(parser)
    parser.add_argument("--k", type=POSITIVE_INTEGER, default=50,
                        help="threshold k, to state the bound 2A against it (default 50)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        draw = draw_from_args(args)
    except CliError as error:
        return fail(error)
    if args.json:
        print(json.dumps({**describe(draw, args.window_hours), "window_steps": args.window_hours, "k": args.k}))
    else:
        print("\n".join(report_lines(draw, args.window_hours, args.k)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
