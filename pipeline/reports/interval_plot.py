"""One metric of each system with its bootstrap interval, drawn to be read where MLflow shows it: an image card of the
chart view, whose box is about 290 px wide (330 px here: nearly unscaled). MLflow's own charts draw no interval. And
the same by slice of the questions, as small multiples (:func:`slice_panels`): one panel per slice.

One row per system, the best on top: a dot at the mean, a capped line from the lower bound to the upper one, the
mean and bounds written at the right; the axis spans the intervals (not 0-1), so that overlapping ones show as such.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.reports.canvas import Axes, Canvas, decimal_labels, font_at, nice_ticks, shortened_to
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


# -- small multiples: one panel per slice of the questions, each system's interval in every panel ---------------------

PANEL_IN, PANEL_COLUMNS, MAX_PANELS = 2.4, 3, 30  # a panel's width, panels a row, panels drawn at most
PANEL_ROW_IN, PANEL_HEAD_IN, PANEL_FOOT_IN, HEAD_IN = 0.24, 0.5, 0.45, 0.45
PANEL_GAP_IN = 0.3  # between two panels of a row
PANEL_TITLE_PT = 8.0


@dataclass(frozen=True)
class Panel:
    """One slice: its title (``team=billing, 12 questions``), a second line (``too small to test``, ``reversal``)
    and each system's (mean, low, high), NaN where it has none."""

    title: str
    intervals: Mapping[str, tuple[float, float, float]]
    note: str = ""


def slice_panels_png(panels: Sequence[Panel], systems: Sequence[str], title: str) -> bytes:
    """:func:`slice_panels` as PNG."""
    return slice_panels(panels, systems, title)[0].png()


def slice_panels(panels: Sequence[Panel], systems: Sequence[str], title: str) -> tuple[Canvas, list[Axes]]:
    """Small multiples: one panel per slice (the first :data:`MAX_PANELS`), :data:`PANEL_COLUMNS` a row; in each, a
    row per system in the order of ``systems`` (names left of each row of panels), its interval a capped line in
    the system's colour with a dot at the mean. Every panel shares one axis, so slices compare at a glance. Returns
    the canvas and each panel's axes."""
    panels = list(panels)[:MAX_PANELS]
    if not panels or not systems:
        raise ValueError("no slice or no system to draw")
    values = [v for p in panels for m in p.intervals.values() for v in m if v == v]
    if not values:
        raise ValueError("no mean to draw")
    low, high = min(values), max(values)
    pad = max((high - low) * 0.06, 0.005)
    low, high = max(0.0, low - pad), min(1.0, high + pad) if high <= 1.0 else high + pad
    columns = min(PANEL_COLUMNS, len(panels))
    lines = math.ceil(len(panels) / columns)
    panel_height = PANEL_HEAD_IN + PANEL_ROW_IN * len(systems) + PANEL_FOOT_IN
    width = NAME_IN + columns * PANEL_IN + (columns - 1) * PANEL_GAP_IN + 0.15
    canvas = Canvas(width, HEAD_IN + lines * panel_height, DPI, {"left": 0, "right": 0, "top": 0, "bottom": 0})
    colours = dict(zip(systems, palette(len(systems))))
    font, small = font_at(NAME_PT, DPI), font_at(PANEL_TITLE_PT, DPI)
    ticks = nice_ticks(low, high, 3)
    tick_labels = decimal_labels(ticks)
    canvas.text((canvas.width / 2, canvas.px(6)), title, "mt", 10, fit=True)
    room = canvas.px(PANEL_IN * 72) - canvas.px(4)
    drawn = []
    for number, panel in enumerate(panels):
        line, column = divmod(number, columns)
        left = round((NAME_IN + column * (PANEL_IN + PANEL_GAP_IN)) * DPI)
        top = round((HEAD_IN + line * panel_height + PANEL_HEAD_IN) * DPI)
        box = (left, top, left + round(PANEL_IN * DPI), top + round(PANEL_ROW_IN * len(systems) * DPI))
        axes = Axes(canvas, box, (low, high), (len(systems) - 0.5, -0.5))
        drawn.append(axes)
        axes.grid(ticks, [], GRID_COLOUR)
        width_px = max(1, round(canvas.px(LINE_PT)))
        cap, r = canvas.px(CAP_PT), canvas.px(DOT_PT) / 2
        names_room = canvas.px(NAME_IN * 72) - canvas.px(8)
        for row, system in enumerate(systems):
            y, colour = axes.y(row), colours[system]
            if column == 0:
                canvas.text((box[0] - canvas.px(4), y), shortened_to(str(system), names_room, font), "rm", NAME_PT)
            mean, lo, hi = panel.intervals.get(system, (math.nan, math.nan, math.nan))
            if mean != mean:
                continue
            x0, x1, xm = axes.x(lo), axes.x(hi), axes.x(mean)
            canvas.draw.line((x0, y, x1, y), fill=colour, width=width_px)
            for x in (x0, x1):
                canvas.draw.line((x, y - cap, x, y + cap), fill=colour, width=width_px)
            canvas.draw.ellipse((xm - r, y - r, xm + r, y + r), fill=colour)
        axes.frame()
        axes.x_ticks(ticks, tick_labels)
        heading = [shortened_to(panel.title, room, small)] + ([shortened_to(panel.note, room, small)] if panel.note
                                                               else [])
        axes.title(heading, PANEL_TITLE_PT)
    return canvas, drawn
