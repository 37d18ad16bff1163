"""The two plots every run makes, drawn on a :class:`pipeline.reports.canvas.Canvas`: its metric's histogram and its
failure classes.

A sweep makes them for every job, on the copy that draws beside the driver. matplotlib took 45-55 ms a plot there
(the per-run plots were a fifth of a later job's CPU); drawn here they take a few milliseconds, with the same sizes,
colours, titles, axis labels and tick choices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pipeline.analysis.diagnosis import CAUSES, CLASSES, LABELS
from pipeline.reports.canvas import AUTO_STEPS, Canvas, count_labels, nice_ticks
from pipeline.reports.colours import BUCKET_COLOURS, CAUSE_COLOURS, NOT_RETRIEVED_COLOUR

BAR_COLOUR = BUCKET_COLOURS[1]
MEAN_COLOUR = BUCKET_COLOURS[3]
# "Returned nothing" in the grey of "not retrieved", the other causes (one per failing question) in oranges, then late
# rank and duplicates (which may accompany a cause) in blues
FAILURE_COLOURS = (NOT_RETRIEVED_COLOUR, *CAUSE_COLOURS[: len(CAUSES) - 1],
                   *BUCKET_COLOURS[: len(CLASSES) - len(CAUSES)][::-1])
HISTOGRAM_INCHES = (6.5, 4.0)
FAILURES_INCHES = (7.0, 4.2)
# Margins (inches) around the axes: room for a two-line title, the axis labels and seven-digit counts.
MARGINS = {"left": 0.95, "right": 0.25, "bottom": 0.7, "top": 0.7}
FAILURES_LEFT = 2.3  # the class names sit left of the bars


def metric_histogram_png(values: Sequence[float], metric: str, system: str, dpi: int, bins: int = 10) -> bytes:
    """Distribution of one per-question metric of one run (scores in [0, 1], NaN left out), its mean marked."""
    return metric_histogram(values, metric, system, dpi, bins).png()


def failure_bars_png(counts: Mapping[str, int], system: str, questions: int | None, dpi: int) -> bytes:
    """Horizontal bars of failure-class counts (keys of :data:`CLASSES`; a class not given counts 0), first class
    on top, each count written at its bar's end."""
    return failure_bars(counts, system, questions, dpi).png()


def metric_histogram(values: Sequence[float], metric: str, system: str, dpi: int, bins: int = 10) -> Canvas:
    """:func:`metric_histogram_png`'s canvas, before it is encoded (the tests read its boxes)."""
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    counts, edges = np.histogram(data, bins=np.linspace(0.0, 1.0, bins + 1))
    canvas = Canvas(*HISTOGRAM_INCHES, dpi, MARGINS)
    top = max(int(counts.max()) if len(counts) else 0, 1) * 1.05  # matplotlib's 5% margin above the tallest bar
    axes = canvas.axes((0.0, 1.0), (0.0, top))
    for count, low, high in zip(counts, edges[:-1], edges[1:]):
        if count:
            axes.bar_up(low, high, float(count), BAR_COLOUR)
    axes.frame()
    ticks = nice_ticks(0.0, 1.0, canvas.tick_space(axes.width, "x"), steps=AUTO_STEPS)
    axes.x_ticks(ticks, [f"{v:.1f}" for v in ticks])
    ticks = nice_ticks(0.0, top, 10, integer=True)
    axes.y_categories(count_labels(ticks), ticks)
    axes.x_label(f"{metric} of a question (score, 0–1)")
    axes.title([f"{metric} per question ({len(data)} questions)", f"system: {system}"])
    axes.y_label("questions (count)")
    if len(data):
        mean = float(data.mean())
        axes.v_line(mean, MEAN_COLOUR, 1.5)
        axes.legend_top(f"mean {mean:.3f}", MEAN_COLOUR, 1.5)
    return canvas


def failure_bars(counts: Mapping[str, int], system: str, questions: int | None, dpi: int) -> Canvas:
    """:func:`failure_bars_png`'s canvas, before it is encoded (the tests read its boxes)."""
    values = [int(counts.get(c, 0)) for c in CLASSES]
    canvas = Canvas(*FAILURES_INCHES, dpi, {**MARGINS, "left": FAILURES_LEFT})
    right = max([*values, 1]) * 1.25
    # bars 0.8 of a slot, the first class on top, matplotlib's 5% margins around them
    rows = len(values)
    span = (rows - 1) + 0.8
    axes = canvas.axes((0.0, right), (rows - 1 + 0.4 + 0.05 * span, -0.4 - 0.05 * span))
    for row, (value, colour) in enumerate(zip(values, FAILURE_COLOURS)):
        axes.bar_right(row, value, 0.8, colour)
        axes.text_after_bar(row, value, f"{value}")
    axes.frame()
    ticks = nice_ticks(0.0, right, 10, integer=True)
    axes.x_ticks(ticks, count_labels(ticks))
    axes.y_categories([LABELS[c] for c in CLASSES])
    axes.x_label("questions (count)")
    scope = f" of {questions}" if questions is not None else ""
    axes.title([f"Questions{scope} per failure class", f"system: {system}"])
    axes.y_label("failure class (causes, then where)")
    return canvas


def warm_up(dpi: int) -> None:
    """Load PIL's drawing and PNG code and the fonts once (a sweep's drawing copy does this before its first job)."""
    metric_histogram_png(np.linspace(0.0, 1.0, 11), "ndcg@10", "placeholder", dpi)
    failure_bars_png(dict.fromkeys(CLASSES, 1), "placeholder", 11, dpi)
