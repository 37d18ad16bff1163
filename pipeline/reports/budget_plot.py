"""A measure against the token budget, one line per system (chunker x retriever), each with its bootstrap interval
as a band: the figure a RAG team picks a chunk size from, every system compared at equal context tokens.

Budgets are drawn at equal spacing on a doubling scale (256, 512, 1024 ...: log2 of the tokens), labelled in tokens.
Drawn as the grid's response is (:func:`pipeline.reports.response_plot.response_canvas`), on a PIL canvas.
"""

from __future__ import annotations

import math

import pandas as pd

from pipeline.reports.response_plot import response_canvas

TOKENS_COLUMN = "log2 tokens"


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
