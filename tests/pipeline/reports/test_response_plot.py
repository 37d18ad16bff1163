"""A grid's response, drawn without matplotlib: one line of the means per value of the second setting, each through
its points and inside its band, the top systems ringed, the colours matplotlib's, every text whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib import colormaps
from matplotlib.colors import to_hex, to_rgb

from pipeline.reports import response_plot
from pipeline.reports.colours import TAB10, TAB20, palette
from tests.pipeline.reports.drawn import assert_whole_and_apart, pixels

DPI = 110




def near(image: np.ndarray, colour: str, tolerance: int = 12) -> np.ndarray:
    return np.abs(image - np.round(np.array(to_rgb(colour)) * 255)).sum(axis=-1) <= tolerance


GRID = pd.DataFrame([{"k1": k1, "b": b, "mean": 0.5 + k1 / 5 + b / 10, "ci_low": 0.45 + k1 / 5,
                      "ci_high": 0.65 + k1 / 5 + b / 5, "top": k1 == 1.2 and b == 0.9}
                     for k1 in (0.6, 0.9, 1.2) for b in (0.3, 0.9)])


def test_each_line_passes_through_its_means_and_the_top_is_ringed():
    canvas = response_plot.response_canvas(GRID, "k1", "b", "ndcg@10", 0.95, DPI)
    image = pixels(canvas.png())
    axes = canvas.area
    for value, colour in zip((0.3, 0.9), palette(2)):
        line = GRID[GRID.b == value]
        for k1, mean in zip(line.k1, line["mean"]):  # a dot of the line's colour on each mean
            x, y = round(axes.x(k1)), round(axes.y(mean))
            assert near(image[y - 2:y + 3, x - 2:x + 3], colour).all(), (value, k1)
        middle = (line.k1.iloc[0] + line.k1.iloc[1]) / 2, (line["mean"].iloc[0] + line["mean"].iloc[1]) / 2
        x, y = round(axes.x(middle[0])), round(axes.y(middle[1]))
        assert near(image[y - 1:y + 2, x - 1:x + 2], colour).any()  # the line between two of them
    top = GRID[GRID.top].iloc[0]
    x, y = axes.x(top.k1), axes.y(top["mean"])
    radius = canvas.px(response_plot.RING_PT) / 2
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):  # a black ring around the top system's point, all round
        ray = [image[round(y + dy * r), round(x + dx * r)] for r in np.arange(radius - 3, radius + 1, 0.5)]
        assert near(np.array(ray), "#000000", 150).any(), (dx, dy)
    texts = [text for text, _ in canvas.boxes]
    assert {"b = 0.3", "b = 0.9", "top, or tied with it", "k1 (swept value)"} <= set(texts)
    assert "ndcg@10, mean over questions (0–1)" in texts
    assert "bands: each system's 95% bootstrap interval" in texts and "ndcg@10 across the grid k1 × b" in texts
    under = [(box[0] + box[2]) / 2 for text, box in canvas.boxes if text in ("0.6", "0.9", "1.2")
             and box[1] > axes.box[3]]
    assert under == pytest.approx([axes.x(v) for v in (0.6, 0.9, 1.2)], abs=1)  # a tick at each swept value


def test_the_band_covers_the_interval_and_nothing_outside_it():
    one = GRID[GRID.b == 0.3].assign(top=False)
    canvas = response_plot.response_canvas(one, "k1", "b", "mrr", 0.9, DPI)
    image = pixels(canvas.png())
    axes = canvas.area
    x = round(axes.x(0.75))  # between two points: the band, a light tint of the line's colour
    low, high = np.interp(0.75, one.k1, one.ci_low), np.interp(0.75, one.k1, one.ci_high)
    inside = image[round(axes.y(high)) + 4:round(axes.y(low)) - 4, x]
    above = image[axes.box[1] + 2:round(axes.y(high)) - 4, x]
    tint = np.round(0.9 * 255 + 0.1 * np.array(to_rgb(palette(1)[0])) * 255)
    assert (np.abs(inside - tint).sum(axis=-1) <= 6).mean() > 0.8
    assert (above == 255).all(axis=-1).mean() > 0.8  # white but for a grid line or two
    assert "top, or tied with it" not in [text for text, _ in canvas.boxes]


def test_the_palettes_are_matplotlibs():
    assert list(TAB10) == [to_hex(colormaps["tab10"](i)) for i in range(10)]
    assert list(TAB20) == [to_hex(colormaps["tab20"](i)) for i in range(20)]
    assert palette(3) == list(TAB10[:3]) and palette(12)[:2] == list(TAB20[:2])


@pytest.mark.parametrize("hues", [1, 3, 12])
@pytest.mark.parametrize("metric", ["ndcg@10", "a metric with a long name " * 4])
def test_every_text_is_inside_the_image_and_clear_of_the_others(hues, metric):
    grid = pd.DataFrame([{"x": x, "h": h, "mean": 0.5 + x / 10 + h / 100, "ci_low": 0.4, "ci_high": 0.9,
                          "top": x == 2 and h == 0} for x in (1, 2, 3) for h in range(hues)])
    canvas = response_plot.response_canvas(grid, "x", "h", metric, 0.95, DPI)
    assert len(canvas.boxes) > 8
    assert_whole_and_apart(canvas)


def test_a_grid_without_its_columns_is_refused():
    with pytest.raises(ValueError, match="top"):
        response_plot.response_png(GRID.drop(columns=["top"]), "k1", "b", "mrr", 0.95, DPI)
