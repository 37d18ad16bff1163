"""Plots of a sweep and of a run, as matplotlib Figures drawn from plain pandas inputs.

Headless by construction: every figure is a ``matplotlib.figure.Figure`` on its own Agg canvas, never a
pyplot figure, so nothing depends on (or changes) the process-wide backend and nothing needs closing.
Each plot is titled, labels its axes with units, and stays legible from 14 to 1,000 questions.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from metrics.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, percentile_bounds, resample_means
from pipeline.analysis.diagnosis import CAUSES, CLASSES, LABELS
from pipeline.reports.html import PngCanvas, png_bytes

# Above this many questions the rank heat map shows rank buckets per system instead of one row per question.
HEATMAP_MAX_ROWS = 50
# Rank buckets, best to worst, then "not retrieved": colour-blind-safe blues to oranges, grey for none.
BUCKET_COLOURS = ("#08519c", "#6baed6", "#fdae6b", "#d94801")
# Failure causes (pipeline.analysis.diagnosis.CAUSES, in order): dark to light oranges.
CAUSE_COLOURS = ("#7f2704", "#d94801", "#f16913", "#fd8d3c", "#fdae6b")
NOT_RETRIEVED_COLOUR = "#3a3a3a"
BEYOND_COLOUR = "#8c8c8c"  # a ranking full to its depth without a relevant document: one may lie deeper


def new_figure(width: float, height: float) -> Figure:
    """A Figure with its own Agg canvas (no pyplot state), laid out so labels are never clipped."""
    fig = Figure(figsize=(width, height), layout="constrained")
    PngCanvas(fig)
    return fig


# Margins (inches) of the per-run plots, made for every job of a sweep: wide enough for a two-line title, the
# axis labels and seven-digit counts, so they need no layout engine (constrained layout draws each figure twice
# and measures every text: two thirds of a per-run plot's cost).
RUN_PLOT_MARGINS = {"left": 0.95, "right": 0.25, "bottom": 0.7, "top": 0.7}


def run_figure(width: float, height: float, **margins: float) -> Figure:
    """A per-run plot's Figure: one axes inside :data:`RUN_PLOT_MARGINS` (or the ``margins`` given, in inches),
    no layout pass at draw time."""
    fig = Figure(figsize=(width, height))
    PngCanvas(fig)
    m = {**RUN_PLOT_MARGINS, **margins}
    fig.subplots_adjust(left=m["left"] / width, right=1 - m["right"] / width, bottom=m["bottom"] / height,
                        top=1 - m["top"] / height)
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


def rank_bucket_labels(cutoff: int = 3, late_limit: int = 10, beyond: bool = False) -> list[str]:
    """Bucket names, best first: "1", "2–3", "4–10", "11+", ("beyond depth",) "not retrieved" (cutoff 3, limit 10).

    With ``beyond``, a question whose ranking was full to its depth without a relevant document ("beyond depth N" in
    the diagnosis: one may lie deeper) is told apart from one whose ranking ended early (not retrieved)."""
    labels = ["1"]
    if cutoff > 1:
        labels.append(f"2–{cutoff}" if cutoff > 2 else "2")
    if late_limit > cutoff:
        labels.append(f"{cutoff + 1}–{late_limit}" if late_limit > cutoff + 1 else str(late_limit))
    labels += [f"{late_limit + 1}+", *(["beyond depth"] if beyond else []), "not retrieved"]
    return labels


def _has_beyond(beyond: pd.DataFrame | None) -> bool:
    return beyond is not None and bool(beyond.notna().to_numpy().any())


def rank_bucket_codes(ranks: pd.DataFrame, cutoff: int = 3, late_limit: int = 10,
                      beyond: pd.DataFrame | None = None) -> np.ndarray:
    """Each cell's bucket index into :func:`rank_bucket_labels` (0 = rank 1 ... last = not retrieved); ``beyond``
    (questions x systems, the depth or <NA>, aligned with ``ranks``) fills the "beyond depth" bucket."""
    values = ranks.to_numpy(dtype=float, na_value=np.nan)
    edges = [1.0] + ([float(cutoff)] if cutoff > 1 else []) + ([float(late_limit)] if late_limit > cutoff else [])
    codes = np.searchsorted(np.array(edges), values, side="left")
    missing = (values <= 0) | np.isnan(values)
    if not _has_beyond(beyond):
        return np.where(missing, len(edges) + 1, codes)
    deep = beyond.reindex(index=ranks.index, columns=ranks.columns).notna().to_numpy()
    return np.where(missing & deep, len(edges) + 1, np.where(missing, len(edges) + 2, codes))


def rank_buckets(ranks: pd.DataFrame, cutoff: int = 3, late_limit: int = 10,
                 beyond: pd.DataFrame | None = None) -> pd.DataFrame:
    """How many questions each system puts in each rank bucket (buckets x systems)."""
    labels = rank_bucket_labels(cutoff, late_limit, _has_beyond(beyond))
    codes = rank_bucket_codes(ranks, cutoff, late_limit, beyond)
    counts = np.stack([np.bincount(codes[:, j], minlength=len(labels)) for j in range(codes.shape[1])], axis=1)
    return pd.DataFrame(counts, index=pd.Index(labels, name="rank of first relevant"), columns=ranks.columns)


def first_relevant_heatmap(
    ranks: pd.DataFrame, cutoff: int = 3, late_limit: int = 10, max_rows: int = HEATMAP_MAX_ROWS,
    beyond: pd.DataFrame | None = None,
) -> Figure:
    """Rank of the first relevant document, questions x systems (0 or NaN = not retrieved, drawn in grey; with
    ``beyond``, a ranking full to its depth without a relevant document in a lighter grey, ">N").

    Up to ``max_rows`` questions: one annotated cell per question and system. Beyond, one row per rank
    bucket and the share of questions in it, so 1,000 questions stay as readable as 14.
    """
    if ranks.shape[1] == 0:
        raise ValueError("the heat map needs at least one system")
    if len(ranks) <= max_rows:
        return _heatmap_per_question(ranks, cutoff, late_limit, beyond)
    return _heatmap_buckets(ranks, cutoff, late_limit, beyond)


def _heatmap_per_question(ranks: pd.DataFrame, cutoff: int, late_limit: int,
                          beyond: pd.DataFrame | None = None) -> Figure:
    deep = _has_beyond(beyond)
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


def _heatmap_buckets(ranks: pd.DataFrame, cutoff: int, late_limit: int,
                     beyond: pd.DataFrame | None = None) -> Figure:
    counts = rank_buckets(ranks, cutoff, late_limit, beyond)
    share = counts.to_numpy(float) / len(ranks)
    first_missing = len(counts) - 1 - _has_beyond(beyond)  # the grey rows: (beyond depth and) not retrieved
    fig = new_figure(4.0 + 1.2 * ranks.shape[1], 1.8 + 0.55 * len(counts))
    ax = fig.add_subplot()
    is_missing_row = np.broadcast_to(np.arange(len(counts))[:, None] >= first_missing, share.shape)
    ranked = np.ma.masked_array(share, mask=is_missing_row)
    missing = np.ma.masked_array(share, mask=~is_missing_row)
    image = ax.imshow(ranked, cmap="Blues", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.imshow(missing, cmap="Greys", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for (i, j), n in np.ndenumerate(counts.to_numpy()):
        ax.text(j, i, f"{n}\n({share[i, j]:.0%})", ha="center", va="center", fontsize=8,
                color="white" if share[i, j] > 0.55 else "black", in_layout=False)
    ax.axhline(first_missing - 0.5, color="black", linewidth=1.5)
    ax.add_patch(Rectangle((-0.5, first_missing - 0.5), ranks.shape[1], len(counts) - first_missing, fill=False,
                           hatch="//", edgecolor="#9a9a9a", linewidth=0))
    ax.set_xticks(range(ranks.shape[1]), [str(c) for c in ranks.columns], rotation=30, ha="right")
    ax.set_yticks(range(len(counts)), list(counts.index))
    ax.set_xlabel("system")
    ax.set_ylabel("rank of first relevant document (position)")
    grey = "hatched grey rows = beyond depth, not retrieved" if _has_beyond(beyond) else \
        "hatched grey row = not retrieved"
    _title(ax, f"Rank of the first relevant document\n{len(ranks)} questions counted per rank bucket "
                 f"({grey})", fontsize="medium")
    fig.colorbar(image, ax=ax, label="share of questions (0–1)")
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


def response_plot(grid: pd.DataFrame, x: str, hue: str, metric: str, confidence: float = DEFAULT_CONFIDENCE) -> Figure:
    """A grid sweep's response: the metric's mean against ``x``, one line per value of ``hue``, each with its
    bootstrap interval as a band; the top system and those tied with it ringed.

    ``grid`` has one row per system: columns ``x``, ``hue``, ``mean``, ``ci_low``, ``ci_high`` and ``top`` (bool).
    """
    _require(grid, (x, hue, "mean", "ci_low", "ci_high", "top"), "grid")
    values = sorted(grid[hue].unique())
    colours = _palette(len(values))
    fig = new_figure(9.5, 4.8)
    ax = fig.add_subplot()
    for colour, value in zip(colours, values):
        line = grid[grid[hue] == value].sort_values(x)
        ax.fill_between(line[x], line["ci_low"], line["ci_high"], color=colour, alpha=0.1, linewidth=0)
        ax.plot(line[x], line["ci_low"], line[x], line["ci_high"], color=colour, linewidth=0.8, linestyle=":")
        ax.plot(line[x], line["mean"], marker="o", color=colour, label=f"{hue} = {value:g}")
    top = grid[grid["top"]]
    if len(top):
        ax.scatter(top[x], top["mean"], s=160, facecolors="none", edgecolors="black", linewidths=1.3, zorder=3,
                   label="top, or tied with it")
    ax.set_xticks(sorted(grid[x].unique()))
    ax.set_xlabel(f"{x} (swept value)")
    ax.set_ylabel(f"{metric}, mean over questions (0–1)")
    _title(ax, f"{metric} across the grid {x} × {hue}\nbands: each system's {confidence:.0%} bootstrap interval")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


def metric_histogram(values: pd.Series, metric: str, system: str, bins: int = 10) -> Figure:
    """Distribution of one per-question metric of one run, its mean marked (scores lie in [0, 1])."""
    return _Histogram(_scores(values), metric, system, bins).fig


def failure_bars(counts: Mapping[str, int], system: str, questions: int | None = None) -> Figure:
    """Horizontal bars of failure-class counts (keys of pipeline.analysis.diagnosis.CLASSES) for one run: the
    causes (one per failing question) in oranges, then late rank and duplicates (which may accompany a cause) in
    blues."""
    return _FailureBars(_class_counts(counts), system, questions).fig


# -- the per-run plots as a sweep's drawing copy makes them, one job after another -------------------------------


def metric_histogram_png(values: pd.Series, metric: str, system: str, dpi: int, bins: int = 10) -> bytes:
    """:func:`metric_histogram` as a PNG, byte for byte, drawn on the figure this process drew the last one on.

    A sweep's copy that draws each job's two plots spent a third of a plot building a figure its last job had
    already built (the figure, its axes, their ticks, and the text sizes its renderer remembers): here the bars,
    the mean and the texts of the kept figure are set to the new run's, as a fresh figure would have them."""
    data = _scores(values)
    kept = _KEPT.get(_Histogram)
    if isinstance(kept, _Histogram) and kept.fits(data, bins):
        kept.refill(data, metric, system)
    else:
        kept = _KEPT[_Histogram] = _Histogram(data, metric, system, bins)
    return png_bytes(kept.fig, dpi)


