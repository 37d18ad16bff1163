"""A sweep's plots and its self-contained HTML report, built from the end-of-sweep summary.

The summary is read back from MLflow (:mod:`pipeline.analysis.summary`), so this works alike under the basic and the
joblib launcher: every input here is a child run's metrics or its per-question table. The figures are saved
in ``<sweep dir>/plots/`` and logged to the parent as ``plots/*.png``; ``report.html`` (tables and the same
figures embedded) is saved in the sweep folder and logged to the parent.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.analysis.diagnosis import DiagnosisSettings, diagnosis_from_table
from pipeline.analysis.summary import SweepSummary
from pipeline.common.names import PLOTS_DIR, PROG, REPORT_FILE
from pipeline.common.redact import redact_text
from pipeline.config.build import MetricPlan
from pipeline.config.plan import diagnosis_settings
from pipeline.reports.html import save_figures, sweep_html, write_report
from pipeline.reports.plots import Figure, first_relevant_heatmap, means_bars, paired_bootstrap
from pipeline.tracking.runs import Tracker


@dataclass
class SweepFigure:
    """A figure with the file stem it is saved under and the heading it gets in the report."""

    stem: str
    heading: str
    figure: Figure


def long_means(summary: SweepSummary) -> pd.DataFrame:
    """``system, metric, mean, ci_low, ci_high``, one row per finished system and shown metric."""
    rows = []
    for system, row in summary.means.iterrows():
        for spec in summary.show:
            rows.append({"system": str(system), "metric": spec.name, "mean": row[spec.name],
                         "ci_low": row[f"{spec.name}/ci_low"], "ci_high": row[f"{spec.name}/ci_high"]})
    return pd.DataFrame(rows, columns=["system", "metric", "mean", "ci_low", "ci_high"])


def per_question_scores(summary: SweepSummary, metric: str) -> pd.DataFrame:
    """One metric, questions x finished systems, over the questions every system scored."""
    columns = {s.name: s.per_question[metric] for s in summary.finished if metric in s.per_question.columns}
    return pd.DataFrame(columns).dropna()


def sweep_figures(summary: SweepSummary, plan: MetricPlan, settings: DiagnosisSettings) -> list[SweepFigure]:
    """Means with their intervals; and, when every system saw the same questions, the first-relevant heat map
    and the paired bootstrap of the two best systems on the primary metric."""
    figures = []
    level = f"{plan.confidence:.0%}"
    means = long_means(summary).dropna(subset=["mean"])
    if not means.empty:
        figures.append(SweepFigure("metric_means", f"Metric means with {level} bootstrap intervals",
                                   means_bars(means, f"Mean score per metric, {level} bootstrap intervals")))
    if not summary.same_data:
        return figures
    if not summary.first_rank.empty:
        figures.append(SweepFigure("first_relevant_rank", "Rank of the first relevant document, per question",
                                   first_relevant_heatmap(summary.first_rank, settings.cutoff, settings.late_limit)))
    primary = plan.primary.name
    scores = per_question_scores(summary, primary)
    if scores.shape[1] >= 2 and len(scores):
        figures.append(SweepFigure("paired_bootstrap", f"Paired bootstrap of {primary}: the two best systems",
                                   paired_bootstrap(scores, primary, resamples=plan.resamples, seed=plan.seed,
                                                    confidence=plan.confidence)))
    return figures


def report_html(summary: SweepSummary, figures: list[SweepFigure], title: str, settings: DiagnosisSettings,
                meta: Mapping[str, str]) -> str:
    """The HTML page: every system (a failed job is named under the title with its reason), its means,
    the first-relevant ranks, the failure classes and each failing question's evidence, and the plots."""
    diagnoses = {}
    for system in summary.finished:
        table = diagnosis_from_table(system.per_question)
        if table is not None:
            diagnoses[system.name] = table
    info = dict(meta)
    for system in summary.failed:
        info[f"failed job {system.job}"] = f"{system.name}: {system.error or system.status}"
    ranks = summary.first_rank if not summary.first_rank.empty else None
    return sweep_html(title, long_means(summary), ranks, diagnoses, {f.heading: f.figure for f in figures},
                        {k: redact_text(str(v)) for k, v in info.items()}, settings.cutoff, settings.late_limit)


def plots_and_report(summary: SweepSummary, plan: MetricPlan, diagnosis: Mapping[str, Any], title: str,
                     sweep_dir: Path, parent: Tracker, meta: Mapping[str, str]) -> list[Path]:
    """Save the plots and the report in the sweep folder and log the plots to the parent;
    returns the report, to be logged with the parent's other files.

    A failure here is reported on stderr and nothing is returned: the plots are a view of results that are
    logged anyway, and must never cost them.
    """
    if not summary.finished:
        return []
    try:
        settings = diagnosis_settings(diagnosis)
        figures = sweep_figures(summary, plan, settings)
        parent.log_files(save_figures({f.stem: f.figure for f in figures}, sweep_dir / PLOTS_DIR), PLOTS_DIR)
        info = {"sweep folder": str(sweep_dir), **meta}
        report = write_report(report_html(summary, figures, title, settings, info), sweep_dir / REPORT_FILE)
    except Exception as exc:
        print(f"{PROG}: the sweep's plots and report were not made: {type(exc).__name__}: {redact_text(str(exc))}",
              file=sys.stderr, flush=True)
        return []
    print(f"Report (open in a browser): {report}", flush=True)
    return [report]
