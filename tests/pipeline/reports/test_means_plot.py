"""The means per metric, drawn without matplotlib: a bar per system and metric as tall as its mean, in its system's
colour, its interval as an error bar; the legend names the systems in order; every text whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.reports import means_plot
from pipeline.reports.colours import palette
from tests.pipeline.reports.drawn import assert_whole_and_apart, is_colour, pixels

DPI = 110
SUMMARY = pd.DataFrame(
    [
        {"system": s, "metric": m, "mean": mean, "ci_low": mean - 0.1, "ci_high": min(1.0, mean + 0.05)}
        for s, base in (("bm25", 0.6), ("lsa", 0.5), ("rrf", 0.7))
        for m, mean in (("hit_rate@3", base + 0.2), ("mrr", base + 0.1), ("ndcg@5", base))
    ]
)






def test_one_bar_per_system_and_metric_as_tall_as_its_mean_with_its_interval():
    canvas = means_plot.means_bars(SUMMARY, DPI)
    image = pixels(canvas.png())
    axes = canvas.area
    width = 0.8 / 3
    for s, (system, colour) in enumerate(zip(("bm25", "lsa", "rrf"), palette(3))):
        rows = SUMMARY[SUMMARY.system == system]
        for m, (mean, low, high) in enumerate(zip(rows["mean"], rows.ci_low, rows.ci_high)):
            centre = m - 0.4 + width * (s + 0.5)
            column = round(axes.x(centre - width / 4))  # clear of the error bar in the middle
            bar = is_colour(image[axes.box[1]:axes.box[3] + 1, column], colour)
            assert abs(bar.sum() - mean * axes.height / means_plot.TOP) <= 2, (system, m)
            middle = round(axes.x(centre))
            line = (image[round(axes.y(high)) + 1:round(axes.y(low)), middle - 1:middle + 2].sum(axis=-1) <= 60)
            assert line.any(axis=1).all(), (system, m)  # black from the low bound to the high one
    texts = [text for text, _ in canvas.boxes]
    assert [t for t in texts if t in ("bm25", "lsa", "rrf")] == ["bm25", "lsa", "rrf"]  # the legend, in order
    assert "system" in texts and "metric (cutoff after @)" in texts and "mean over questions (score, 0–1)" in texts
    under = [text for text, box in canvas.boxes if box[1] > axes.box[3] and text in ("hit_rate@3", "mrr", "ndcg@5")]
    assert under == ["hit_rate@3", "mrr", "ndcg@5"]


def test_a_missing_mean_draws_no_bar_and_a_missing_bound_no_interval():
    table = SUMMARY.copy()
    table.loc[0, "mean"] = np.nan
    table.loc[1, "ci_low"] = np.nan
    canvas = means_plot.means_bars(table, DPI)
    image = pixels(canvas.png())
    axes = canvas.area
    first = round(axes.x(-0.4 + 0.8 / 6 - 0.8 / 12))
    assert not is_colour(image[:, first], palette(3)[0]).any()
    second = round(axes.x(1 - 0.4 + 0.8 / 6))
    below = image[round(axes.y(SUMMARY["mean"][1])) + 2:axes.box[3] - 1, second]
    assert not (below.sum(axis=-1) <= 60).any()  # no error bar below the mean


def test_a_table_without_intervals_is_refused():
    with pytest.raises(ValueError, match="ci_low"):
        means_plot.means_bars_png(SUMMARY.drop(columns=["ci_low"]), DPI)


@pytest.mark.parametrize("systems", [1, 12])
@pytest.mark.parametrize("name", ["bm25", "a system whose name is much longer than the legend should be " * 2])
def test_every_text_is_inside_the_image_and_clear_of_the_others(systems, name):
    table = pd.DataFrame([{"system": f"{name} {s}", "metric": m, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
                          for s in range(systems) for m in ("ndcg@10", "recall@100", "mrr@10")])
    canvas = means_plot.means_bars(table, DPI)
    assert_whole_and_apart(canvas)
