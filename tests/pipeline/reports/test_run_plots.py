"""A run's two plots, drawn without matplotlib: the bars are as long as their counts, the mean is where it lies,
every text is inside the image and clear of the others, and the ticks are the ones matplotlib would pick."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.analysis.diagnosis import CLASSES, LABELS
from pipeline.reports import run_plots
from tests.pipeline.reports.drawn import assert_whole_and_apart, is_colour, pixels

DPI = 110






def test_the_histogram_has_one_bar_per_bin_as_tall_as_its_count():
    values = np.r_[np.full(40, 0.05), np.full(10, 0.55), np.full(20, 0.95), np.nan]  # NaN is left out
    canvas = run_plots.metric_histogram(values, "ndcg@10", "BM25", DPI)
    image = pixels(canvas.png())
    assert image.shape == (round(4.0 * DPI), round(6.5 * DPI), 3)
    axes = canvas.area
    _, top, _, bottom = axes.box
    bar = is_colour(image, run_plots.BAR_COLOUR)
    per_unit = (bottom - top) / (40 * 1.05)  # the tallest bar reaches 1/1.05 of the axes
    for low, count in zip(np.arange(10) / 10, [40, 0, 0, 0, 0, 10, 0, 0, 0, 20]):
        column = round(axes.x(low + 0.05))
        height = bar[top:bottom + 1, column].sum()
        assert abs(height - count * per_unit) <= 2, (low, height, count * per_unit)
    texts = [text for text, _ in canvas.boxes]
    assert "ndcg@10 per question (70 questions)" in texts and "system: BM25" in texts
    assert "ndcg@10 of a question (score, 0–1)" in texts and "questions (count)" in texts


def test_the_histogram_marks_the_mean_where_it_lies_and_says_it():
    values = np.r_[np.zeros(30), np.ones(10)]
    canvas = run_plots.metric_histogram(values, "mrr", "LSA", DPI)
    image = pixels(canvas.png())
    marked = np.flatnonzero(is_colour(image, run_plots.MEAN_COLOUR).sum(axis=0) > canvas.area.height // 2)
    assert len(marked) and abs(marked.mean() - canvas.area.x(0.25)) <= 1.5
    assert "mean 0.250" in [text for text, _ in canvas.boxes]


def test_a_run_without_scores_draws_no_bar_and_no_mean():
    canvas = run_plots.metric_histogram(np.array([np.nan]), "ndcg@10", "nothing", DPI)
    image = pixels(canvas.png())
    assert not is_colour(image, run_plots.BAR_COLOUR).any() and not is_colour(image, run_plots.MEAN_COLOUR).any()
    assert "ndcg@10 per question (0 questions)" in [text for text, _ in canvas.boxes]


def test_failure_bars_are_as_long_as_their_counts_first_class_on_top():
    counts = {"vocabulary_gap": 3, "homonymy": 55, "late_rank": 64, "duplicates": 7}
    canvas = run_plots.failure_bars(counts, "BM25", 300, DPI)
    image = pixels(canvas.png())
    axes = canvas.area
    rows = []
    for cls, colour in zip(CLASSES, run_plots.FAILURE_COLOURS):
        mask = is_colour(image, colour)
        mask[:, : axes.box[0] - 1] = False  # the bars only, not a colour met elsewhere
        value = counts.get(cls, 0)
        if value == 0:
            continue
        ys, xs = np.nonzero(mask)
        assert abs((xs.max() - xs.min() + 1) - value / (64 * 1.25) * axes.width) <= 2, cls
        rows.append(ys.mean())
    assert rows == sorted(rows)  # in CLASSES order, top down
    texts = [text for text, _ in canvas.boxes]
    assert [LABELS[c] for c in CLASSES] == [t for t in texts if t in LABELS.values()]
    assert {"3", "0", "55", "64", "7"} <= set(texts)  # each count written at its bar
    assert "Questions of 300 per failure class" in texts and "failure class (causes, then where)" in texts


@pytest.mark.parametrize("questions", [14, 1_000_000])
@pytest.mark.parametrize("system", ["bm25 k1=1.5 b=0.75", "a system whose name is much longer than the plot " * 3])
def test_every_text_is_inside_the_image_and_clear_of_the_others(questions, system):
    values = np.linspace(0, 1, questions)
    counts = {"vocabulary_gap": questions // 3, "partial_gap": questions // 2, "homonymy": 2, "late_rank": questions}
    for canvas in (run_plots.metric_histogram(values, "ndcg@10", system, DPI),
                   run_plots.failure_bars(counts, system, questions, DPI)):
        assert len(canvas.boxes) > 8
        assert_whole_and_apart(canvas)
        assert any(text.startswith("system: ") for text, _ in canvas.boxes)


def test_the_same_run_draws_the_same_bytes():
    values = np.random.default_rng(0).random(300)
    first = run_plots.metric_histogram_png(values, "ndcg@10", "BM25", DPI)
    assert run_plots.metric_histogram_png(values, "ndcg@10", "BM25", DPI) == first
    assert run_plots.metric_histogram_png(values[:-1], "ndcg@10", "BM25", DPI) != first