def failure_bars_png(counts: Mapping[str, int], system: str, questions: int | None, dpi: int) -> bytes:
    """:func:`failure_bars` as a PNG, byte for byte, drawn on the figure this process drew the last one on (see
    :func:`metric_histogram_png`)."""
    values = _class_counts(counts)
    kept = _KEPT.get(_FailureBars)
    if isinstance(kept, _FailureBars):
        kept.refill(values, system, questions)
    else:
        kept = _KEPT[_FailureBars] = _FailureBars(values, system, questions)
    return png_bytes(kept.fig, dpi)


_KEPT: dict[type, object] = {}  # per process: the per-run plot of each kind drawn last


def warm_up_run_plots(dpi: int) -> None:
    """Draw each per-run plot once on placeholder data: a sweep's drawing copy does this before its first job
    hands it anything (fonts loaded, the figures built), so the first job's plots cost what a later job's do. What
    the next plots draw is unchanged: each is drawn as a fresh figure would be (see :func:`metric_histogram_png`)."""
    metric_histogram_png(pd.Series(np.linspace(0.0, 1.0, 101)), "ndcg@10", "placeholder", dpi)
    failure_bars_png(dict.fromkeys(CLASSES, 1), "placeholder", 101, dpi)


def _scores(values: pd.Series) -> np.ndarray:
    return pd.Series(values, dtype=float).dropna().to_numpy()


