"""The chart view's figure of one metric per system (MLflow draws no interval): best on top, each interval a capped
line from its lower bound to its upper one in the system's colour with a dot at the mean, the values written beside,
every text whole and apart; and the same by slice, as small multiples."""

from __future__ import annotations

import pytest

from pipeline.reports.colours import palette
from pipeline.reports.interval_plot import MAX_ROWS, intervals
from tests.pipeline.reports.drawn import assert_whole_and_apart, is_colour, pixels

ROWS = [("RRF", 0.591, 0.548, 0.634), ("BM25 k1=0.9", 0.668, 0.622, 0.713), ("BM25 k1=0.9 b=0.4", 0.661, 0.615, 0.706)]


def test_each_system_s_interval_spans_its_bounds_best_on_top_with_its_values_written():
    canvas = intervals(ROWS, "ndcg@10 on scifact, 95% intervals")
    image = pixels(canvas.png())
    axes = canvas.area
    best_first = sorted(ROWS, key=lambda r: -r[1])
    for row, ((name, mean, low, high), colour) in enumerate(zip(best_first, palette(3))):
        y = round(axes.y(row))
        drawn = is_colour(image[y, axes.box[0]:axes.box[2] + 1], colour).nonzero()[0] + axes.box[0]
        assert abs(drawn.min() - axes.x(low)) <= 2 and abs(drawn.max() - axes.x(high)) <= 2, name
        assert is_colour(image[y - 2:y + 3, round(axes.x(mean))], colour).all()  # the dot at the mean
        texts = [text for text, box in canvas.boxes if box[1] <= y <= box[3]]
        assert name in texts and f"{mean:.3f} [{low:.3f}, {high:.3f}]" in texts  # a grid's names whole
    assert axes.xlim[0] > 0.5 and axes.xlim[1] < 0.75  # the intervals' span, not 0-1: overlaps show
    assert_whole_and_apart(canvas)


def test_at_most_twenty_systems_the_best_ones_and_no_mean_is_an_error():
    many = [(f"system {i}", i / 100, i / 100 - 0.01, i / 100 + 0.01) for i in range(30)]
    canvas = intervals(many, "t")
    shown = [text for text, _ in canvas.boxes if text.startswith("system ")]
    assert len(shown) == MAX_ROWS and shown[0] == "system 29"
    with pytest.raises(ValueError):
        intervals([("x", float("nan"), 0.0, 1.0)], "t")


def test_small_multiples_draw_one_panel_per_slice_on_one_axis_each_system_in_its_colour():
    from pipeline.reports.interval_plot import Panel, slice_panels

    systems = ["RRF", "BM25", "LSA"]
    panels = [Panel("all 72 questions", {"RRF": (0.70, 0.62, 0.77), "BM25": (0.54, 0.47, 0.61),
                                         "LSA": (0.50, 0.40, 0.60)}),
              Panel("team=billing, 12 questions", {"RRF": (0.10, 0.02, 0.20), "BM25": (0.82, 0.70, 0.93),
                                                   "LSA": (float("nan"),) * 3}, "reversal: see the table"),
              Panel("team=data, 60 questions", {"RRF": (0.82, 0.76, 0.87), "BM25": (0.49, 0.44, 0.54)}),
              Panel("question_length=a very long slice name that cannot fit, 3 questions",
                    {"RRF": (0.6, 0.3, 0.9)}, "too small to test")]
    canvas, axes = slice_panels(panels, systems, "ndcg@5 by slice, 95% bootstrap intervals")
    image = pixels(canvas.png())
    texts = [text for text, _ in canvas.boxes]
    assert texts.count("RRF") == 2 and texts.count("BM25") == 2  # names left of each row of panels (3 a row)
    assert "reversal: see the table" in texts and "too small to test" in texts
    assert any(t.startswith("question_l") and "…" in t and t.endswith("questions") for t in texts)  # cut to fit
    assert len(axes) == 4 and len({a.xlim for a in axes}) == 1  # one axis for every panel
    assert axes[0].xlim[0] < 0.02 < 0.93 < axes[0].xlim[1]
    colours = dict(zip(systems, palette(3)))
    billing = axes[1]
    for row, (system, (mean, low, high)) in enumerate(list(panels[1].intervals.items())[:2]):
        y = round(billing.y(row))
        drawn = is_colour(image[y, billing.box[0]:billing.box[2] + 1], colours[system]).nonzero()[0] + billing.box[0]
        assert abs(drawn.min() - billing.x(low)) <= 2 and abs(drawn.max() - billing.x(high)) <= 2, system
        assert is_colour(image[y - 2:y + 3, round(billing.x(mean))], colours[system]).all()  # the dot at the mean
    assert not is_colour(image[round(billing.y(2)), billing.box[0]:billing.box[2] + 1], colours["LSA"]).any()
    assert_whole_and_apart(canvas)
