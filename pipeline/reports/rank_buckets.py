"""Rank buckets: where each system puts the first relevant document of each question ("1", "2–3", "4–10", "11+",
"not retrieved"), counted per system, and the sweep's heat map of those counts drawn on a PIL
:class:`~pipeline.reports.canvas.Canvas`.

The heat map is what a sweep of more than :data:`HEATMAP_MAX_ROWS` questions shows (fewer get one row per question,
:func:`pipeline.reports.plots.first_relevant_heatmap`). matplotlib took 0.25-0.35 s of CPU to draw it at the end of a
12-point SciFact sweep, the longest of the end's figures; it is a grid of coloured cells with their counts, drawn
here in a few milliseconds with the same size, colours, texts and colour bar.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipeline.reports.canvas import (
    AUTO_STEPS,
    FRAME,
    LABEL_PAD_PT,
    PAD_PT,
    TEXT_PT,
    TICK_PT,
    TITLE_PAD_PT,
    WHITE,
    Canvas,
    font_at,
    nice_ticks,
    shortened_to,
)
from pipeline.reports.colours import BLUES, GREYS, HATCH_COLOUR

# Above this many questions the rank heat map shows rank buckets per system instead of one row per question.
HEATMAP_MAX_ROWS = 50
CELL_PT = 8.0  # the counts in the cells
SLANT_DEGREES = 30  # the system names under the cells, as matplotlib's rotation=30, ha="right" sets them
LONGEST_NAME_IN = 2.5  # a system name is shortened in the middle beyond this (inches), so the cells keep their room
BAR_GAP_PT = 10.0  # between the cells and the colour bar
DARK_SHARE = 0.55  # a cell's text is white above this share (on the darker blues)


def rank_bucket_labels(cutoff: int = 3, late_limit: int = 10, beyond: bool = False) -> list[str]:
    """Bucket names, best first: "1", "2–3", "4–10", "11+", ("beyond depth",) "not retrieved" (cutoff 3, limit 10).

    With ``beyond``, a question whose ranking was full to its depth without a relevant document ("beyond depth N" in
    the diagnosis: one may lie deeper) is told apart from one whose ranking ended early (not retrieved)."""
    labels = ["1"]
    if cutoff > 1:
        labels.append(f"2–{cutoff}" if cutoff > 2 else "2")
    if late_limit > cutoff:
        labels.append(f"{cutoff + 1}–{late_limit}" if late_limit > cutoff + 1 else str(late_limit))
    labels += [f"{late_limit + 1}+", *(["beyond depth"] if beyond else []), "not retrieved"]
    return labels


def has_beyond(beyond: pd.DataFrame | None) -> bool:
    """Whether ``beyond`` marks any ranking as full to its depth."""
    return beyond is not None and bool(beyond.notna().to_numpy().any())


def rank_bucket_codes(ranks: pd.DataFrame, cutoff: int = 3, late_limit: int = 10,
                      beyond: pd.DataFrame | None = None) -> np.ndarray:
    """Each cell's bucket index into :func:`rank_bucket_labels` (0 = rank 1 ... last = not retrieved); ``beyond``
    (questions x systems, the depth or <NA>, aligned with ``ranks``) fills the "beyond depth" bucket."""
    values = ranks.to_numpy(dtype=float, na_value=np.nan)
    edges = [1.0] + ([float(cutoff)] if cutoff > 1 else []) + ([float(late_limit)] if late_limit > cutoff else [])
    codes = np.searchsorted(np.array(edges), values, side="left")
    missing = (values <= 0) | np.isnan(values)
    if not has_beyond(beyond):
        return np.where(missing, len(edges) + 1, codes)
    deep = beyond.reindex(index=ranks.index, columns=ranks.columns).notna().to_numpy()
    return np.where(missing & deep, len(edges) + 1, np.where(missing, len(edges) + 2, codes))


def rank_buckets(ranks: pd.DataFrame, cutoff: int = 3, late_limit: int = 10,
                 beyond: pd.DataFrame | None = None) -> pd.DataFrame:
    """How many questions each system puts in each rank bucket (buckets x systems)."""
    labels = rank_bucket_labels(cutoff, late_limit, has_beyond(beyond))
    codes = rank_bucket_codes(ranks, cutoff, late_limit, beyond)
    counts = np.stack([np.bincount(codes[:, j], minlength=len(labels)) for j in range(codes.shape[1])], axis=1)
    return pd.DataFrame(counts, index=pd.Index(labels, name="rank of first relevant"), columns=ranks.columns)


def colours_of(scale: tuple[str, ...], shares: np.ndarray) -> list[tuple[int, int, int]]:
    """Each share (0-1) on a sequential scale of evenly spaced colours, linearly between them (as matplotlib's
    ``Blues`` and ``Greys`` are built from the same nine ColorBrewer colours)."""
    stops = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in scale], dtype=float)
    at = np.clip(np.asarray(shares, dtype=float).ravel(), 0.0, 1.0) * (len(stops) - 1)
    low = np.minimum(np.floor(at).astype(int), len(stops) - 2)
    colours = np.round(stops[low] + (at - low)[:, None] * (stops[low + 1] - stops[low])).astype(int)
    return [tuple(c) for c in colours.tolist()]


def bucket_heatmap_png(ranks: pd.DataFrame, cutoff: int, late_limit: int, dpi: int,
                       beyond: pd.DataFrame | None = None) -> bytes:
    """The rank buckets of every system as a heat map (PNG): one column per system, one row per bucket, each cell
    its count and share of the questions; the not-retrieved (and beyond-depth) rows in grey, hatched."""
    return bucket_heatmap(ranks, cutoff, late_limit, dpi, beyond).png()


def bucket_heatmap(ranks: pd.DataFrame, cutoff: int, late_limit: int, dpi: int,
                   beyond: pd.DataFrame | None = None) -> Canvas:
    """:func:`bucket_heatmap_png`'s canvas, before it is encoded (the tests read its boxes)."""
    counts = rank_buckets(ranks, cutoff, late_limit, beyond)
    share = counts.to_numpy(float) / max(len(ranks), 1)
    deep = has_beyond(beyond)
    first_missing = len(counts) - 1 - deep  # the grey rows: (beyond depth and) not retrieved
    rows, columns = share.shape
    inches = (4.0 + 1.2 * columns, 1.8 + 0.55 * rows)  # matplotlib's figure size for it
    names = [shortened_to(str(c), LONGEST_NAME_IN * dpi, font_at(TEXT_PT, dpi)) for c in ranks.columns]
    canvas = Canvas(*inches, dpi, _margins(inches, dpi, names, list(counts.index), columns))
    axes = canvas.axes((-0.5, columns - 0.5), (rows - 0.5, -0.5))
    for i in range(rows):
        for j, colour in enumerate(colours_of(GREYS if i >= first_missing else BLUES, share[i])):
            axes.cell(j, i, colour)
    axes.hatch((-0.5, first_missing - 0.5, columns - 0.5, rows - 0.5), HATCH_COLOUR)
    axes.h_line(first_missing - 0.5, FRAME, 1.5)
    for (i, j), n in np.ndenumerate(counts.to_numpy()):
        ink = WHITE if share[i, j] > DARK_SHARE else FRAME
        axes.cell_text(j, i, [f"{n}", f"({share[i, j]:.0%})"], ink, CELL_PT)
    axes.frame()
    axes.x_slanted(list(range(columns)), names, SLANT_DEGREES)
    axes.y_categories(list(counts.index))
    axes.x_label("system")
    grey = "hatched grey rows = beyond depth, not retrieved" if deep else "hatched grey row = not retrieved"
    axes.title(["Rank of the first relevant document",
                f"{len(ranks)} questions counted per rank bucket ({grey})"])
    axes.y_label("rank of first relevant document (position)")
    bar = axes.colour_bar(colours_of(BLUES, np.linspace(0.0, 1.0, 256)), BAR_GAP_PT,
                          bar_thickness(canvas.height, dpi))
    ticks = nice_ticks(0.0, 1.0, canvas.tick_space(bar.height, "y"), steps=AUTO_STEPS)
    bar.y_ticks_right(ticks, [f"{v:.1f}" for v in ticks])
    bar.y_label_right("share of questions (0–1)")
    return canvas


