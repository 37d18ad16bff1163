"""A sweep's figures, made from the end-of-sweep summary: the means with their intervals, the first-relevant heat
map, the paired bootstrap of the two best systems, a grid's response, the primary metric by slice of the questions
(small multiples), and the primary metric's intervals for MLflow's chart view. Each is a figure, or the picklable
function that makes it (for the drawing copy); nothing here saves, logs or reads MLflow."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pipeline.analysis.diagnosis import DiagnosisSettings
from pipeline.analysis.summary import SweepSummary
from pipeline.common.names import TAG_CORPUS
from pipeline.config.build import MetricPlan
from pipeline.reports.html import DPI
from pipeline.reports.interval_plot import Panel, intervals_png, slice_panels_png
from pipeline.reports.means_plot import means_bars_png
from pipeline.reports.paired_plot import paired_bootstrap_png
from pipeline.reports.plots import Figure, first_relevant_heatmap
from pipeline.reports.rank_buckets import HEATMAP_MAX_ROWS, bucket_heatmap_png
from pipeline.reports.response_plot import CURVE_MEASURES, budget_curve, budget_curve_png, response_png
from pipeline.reports.tables import grid_axes, grid_frame

HEATMAP_STEM = "first_relevant_rank"  # the sweep's heat map's file stem


@dataclass
class SweepFigure:
    """A figure with the file stem it is saved under and the heading it gets in the report; the figure may be the
    function that makes it (a maker the drawing copy calls), or its PNG once that copy has drawn it."""

    stem: str
    heading: str
    figure: Figure | Callable[[], Figure] | bytes


def long_means(summary: SweepSummary, collapse: bool = False) -> pd.DataFrame:
    """``system, metric, mean, ci_low, ci_high``, one row per finished system and shown metric (with ``collapse``,
    one per group of identical systems, under the group's label)."""
    rows = []
    names = summary.representatives if collapse else list(summary.means.index)
    for system in names:
        row = summary.means.loc[system]
        label = summary.label(system) if collapse else str(system)
        for spec in summary.show:
            rows.append({"system": label, "metric": spec.name, "mean": row[spec.name],
                         "ci_low": row[f"{spec.name}/ci_low"], "ci_high": row[f"{spec.name}/ci_high"]})
    return pd.DataFrame(rows, columns=["system", "metric", "mean", "ci_low", "ci_high"])


def per_question_scores(summary: SweepSummary, metric: str) -> pd.DataFrame:
    """One metric, questions x groups of identical systems (under the group's label), over the questions every
    system scored."""
    by_name = {s.name: s for s in summary.finished}
    columns = {summary.label(rep): by_name[rep].per_question[metric] for rep in summary.representatives
               if metric in by_name[rep].per_question.columns}
    return pd.DataFrame(columns).dropna()


def sweep_figures(summary: SweepSummary, plan: MetricPlan, settings: DiagnosisSettings) -> list[SweepFigure]:
    """Means with their intervals; and, when every system saw the same questions, the first-relevant heat map,
    the paired bootstrap of the two best distinct systems on the primary metric and, for a grid, its response.
    Systems with identical results are drawn once."""
    return uncompared_figures(summary, plan, settings) + compared_figures(summary, plan)


def uncompared_figures(summary: SweepSummary, plan: MetricPlan, settings: DiagnosisSettings,
                       makers: bool = False) -> list[SweepFigure]:
    """The figures that need no comparison between systems (:func:`pipeline.analysis.summary.compare_systems`):
    the means, the first-relevant heat map, the paired bootstrap of the two best systems. ``makers``: each as the
    picklable function that builds it from its data (for a drawing copy to build), not built here."""
    figures = []
    make = functools.partial if makers else (lambda builder, *args, **kwargs: builder(*args, **kwargs))
    level = f"{plan.confidence:.0%}"
    means = long_means(summary, collapse=True).dropna(subset=["mean"])
    if not means.empty:
        figures.append(SweepFigure("metric_means", f"Metric means with {level} bootstrap intervals (plot)",
                                   make(means_bars_png, means, DPI,
                                        f"Mean score per metric, {level} bootstrap intervals")))
    for measure in CURVE_MEASURES:
        curve = budget_curve(summary, measure)
        if curve["budget"].nunique() >= 2:
            figures.append(SweepFigure(f"{measure}_by_tokens", f"{measure} at equal token budgets, every system",
                                       make(budget_curve_png, curve, measure, plan.confidence, DPI)))
    if not summary.same_data:
        return figures
    if not summary.first_rank.empty:
        reps = summary.representatives
        ranks = summary.first_rank[reps].rename(columns=summary.label)
        beyond = summary.beyond[reps].rename(columns=summary.label)
        figures.append(SweepFigure(HEATMAP_STEM, "Rank of the first relevant document, per question",
                                   make(rank_heatmap, ranks, settings.cutoff, settings.late_limit, beyond)))
    primary = plan.primary.name
    scores = per_question_scores(summary, primary)
    if scores.shape[1] >= 2 and len(scores):
        figures.append(SweepFigure("paired_bootstrap", f"Paired bootstrap of {primary}: the two best systems",
                                   make(paired_bootstrap_png, scores, primary, DPI, resamples=plan.resamples,
                                        seed=plan.seed, confidence=plan.confidence)))
    return figures


def rank_heatmap(ranks: pd.DataFrame, cutoff: int, late_limit: int, beyond: pd.DataFrame | None) -> Figure | bytes:
    """The first-relevant heat map: one row per question up to :data:`HEATMAP_MAX_ROWS` questions (a figure), else
    one row per rank bucket (its PNG, drawn with PIL: matplotlib took 0.25-0.35 s for it)."""
    if len(ranks) <= HEATMAP_MAX_ROWS:
        return first_relevant_heatmap(ranks, cutoff, late_limit, beyond)
    return bucket_heatmap_png(ranks, cutoff, late_limit, DPI, beyond)


def compared_figures(summary: SweepSummary, plan: MetricPlan) -> list[SweepFigure]:
    """For a grid, its response: it rings the top system and those tied with it."""
    if not summary.same_data:
        return []
    figures = [] if summary.slices is None else [slice_figure(summary, plan)]
    grid = grid_frame(summary)
    if grid is None:
        return figures
    x, hue = grid_axes(summary)
    primary = plan.primary.name
    return [*figures, SweepFigure("grid_response", f"{primary} across the grid {x} x {hue}",
                                  response_png(grid, x, hue, primary, plan.confidence, DPI))]


SLICES_STEM = "slices"


def slice_figure(summary: SweepSummary, plan: MetricPlan) -> SweepFigure:
    """The primary metric by slice (metrics.slices) as small multiples: all questions, then one panel per slice,
    each system's interval in each; a panel says when its slice is too small to test, or reverses a verdict."""
    report = summary.slices
    assert report is not None
    primary = report.primary
    means = report.means[report.means["metric"] == primary]
    reversed_ = {(r.slicing, r.slice) for r in report.reversals().itertuples(index=False)}
    panels = []
    for (name, label), rows in means.groupby(["slicing", "slice"], sort=False):
        n = int(rows["questions"].iloc[0])
        note = ("too small to test" if report.too_small(name, label) else
                "reversal: see the table" if (name, label) in reversed_ else "")
        title = f"{name}={label}, {n} questions" if name else f"all {n} questions"
        panels.append(Panel(title, {summary.label(r.system): (r.mean, r.ci_low, r.ci_high)
                                    for r in rows.itertuples(index=False)}, note))
    level = f"{plan.confidence:.0%}"
    return SweepFigure(SLICES_STEM, f"{primary} by slice of the questions: each system's {level} interval",
                       slice_panels_png(panels, [summary.label(s) for s in report.systems],
                                        f"{primary} by slice, {level} bootstrap intervals"))


def interval_figure(summary: SweepSummary, plan: MetricPlan, folder: Path) -> Path | None:
    """The primary metric of each system with its interval, for MLflow's chart view (which draws no error bars);
    only for a sweep on one corpus: two corpora never share an axis. Saved in ``folder``; None when not drawn."""
    means = long_means(summary, collapse=True)
    means = means[(means["metric"] == plan.primary.name) & means["mean"].notna()]
    corpora = {s.tags.get(TAG_CORPUS) for s in summary.finished}
    if means.empty or not summary.same_data or len(corpora) != 1:
        return None
    title = f"{plan.primary.name} on {corpora.pop() or 'the corpus'}, {plan.confidence:.0%} intervals"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{plan.primary.mlflow_key}_intervals.png"
    rows = means[["system", "mean", "ci_low", "ci_high"]].itertuples(index=False, name=None)
    path.write_bytes(intervals_png(list(rows), title))
    return path
