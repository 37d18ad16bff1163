"""A grid sweep's response, drawn on a PIL :class:`~pipeline.reports.canvas.Canvas`: the primary metric's mean
against one swept setting, one line per value of the other, each with its bootstrap interval as a band; the top
system and those tied with it ringed. In the same form, a measure against the token budget, one line per system
(chunker x retriever): the figure a RAG team picks a chunk size from, every system compared at equal context tokens
(budgets at equal spacing on a doubling scale, labelled in tokens).

It is drawn at the very end of a sweep, on the driver's path, once the systems are compared (the rings need the
comparison). matplotlib took about 90 ms for it there; this draws the same figure (size, colours, line styles,
ticks, labels, legend) in about 15. The lines, bands and markers are drawn three times larger and scaled down, so
their edges are smooth as matplotlib's are; the texts are drawn at size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from metrics.spec import TOKENS
from pipeline.analysis.summary import SweepSummary
from pipeline.common.names import LOWER, UPPER
from pipeline.reports.canvas import (
    AUTO_STEPS,
    FRAME,
    LARGE_PT,
    Canvas,
    Key,
    axes_margins,
    decimal_labels,
    legend_label,
    legend_room,
    nice_ticks,
)
from pipeline.reports.colours import GRID_COLOUR, palette

INCHES = (9.5, 4.8)  # matplotlib's figure size for it
BAND_ALPHA = 0.1
LINE_PT, BOUND_PT, MARKER_PT = 1.5, 0.8, 6.0  # the mean's line, the interval's dotted bounds, the mean's dots
RING_PT, RING_EDGE_PT = math.sqrt(160), 1.3  # scatter(s=160): a ring of that diameter (points)
MARGIN = 0.05  # matplotlib's data margins
DOTTED = (1.0, 1.65)  # matplotlib's ":" (dots and gaps in line widths)


def response_png(grid: pd.DataFrame, x: str, hue: str, metric: str, confidence: float, dpi: int) -> bytes:
    """The grid's response as PNG. ``grid``: one row per system, columns ``x``, ``hue``, ``mean``, ``ci_low``,
    ``ci_high`` and ``top`` (bool), as :func:`pipeline.reports.tables.grid_frame` makes it."""
    return response_canvas(grid, x, hue, metric, confidence, dpi).png()


def response_canvas(grid: pd.DataFrame, x: str, hue: str, metric: str, confidence: float, dpi: int, *,
                    key: Callable[[object], str] | None = None, titles: list[str] | None = None,
                    x_label: str | None = None, x_tick_labels: Callable[[list[float]], list[str]] | None = None,
                    order: list | None = None) -> Canvas:
    """:func:`response_png`'s canvas, before it is encoded (the tests read its boxes). ``key``, ``titles``,
    ``x_label`` and ``x_tick_labels`` word a figure of the same form that is not a grid (tokens against a budget,
    one line per system: :func:`budget_curve_png`); ``order``: the lines' order (default: sorted)."""
    missing = [c for c in (x, hue, "mean", "ci_low", "ci_high", "top") if c not in grid.columns]
    if missing:
        raise ValueError(f"grid lacks column(s) {', '.join(missing)}")
    if grid.empty:
        raise ValueError("grid is empty: nothing to plot")
    values = order or sorted(grid[hue].unique())
    colours = palette(len(values))
    xs = sorted(float(v) for v in grid[x].unique())
    low = float(np.nanmin(grid[["ci_low", "mean"]].to_numpy(float)))
    high = float(np.nanmax(grid[["ci_high", "mean"]].to_numpy(float)))
    xlim, ylim = _padded(xs[0], xs[-1]), _padded(low, high)
    top = grid[grid["top"].astype(bool)]
    key = key or (lambda value: f"{hue} = {value:g}")
    keys = [Key(legend_label(key(value), dpi), colour, "line", LINE_PT, MARKER_PT)
            for value, colour in zip(values, colours)]
    keys += [Key("top, or tied with it", FRAME, "ring", RING_EDGE_PT, RING_PT)] if len(top) else []

    margins = {**axes_margins(dpi, decimal_labels(nice_ticks(*ylim, 9, steps=AUTO_STEPS)), 2, LARGE_PT),
               "right": legend_room(keys, INCHES[0], dpi)}
    canvas = Canvas(*INCHES, dpi, margins)
    axes = canvas.axes(xlim, ylim)
    y_ticks = nice_ticks(*ylim, canvas.tick_space(axes.height, "y"), steps=AUTO_STEPS)
    for colour, value in zip(colours, values):
        line = grid[grid[hue] == value].sort_values(x)
        axes.band(*(line[c].to_numpy(float) for c in (x, "ci_low", "ci_high")), colour, BAND_ALPHA)
    axes.grid(xs, y_ticks, GRID_COLOUR)
    with axes.layer() as layer:
        for colour, value in zip(colours, values):
            line = grid[grid[hue] == value].sort_values(x)
            px = line[x].to_numpy(float)
            for bound in ("ci_low", "ci_high"):
                layer.line(px, line[bound].to_numpy(float), colour, BOUND_PT, dashes=DOTTED)
            layer.line(px, line["mean"].to_numpy(float), colour, LINE_PT)
            layer.dots(px, line["mean"].to_numpy(float), colour, MARKER_PT)
        if len(top):
            layer.rings(top[x].to_numpy(float), top["mean"].to_numpy(float), FRAME, RING_PT, RING_EDGE_PT)
    axes.frame()
    axes.x_ticks(xs, (x_tick_labels or decimal_labels)(xs))
    axes.y_categories(decimal_labels(y_ticks), y_ticks)
    axes.x_label(x_label or f"{x} (swept value)")
    axes.title(titles or [f"{metric} across the grid {x} × {hue}",
                          f"bands: each system's {confidence:.0%} bootstrap interval"], LARGE_PT)
    axes.y_label(f"{metric}, mean over questions (0–1)")
    axes.legend_right(keys)
    return canvas


