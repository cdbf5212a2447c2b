"""The PNG figures of the evaluation (Cookie Monster paper Fig. 4, 5, 6, the Appendix D bias-detection figure, and Big
Bird Fig. 5).

Each function draws one panel on a matplotlib ``Axes`` from plain rows (the
dicts of ``results.json``) or arrays, so the figures can be redrawn from the
JSON alone; ``save`` lays panels out and writes the PNG.

matplotlib is an extra (``plots``, also in ``eval``) and is imported only when a
figure is drawn: without it this module imports, and ``require_matplotlib``
(which ``save`` calls) raises ``PlottingUnavailable``, one line naming the extra.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from transforms.core.io import InputError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.patches import Rectangle

COLORS = {"ipa_like": "tab:red", "ara_like": "tab:blue", "cookie_monster": "tab:green"}
LABELS = {"ipa_like": "IPA-like", "ara_like": "ARA-like", "cookie_monster": "Cookie Monster"}
DISTRIBUTION = "privacy-measurement-beam"  # setup.py's name, for the install hint


class PlottingUnavailable(InputError):
    """A figure was asked for and matplotlib is not installed: one line naming the extra to install."""


def require_matplotlib(extra: str = "plots") -> None:
    """Raises ``PlottingUnavailable`` when matplotlib cannot be imported; entry points call it before any work,
    so a run without the extra stops at once with ``plotting needs matplotlib: pip install '...[extra]'``."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlottingUnavailable(f"plotting needs matplotlib: pip install '{DISTRIBUTION}[{extra}]'") from None


