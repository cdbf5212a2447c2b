"""The privacy parameters of the k-anonymity server (seed 004), in both directions.

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
from fractions import Fraction
from typing import NoReturn, Sequence

from transforms.kanon.mechanisms.accounting import (
    DrawParameters,
    instance_guarantee,
    solve_draw_parameters,
    stream_guarantee,
)


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (DESIGN.md CLI conventions)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_privacy_arguments(parser: argparse.ArgumentParser) -> None:
    """The two ways to give the noise: a stream target (--epsilon/--delta) or per-draw TLap (--noise-*)."""
    target = parser.add_argument_group("target guarantee of the whole verdict stream (Cor. 3.1 applied to Cor. 4.4)")
    target.add_argument("--epsilon", type=str, help="total epsilon of the stream, e.g. 3")
    target.add_argument("--delta", type=str, help="total delta of the stream, e.g. 1e-5")
    noise = parser.add_argument_group("per-draw noise TLap(eps, delta) of Sec. 4.1 (used for rho_1 and rho_2)")
    noise.add_argument("--noise-epsilon", type=str, help="per-draw epsilon")
    noise.add_argument("--noise-delta", type=str, help="per-draw delta")
    parser.add_argument("--window-hours", type=int, default=168, help="window w in one-hour steps (default 168)")


def _fraction(text: str) -> Fraction:
    """A decimal ('1e-5', '0.75') or a ratio ('3/4') as an exact Fraction."""
    return Fraction(text.strip())


def draw_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> DrawParameters:
    """The per-draw parameters from exactly one of the two pairs; a one-line parser error otherwise."""
    target_given = [v is not None for v in (args.epsilon, args.delta)]
    noise_given = [v is not None for v in (args.noise_epsilon, args.noise_delta)]
    if any(target_given) == any(noise_given):
        parser.error(
            "give exactly one of --epsilon/--delta (stream target) or --noise-epsilon/--noise-delta (per draw)"
        )
    if any(target_given) and not all(target_given):
        parser.error("--epsilon and --delta go together")
    if any(noise_given) and not all(noise_given):
        parser.error("--noise-epsilon and --noise-delta go together")
    if args.window_hours < 1:
        parser.error(f"--window-hours must be >= 1, got {args.window_hours}")
    try:
        if any(target_given):
            return solve_draw_parameters(_fraction(args.epsilon), _fraction(args.delta), args.window_hours)
        return DrawParameters(_fraction(args.noise_epsilon), _fraction(args.noise_delta))
    except (ValueError, ZeroDivisionError) as exc:
        parser.error(str(exc))


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="python -m pipelines.kanon_privacy", description=__doc__.split("\n\n")[0])
    add_privacy_arguments(parser)
    parser.add_argument("--k", type=int, default=50, help="threshold k, to state the bound 2A against it (default 50)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)
    draw = draw_from_args(parser, args)
    if args.json:
        print(json.dumps({**describe(draw, args.window_hours), "window_steps": args.window_hours, "k": args.k}))
    else:
        print("\n".join(report_lines(draw, args.window_hours, args.k)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