def _class_counts(counts: Mapping[str, int]) -> list[int]:
    return [int(counts.get(c, 0)) for c in CLASSES]


class _Histogram:
    """A :func:`metric_histogram` figure, which :meth:`refill` turns into another run's."""

    def __init__(self, data: np.ndarray, metric: str, system: str, bins: int) -> None:
        self.bins = bins
        self.fig = run_figure(6.5, 4.0)
        ax = self.ax = self.fig.add_subplot()
        self.bars = ax.hist(data, bins=self._edges(), color="#6baed6", edgecolor="white")[2]
        self.mean, self.legend = None, None
        if len(data):
            self.mean = ax.axvline(data.mean(), color="#d94801", linewidth=1.5, label=f"mean {data.mean():.3f}")
            self.legend = ax.legend(loc="upper center", fontsize="small")
        ax.set_xlim(0, 1)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        self._texts(metric, system, len(data))

    def _edges(self) -> np.ndarray:
        return np.linspace(0.0, 1.0, self.bins + 1)

    def fits(self, data: np.ndarray, bins: int) -> bool:
        """Whether this figure can show ``data``: the same bins, and a mean to mark exactly when it has one."""
        return bins == self.bins and (self.mean is not None) == bool(len(data))

    def refill(self, data: np.ndarray, metric: str, system: str) -> None:
        for bar, count in zip(self.bars, np.histogram(data, bins=self._edges())[0]):  # what ax.hist counts
            bar.set_height(count)
        if self.mean is not None and self.legend is not None:
            label = f"mean {data.mean():.3f}"
            self.mean.set_xdata([data.mean(), data.mean()])
            self.mean.set_label(label)
            self.legend.get_texts()[0].set_text(label)
        self.ax.relim()  # the data limits the new bars give, then the view a fresh figure computes from them
        self.ax.autoscale_view()
        self.ax.set_xlim(0, 1)
        self._texts(metric, system, len(data))

    def _texts(self, metric: str, system: str, questions: int) -> None:
        _title(self.ax, f"{metric} per question ({questions} questions)\nsystem: {system}", fontsize="medium")
        self.ax.set_xlabel(f"{metric} of a question (score, 0–1)")
        self.ax.set_ylabel("questions (count)")