def new_figure(width: float, height: float):
    """A matplotlib ``Figure`` of ``width`` x ``height`` inches drawn by the Agg canvas (no display needed)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


def save(path: Path, panels: Sequence[Callable[[Axes], None]], columns: int | None = None) -> Path:
    """One PNG with a panel per callable, left to right (``columns`` per row)."""
    columns = columns or len(panels)
    rows = -(-len(panels) // columns)
    figure = new_figure(4.6 * columns, 3.8 * rows)
    for index, draw in enumerate(panels):
        draw(figure.add_subplot(rows, columns, index + 1))
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def _finish(axes: Axes, title: str, xlabel: str, ylabel: str, legend: str = "upper left") -> None:
    axes.set_title(title, fontsize=9)
    axes.set_xlabel(xlabel, fontsize=8)
    axes.set_ylabel(ylabel, fontsize=8)
    axes.tick_params(labelsize=7)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, loc=legend)


def sweep_panel(points: list[dict], x: str, y: str, title: str, ylabel: str, log_x: bool = True,
                dashed: str | None = None, log_y: bool = False) -> Callable[[Axes], None]:
    """``y`` (and ``dashed``, dotted) against ``x`` per policy (Fig. 4)."""
    def draw(axes: Axes) -> None:
        shown = [p[column] for p in points for column in (y, dashed) if column]
        for policy, color in COLORS.items():
            mine = sorted((p for p in points if p["policy"] == policy), key=lambda p: p[x])
            if not mine:
                continue
            axes.plot([p[x] for p in mine], [p[y] for p in mine], marker="o", color=color, label=LABELS[policy])
            if dashed:
                axes.plot([p[x] for p in mine], [p[dashed] for p in mine], linestyle=":", color=color)
        if log_x:
            axes.set_xscale("log")
        if log_y and shown and min(shown) > 0:  # a zero (nothing spent) keeps the linear scale
            axes.set_yscale("log")
        _finish(axes, title, x, ylabel, legend="best")
    return draw


def curve_panel(curves: dict[str, Sequence[float]], title: str, xlabel: str, ylabel: str,
                markers: dict[str, Sequence[bool]] | None = None) -> Callable[[Axes], None]:
    """One line per policy against 1, 2, ... (Fig. 5a); ``markers`` dots the executed points."""
    def draw(axes: Axes) -> None:
        for policy, values in curves.items():
            xs = np.arange(1, len(values) + 1)
            axes.plot(xs, values, color=COLORS.get(policy), label=LABELS.get(policy, policy))
            if markers and policy in markers:
                shown = np.asarray(markers[policy], dtype=bool)
                axes.plot(xs[shown], np.asarray(values)[shown], ".", color=COLORS.get(policy), markersize=4)
        _finish(axes, title, xlabel, ylabel)
    return draw


def cdf_panel(samples: dict[str, Sequence[float]], title: str, xlabel: str, total: dict[str, int] | None = None,
              log_x: bool = False) -> Callable[[Axes], None]:
    """Empirical CDFs (Fig. 5b, 6a, 6b, 6d). With ``total``, a CDF over ``total[name]`` items of which only
    ``samples[name]`` have a value (IPA-like's line stops at its executed share)."""
    def draw(axes: Axes) -> None:
        from matplotlib import colormaps

        smallest = np.inf
        variants = [name for name in samples if name not in COLORS]  # e.g. "cookie_monster +3": shades of green
        # strict=False: without variants the colormap still gives one shade (linspace of at least one point)
        shades = dict(zip(variants, colormaps["Greens"](np.linspace(0.35, 0.95, max(len(variants), 1))), strict=False))
        for name, values in samples.items():
            ordered = np.sort(np.asarray(values, dtype=float))
            if ordered.size == 0:
                continue
            smallest = min(smallest, ordered[0])
            denominator = total[name] if total else ordered.size
            # the same steps from one point per distinct value (its last rank) after the first point: at the
            # paper's scale 16 M devices share a few thousand averages, and 16 M points would cost gigabytes
            distinct = np.unique(ordered)
            ranks = np.searchsorted(ordered, distinct, side="right")
            xs, ys = np.r_[ordered[0], distinct], np.r_[1, ranks] / denominator
            axes.step(xs, ys, where="post", color=COLORS.get(name, shades.get(name)), label=LABELS.get(name, name))
        if log_x:  # a log axis when every value is positive, else linear near 0 (devices that paid nothing)
            if smallest > 0:
                axes.set_xscale("log")
            else:
                axes.set_xscale("symlog", linthresh=1e-3)
        axes.set_ylim(0, 1.02)
        _finish(axes, title, xlabel, "CDF", legend="lower right")
    return draw


def spread_panel(points: list[dict], x: str, title: str, ylabel: str, executed_share: bool = True
                 ) -> Callable[[Axes], None]:
    """Fig. 5c / 6c: per policy and ``x`` value, the mean RMSRE (bar), +- one standard deviation (box, kept
    inside the range so that the log scale can show it) and the min-max range (whiskers); IPA-like's executed
    share is written above its bars."""
    def draw(axes: Axes) -> None:
        values = sorted({p[x] for p in points})
        width = 0.8 / len(COLORS)
        for offset, (policy, color) in enumerate(COLORS.items()):
            for position, value in enumerate(values):
                point = next((p for p in points if p["policy"] == policy and p[x] == value), None)
                if point is None or point.get("rmsre_mean") is None:
                    continue
                center = position + (offset - 1) * width
                mean, std = point["rmsre_mean"], point.get("rmsre_std") or 0.0
                low, high = max(mean - std, point["rmsre_min"]), min(mean + std, point["rmsre_max"])
                axes.add_patch(_box(center, width, low, high, color))
                axes.plot([center - width / 2, center + width / 2], [mean, mean], color="black", linewidth=1)
                axes.plot([center, center], [point["rmsre_min"], point["rmsre_max"]], color=color, linewidth=0.8)
                if executed_share and policy == "ipa_like":
                    share = point["queries_executed"] / max(point["queries_total"], 1)
                    axes.annotate(f"{100 * share:.1f}%", (center, point["rmsre_max"]), fontsize=6, ha="center",
                                  va="bottom")
        axes.set_xticks(range(len(values)), [str(v) for v in values])
        axes.set_yscale("log")
        for policy, color in COLORS.items():
            axes.plot([], [], color=color, linewidth=6, alpha=0.5, label=LABELS[policy])
        _finish(axes, title, x, ylabel)
    return draw


def kappa_panel(points: list[dict], variants: Sequence[tuple[str, bool]], y: str, title: str,
                reference: float | None = None, log_y: bool = False) -> Callable[[Axes], None]:
    """The bias-detection figure: ``y`` against kappa for each (count, heartbeats) variant (Thm. 15 or 16)."""
    def draw(axes: Axes) -> None:
        for count, heartbeats in variants:
            mine = [p for p in points if p["count"] == count and p["heartbeats"] == heartbeats and p[y] is not None]
            label = f"Thm. {15 if count == 'epochs' else 16}, {'heartbeats' if heartbeats else 'no heartbeats'}"
            axes.plot([p["kappa"] for p in mine], [p[y] for p in mine], marker="o", label=label)
        if reference is not None:
            axes.axhline(reference, color="gray", linestyle="--", linewidth=0.8)
        axes.set_xscale("log")
        if log_y:
            axes.set_yscale("log")
        _finish(axes, title, "kappa", y, legend="best")
    return draw


def series_panel(series: Mapping[str, tuple[Sequence[float], Sequence[float], str, str]], title: str, xlabel: str,
                 ylabel: str, references: Mapping[str, tuple[float, str, str]] | None = None, log_x: bool = False,
                 log_y: bool = False) -> Callable[[Axes], None]:
    """Labelled lines ``label -> (xs, ys, color, linestyle)`` and horizontal reference lines ``label -> (y, color,
    linestyle)`` (Big Bird Fig. 5: a swept system against fixed baselines)."""
    def draw(axes: Axes) -> None:
        for label, (xs, ys, color, style) in series.items():
            axes.plot(xs, ys, marker="o", markersize=3, color=color, linestyle=style, label=label)
        for label, (y, color, style) in (references or {}).items():
            axes.axhline(y, color=color, linestyle=style, linewidth=1, label=label)
        if log_x:
            axes.set_xscale("log", base=2)
        if log_y:
            axes.set_yscale("log")
        _finish(axes, title, xlabel, ylabel, legend="best")
    return draw


def _box(center: float, width: float, low: float, high: float, color: str) -> Rectangle:
    from matplotlib.patches import Rectangle

    return Rectangle((center - width / 2, low), width, max(high - low, 1e-12), color=color, alpha=0.5)
