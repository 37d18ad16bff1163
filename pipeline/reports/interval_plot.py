"""One metric of each system with its bootstrap interval, drawn to be read where MLflow shows it: an image card of the
chart view, whose box is about 290 px wide (330 px here: nearly unscaled). MLflow's own charts draw no interval.

One row per system, the best on top: a dot at the mean, a capped line from the lower bound to the upper one, the
mean and bounds written at the right; the axis spans the intervals (not 0-1), so that overlapping ones show as such.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.reports.canvas import Canvas, decimal_labels, font_at, nice_ticks, shortened_to
from pipeline.reports.colours import GRID_COLOUR, palette

WIDTH_IN, ROW_IN, FRAME_IN = 3.3, 0.28, 0.9  # the width MLflow's image card shows unscaled; a row; title and axis
DPI = 100  # shown at about its own size: 10 pt text is 14 px
NAME_IN, VALUE_IN = 1.3, 1.1  # room for the names (left) and the written values (right)
MAX_ROWS = 20
CAP_PT, DOT_PT, LINE_PT = 3.0, 5.0, 1.5
NAME_PT, VALUE_PT = 8.0, 7.0


def intervals_png(rows: Sequence[tuple[str, float, float, float]], title: str) -> bytes:
    """``rows``: (system, mean, low, high); the best :data:`MAX_ROWS` are drawn, best on top."""
    return intervals(rows, title).png()


def intervals(rows: Sequence[tuple[str, float, float, float]], title: str) -> Canvas:
    """:func:`intervals_png`'s canvas, before it is encoded (the tests read its boxes)."""
    shown = sorted((r for r in rows if r[1] == r[1]), key=lambda r: -r[1])[:MAX_ROWS]
    if not shown:
        raise ValueError("no mean to draw")
    names, means, lows, highs = zip(*shown)
    low, high = float(np.nanmin([*lows, *means])), float(np.nanmax([*highs, *means]))
    pad = max((high - low) * 0.08, 0.005)
    low, high = max(0.0, low - pad), min(1.0, high + pad) if high <= 1.0 else high + pad
    canvas = Canvas(WIDTH_IN, FRAME_IN + ROW_IN * len(shown), DPI,
                    {"left": NAME_IN, "right": VALUE_IN, "top": 0.45, "bottom": 0.5})
    count = len(shown)
    axes = canvas.axes((low, high), (count - 0.5, -0.5))
    ticks = nice_ticks(low, high, 2)
    axes.grid(ticks, [], GRID_COLOUR)
    colours = palette(count)
    font = font_at(NAME_PT, DPI)
    room = canvas.px(NAME_IN * 72) - canvas.px(8)
    for row, (name, mean, lo, hi, colour) in enumerate(zip(names, means, lows, highs, colours)):
        y = axes.y(row)
        x0, x1, xm = axes.x(lo), axes.x(hi), axes.x(mean)
        width = max(1, round(canvas.px(LINE_PT)))
        cap = canvas.px(CAP_PT)
        canvas.draw.line((x0, y, x1, y), fill=colour, width=width)
        for x in (x0, x1):
            canvas.draw.line((x, y - cap, x, y + cap), fill=colour, width=width)
        r = canvas.px(DOT_PT) / 2
        canvas.draw.ellipse((xm - r, y - r, xm + r, y + r), fill=colour)
        canvas.text((axes.box[0] - canvas.px(4), y), shortened_to(str(name), room, font), "rm", NAME_PT)
        canvas.text((axes.box[2] + canvas.px(3), y), f"{mean:.3f} [{lo:.3f}, {hi:.3f}]", "lm", VALUE_PT)
    axes.frame()
    axes.x_ticks(ticks, decimal_labels(ticks))
    axes.title([title], 10)
    return canvas
