"""Rank buckets, and their heat map drawn without matplotlib: each cell is coloured by its share on matplotlib's own
scales and says its count, the rows without a relevant document are grey and hatched, and every text is whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib import colormaps

from pipeline.reports import rank_buckets
from pipeline.reports.colours import BLUES, GREYS, HATCH_COLOUR
from tests.pipeline.reports.drawn import assert_whole_and_apart, pixels

DPI = 110




def ranks_of(systems: list[str], questions: int = 300, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({s: np.where(rng.random(questions) < 0.1, 0, rng.integers(1, 30, questions)) for s in systems},
                        index=[f"q{i:03d}" for i in range(questions)])


def test_rank_buckets_split_at_the_cutoff_and_ten():
    ranks = pd.DataFrame({"a": [1, 2, 3, 4, 10, 11, 0], "b": [1, 1, 1, 1, 1, 1, 1]})
    assert rank_buckets.rank_bucket_labels() == ["1", "2–3", "4–10", "11+", "not retrieved"]
    counts = rank_buckets.rank_buckets(ranks)
    assert counts["a"].tolist() == [1, 2, 2, 1, 1]
    assert counts["b"].tolist() == [7, 0, 0, 0, 0]


def test_a_ranking_full_to_its_depth_is_bucketed_apart_from_one_that_ended():
    ranks = pd.DataFrame({"a": [1, np.nan, np.nan, 4], "b": [np.nan, 2, np.nan, 11]}, index=["q1", "q2", "q3", "q4"])
    beyond = pd.DataFrame({"a": [pd.NA, 100, pd.NA, pd.NA], "b": [10, pd.NA, pd.NA, pd.NA]}, index=ranks.index,
                          dtype="Int64")
    counts = rank_buckets.rank_buckets(ranks, beyond=beyond)
    assert list(counts.index) == ["1", "2–3", "4–10", "11+", "beyond depth", "not retrieved"]
    assert counts["a"].tolist() == [1, 0, 1, 0, 1, 1] and counts["b"].tolist() == [0, 1, 0, 1, 1, 1]
    plain = rank_buckets.rank_buckets(ranks)
    assert list(plain.index)[-1] == "not retrieved" and len(plain) == 5


@pytest.mark.parametrize("name, scale", [("Blues", BLUES), ("Greys", GREYS)])
def test_shares_are_coloured_as_matplotlibs_scale_colours_them(name, scale):
    shares = np.linspace(0.0, 1.0, 101)
    ours = np.array(rank_buckets.colours_of(scale, shares))
    theirs = np.round(colormaps[name](shares)[:, :3] * 255)
    assert np.abs(ours - theirs).max() <= 2  # matplotlib's scale is the same line cut into 256 steps


def test_each_cell_is_its_bucket_coloured_by_its_share_and_says_its_count():
    ranks = ranks_of(["x", "y"])
    canvas = rank_buckets.bucket_heatmap(ranks, 3, 10, DPI)
    image = pixels(canvas.png())
    counts = rank_buckets.rank_buckets(ranks)
    share = counts.to_numpy(float) / len(ranks)
    assert share.shape == (5, 2)
    axes = canvas.area
    texts = [text for text, _ in canvas.boxes]
    for (row, column), n in np.ndenumerate(counts.to_numpy()):
        x0, x1 = round(axes.x(column - 0.5)) + 3, round(axes.x(column + 0.5)) - 3
        y0, y1 = round(axes.y(row - 0.5)) + 3, round(axes.y(row + 0.5)) - 3
        corner = image[y0:y0 + 4, x0:x1]  # the cell's top strip, clear of its text
        if row < 4:
            expected = rank_buckets.colours_of(BLUES, np.array([share[row, column]]))[0]
            assert (corner == expected).all(axis=-1).mean() > 0.95, (row, column)
        else:  # not retrieved: grey, hatched
            grey = rank_buckets.colours_of(GREYS, np.array([share[row, column]]))[0]
            hatch = tuple(int(HATCH_COLOUR[i:i + 2], 16) for i in (1, 3, 5))
            cell = image[y0:y1, x0:x1]
            assert (cell == grey).all(axis=-1).mean() > 0.5
            assert (np.abs(cell - hatch).sum(axis=-1) <= 30).mean() > 0.03
        assert f"{n}" in texts and f"({share[row, column]:.0%})" in texts
    assert (share[-1] == pytest.approx([(ranks[s] == 0).mean() for s in ("x", "y")]))
    assert "300 questions counted per rank bucket (hatched grey row = not retrieved)" in texts
    assert {"system", "rank of first relevant document (position)", "share of questions (0–1)"} <= set(texts)
    assert [t for t in texts if t in counts.index] == list(counts.index)


def test_a_text_on_a_dark_cell_is_white():
    ranks = pd.DataFrame({"all first": [1] * 60, "none": [0] * 60})
    canvas = rank_buckets.bucket_heatmap(ranks, 3, 10, DPI)
    image = pixels(canvas.png())
    boxes = [[round(v) for v in box] for text, box in canvas.boxes if text == "(100%)"]
    assert len(boxes) == 2  # rank 1 for one system, not retrieved for the other: both cells dark
    for x0, y0, x1, y1 in boxes:
        assert (image[y0:y1, x0:x1] == 255).all(axis=-1).sum() > 10


@pytest.mark.parametrize("systems", [["BM25"], [f"BM25 k1={k} b={b}" for k in (0.6, 0.9, 1.2, 1.5)
                                                for b in (0.3, 0.6, 0.75)],
                                     ["a system whose name is much longer than its column " * 3, "short"]])
@pytest.mark.parametrize("deep", [False, True])
def test_every_text_is_inside_the_image_and_clear_of_the_others(systems, deep):
    ranks = ranks_of(systems, 120)
    beyond = pd.DataFrame(np.where(ranks.to_numpy() == 0, 100, np.nan), index=ranks.index,
                          columns=ranks.columns).astype("Int64") if deep else None
    if deep:
        beyond.iloc[::2] = pd.NA
    canvas = rank_buckets.bucket_heatmap(ranks, 3, 10, DPI, beyond)
    assert ("beyond depth" in [text for text, _ in canvas.boxes]) == deep
    # the system names, slanted (their boxes overlap as rectangles, not their letters), hang below the cells
    names = [(text, box) for text, box in canvas.boxes if text in canvas.slanted]
    assert len(names) == len(systems)
    assert all(box[1] > canvas.area.box[3] for _, box in names)
    assert_whole_and_apart(canvas, canvas.slanted)


def test_the_same_ranks_draw_the_same_bytes():
    ranks = ranks_of(["x", "y", "z"])
    first = rank_buckets.bucket_heatmap_png(ranks, 3, 10, DPI)
    assert rank_buckets.bucket_heatmap_png(ranks, 3, 10, DPI) == first
    ranks.iloc[0, 0] = 0 if ranks.iloc[0, 0] else 1
    assert rank_buckets.bucket_heatmap_png(ranks, 3, 10, DPI) != first