def _margins(inches: tuple[float, float], dpi: int, names: list[str], buckets: list[str],
             columns: int) -> dict[str, float]:
    """Room (inches) around the cells for what is drawn there, as matplotlib's constrained layout leaves it: the
    title above; the bucket names and the axis label left; the slanted system names and the axis label below; the
    colour bar, its ticks and its label right."""
    font = font_at(TEXT_PT, dpi)

    def px(points: float) -> float:
        return points * dpi / 72

    line = px(TEXT_PT) * 1.2
    slant = math.radians(SLANT_DEGREES)
    widths = [font.getlength(n) for n in names]
    slanted_height = max((w * math.sin(slant) + line * math.cos(slant) for w in widths), default=0.0)
    left = px(4) + line + px(LABEL_PAD_PT) + max((font.getlength(b) for b in buckets), default=0.0) + px(
        TICK_PT + PAD_PT)
    right = px(4) + px(BAR_GAP_PT) + bar_thickness(inches[1] * dpi, dpi) + px(TICK_PT + PAD_PT) + font.getlength(
        "0.0") + px(LABEL_PAD_PT) + line
    # the first system's name reaches left of its column: the margin makes room for it
    column = (inches[0] * dpi - left - right) / max(columns, 1)
    first = widths[0] * math.cos(slant) + line * math.sin(slant) if widths else 0.0
    left = max(left, first - column / 2 + px(4))
    bottom = px(TICK_PT + PAD_PT) + slanted_height + px(LABEL_PAD_PT) + line + px(4)
    top = px(TITLE_PAD_PT) + 2 * line + px(6)
    return {side: value / dpi for side, value in (("left", left), ("right", right), ("bottom", bottom), ("top", top))}


def bar_thickness(height: float, dpi: int) -> float:
    """A colour bar's thickness (pixels) in an image ``height`` pixels tall, about matplotlib's."""
    return max(9 * dpi / 72, height / 28)
