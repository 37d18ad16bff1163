"""The one plot still drawn by matplotlib: a sweep's heat map of the first relevant rank, one annotated row per
question, for a few dozen questions (a help-desk study). Every other plot is drawn with PIL on
:mod:`pipeline.reports.canvas`, in milliseconds where matplotlib took 0.1-0.35 s: a run's own two
(:mod:`~pipeline.reports.run_plots`), the rank buckets of more questions (:mod:`~pipeline.reports.rank_buckets`), the
means (:mod:`~pipeline.reports.means_plot`), the paired bootstrap (:mod:`~pipeline.reports.paired_plot`) and a grid's
response (:mod:`~pipeline.reports.response_plot`).

Headless by construction: every figure is a ``matplotlib.figure.Figure`` on its own Agg canvas, never a
pyplot figure, so nothing depends on (or changes) the process-wide backend and nothing needs closing.
Each plot is titled, labels its axes with units, and stays legible from 14 to 1,000 questions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from pipeline.reports.colours import BEYOND_COLOUR, BUCKET_COLOURS, NOT_RETRIEVED_COLOUR
from pipeline.reports.png_canvas import PngCanvas
from pipeline.reports.rank_buckets import has_beyond, rank_bucket_codes, rank_bucket_labels


def new_figure(width: float, height: float) -> Figure:
    """A Figure with its own Agg canvas (no pyplot state), laid out so labels are never clipped."""
    fig = Figure(figsize=(width, height), layout="constrained")
    PngCanvas(fig)
    return fig


def first_relevant_heatmap(ranks: pd.DataFrame, cutoff: int = 3, late_limit: int = 10,
                           beyond: pd.DataFrame | None = None) -> Figure:
    """Rank of the first relevant document, questions x systems, one annotated cell per question and system (0 or NaN
    = not retrieved, drawn in grey; with ``beyond``, a ranking full to its depth without a relevant document in a
    lighter grey, ">N"). For a few dozen questions: more are counted per rank bucket
    (:func:`pipeline.reports.rank_buckets.bucket_heatmap_png`)."""
    if ranks.shape[1] == 0:
        raise ValueError("the heat map needs at least one system")
    deep = has_beyond(beyond)
    labels = rank_bucket_labels(cutoff, late_limit, deep)
    codes = rank_bucket_codes(ranks, cutoff, late_limit, beyond)
    colours = [*BUCKET_COLOURS[: len(labels) - 1 - deep], *([BEYOND_COLOUR] if deep else []), NOT_RETRIEVED_COLOUR]
    fig = new_figure(3.5 + 1.1 * ranks.shape[1], 1.8 + 0.3 * len(ranks))
    ax = fig.add_subplot()
    ax.imshow(codes, cmap=ListedColormap(colours), vmin=-0.5, vmax=len(labels) - 0.5, aspect="auto",
              interpolation="nearest")
    values = ranks.to_numpy(dtype=float, na_value=np.nan)
    depths = (beyond.reindex(index=ranks.index, columns=ranks.columns).to_numpy(dtype=float, na_value=np.nan)
              if deep else None)
    last = len(labels) - 1
    for (i, j), code in np.ndenumerate(codes):
        if code == last:
            text = "–"
        elif deep and code == last - 1:
            text = f">{int(depths[i, j])}"
        else:
            text = str(int(values[i, j]))
        ax.text(j, i, text, ha="center", va="center", fontsize=8,
                color="white" if code in (0, last, last - 1 - deep) else "black")
    ax.set_xticks(range(ranks.shape[1]), [str(c) for c in ranks.columns], rotation=30, ha="right")
    ax.set_yticks(range(len(ranks)), [str(q) for q in ranks.index])
    ax.set_xlabel("system")
    ax.set_ylabel("question id")
    more = "; >N = beyond depth N" if deep else ""
    _title(ax, f"Rank of the first relevant document ({len(ranks)} questions; – = not retrieved{more})")
    ax.legend(handles=[Patch(color=c, label=lab) for c, lab in zip(colours, labels)], title="rank (position)",
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


def _title(ax: Axes, label: str, **style: object) -> None:
    """The axes' title, at their top (``y=1.0``): where matplotlib's automatic placement puts it, as no plot here
    draws anything above its axes, without measuring every tick label first to find that out (about a quarter of
    what drawing a per-run plot costs; the PNG is byte for byte the same)."""
    ax.set_title(label, y=1.0, **style)
