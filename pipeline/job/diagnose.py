"""Failure diagnosis inside a job: classify every question, extend its per-question table, count, plot, print.

It runs after the job's evaluation and before anything is written: the classes and their evidence become columns
of the per-question table (so the CSV, the MLflow table and the end-of-sweep report all carry them), the counts
join the job's one batch of metrics (``system/failures_<class>``), and the per-run plots are saved in the
job's folder (and logged as the run's ``plots/*.png``). The rules themselves live in :mod:`pipeline.analysis.diagnosis`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from metrics.spec import parse_metric
from pipeline.analysis.diagnosis import (
    DiagnosisSettings,
    add_columns,
    diagnose,
    diagnosis_text,
    failure_counts,
    failure_metrics,
)
from pipeline.common.names import DIAGNOSIS_FILE, PLOTS_DIR
from pipeline.config.plan import JobPlan
from pipeline.job.results import JobResult
from pipeline.reports.html import DPI, Drawing
from pipeline.reports.run_plots import failure_bars_png, metric_histogram_png
from retrievers.base import Documents, counts_of

if TYPE_CHECKING:
    from pipeline.reports.html import Figure

TERMINAL_QUESTIONS = 10  # failing questions printed per job; diagnosis.txt lists them all


@dataclass
class JobDiagnosis:
    """One job's diagnosis: the table of :func:`pipeline.analysis.diagnosis.diagnose`, its text and its figures."""

    system: str
    table: pd.DataFrame
    settings: DiagnosisSettings
    figures: dict[str, Figure | Callable[[], Figure | bytes]]  # artifact stem ('ndcg_at_10_histogram') -> figure,
    # or the maker of it or of its PNG
    text_file: Path | None = None  # where write() put the whole section
    skipped: str | None = None  # why nothing was diagnosed (no question is judged yet)

    @cached_property
    def text(self) -> str:
        """The whole diagnosis section: counts, then every failing question with its evidence."""
        if self.skipped is not None:
            return self.skipped
        return diagnosis_text(self.table, self.system, self.settings.cutoff)

    def terminal_text(self, limit: int = TERMINAL_QUESTIONS) -> str:
        """The diagnosis section, cut after ``limit`` failing questions (each is a line and its evidence)."""
        lines = self.text.splitlines()
        shown = 1 + 2 * limit
        if len(lines) <= shown:
            return "\n".join(lines)
        more = (len(lines) - shown) // 2
        where = self.text_file or DIAGNOSIS_FILE
        return "\n".join([*lines[:shown], f"  ... and {more} more failing question(s): see {where}"])

    def write(self, out_dir: Path) -> list[Path]:
        """``diagnosis.txt`` (the whole section) and the plots (``plots/*.png``), returned to be logged with the
        job's other files."""
        return self.start_writing(out_dir)()

    def start_writing(self, out_dir: Path,
                      beside: Mapping[Path, Callable[[], bytes]] | None = None) -> Callable[[], list[Path]]:
        """Write ``diagnosis.txt`` and start drawing the plots on the other core, and writing the files ``beside``
        gives (path -> maker of its bytes) with them; the returned function waits for all (writing, from the last
        one back, those the copy has not started) and gives the diagnosis text and the plots (the files ``beside``
        are the caller's to list)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        self.text_file = out_dir / DIAGNOSIS_FILE
        self.text_file.write_text(self.text + "\n", encoding="utf-8")
        others = dict(beside or {})
        drawing = Drawing({**self.figures, **others}, out_dir / PLOTS_DIR)
        return lambda: [self.text_file, *(p for p in drawing.finish(share=True) if p not in others)]


def diagnose_job(result: JobResult, plan: JobPlan, documents: Documents | None = None) -> JobDiagnosis:
    """Diagnose every question of the job with its own tokenizer and ranking depth, and extend ``result``:
    its per-question table gains the diagnosis columns, its metrics the ``system/failures_<class>`` counts.

    ``documents``: the corpus as the job's retrievers saw it (through the term-count cache), so the diagnosis
    reads the term counts a lexical retriever already made, and a sweep's later jobs reuse them.

    The depth is the one the ranking was actually made to: ``depth`` as capped by the retriever (a weighted fusion
    keeps its own top ``retriever.depth``, no retriever returns more documents than the corpus holds), which is the
    run's width. A ranking full to that depth may hide its relevant documents beyond it (late rank); a shorter one
    ended because nothing else scored (not retrieved).
    """
    settings = dataclasses.replace(plan.diagnosis, depth=min(plan.depth, result.run.depth or plan.depth))
    if not result.scored:  # no judgment: no question can fail yet
        return JobDiagnosis(result.system, pd.DataFrame(), settings, {},
                            skipped=f"Diagnosis of {result.system}: nothing is judged yet, no question to diagnose")
    tokenizer = plan.context.tokenizer
    counts = counts_of(documents, tokenizer) if documents is not None else None
    table = diagnose(result.collection, result.run, result.evaluation, tokenizer, settings, counts)
    add_columns(result.table, table)
    result.extra_metrics.update(failure_metrics(table))
    metric = plan.histogram_metric
    # drawn by the copy that draws them (pipeline.reports.html.Drawing)
    figures: dict[str, Callable[[], bytes]] = {
        f"{parse_metric(metric).mlflow_key}_histogram": functools.partial(
            metric_histogram_png, result.evaluation.per_question[metric].to_numpy(float), metric, result.system, DPI),
        "failure_classes": functools.partial(failure_bars_png, failure_counts(table), result.system, len(table),
                                             DPI),
    }
    return JobDiagnosis(result.system, table, settings, figures)