def _padded(low: float, high: float) -> tuple[float, float]:
    """Data limits with matplotlib's 5% margins; a single value gets room around it."""
    span = high - low
    if span <= 0:
        room = max(abs(low) * 0.1, 0.05)
        return low - room, high + room
    return low - MARGIN * span, high + MARGIN * span


TOKENS_COLUMN = "log2 tokens"
CURVE_MEASURES = ("recall", "span_recall")  # drawn against the token budget, when a sweep logged two budgets or more


def budget_curve(summary: SweepSummary, measure: str) -> pd.DataFrame:
    """``system, budget, mean, ci_low, ci_high``: each distinct system's ``measure`` at every token budget its run
    logged (``recall_at_512tok`` and its bounds)."""
    pattern = re.compile(rf"^{measure}_at_(\d+){TOKENS}$")
    rows = []
    by_name = {s.name: s for s in summary.finished}
    for system in summary.representatives:
        metrics = by_name[system].metrics
        for key, value in metrics.items():
            found = pattern.match(key)
            if found and key + LOWER in metrics and key + UPPER in metrics:
                rows.append({"system": summary.label(system), "budget": int(found.group(1)), "mean": value,
                             "ci_low": metrics[key + LOWER], "ci_high": metrics[key + UPPER]})
    return one_line_each(pd.DataFrame(rows, columns=["system", "budget", "mean", "ci_low", "ci_high"]))


def one_line_each(curve: pd.DataFrame) -> pd.DataFrame:
    """Systems whose curves are the same at every budget drawn once, labelled ``A = B``: a line hidden under an
    identical one would read as a system missing."""
    lines: dict[tuple, list[str]] = {}
    for system, rows in curve.groupby("system", sort=False):
        shape = tuple(rows.sort_values("budget")[["budget", "mean", "ci_low", "ci_high"]].itertuples(index=False))
        lines.setdefault(shape, []).append(str(system))
    names = {members[0]: " = ".join(members) for members in lines.values()}
    kept = curve[curve["system"].isin(names)]
    return kept.assign(system=kept["system"].map(names))


def budget_curve_png(curve: pd.DataFrame, measure: str, confidence: float, dpi: int) -> bytes:
    """``curve``: one row per (system, budget): ``system``, ``budget`` (tokens), ``mean``, ``ci_low``, ``ci_high``,
    systems in the order their lines are drawn and listed. ``measure``: ``recall`` or ``span_recall``."""
    grid = curve.assign(**{TOKENS_COLUMN: [math.log2(b) for b in curve["budget"]], "top": False})
    canvas = response_canvas(
        grid, TOKENS_COLUMN, "system", measure, confidence, dpi, key=str,
        titles=[f"{measure} at each token budget, one line per system",
                f"the context filled with each system's top chunks; bands: {confidence:.0%} bootstrap intervals"],
        x_label="context budget (tokens; each chunk whole, the first that overflows ends the context)",
        x_tick_labels=lambda xs: [f"{2 ** x:,.0f}" for x in xs], order=list(dict.fromkeys(curve["system"])))
    return canvas.png()
