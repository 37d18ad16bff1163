"""Plots of a sweep, as matplotlib Figures drawn from plain pandas inputs: the means with their intervals, the
per-question heat map of a few dozen questions, the paired bootstrap. A run's own two plots, the rank-bucket heat map
of more questions and a grid's response are drawn with PIL (:mod:`pipeline.reports.run_plots`,
:mod:`pipeline.reports.rank_buckets`, :mod:`pipeline.reports.response_plot`).

Headless by construction: every figure is a ``matplotlib.figure.Figure`` on its own Agg canvas, never a
pyplot figure, so nothing depends on (or changes) the process-wide backend and nothing needs closing.
Each plot is titled, labels its axes with units, and stays legible from 14 to 1,000 questions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from metrics.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, percentile_bounds, resample_means
from pipeline.reports.colours import BEYOND_COLOUR, BUCKET_COLOURS, NOT_RETRIEVED_COLOUR
from pipeline.reports.html import PngCanvas
from pipeline.reports.rank_buckets import has_beyond, rank_bucket_codes, rank_bucket_labels


def new_figure(width: float, height: float) -> Figure:
    """A Figure with its own Agg canvas (no pyplot state), laid out so labels are never clipped."""
    fig = Figure(figsize=(width, height), layout="constrained")
    PngCanvas(fig)
    return fig


def means_bars(summary: pd.DataFrame, title: str = "Mean score per metric, 95% bootstrap intervals") -> Figure:
    """Grouped bars: one group per metric, one bar per system, the 95% interval as an error bar.

    ``summary`` is long: columns ``system``, ``metric``, ``mean``, ``ci_low``, ``ci_high`` (one row each).
    """
    _require(summary, ("system", "metric", "mean", "ci_low", "ci_high"), "summary")
    systems = list(dict.fromkeys(summary["system"]))
    metrics = list(dict.fromkeys(summary["metric"]))
    table = summary.set_index(["system", "metric"])
    fig = new_figure(max(6.0, 1.0 + 0.35 * len(systems) * len(metrics)) + 2.0, 4.5)
    ax = fig.add_subplot()
    width = 0.8 / len(systems)
    x = np.arange(len(metrics))
    colours = _palette(len(systems))
    # every bar in one call and every interval in another, system by system: byte for byte the PNG of one bar() with
    # yerr per system (bars are drawn before error bars either way), built in half the time
    rows = table.reindex([(system, m) for system in systems for m in metrics])
    mean = rows["mean"].to_numpy(float)
    err = np.vstack([mean - rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float) - mean])
    centres = np.concatenate([x - 0.4 + width * (s + 0.5) for s in range(len(systems))])
    bars = ax.bar(centres, mean, width, color=[c for c in colours for _ in metrics])
    ax.errorbar(centres, mean, yerr=np.clip(err, 0, None), fmt="none", capsize=3, elinewidth=1, ecolor="black",
                label="_nolegend_")
    ax.set_xticks(x, metrics)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("metric (cutoff after @)")
    ax.set_ylabel("mean over questions (score, 0–1)")
    _title(ax, title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend([bars.patches[s * len(metrics)] for s in range(len(systems))], systems, title="system",
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
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


def best_pair(scores: pd.DataFrame) -> tuple[str, str]:
    """The two systems (columns) with the highest mean, best first; ties by name."""
    if scores.shape[1] < 2:
        raise ValueError("a paired comparison needs at least two systems")
    means = scores.mean()
    order = sorted(means.index, key=lambda s: (-means[s], str(s)))
    return order[0], order[1]


def paired_bootstrap(
    scores: pd.DataFrame,
    metric: str,
    pair: tuple[str, str] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Figure:
    """Bootstrap distribution of the mean paired difference (first minus second system of ``pair``).

    ``scores`` holds one metric, questions x systems, aligned by question; ``pair`` defaults to the two best
    systems. Resampling is metrics.bootstrap's (SPEC-exact), so the interval drawn is the one reported.
    """
    a, b = pair or best_pair(scores)
    diff = (scores[a] - scores[b]).to_numpy(float)
    means = resample_means(diff, resamples, seed)[:, 0]
    low, high = (float(v[0]) for v in percentile_bounds(means[:, None], confidence))
    mean = float(diff.mean())
    fig = new_figure(9.5, 4.5)
    ax = fig.add_subplot()
    ax.hist(means, bins=min(60, max(10, int(np.sqrt(resamples)))), color="#6baed6", edgecolor="white",
            linewidth=0.3, label=f"{resamples:,} resample means")
    ax.axvspan(low, high, color="#fdae6b", alpha=0.3, zorder=0,
               label=f"{confidence:.0%} interval [{low:+.3f}, {high:+.3f}]")
    ax.axvline(low, color="#d94801", linewidth=1.2)
    ax.axvline(high, color="#d94801", linewidth=1.2)
    ax.axvline(mean, color="#08519c", linewidth=1.8, label=f"observed mean {mean:+.3f}")
    ax.axvline(0.0, color="black", linestyle="--", linewidth=1.2, label="zero (no difference)")
    verdict = "contains zero: not distinguishable" if low <= 0 <= high else "excludes zero"
    _title(ax, f"Paired bootstrap of {metric}: {a} − {b} ({len(diff)} questions)\n"
                 f"{confidence:.0%} interval {verdict}")
    ax.set_xlabel(f"mean per-question difference in {metric} (score points, 0–1 scale)")
    ax.set_ylabel("resamples (count)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


def _title(ax: Axes, label: str, **style: object) -> None:
    """The axes' title, at their top (``y=1.0``): where matplotlib's automatic placement puts it, as no plot here
    draws anything above its axes, without measuring every tick label first to find that out (about a quarter of
    what drawing a per-run plot costs; the PNG is byte for byte the same)."""
    ax.set_title(label, y=1.0, **style)


def _palette(n: int) -> list:
    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(missing)}")
    if frame.empty:
        raise ValueError(f"{what} is empty: nothing to plot")
