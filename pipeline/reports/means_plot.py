"""A sweep's means per metric with their bootstrap intervals, drawn on a PIL :class:`~pipeline.reports.canvas.Canvas`:
one group of bars per metric, one bar per system, each interval as an error bar.

matplotlib took about 0.15 s to draw it at a sweep's end (bars, error bars, a legend of systems); drawn here it takes
a few milliseconds, with the same size, palette, ticks, labels and legend.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline.reports.canvas import (
    AUTO_STEPS,
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

HEIGHT_IN = 4.5
CAP_PT = 3.0  # an error bar's cap reaches this far each side (matplotlib's capsize=3)
TOP = 1.05  # the scores' axis, 0 to a little over 1
MARGIN = 0.05  # matplotlib's data margins
TITLE = "Mean score per metric, 95% bootstrap intervals"


def means_bars_png(summary: pd.DataFrame, dpi: int, title: str = TITLE) -> bytes:
    """Grouped bars as PNG. ``summary`` is long: columns ``system``, ``metric``, ``mean``, ``ci_low``, ``ci_high``
    (one row each)."""
    return means_bars(summary, dpi, title).png()


def means_bars(summary: pd.DataFrame, dpi: int, title: str = TITLE) -> Canvas:
    """:func:`means_bars_png`'s canvas, before it is encoded (the tests read its boxes)."""
    missing = [c for c in ("system", "metric", "mean", "ci_low", "ci_high") if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks column(s) {', '.join(missing)}")
    if summary.empty:
        raise ValueError("summary is empty: nothing to plot")
    systems = list(dict.fromkeys(summary["system"]))
    metrics = list(dict.fromkeys(summary["metric"]))
    rows = summary.set_index(["system", "metric"]).reindex([(s, m) for s in systems for m in metrics])
    mean = rows["mean"].to_numpy(float)
    low, high = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
    width = 0.8 / len(systems)
    x = np.arange(len(metrics))
    centres = np.concatenate([x - 0.4 + width * (s + 0.5) for s in range(len(systems))])
    colours = palette(len(systems))
    keys = [Key(legend_label(str(system), dpi), colour, "patch") for system, colour in zip(systems, colours)]
    inches = (max(6.0, 1.0 + 0.35 * len(systems) * len(metrics)) + 2.0, HEIGHT_IN)
    margins = {**axes_margins(dpi, ["0.0"], 1, LARGE_PT), "right": legend_room(keys, inches[0], dpi, "system")}
    canvas = Canvas(*inches, dpi, margins)
    span = len(metrics) - 0.2
    axes = canvas.axes((-0.4 - MARGIN * span, len(metrics) - 0.6 + MARGIN * span), (0.0, TOP))
    y_ticks = nice_ticks(0.0, TOP, canvas.tick_space(axes.height, "y"), steps=AUTO_STEPS)
    axes.grid([], y_ticks, GRID_COLOUR)
    drawn = ~np.isnan(mean)
    bar_colours = [colour for colour in colours for _ in metrics]  # system by system, as the bars are
    axes.bars((centres - width / 2)[drawn], (centres + width / 2)[drawn], mean[drawn],
              [colour for colour, keep in zip(bar_colours, drawn) if keep])
    bounded = drawn & ~np.isnan(low) & ~np.isnan(high)
    axes.error_bars(centres[bounded], np.minimum(low, mean)[bounded], np.maximum(high, mean)[bounded], CAP_PT)
    axes.frame()
    axes.x_ticks(list(x.astype(float)), metrics)
    axes.y_categories(decimal_labels(y_ticks), y_ticks)
    axes.x_label("metric (cutoff after @)")
    axes.title([title], LARGE_PT)
    axes.y_label("mean over questions (score, 0–1)")
    axes.legend_right(keys, title="system")
    return canvas
