"""The files a sweep's end writes into its folder beside the report: the terminal summary and its tables as CSV,
Markdown and LaTeX, every pair's statistics (``pairs.csv``) and each system's failing questions
(``diagnosis/*.csv``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from pipeline.analysis.diagnosis import diagnosis_from_table
from pipeline.analysis.summary import SweepSummary
from pipeline.common.names import (
    DIAGNOSIS_DIR,
    DIFFERENCES_FILE,
    PAIRS_FILE,
    RANKS_FILE,
    SLICES_FILE,
    SUMMARY_LATEX,
    SUMMARY_MARKDOWN,
    SUMMARY_TEXT,
    SYSTEMS_FILE,
)
from pipeline.common.redact import redact_text
from pipeline.reports.sweep_page import DIAGNOSIS_COLUMNS, PageFiles, failing
from pipeline.reports.tables import summary_tables, to_latex, to_markdown
from pipeline.reports.text import sweep_text
from pipeline.sweep.resume import sync_command
from pipeline.tracking.records import JobRecord


def summary_text(summary: SweepSummary, title: str, unlogged: list[tuple[Path, JobRecord]], sweep_dir: Path) -> str:
    """The terminal summary, and what was computed but not logged with the command that logs it."""
    text = sweep_text(summary, title)
    if unlogged:
        folders = ", ".join(str(folder.relative_to(sweep_dir)) for folder, _ in unlogged)
        text += (f"\n\nNOT LOGGED: {len(unlogged)} job(s) computed their results but could not log them (folders "
                 f"{folders}); once the tracking store answers: {sync_command(sweep_dir)}")
    return text


def write_summary(summary: SweepSummary, text: str, sweep_dir: Path) -> list[Path]:
    """The sweep's result files, in the sweep directory (and logged to the parent run)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    files = [sweep_dir / SUMMARY_TEXT]
    files[0].write_text(redact_text(text) + "\n", encoding="utf-8")
    for frame, name in ((summary.means, SYSTEMS_FILE), (summary.first_rank, RANKS_FILE),
                        (summary.differences, DIFFERENCES_FILE)):
        if not frame.empty:
            frame.to_csv(sweep_dir / name)
            files.append(sweep_dir / name)
    if summary.slices is not None:  # metrics.slices: every figure by slice, each system against the top one
        summary.slices.table().to_csv(sweep_dir / SLICES_FILE, index=False)
        files.append(sweep_dir / SLICES_FILE)
    return files


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
                       (SLICES_FILE, "every figure by slice of the questions, each system against the top one"),
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
