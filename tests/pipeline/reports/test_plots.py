"""Plots: each figure renders headless, is titled and labelled, and draws the series it was given."""

from __future__ import annotations

import io

import matplotlib.image
import numpy as np
import pandas as pd

from pipeline.reports import plots
from pipeline.reports.html import figure_png
from pipeline.reports.rank_buckets import rank_bucket_labels


def rendered(fig) -> np.ndarray:
    """The figure as an RGBA pixel array, through a real PNG encode and decode."""
    png = figure_png(fig)
    assert png.startswith(b"\x89PNG")
    return matplotlib.image.imread(io.BytesIO(png), format="png")


def assert_readable(fig, quantity: str | None = "y") -> np.ndarray:
    """Titled, both axes labelled, the quantitative axis with its unit in parentheses, not a blank image."""
    ax = fig.axes[0]
    assert ax.get_title().strip()
    assert ax.get_xlabel().strip() and ax.get_ylabel().strip()
    if quantity:
        assert "(" in (ax.get_xlabel() if quantity == "x" else ax.get_ylabel())
    pixels = rendered(fig)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert pixels[..., :3].std() > 0.05
    return pixels


def test_heatmap_of_the_help_desk_ranks_marks_not_retrieved_distinctly():
    # docs/helpdesk-reference.md's table of first relevant ranks (0 = not retrieved)
    ranks = pd.DataFrame({s: [1] * 14 for s in ("BM25", "LSA", "weighted", "RRF")},
                         index=[f"q{i:02d}" for i in range(1, 15)])
    ranks.loc["q01", "LSA"] = 2
    ranks.loc["q02"] = 0
    ranks.loc["q10"] = [0, 13, 0, 0]
    ranks.loc["q12", "BM25"] = 2
    fig = plots.first_relevant_heatmap(ranks)
    ax = fig.axes[0]
    assert_readable(fig, quantity=None)
    assert ax.get_legend().get_title().get_text() == "rank (position)"
    image = np.asarray(ax.images[0].get_array())
    assert image.shape == (14, 4)
    not_retrieved = len(rank_bucket_labels()) - 1
    assert (image == not_retrieved).sum() == 7 and image[1].tolist() == [not_retrieved] * 4
    assert image[9].tolist() == [not_retrieved, 3, not_retrieved, not_retrieved]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(ranks.index)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(ranks.columns)
    cell_texts = [t.get_text() for t in ax.texts]
    assert cell_texts.count("–") == 7 and "13" in cell_texts
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "not retrieved"


def test_a_ranking_full_to_its_depth_is_marked_beyond_it_in_the_per_question_heat_map():
    ranks = pd.DataFrame({"a": [1, np.nan, np.nan, 4], "b": [np.nan, 2, np.nan, 11]}, index=["q1", "q2", "q3", "q4"])
    beyond = pd.DataFrame({"a": [pd.NA, 100, pd.NA, pd.NA], "b": [10, pd.NA, pd.NA, pd.NA]}, index=ranks.index,
                          dtype="Int64")
    fig = plots.first_relevant_heatmap(ranks, beyond=beyond)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count(">100") == 1 and texts.count(">10") == 1 and texts.count("–") == 2
    assert "beyond depth" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def every_plot() -> dict:
    """One of each plot, each a function making it afresh."""
    ranks = pd.DataFrame({"BM25": [1, 2, 0, 11], "LSA": [3, 1, 1, 0]}, index=["q1", "q2", "q3", "q4"])
    return {
        "heat map": lambda: plots.first_relevant_heatmap(ranks),
    }


def test_titles_placed_at_the_top_of_the_axes_are_where_matplotlib_would_place_them(monkeypatch):
    """Every title is set at ``y=1.0`` (matplotlib then skips measuring the tick labels to place it): as nothing is
    drawn above the axes, each plot's PNG is byte for byte the one automatic placement gives."""
    fixed = {name: figure_png(make()) for name, make in every_plot().items()}
    monkeypatch.setattr(plots, "_title", lambda ax, label, **style: ax.set_title(label, **style))
    for name, make in every_plot().items():
        assert figure_png(make()) == fixed[name], name
