"""Plots: each figure renders headless, is titled and labelled, and draws the series it was given."""

from __future__ import annotations

import io

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from metrics.bootstrap import paired_difference
from metrics.evaluation import evaluate
from pipeline.reports import plots
from pipeline.reports.html import figure_png
from pipeline.reports.rank_buckets import rank_bucket_labels
from retrievers import BM25, LSA


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


@pytest.fixture(scope="module")
def ndcg(helpdesk_collection):
    """Per-question nDCG@5 of BM25 and LSA on the help-desk corpus (questions x systems)."""
    c = helpdesk_collection
    columns = {}
    for name, retriever in (("BM25", BM25()), ("LSA", LSA())):
        run = retriever.index(c).rank(c.query_ids, c.query_texts, 100)
        columns[name] = evaluate(run, c.qrels, ["ndcg@5"]).per_question["ndcg@5"]
    return pd.DataFrame(columns)


SUMMARY = pd.DataFrame(
    [
        {"system": s, "metric": m, "mean": mean, "ci_low": mean - 0.1, "ci_high": min(1.0, mean + 0.05)}
        for s, base in (("bm25", 0.6), ("lsa", 0.5), ("rrf", 0.7))
        for m, mean in (("hit_rate@3", base + 0.2), ("mrr", base + 0.1), ("ndcg@5", base))
    ]
)


def test_means_bars_one_bar_and_one_error_bar_per_system_and_metric():
    """System by system, a bar per metric in the system's colour with its interval; the legend names the systems
    in order, each with its bars' colour."""
    fig = plots.means_bars(SUMMARY)
    ax = fig.axes[0]
    assert_readable(fig)
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    (errors,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 9 and [t.get_text() for t in ax.get_xticklabels()] == ["hit_rate@3", "mrr", "ndcg@5"]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["bm25", "lsa", "rrf"]
    for s, handle in enumerate(legend.legend_handles):
        assert all(p.get_facecolor() == handle.get_facecolor() for p in bars.patches[3 * s:3 * s + 3])
    assert len({p.get_facecolor() for p in bars.patches}) == 3
    rrf = SUMMARY[SUMMARY["system"] == "rrf"]
    assert [p.get_height() for p in bars.patches[6:]] == pytest.approx(rrf["mean"].tolist())
    segments = errors.lines[2][0].get_segments()[6:]  # one vertical segment per bar: (x, low) -> (x, high)
    assert [s[0][1] for s in segments] == pytest.approx(rrf["ci_low"].tolist())
    assert [s[1][1] for s in segments] == pytest.approx(rrf["ci_high"].tolist())
    assert [s[0][0] for s in segments] == pytest.approx([p.get_x() + p.get_width() / 2 for p in bars.patches[6:]])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bm25", "lsa", "rrf"]


def per_system_means_bars(summary: pd.DataFrame) -> plots.Figure:
    """The means figure as matplotlib's own per-system ``bar(..., yerr=...)`` calls draw it (the reference)."""
    systems, metrics = list(dict.fromkeys(summary["system"])), list(dict.fromkeys(summary["metric"]))
    table = summary.set_index(["system", "metric"])
    fig = plots.new_figure(max(6.0, 1.0 + 0.35 * len(systems) * len(metrics)) + 2.0, 4.5)
    ax = fig.add_subplot()
    width, x, colours = 0.8 / len(systems), np.arange(len(metrics)), plots._palette(len(systems))
    for s, system in enumerate(systems):
        rows = table.reindex([(system, m) for m in metrics])
        mean = rows["mean"].to_numpy(float)
        err = np.vstack([mean - rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float) - mean])
        ax.bar(x - 0.4 + width * (s + 0.5), mean, width, yerr=np.clip(err, 0, None), capsize=3, label=system,
               color=colours[s], error_kw={"elinewidth": 1, "ecolor": "black"})
    ax.set_xticks(x, metrics)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("metric (cutoff after @)")
    ax.set_ylabel("mean over questions (score, 0–1)")
    plots._title(ax, "Mean score per metric, 95% bootstrap intervals")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="system", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


