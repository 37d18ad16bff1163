"""Failure diagnosis inside a job: classify every question, extend its per-question table, count, plot, print.

It sits between :func:`pipeline.job.results.evaluate_job` and the logging in :mod:`pipeline.job.runner`: the classes and
their evidence become columns of the per-question table (so the CSV, the MLflow table and the end-of-sweep
report all carry them), the counts join the job's one batch of metrics as ``failures/<class>``, and the
per-run plots are saved in the job's folder and logged as the run's ``plots/*.png``. The rules themselves live in
:mod:`pipeline.analysis.diagnosis`; this module only wires them to the config, the files and MLflow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from metrics.errors import InputError
from metrics.spec import parse_metric
from pipeline.analysis.diagnosis import (
    CLASSES,
    DiagnosisSettings,
    diagnose,
    diagnosis_text,
    failure_counts,
    failure_metrics,
)
from pipeline.config.build import MetricPlan, make_tokenizer
from pipeline.job.results import JobResult
from pipeline.reports.html import save_figures
from pipeline.reports.plots import failure_bars, metric_histogram
from pipeline.tracking.runs import Tracker

TEXT_FILE = "diagnosis.txt"  # the full diagnosis section, in the job's folder and among its artifacts
PLOTS_DIR = "plots"  # per-run figures: <job folder>/plots/*.png, artifacts plots/*.png
TERMINAL_QUESTIONS = 10  # failing questions printed per job; diagnosis.txt lists them all

# Columns added to the per-question table. Lists and mappings are written as JSON text, so the CSV and the
# MLflow table hold plain strings (and booleans) and read back unchanged.
COLUMNS = {
    "missed": "missed",  # first relevant document not in the top `cutoff`
    "failure_classes": "classes",  # comma-separated CLASSES, "" when none
    "first_relevant": "rank",  # "2", "not retrieved", "beyond depth 10"
    "first_result": "first_result",
    "first_result_shared": "first_result_shared",  # JSON list of question terms
    "shared_terms": "shared_terms",  # JSON object: relevant document -> shared question terms
    "late_rank_kind": "late_rank_kind",
    "duplicate_groups": "duplicate_groups",  # JSON list of lists of near-identical document ids
    "diagnosis": "diagnosis",
    "evidence": "evidence",
}


def diagnosis_settings(node: Mapping[str, Any], depth: int | None = None) -> DiagnosisSettings:
    """The ``diagnosis`` config as :class:`DiagnosisSettings`; an out-of-range value is an InputError."""
    try:
        return DiagnosisSettings(cutoff=int(node["cutoff"]), late_limit=int(node["late_limit"]),
                                 duplicate_threshold=float(node["duplicate_threshold"]),
                                 duplicate_top_k=int(node["duplicate_top_k"]), shingle_size=int(node["shingle_size"]),
                                 depth=depth)
    except ValueError as exc:
        raise InputError(f"diagnosis: {exc}") from None


def histogram_metric(node: Mapping[str, Any], plan: MetricPlan) -> str:
    """The metric of the per-run histogram: ``diagnosis.histogram_metric``, else nDCG at the largest cutoff
    computed, else the primary metric. It must be one the job computes."""
    computed = [spec.name for spec in plan.specs]
    chosen = node.get("histogram_metric")
    if chosen:
        name = parse_metric(str(chosen)).name
        if name not in computed:
            raise InputError(f"diagnosis.histogram_metric {chosen!r} is not computed; choose one of "
                             f"{', '.join(computed)}")
        return name
    ndcg = [spec for spec in plan.specs if spec.measure == "ndcg"]
    return max(ndcg, key=lambda s: s.k or 0).name if ndcg else plan.primary.name


def check_diagnosis(cfg: Mapping[str, Any], plan: MetricPlan) -> None:
    """Fail on a bad ``diagnosis`` block before any job runs (the sweep driver checks every job with it)."""
    diagnosis_settings(cfg["diagnosis"])
    histogram_metric(cfg["diagnosis"], plan)


@dataclass
class JobDiagnosis:
    """One job's diagnosis: the table of :func:`pipeline.analysis.diagnosis.diagnose`, its text and its figures."""

    system: str
    table: pd.DataFrame
    settings: DiagnosisSettings
    figures: dict[str, Figure]  # artifact stem ('ndcg_at_10_histogram') -> figure
    text_file: Path | None = None  # where write() put the whole section

    @cached_property
    def text(self) -> str:
        """The whole diagnosis section: counts, then every failing question with its evidence."""
        return diagnosis_text(self.table, self.system, self.settings.cutoff)

    def terminal_text(self, limit: int = TERMINAL_QUESTIONS) -> str:
        """The diagnosis section, cut after ``limit`` failing questions (each is a line and its evidence)."""
        lines = self.text.splitlines()
        shown = 1 + 2 * limit
        if len(lines) <= shown:
            return "\n".join(lines)
        more = (len(lines) - shown) // 2
        where = self.text_file or TEXT_FILE
        return "\n".join([*lines[:shown], f"  ... and {more} more failing question(s): see {where}"])

    def write(self, out_dir: Path) -> list[Path]:
        """``diagnosis.txt``, the whole section (returned, to be logged with the job's other files)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        self.text_file = out_dir / TEXT_FILE
        self.text_file.write_text(self.text + "\n", encoding="utf-8")
        return [self.text_file]

    def save_and_log_figures(self, out_dir: Path, tracker: Tracker) -> list[Path]:
        """The plots, as ``<job folder>/plots/*.png`` and as the run's ``plots/*.png``."""
        return save_and_log_figures(self.figures, out_dir / PLOTS_DIR, tracker)


def save_and_log_figures(figures: Mapping[str, Figure], folder: Path, tracker: Tracker) -> list[Path]:
    """Each figure rendered once: saved as ``<folder>/<name>.png`` and logged as the run's ``plots/<name>.png``.

    This is what ``MlflowClient.log_figure`` does (save to a file, log the file), without rendering every
    figure a second time for the copy kept in the job's or sweep's folder.
    """
    paths = save_figures(figures, folder)
    tracker.log_files(paths, PLOTS_DIR)
    return paths


def diagnose_job(result: JobResult, cfg: Mapping[str, Any], launch_dir: Path) -> JobDiagnosis:
    """Diagnose every question of the job with its own tokenizer and ranking depth, and extend ``result``:
    its per-question table gains :data:`COLUMNS`, its metrics the ``failures/<class>`` counts.

    The depth is the one the ranking was actually made to: ``cfg.depth`` as capped by the retriever (a
    weighted fusion keeps its own top ``retriever.depth``, no retriever returns more documents than the
    corpus holds), which is the run's width. A ranking full to that depth may hide its relevant documents
    beyond it (late rank); a shorter one ended because nothing else scored (not retrieved).
    """
    depth = min(int(cfg["depth"]), result.run.depth or int(cfg["depth"]))
    settings = diagnosis_settings(cfg["diagnosis"], depth)
    metric = histogram_metric(cfg["diagnosis"], result.plan)
    tokenizer = make_tokenizer(cfg["text"], launch_dir)
    table = diagnose(result.collection, result.run, result.evaluation, tokenizer, settings)
    add_columns(result.table, table)
    result.extra_metrics.update(failure_metrics(table))
    figures = {
        f"{parse_metric(metric).mlflow_key}_histogram": metric_histogram(result.evaluation.per_query[metric], metric,
                                                                         result.system),
        "failure_classes": failure_bars(failure_counts(table), result.system, len(table)),
    }
    return JobDiagnosis(result.system, table, settings, figures)


def add_columns(per_question: pd.DataFrame, table: pd.DataFrame) -> None:
    """Write the diagnosis into the per-question table (``query_id`` column), row by row, as :data:`COLUMNS`."""
    rows = table.reindex(per_question["query_id"].astype(str))
    for column, source in COLUMNS.items():
        values = rows[source].tolist()
        if source == "missed":
            per_question[column] = [bool(v) for v in values]
        else:
            per_question[column] = [_text(v) for v in values]


def diagnosis_from_table(per_question: pd.DataFrame) -> pd.DataFrame | None:
    """The inverse of :func:`add_columns`, from a per-question table read back (index: question id): the
    columns :func:`pipeline.reports.html.sweep_report` shows. None for a run logged without a diagnosis."""
    if not set(COLUMNS) <= set(per_question.columns):
        return None
    frame = pd.DataFrame(index=per_question.index)
    for column, source in COLUMNS.items():
        frame[source] = per_question[column]
    frame["question"] = per_question.get("question", pd.Series("", index=per_question.index))
    frame = frame.astype({c: object for c in frame.columns if c != "missed"})
    frame = frame.where(frame.notna(), "")  # an empty text cell reads back as missing
    frame["missed"] = frame["missed"].map(lambda v: str(v).lower() == "true")
    classes = frame["classes"].map(lambda v: {c.strip() for c in str(v).split(",")})
    for name in CLASSES:
        frame[name] = classes.map(lambda found, name=name: name in found)
    return frame


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)
