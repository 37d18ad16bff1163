"""Plain-text tables for the terminal (and the same text as an artifact): readable in a non-TTY log."""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd

from metrics.bootstrap import Interval
from pipeline.analysis.summary import JUDGED, JUDGED_FLOOR, SweepSummary, thinly_judged

MAX_RANK_ROWS = 30  # beyond this many questions, the rank table shows only those some system misses


class Measured(Protocol):
    """What :func:`job_text` reads of a job's result (``pipeline.job.results.JobResult``)."""

    system: str
    collection: Any
    evaluation: Any
    plan: Any
    intervals: dict[str, Interval]

    def note_lines(self) -> list[str]: ...


def job_text(result: Measured) -> str:
    """Each metric's mean with its bootstrap interval, under a line saying what was measured and one line per kind
    of note (what the job dropped or corrected in its input)."""
    c, e = result.collection, result.evaluation
    level = int(result.plan.settings.level)
    head = (f"{result.system} on {c.name} ({c.split}): {len(e.per_question)} questions evaluated, "
            f"{len(e.without_judgments)} without a judgment >= {level}, {len(c.doc_ids)} documents")
    head = "\n".join([head, *(f"note: {note}" for note in result.note_lines())])
    confidence = f"{result.plan.confidence:.0%}"
    rows = [(name, f"{iv.mean:.3f}", f"[{iv.low:.3f}, {iv.high:.3f}]") for name, iv in result.intervals.items()]
    table = format_table([("metric", "mean", f"{confidence} interval"), *rows], align="lrl")
    judged = result.intervals.get(JUDGED.name)
    if judged is not None and thinly_judged(judged.mean):
        only_relevant = not (result.collection.qrels.grades < result.plan.settings.level).any()
        table += "\n" + judged_warning(result.system, judged.mean, only_relevant)
    return f"{head}\n{table}"


def judged_warning(system: str, judged: float, only_relevant: bool = False) -> str:
    """The warning for a system whose judged@10 is below the floor: its nDCG (and recall, MAP) undercount.
    ``only_relevant``: the judgments list only relevant documents (BEIR's usually do)."""
    text = (f"warning: {system}: judged@10 is {judged:.3f} (below {JUDGED_FLOOR}): {1 - judged:.0%} of its top 10 "
            f"was never judged, and nDCG, recall and MAP count every unjudged document as not relevant, so they "
            f"undercount it")
    if only_relevant:
        return text + ("; these judgments list only relevant documents (judged@10 is the share of the top 10 that "
                       "is relevant): judge each system's top documents to compare systems fairly")
    return text + "; compare systems with bpref (it ignores unjudged documents), or judge their top documents"


def sweep_text(summary: SweepSummary, title: str) -> str:
    """The systems table, the rank-of-first-relevant table and paired differences against the best system."""
    parts = [f"== {title}: {len(summary.finished)} of {len(summary.systems)} jobs finished"]
    if not summary.means.empty:
        parts.append(systems_table(summary))
        thin = summary.thinly_judged()
        if thin:
            parts.append("\n".join(judged_warning(system, judged) for system, judged in thin.items()))
        if not summary.same_data:
            parts.append("The systems were measured on different collections: no per-question comparison.")
        if not summary.first_rank.empty:
            parts.append(first_rank_table(summary))
        if not summary.differences.empty:
            parts.append(differences_table(summary))
    for system in summary.failed:
        parts.append(f"FAILED job {system.job} ({system.name}): {system.error or system.status}")
    return "\n\n".join(parts)


def systems_table(summary: SweepSummary) -> str:
    names = [spec.name for spec in summary.show]
    rows = [("system", *names)]
    for system, row in summary.means.iterrows():
        rows.append((str(system), *(number(row[n]) for n in names)))
    return "Mean over questions\n" + format_table(rows, align="l" + "r" * len(names))


def first_rank_table(summary: SweepSummary) -> str:
    ranks = summary.first_rank
    note = ""
    if len(ranks) > MAX_RANK_ROWS:
        missed = ranks[(ranks.isna() | (ranks > 3)).any(axis=1)]
        note = f"\n({len(ranks) - len(missed)} questions found in the top 3 by every system not shown)"
        if len(missed) > MAX_RANK_ROWS:
            note += f"\n(... and {len(missed) - MAX_RANK_ROWS} more; see first_relevant_rank.csv)"
        ranks = missed.head(MAX_RANK_ROWS)
    rows = [("question", *ranks.columns)]
    for qid, row in ranks.iterrows():
        rows.append((str(qid), *("--" if pd.isna(v) else str(int(v)) for v in row)))
    return ("Rank of the first relevant document (-- = not retrieved)\n"
            + format_table(rows, align="l" + "r" * len(ranks.columns)) + note)


def differences_table(summary: SweepSummary) -> str:
    level = f"{summary.confidence:.0%}"
    rows = [("system", "metric", "difference", f"{level} interval", "")]
    for (system, metric), row in summary.differences.iterrows():
        mark = "*" if row.ci_low > 0 or row.ci_high < 0 else ""
        rows.append((str(system), str(metric), f"{row.difference:+.3f}", f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}]",
                     mark))
    head = (f"Paired differences against the best system, {summary.best} (by {summary.primary.name}): system minus "
            f"{summary.best}, bootstrap over questions; * = the interval excludes zero")
    return head + "\n" + format_table(rows, align="llrll")


def number(value: float) -> str:
    return "--" if pd.isna(value) else f"{value:.3f}"


def format_table(rows: list[tuple[str, ...]], align: str) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(w) if a == "r" else cell.ljust(w) for cell, w, a in zip(row, widths, align)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
