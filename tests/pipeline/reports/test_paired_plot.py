"""The paired bootstrap, drawn without matplotlib: its bars count every resample the help-desk reference's bootstrap
draws, its lines stand at the reference's interval, the observed mean and zero, and every text is whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.bootstrap import paired_difference, resample_means
from metrics.evaluation import evaluate
from pipeline.reports import paired_plot
from retrievers import BM25, LSA
from tests.pipeline.reports.drawn import assert_whole_and_apart, is_colour, pixels

DPI = 110


@pytest.fixture(scope="module")
def ndcg(helpdesk_collection):
    """Per-question nDCG@5 of BM25 and LSA on the help-desk corpus (questions x systems)."""
    c = helpdesk_collection
    columns = {}
    for name, retriever in (("BM25", BM25()), ("LSA", LSA())):
        run = retriever.index(c).rank(c.query_ids, c.query_texts, 100)
        columns[name] = evaluate(run, c.qrels, ["ndcg@5"]).per_question["ndcg@5"]
    return pd.DataFrame(columns)






def test_the_spec_interval_the_mean_and_zero_are_drawn_where_they_lie(ndcg):
    canvas = paired_plot.paired_bootstrap(ndcg, "ndcg@5", DPI, pair=("BM25", "LSA"))
    image = pixels(canvas.png())
    axes = canvas.area
    expected = paired_difference(ndcg["BM25"].to_numpy(), ndcg["LSA"].to_numpy())[0]
    middle = (axes.box[1] + axes.box[3]) // 2
    for value, colour in ((expected.low, paired_plot.BOUNDS), (expected.high, paired_plot.BOUNDS),
                          (expected.mean, paired_plot.MEAN)):
        column = round(axes.x(value))
        assert is_colour(image[axes.box[1] + 2:axes.box[3] - 2, column - 1:column + 2], colour).any(axis=1).mean() > 0.9
    zero = round(axes.x(0.0))
    dashes = is_colour(image[axes.box[1] + 2:axes.box[3] - 2, zero - 1:zero + 2], "#000000").any(axis=1)
    assert 0.5 < dashes.mean() < 0.9, middle  # dashed: black, then gaps
    texts = [text for text, _ in canvas.boxes]
    # docs/helpdesk-reference.md, "Paired bootstrap": +0.012 [-0.081, +0.107]
    assert "95% interval [-0.081, +0.107]" in texts and "observed mean +0.012" in texts
    assert any("BM25 − LSA" in t for t in texts) and "95% interval contains zero: not distinguishable" in texts
    assert "5,000 resample means" in texts and "zero (no difference)" in texts


def test_each_bar_is_as_tall_as_its_count_of_resample_means(ndcg):
    canvas = paired_plot.paired_bootstrap(ndcg, "ndcg@5", DPI, pair=("BM25", "LSA"), resamples=1000)
    image = pixels(canvas.png())
    axes = canvas.area
    means = resample_means((ndcg["BM25"] - ndcg["LSA"]).to_numpy(float), 1000, 0)[:, 0]
    counts, edges = np.histogram(means, bins=31)
    assert counts.sum() == 1000  # every resample counted once
    per_unit = axes.height / axes.ylim[1]
    bars = is_colour(image, paired_plot.BARS)
    for count, low, high in zip(counts, edges[:-1], edges[1:]):
        column = round(axes.x((low + high) / 2))
        height = bars[axes.box[1]:axes.box[3] + 1, column].sum()
        spanned = is_colour(image[axes.box[1]:axes.box[3] + 1, column], paired_plot.BOUNDS).any()
        if not spanned:  # a bound's line across this bar hides a pixel column of it
            assert abs(height - count * per_unit) <= 2, (low, height, count * per_unit)


def test_the_pair_defaults_to_the_two_best_systems():
    scores = pd.DataFrame({"low": [0.1, 0.2], "best": [0.9, 0.8], "second": [0.5, 0.9]})
    assert paired_plot.best_pair(scores) == ("best", "second")
    canvas = paired_plot.paired_bootstrap(scores, "mrr", DPI, resamples=200)
    assert any("best − second" in text for text, _ in canvas.boxes)
    with pytest.raises(ValueError):
        paired_plot.best_pair(scores[["low"]])


@pytest.mark.parametrize("names", [("BM25", "LSA"), ("a system whose name is long " * 4, "another one " * 6)])
def test_every_text_is_inside_the_image_and_clear_of_the_others(ndcg, names):
    scores = ndcg.set_axis(list(names), axis=1)
    canvas = paired_plot.paired_bootstrap(scores, "ndcg@5", DPI, resamples=500)
    assert_whole_and_apart(canvas)
