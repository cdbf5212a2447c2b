"""A static HTML page with inline SVG charts: what a person opens after ``make demo``.

No server, no script, no plotting library: every chart is an ``<svg>`` element written here, so the page opens
from disk in any browser and needs nothing installed. Three shapes cover what the demo shows: a line chart over
time (``line_chart``), grouped bars (``bar_chart``) and points with an error band (``band_chart``).
"""
from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 45, 20, 50  # margins around the plotting area
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


@dataclass
class Section:
    """One pipeline's part of the page: a title, a sentence, headline numbers, charts and a table."""

    title: str
    summary: str
    headlines: list[tuple[str, str]] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)  # SVG elements
    table: tuple[Sequence[str], Sequence[Sequence[str]]] | None = None  # (header, rows)


def _scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    span = (high - low) or 1.0
    return lambda value: start + (value - low) / span * (end - start)


def _frame(title: str, x_label: str, y_label: str, body: list[str], x_ticks: list[tuple[float, str]],
           y_ticks: list[tuple[float, str]], legend: Sequence[str] = ()) -> str:
    """The axes, ticks, labels and legend around ``body`` (elements already in pixel coordinates)."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}"><title>{html.escape(title)}</title>',
             f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" stroke="black"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="black"/>']
    for x, text in x_ticks:
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" font-size="11" text-anchor="middle">'
                     f'{html.escape(text)}</text>')
    for y, text in y_ticks:
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{html.escape(text)}</text>')
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
    parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" font-size="12" text-anchor="middle">'
                 f'{html.escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{(TOP + HEIGHT - BOTTOM) / 2}" font-size="12" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(TOP + HEIGHT - BOTTOM) / 2})">{html.escape(y_label)}</text>')
    for index, name in enumerate(legend):
        x = LEFT + 10 + index * 150
        parts.append(f'<rect x="{x}" y="{TOP}" width="10" height="10" fill="{COLOURS[index % len(COLOURS)]}"/>')
        parts.append(f'<text x="{x + 14}" y="{TOP + 9}" font-size="11">{html.escape(name)}</text>')
    return "".join(parts + body + ["</svg>"])


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: about ``count`` multiples of 1, 2 or 5 times a power of ten
    (Heckbert, "Nice numbers for graph labels", Graphics Gems, 1990); the first at or below ``low``, the last at or
    above ``high``."""
    if high <= low:
        high = low + 1.0
    step = _nice((high - low) / max(count - 1, 1))
    first, last = math.floor(low / step), math.ceil(high / step)
    return [round(i * step, 12) for i in range(first, last + 1)]


def _nice(value: float) -> float:
    """The smallest of 1, 2, 5 and 10 times a power of ten at or above ``value``."""
    exponent = math.floor(math.log10(value))
    fraction = value / 10**exponent
    return next(nice for nice in (1, 2, 5, 10) if fraction <= nice * (1 + 1e-9)) * 10**exponent


def tick_text(value: float) -> str:
    """A tick's label: a whole number with thousands separators (2,000,000, not 2e+06), else its shortest form."""
    return f"{round(value):,}" if float(value).is_integer() else f"{value:g}"


def _y_ticks(ticks: Sequence[float], y: Callable[[float], float], fmt: Callable[[float], str]) -> list:
    return [(y(value), fmt(value)) for value in ticks]


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], x_label: str, y_label: str,
               x_text: Callable[[float], str] = tick_text, y_text: Callable[[float], str] = tick_text,
               steps: bool = False, x_unit: float = 1.0) -> str:
    """One polyline per series of (x, y) points; with ``steps``, each value holds until the next point. The x
    ticks are round multiples of ``x_unit`` (24 for hour steps: whole days), the y ticks round numbers."""
    if steps:
        series = {name: [point for (x0, y0), (x1, _) in itertools.pairwise(values) for point in ((x0, y0), (x1, y0))]
                  + values[-1:] for name, values in series.items()}
    points = [point for values in series.values() for point in values] or [(0.0, 0.0)]
    x_values = [value * x_unit for value in nice_ticks(min(p[0] for p in points) / x_unit,
                                                          max(p[0] for p in points) / x_unit)]
    y_values = nice_ticks(min(0.0, min(p[1] for p in points)), (max(p[1] for p in points) or 1.0) * 1.15)
    x = _scale(x_values[0], x_values[-1], LEFT, WIDTH - RIGHT)
    y = _scale(y_values[0], y_values[-1], HEIGHT - BOTTOM, TOP)
    body = []
    for index, values in enumerate(series.values()):
        path = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in values)
        body.append(f'<polyline class="series" points="{path}" fill="none" stroke="{COLOURS[index % len(COLOURS)]}" '
                    'stroke-width="2"/>')
    x_ticks = [(x(value), x_text(value)) for value in x_values]
    return _frame(title, x_label, y_label, body, x_ticks, _y_ticks(y_values, y, y_text), list(series))


