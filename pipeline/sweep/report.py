"""A sweep's plots, its self-contained HTML report and its exported tables, built from the end-of-sweep summary.

The summary is read back from MLflow (:mod:`pipeline.analysis.summary`), so this works alike under the basic and the
joblib launcher: every input here is a child run's metrics, params, tags or per-question table. The figures are saved
in ``<sweep dir>/plots/`` and logged to the parent as ``plots/*.png``; ``report.html`` (tables and the same figures
embedded), the tables as Markdown and LaTeX, every pair's statistics (``pairs.csv``) and each system's failing
questions (``diagnosis/*.csv``, linked from the report) are saved in the sweep folder and logged to the parent.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.analysis.diagnosis import DiagnosisSettings, diagnosis_from_table
from pipeline.analysis.summary import SweepSummary
from pipeline.common import interrupts
from pipeline.common.names import (
    DIAGNOSIS_DIR,
    DIFFERENCES_FILE,
    INTERVAL_FIGURE,
    PAIRS_FILE,
    PLOTS_DIR,
    PROG,
    RANKS_FILE,
    REPORT_FILE,
    SUMMARY_LATEX,
    SUMMARY_MARKDOWN,
    SUMMARY_TEXT,
    SYSTEMS_FILE,
    TAG_CORPUS,
)
from pipeline.common.redact import redact_text
from pipeline.config.build import MetricPlan
from pipeline.config.plan import diagnosis_settings
from pipeline.reports.html import DPI, Drawing, save_figures, write_report
from pipeline.reports.interval_plot import intervals_png
from pipeline.reports.means_plot import means_bars_png
from pipeline.reports.paired_plot import paired_bootstrap_png
from pipeline.reports.plots import Figure, first_relevant_heatmap
from pipeline.reports.rank_buckets import HEATMAP_MAX_ROWS, bucket_heatmap_png
from pipeline.reports.response_plot import response_png
from pipeline.reports.sweep_page import DIAGNOSIS_COLUMNS, PageFiles, failing, sweep_page
from pipeline.reports.tables import grid_axes, grid_frame, summary_tables, to_latex, to_markdown
from pipeline.tracking.runs import Tracker

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
    grid = grid_frame(summary)
    if grid is None:
        return []
    x, hue = grid_axes(summary)
    primary = plan.primary.name
    return [SweepFigure("grid_response", f"{primary} across the grid {x} x {hue}",
                        response_png(grid, x, hue, primary, plan.confidence, DPI))]




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


class FirstFigures:
    """The figures a sweep's end can draw before it compares its systems, built and drawn by the copy that drew the
    jobs' plots (see :class:`pipeline.reports.html.Drawing`) while this process compares them: the comparisons
    (0.3 s on SciFact) and the figures (0.6 s of CPU, a fifth of it building them) no longer take turns. Handed over
    as their makers and data, they cost this process the pickling only. A failure to make them is kept, and
    reported where :func:`plots_and_report` reports its own."""

    def __init__(self, summary: SweepSummary, plan: MetricPlan, diagnosis: Mapping[str, Any],
                 sweep_dir: Path) -> None:
        self.figures: list[SweepFigure] = []  # in the report's order
        self.order: list[SweepFigure] = []  # in the order the copy draws them
        self.drawing: Drawing | None = None
        self.error: Exception | None = None
        if not summary.finished:
            return
        try:
            self.figures = uncompared_figures(summary, plan, diagnosis_settings(diagnosis), makers=True)
            # the copy starts with the longest to draw (the heat map: a third to half of their drawing), and
            # drawn() takes from the last one back
            self.order = sorted(self.figures, key=lambda f: f.stem != HEATMAP_STEM)
            self.drawing = Drawing({f.stem: f.figure for f in self.order}, sweep_dir / PLOTS_DIR)
        except Exception as exc:
            self.error = exc

    @property
    def drawn_beside(self) -> bool:
        """Whether a copy is drawing them now."""
        return self.drawing is not None and (self.drawing.pid != 0 or self.drawing.drawer is not None)

    def drawn(self) -> tuple[list[Path], list[SweepFigure]]:
        """Wait for them (drawing here those the copy has not started); their files, and the figures with their
        PNGs for the report, in the report's order."""
        assert self.drawing is not None
        files = dict(zip((f.stem for f in self.order), self.drawing.finish(share=True)))  # in the order given
        paths = [files[f.stem] for f in self.figures]
        return paths, [SweepFigure(f.stem, f.heading, path.read_bytes()) for f, path in zip(self.figures, paths)]

    def stop(self) -> None:
        if self.drawing is not None:
            self.drawing.stop()


def diagnosis_file(system: str, job: int) -> str:
    """``diagnosis/job03_BM25_k1_0.9.csv``: the job number keeps two names that clean alike apart."""
    stem = re.sub(r"[^A-Za-z0-9.-]+", "_", system).strip("._") or "system"
    return f"{DIAGNOSIS_DIR}/job{job:02d}_{stem}.csv"


def diagnoses_of(summary: SweepSummary) -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """Each finished system's diagnosis table (runs logged without one are left out), and its job number."""
    diagnoses, jobs = {}, {}
    for system in summary.finished:
        table = diagnosis_from_table(system.per_question)
        if table is not None:
            diagnoses[system.name] = table
            jobs[system.name] = system.job
    return diagnoses, jobs


