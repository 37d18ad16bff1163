"""A sweep's plots and its self-contained HTML report, built from the end-of-sweep summary.

The summary is read back from MLflow (:mod:`pipeline.analysis.summary`), so this works alike under the basic and the
joblib launcher: every input here is a child run's metrics, params, tags or per-question table. The figures are saved
in ``<sweep dir>/plots/`` and logged to the parent as ``plots/*.png``; ``report.html`` (tables and the same figures
embedded), the tables as Markdown and LaTeX, every pair's statistics (``pairs.csv``) and each system's failing
questions (``diagnosis/*.csv``, linked from the report) are saved in the sweep folder and logged to the parent.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.analysis.diagnosis import DiagnosisSettings
from pipeline.analysis.summary import SweepSummary
from pipeline.common import interrupts
from pipeline.common.names import DIAGNOSIS_DIR, INTERVAL_FIGURE, PLOTS_DIR, PROG, REPORT_FILE
from pipeline.common.redact import redact_text
from pipeline.config.build import MetricPlan
from pipeline.reports.html import save_figures, write_report
from pipeline.reports.sweep_page import PageFiles, sweep_page
from pipeline.sweep.drawing import FirstFigures
from pipeline.sweep.exports import diagnoses_of, write_beside
from pipeline.sweep.figures import SweepFigure, compared_figures, interval_figure
from pipeline.tracking.runs import Tracker


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
        settings = first.settings
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