class _FailureBars:
    """A :func:`failure_bars` figure, which :meth:`refill` turns into another run's."""

    def __init__(self, values: list[int], system: str, questions: int | None) -> None:
        self.fig = run_figure(7.0, 4.2, left=2.3)
        ax = self.ax = self.fig.add_subplot()
        colours = [*CAUSE_COLOURS[: len(CAUSES)], *BUCKET_COLOURS[: len(CLASSES) - len(CAUSES)][::-1]]
        self.bars = ax.barh([LABELS[c] for c in CLASSES], values, color=colours)
        self.labels = ax.bar_label(self.bars, padding=2)
        ax.invert_yaxis()  # the first class on top
        ax.set_xlim(0, max([*values, 1]) * 1.25)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        self._texts(system, questions)

    def refill(self, values: list[int], system: str, questions: int | None) -> None:
        for bar, value in zip(self.bars.patches, values):
            bar.set_width(value)
        self.bars.datavalues = np.asarray(values)  # what bar_label writes
        for label in self.labels:
            label.remove()
        self.labels = self.ax.bar_label(self.bars, padding=2)
        self.ax.set_xlim(0, max([*values, 1]) * 1.25)
        self._texts(system, questions)

    def _texts(self, system: str, questions: int | None) -> None:
        scope = f" of {questions}" if questions is not None else ""
        _title(self.ax, f"Questions{scope} per failure class\nsystem: {system}", fontsize="medium")
        self.ax.set_ylabel("failure class (causes, then where)")
        self.ax.set_xlabel("questions (count)")


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