def bar_chart(title: str, categories: Sequence[str], series: dict[str, Sequence[float]], y_label: str) -> str:
    """Bars grouped by category, one bar per series."""
    y_values = nice_ticks(0.0, (max((value for values in series.values() for value in values), default=1.0) or 1.0)
                          * 1.15)  # legend room
    y = _scale(0.0, y_values[-1], HEIGHT - BOTTOM, TOP)
    slot = (WIDTH - LEFT - RIGHT) / max(len(categories), 1)
    width = slot * 0.8 / max(len(series), 1)
    body = []
    for s_index, values in enumerate(series.values()):
        for c_index, value in enumerate(values):
            left = LEFT + c_index * slot + slot * 0.1 + s_index * width
            body.append(f'<rect class="bar" x="{left:.1f}" y="{y(value):.1f}" width="{width:.1f}" '
                        f'height="{HEIGHT - BOTTOM - y(value):.1f}" fill="{COLOURS[s_index % len(COLOURS)]}"/>')
    x_ticks = [(LEFT + (index + 0.5) * slot, name) for index, name in enumerate(categories)]
    return _frame(title, "", y_label, body, x_ticks, _y_ticks(y_values, y, tick_text), list(series))


def band_chart(title: str, points: Sequence[tuple[float, float]], half_width: float, x_label: str, y_label: str) -> str:
    """Points (x, y) around zero with the band [-half_width, half_width] shaded: errors against their interval."""
    xs = [p[0] for p in points] or [0.0]
    x_values = nice_ticks(min(xs), max(xs))
    extreme = max([abs(p[1]) for p in points] + [half_width, 1.0])
    y_values = nice_ticks(-extreme, extreme)  # symmetric: floor and ceiling of opposite ends
    x = _scale(x_values[0], x_values[-1], LEFT + 5, WIDTH - RIGHT - 5)
    y = _scale(y_values[0], y_values[-1], HEIGHT - BOTTOM, TOP)
    body = [f'<rect class="band" x="{LEFT}" y="{y(half_width):.1f}" width="{WIDTH - LEFT - RIGHT}" '
            f'height="{y(-half_width) - y(half_width):.1f}" fill="#cfe3f5"/>',
            f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - RIGHT}" y2="{y(0):.1f}" stroke="#888"/>']
    body += [f'<circle class="point" cx="{x(px):.1f}" cy="{y(py):.1f}" r="2.5" fill="{COLOURS[0]}"/>'
             for px, py in points]
    x_ticks = [(x(value), tick_text(value)) for value in x_values]
    return _frame(title, x_label, y_label, body, x_ticks, _y_ticks(y_values, y, tick_text))


def page(title: str, intro: str, sections: Sequence[Section]) -> str:
    """The whole HTML document."""
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
             "section{border-top:1px solid #ccc;padding:1em 0}dl{display:grid;grid-template-columns:max-content auto;"
             "gap:.2em 1.5em}dt{font-weight:bold}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
             "padding:.2em .6em;text-align:right}svg.chart{display:block;margin:1em 0}</style></head><body>",
             f"<h1>{html.escape(title)}</h1><p>{html.escape(intro)}</p>"]
    for section in sections:
        parts.append(f'<section><h2>{html.escape(section.title)}</h2><p>{html.escape(section.summary)}</p><dl>')
        parts += [f"<dt>{html.escape(label)}</dt><dd>{html.escape(value)}</dd>" for label, value in section.headlines]
        parts.append("</dl>")
        parts += section.charts
        if section.table is not None:
            header, rows = section.table
            parts.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows]
            parts.append("</table>")
        parts.append("</section>")
    return "".join(parts + ["</body></html>"])
