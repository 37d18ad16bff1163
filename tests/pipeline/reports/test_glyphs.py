"""Remembered text: a drawing process that remembers the text it draws makes the same PNGs, byte for byte, and
copies most of a sweep's per-run plot texts instead of rendering them again."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from pipeline.analysis.diagnosis import CLASSES
from pipeline.reports import glyphs, plots
from pipeline.reports.html import png_bytes


@pytest.fixture
def remembering(monkeypatch):
    """Text remembered for the test only; the per-run figures kept by the test only."""
    monkeypatch.setattr(plots, "_KEPT", {})
    monkeypatch.setattr(glyphs, "counts", {"drawn": 0, "copied": 0})
    glyphs.remember_text()
    yield glyphs.counts
    glyphs.forget_text()


def sweep_of_plots(jobs: int = 8) -> list[bytes]:
    """Each job's two per-run plots, as a sweep's drawing copy draws them (on the kept figures)."""
    rng = np.random.default_rng(7)
    pngs = []
    for job in range(jobs):
        values = pd.Series(np.round(rng.random(300) * rng.random(), 2))
        counts = {c: int(rng.integers(0, 120)) for c in CLASSES}
        system = f"BM25 k1={0.6 + 0.3 * (job % 4):.1f} b={(0.3, 0.6, 0.75)[job % 3]}"
        pngs.append(plots.metric_histogram_png(values, "ndcg@10", system, 110))
        pngs.append(plots.failure_bars_png(counts, system, 300, 110))
    return pngs


def test_a_sweeps_per_run_plots_are_the_same_pngs_with_text_remembered(monkeypatch, remembering):
    remembered = sweep_of_plots()
    glyphs.forget_text()
    monkeypatch.setattr(plots, "_KEPT", {})
    assert sweep_of_plots() == remembered
    assert remembering["copied"] > remembering["drawn"] / 2  # most texts come back at the same place


def test_the_sweeps_figures_are_the_same_pngs_with_text_remembered(remembering):
    """Figures with many texts (a heat map's cells, rotated tick labels, a legend), each drawn once, then again."""
    ranks = pd.DataFrame(np.random.default_rng(1).integers(0, 15, size=(300, 5)),
                         columns=[f"system {i}" for i in range(5)])
    means = pd.DataFrame({"system": ["A", "A", "B", "B"], "metric": ["ndcg@10", "mrr"] * 2,
                          "mean": [0.5, 0.6, 0.4, 0.7], "ci_low": [0.4, 0.5, 0.3, 0.6],
                          "ci_high": [0.6, 0.7, 0.5, 0.8]})
    makers = [lambda: plots.first_relevant_heatmap(ranks), lambda: plots.first_relevant_heatmap(ranks.iloc[:20]),
              lambda: plots.means_bars(means)]
    first = [png_bytes(make()) for make in makers]
    again = [png_bytes(make()) for make in makers]
    glyphs.forget_text()
    assert [png_bytes(make()) for make in makers] == first == again
    assert remembering["copied"] > 0


def text_png(size: float, text: str = "recall@10", math: bool = False) -> bytes:
    fig = Figure(figsize=(2, 1))
    fig.text(0.1, 0.5, f"${text}$" if math else text, fontsize=size)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    return out.getvalue()


def test_a_text_at_the_same_place_in_another_size_is_drawn_not_copied(remembering):
    small = text_png(10)
    large = text_png(20)
    assert remembering == {"drawn": 2, "copied": 0}
    assert text_png(10) == small and remembering["copied"] == 1
    glyphs.forget_text()
    assert text_png(20) == large and large != small


def test_mathtext_is_drawn_as_usual(remembering):
    text_png(12, r"\alpha", math=True)
    text_png(12, r"\alpha", math=True)
    assert remembering == {"drawn": 0, "copied": 0}


def test_a_text_whose_drawing_uses_more_of_the_renderer_is_not_remembered(monkeypatch, remembering):
    """Should matplotlib draw text through anything but ``draw_text_image``, nothing is remembered (a copy would
    miss it): here the original drawing also asks the Agg object for its size."""
    original = glyphs._ORIGINAL

    def drawing_more(self, *args, **kwargs):
        getattr(self._renderer, "clear")  # noqa: B009 - any other use of the Agg object
        return original(self, *args, **kwargs)

    monkeypatch.setattr(glyphs, "_ORIGINAL", drawing_more)
    text_png(10)
    text_png(10)
    assert remembering == {"drawn": 2, "copied": 0}