def write_beside(summary: SweepSummary, diagnoses: Mapping[str, pd.DataFrame], jobs: Mapping[str, int],
                 sweep_dir: Path) -> tuple[PageFiles, list[Path], list[Path]]:
    """The files the report links to: the tables as Markdown and LaTeX, every pair's statistics, each system's
    failing questions. Returns the links, the files for the parent's root and those for its ``diagnosis/``."""
    files = PageFiles()
    root: list[Path] = []
    tables = summary_tables(summary)
    if tables:
        (sweep_dir / SUMMARY_MARKDOWN).write_text("\n".join(to_markdown(t) for t in tables), encoding="utf-8")
        (sweep_dir / SUMMARY_LATEX).write_text(
            "% \\usepackage{booktabs}\n" + "\n".join(to_latex(t) for t in tables), encoding="utf-8")
        root += [sweep_dir / SUMMARY_MARKDOWN, sweep_dir / SUMMARY_LATEX]
        files.others["the summary tables as Markdown"] = SUMMARY_MARKDOWN
        files.others["the summary tables as LaTeX (booktabs)"] = SUMMARY_LATEX
    if not summary.pairs.empty:
        summary.pairs.to_csv(sweep_dir / PAIRS_FILE)
        root.append(sweep_dir / PAIRS_FILE)
        files.others["every pair of systems on every shown metric: difference, interval, p, Holm p"] = PAIRS_FILE
    for name, what in ((SYSTEMS_FILE, "each system's means and intervals"),
                       (RANKS_FILE, "rank of the first relevant document, question x system"),
                       (DIFFERENCES_FILE, "differences against the top system"),
                       (SUMMARY_TEXT, "the terminal summary")):
        if (sweep_dir / name).exists():
            files.others[what] = name
    written = []
    for system, table in diagnoses.items():
        relative = diagnosis_file(system, jobs[system])
        path = sweep_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        failing(table)[DIAGNOSIS_COLUMNS].rename_axis("query_id").to_csv(path)
        files.diagnosis[system] = relative
        written.append(path)
    return files, root, written


def report_html(summary: SweepSummary, figures: list[SweepFigure], title: str, settings: DiagnosisSettings,
                meta: Mapping[str, str], files: PageFiles | None = None,
                diagnoses: Mapping[str, pd.DataFrame] | None = None) -> str:
    """The HTML page (:func:`pipeline.reports.sweep_page.sweep_page`); a failed job is named in the header with
    its reason."""
    if diagnoses is None:
        diagnoses = diagnoses_of(summary)[0]
    info = dict(meta)
    for system in summary.failed:
        info[f"failed job {system.job}"] = f"{system.name}: {system.error or system.status}"
    plotted = [(f.heading, f.figure) for f in figures if f.stem != "grid_response"]
    grid = next((f.figure for f in figures if f.stem == "grid_response"), None)
    return sweep_page(summary, title, {k: redact_text(str(v)) for k, v in info.items()}, plotted, grid, diagnoses,
                      files or PageFiles(), settings.cutoff, settings.late_limit)


def plots_and_report(summary: SweepSummary, plan: MetricPlan, diagnosis: Mapping[str, Any], title: str,
                     sweep_dir: Path, parent: Tracker, meta: Mapping[str, str],
                     first: FirstFigures | None = None) -> list[Path]:
    """Save the plots, the report and the files it links to in the sweep folder; log the plots and each system's
    failing questions to the parent; return the report and the exported tables, to be logged with the parent's
    other files. ``first``: the figures started before the systems were compared (made here otherwise).

    A failure here is reported on stderr and nothing is returned: the plots are a view of results that are
    logged anyway, and must never cost them.
    """
    if not summary.finished:
        return []
    first = first if first is not None else FirstFigures(summary, plan, diagnosis, sweep_dir)
    try:
        if first.error is not None or first.drawing is None:
            raise first.error or RuntimeError("no figure was started")
        settings = diagnosis_settings(diagnosis)
        # the first ones drawn by a forked copy while the systems were compared and the tables are written, then
        # by both processes; the grid's response here; saved once, the page embeds the same PNGs
        # (pipeline.reports.html draws each figure one time)
        later = compared_figures(summary, plan)
        try:
            diagnoses, jobs = diagnoses_of(summary)
            files, root, per_system = write_beside(summary, diagnoses, jobs, sweep_dir)
            late = save_figures({f.stem: f.figure for f in later}, sweep_dir / PLOTS_DIR)
            early, drawn = first.drawn()
            plots = [*early, *late]
        finally:
            first.stop()
        figures = drawn + later
        parent.log_files(plots, PLOTS_DIR)
        interval = interval_figure(summary, plan, sweep_dir / PLOTS_DIR)
        if interval is not None:  # the saved view's chart section starts with it
            parent.log_image(interval, INTERVAL_FIGURE.format(key=plan.primary.mlflow_key))
        if per_system:
            parent.log_files(per_system, DIAGNOSIS_DIR)
        info = {"sweep folder": str(sweep_dir), **meta}
        report = write_report(report_html(summary, figures, title, settings, info, files, diagnoses),
                              sweep_dir / REPORT_FILE)
    except Exception as exc:
        interrupts.stop_if_interrupted(exc)  # stopped, not failed: the Ctrl-C acts
        print(f"{PROG}: the sweep's plots and report were not made: {type(exc).__name__}: {redact_text(str(exc))}",
              file=sys.stderr, flush=True)
        return []
    print(f"Report (open in a browser): {report}", flush=True)
    return [report, *root]