def test_means_bars_draw_what_a_bar_call_per_system_draws_byte_for_byte():
    """All bars in one call and all intervals in another (a sweep's 12 systems: half the time to build) make the
    PNG that one ``bar(..., yerr=...)`` per system makes; a missing mean or bound included."""
    rng = np.random.default_rng(3)
    rows = [{"system": f"BM25 k1={k1}", "metric": metric, "mean": m, "ci_low": m - rng.random() / 10,
             "ci_high": m + rng.random() / 10}
            for k1 in (0.6, 0.9, 1.2, 1.5, 1.8) for metric, m in zip(("ndcg@10", "recall@100", "mrr"), rng.random(3))]
    summary = pd.DataFrame(rows)
    summary.loc[4, "ci_low"] = np.nan
    summary.loc[7, "mean"] = np.nan
    for table in (summary, SUMMARY):
        assert figure_png(plots.means_bars(table)) == figure_png(per_system_means_bars(table))


def test_means_bars_rejects_a_table_without_intervals():
    with pytest.raises(ValueError, match="ci_low"):
        plots.means_bars(SUMMARY.drop(columns=["ci_low"]))


def test_heatmap_of_the_help_desk_ranks_marks_not_retrieved_distinctly():
    # SPEC.md's table of first relevant ranks (0 = not retrieved)
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


def test_paired_bootstrap_draws_the_spec_interval_and_zero(ndcg):
    fig = plots.paired_bootstrap(ndcg, "ndcg@5", pair=("BM25", "LSA"))
    ax = fig.axes[0]
    assert_readable(fig)
    assert "BM25 − LSA" in ax.get_title()
    heights = [p.get_height() for p in ax.containers[0]]
    assert sum(heights) == 5000  # every resample counted once
    lines = {round(line.get_xdata()[0], 6) for line in ax.get_lines()}
    expected = paired_difference(ndcg["BM25"].to_numpy(), ndcg["LSA"].to_numpy())[0]
    assert {0.0, round(expected.low, 6), round(expected.high, 6), round(expected.mean, 6)} <= lines
    # SPEC.md, "Paired bootstrap": +0.012 [-0.081, +0.107]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "95% interval [-0.081, +0.107]" in legend and "observed mean +0.012" in legend
    assert "contains zero" in ax.get_title()


def test_the_paired_plot_defaults_to_the_two_best_systems():
    scores = pd.DataFrame({"low": [0.1, 0.2], "best": [0.9, 0.8], "second": [0.5, 0.9]})
    assert plots.best_pair(scores) == ("best", "second")
    assert "best − second" in plots.paired_bootstrap(scores, "mrr", resamples=200).axes[0].get_title()
    with pytest.raises(ValueError):
        plots.best_pair(scores[["low"]])


def test_a_ranking_full_to_its_depth_is_marked_beyond_it_in_the_per_question_heat_map():
    ranks = pd.DataFrame({"a": [1, np.nan, np.nan, 4], "b": [np.nan, 2, np.nan, 11]}, index=["q1", "q2", "q3", "q4"])
    beyond = pd.DataFrame({"a": [pd.NA, 100, pd.NA, pd.NA], "b": [10, pd.NA, pd.NA, pd.NA]}, index=ranks.index,
                          dtype="Int64")
    fig = plots.first_relevant_heatmap(ranks, beyond=beyond)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count(">100") == 1 and texts.count(">10") == 1 and texts.count("–") == 2
    assert "beyond depth" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def every_plot(ndcg) -> dict:
    """One of each plot, each a function making it afresh."""
    ranks = pd.DataFrame({"BM25": [1, 2, 0, 11], "LSA": [3, 1, 1, 0]}, index=["q1", "q2", "q3", "q4"])
    return {
        "means": lambda: plots.means_bars(SUMMARY),
        "heat map": lambda: plots.first_relevant_heatmap(ranks),
        "paired": lambda: plots.paired_bootstrap(ndcg, "ndcg@5", pair=("BM25", "LSA")),
    }


def test_titles_placed_at_the_top_of_the_axes_are_where_matplotlib_would_place_them(ndcg, monkeypatch):
    """Every title is set at ``y=1.0`` (matplotlib then skips measuring the tick labels to place it): as nothing is
    drawn above the axes, each plot's PNG is byte for byte the one automatic placement gives."""
    fixed = {name: figure_png(make()) for name, make in every_plot(ndcg).items()}
    monkeypatch.setattr(plots, "_title", lambda ax, label, **style: ax.set_title(label, **style))
    for name, make in every_plot(ndcg).items():
        assert figure_png(make()) == fixed[name], name
