"""Plain-text tables for the terminal (and the same text as an artifact): readable in a non-TTY log."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import pandas as pd

from metrics.bootstrap import Interval
from pipeline.analysis.summary import (
    JUDGED,
    JUDGED_FLOOR,
    LISTED_IN_LABEL,
    RBP,
    RBP_RESIDUAL,
    SweepSummary,
    group_label,
    thinly_judged,
)
from pipeline.chunking.chunked import SHOWN_STATS
from pipeline.common import commands
from pipeline.common.names import HOUSEKEEPING, INDEX_MB_METRIC, JUDGE_SHEET, RUN_FILE, SLICES_FILE

MAX_RANK_ROWS = 30  # beyond this many questions, the rank table shows only those some system misses


class Measured(Protocol):
    """What :func:`job_text` reads of a job's result (``pipeline.job.results.JobResult``)."""

    system: str
    collection: Any
    evaluation: Any
    plan: Any
    intervals: dict[str, Interval]
    rankings_from: str | None

    def note_lines(self) -> list[str]: ...


def job_text(result: Measured) -> str:
    """Each metric's mean with its bootstrap interval, under a line saying what was measured and one line per kind
    of note (what the job dropped or corrected in its input)."""
    c, e = result.collection, result.evaluation
    level = int(result.plan.settings.level)
    head = (f"{result.system} on {c.name} ({c.split}): {len(e.per_question)} questions evaluated, "
            f"{len(e.without_judgments)} without a judgment >= {level}, {len(c.doc_ids)} documents")
    source = [f"{result.rankings_from}"] if getattr(result, "rankings_from", None) else []
    head = "\n".join([head, *source, *(f"note: {note}" for note in result.note_lines())])
    if not result.intervals:  # nothing judged yet: ranked, not scored
        return head
    confidence = f"{result.plan.confidence:.0%}"
    condensed = getattr(result, "condensed", None) or {}
    rows = [(name, f"{iv.mean:.3f}", f"[{iv.low:.3f}, {iv.high:.3f}]",
             *([f"{condensed[name].mean:.3f} [{condensed[name].low:.3f}, {condensed[name].high:.3f}]"]
               if condensed else [])) for name, iv in result.intervals.items()]
    header = ("metric", "mean", f"{confidence} interval", *(["condensed (unjudged removed)"] if condensed else []))
    table = format_table([header, *rows], align="lrl" + ("l" if condensed else ""))
    judged = result.intervals.get(JUDGED.name)
    if judged is not None and thinly_judged(judged.mean):
        only_relevant = not (result.collection.qrels.grades < result.plan.settings.level).any()
        table += "\n" + judged_warning(result.system, judged.mean, only_relevant, job_rbp(result))
    slices = getattr(result, "slices", None)
    if slices is not None and not slices.empty:  # metrics.slices
        from pipeline.reports.slice_text import job_slices_text  # it imports this module's format_table

        table += "\n\n" + job_slices_text(slices, result.plan.primary.name, result.plan.confidence, SLICES_FILE)
    return f"{head}\n{table}"


def job_rbp(result: Measured) -> tuple[float, float] | None:
    """A job's rbp and its residual: the figures it measured, or, when it did not ask for them, measured now from
    its ranking (over the questions it scored)."""
    if RBP.name in result.intervals and RBP_RESIDUAL.name in result.intervals:
        return result.intervals[RBP.name].mean, result.intervals[RBP_RESIDUAL.name].mean
    run = getattr(result, "run", None)
    if run is None or result.evaluation.per_question.empty:
        return None
    from metrics.evaluation import evaluate

    found = evaluate(run, result.collection.qrels, [RBP, RBP_RESIDUAL], result.plan.settings,
                     query_ids=list(result.evaluation.per_question.index)).means()
    return float(found[RBP.name]), float(found[RBP_RESIDUAL.name])


def judged_warning(system: str, judged: float, only_relevant: bool = False,
                   rbp: tuple[float, float] | None = None) -> str:
    """The warning for a system whose judged@10 is below the floor: its nDCG (and recall, MAP) undercount; its rbp
    and residual (``rbp``), when known, bound what the unjudged documents could change. ``only_relevant``: the
    judgments list only relevant documents (BEIR's usually do)."""
    text = (f"warning: {system}: judged@10 is {judged:.3f} (below {JUDGED_FLOOR}): {1 - judged:.0%} of its top 10 "
            f"was never judged, and nDCG, recall and MAP count every unjudged document as not relevant, so they "
            f"undercount it")
    return text + rbp_clause(rbp) + judged_advice(only_relevant)


def rbp_clause(rbp: tuple[float, float] | None) -> str:
    """What rbp says of a thinly judged system: its value, and how much higher its unjudged documents could take it
    (rbp's residual, trec_eval's rbp_resid)."""
    if rbp is None:
        return ""
    value, residual = rbp
    return (f"; its rbp is {value:.3f}, and at most {residual:.3f} higher ({value + residual:.3f}) were every unjudged "
            f"document relevant (rbp's residual)")


def judged_advice(only_relevant: bool) -> str:
    """What to do about thin judgments: bpref helps only where judged non-relevant documents exist."""
    if only_relevant:
        return ("; these judgments list only relevant documents (judged@10 is the share of the top 10 that is "
                "relevant): judge each system's top documents to compare systems fairly")
    return "; compare systems with bpref (it ignores unjudged documents), or judge their top documents"


def thin_systems(thin: Mapping[str, tuple[float, bool]], finished: int) -> str:
    """The thinly judged systems named with their judged@10, or, when they are all of more than three, their range
    (twelve names would fill lines)."""
    values = [judged for judged, _ in thin.values()]
    if len(thin) == finished and len(thin) > 3:
        return f"all {len(thin)} systems ({min(values):.3f} to {max(values):.3f})"
    return ", ".join(f"{system} ({judged:.3f})" for system, (judged, _) in thin.items())


def judged_warnings(summary: SweepSummary) -> str:
    """The sweep's warning for its thinly judged systems: one line, since a sweep's systems share their judgments
    and the warnings would repeat each other (each job already warned under its own table); a line per system only
    where their judgments differ in kind."""
    thin = summary.thinly_judged()
    kinds = {only_relevant for _, only_relevant in thin.values()}
    if len(thin) < 2 or len(kinds) > 1:
        return "\n".join(judged_warning(system, *found, summary.rbp(system)) for system, found in thin.items())
    most = max(judged for judged, _ in thin.values())
    bounds = {system: summary.rbp(system) for system in thin}
    rbp = ("; rbp, and at most how much higher were every unjudged document relevant (its residual): "
           + ", ".join(f"{system} {value:.3f} + {residual:.3f}" for system, (value, residual) in bounds.items())
           if all(bounds.values()) else "")
    return (f"warning: judged@10 is below {JUDGED_FLOOR} for {thin_systems(thin, len(summary.finished))}: at least "
            f"{1 - most:.0%} of each one's top 10 was never judged, and nDCG, recall and MAP count every unjudged "
            f"document as not relevant, so they undercount them" + rbp + judged_advice(kinds.pop()))


def sweep_text(summary: SweepSummary, title: str) -> str:
    """The verdict (the best system, or who is tied at the top), the systems table (identical results on one line),
    the rank-of-first-relevant table, paired differences against the top system and what the questions can detect."""
    parts = [f"== {title}: {len(summary.finished)} of {len(summary.systems)} jobs finished"]
    if summary.unjudged:
        parts.append(nothing_judged(summary))
    if not summary.means.empty:
        parts.append(systems_table(summary))
        if chunked := chunking_table(summary):
            parts.append(chunked)
        if summary.thinly_judged():
            parts.append(judged_warnings(summary))
        if not summary.same_data:
            parts.append("The systems were measured on different collections: no per-question comparison.")
        parts.append(verdict_text(summary))
        if not summary.first_rank.empty:
            parts.append(first_rank_table(summary))
        if not summary.differences.empty:
            parts.append(differences_table(summary))
        power = power_text(summary)
        if power:
            parts.append(power)
        if summary.slices is not None:  # metrics.slices: one compact table, the reversals
            from pipeline.reports.slice_text import slices_table  # it imports this module's format_table

            parts.append(slices_table(summary.slices, summary.label)
                         + f"\nEvery figure by slice, with its interval and test: {SLICES_FILE}")
    for system in summary.failed:
        parts.append(f"FAILED job {system.job} ({system.name}): {system.error or system.status}")
    return "\n\n".join(parts)


def nothing_judged(summary: SweepSummary) -> str:
    """The one line of a sweep none of whose questions is judged: nothing scored, and how to pool its rankings."""
    pool = commands.line(commands.module("pipeline.judge", "pool", summary.parent_run_id, "--to", JUDGE_SHEET))
    return (f"Nothing is judged yet: no question of these {len(summary.finished)} systems has a judgment, so none was "
            f"scored or compared (each ranking is kept in its run's {RUN_FILE}); to judge their top documents: {pool}")


def verdict_text(summary: SweepSummary) -> str:
    """One paragraph: the best system, or the systems tied at the top, or that all results are identical."""
    primary, level = summary.primary.name, f"{summary.confidence:.0%}"
    best = summary.best
    mean = summary.means.loc[best, primary] if best in summary.means.index else float("nan")
    if not summary.same_data:
        return f"Highest mean {primary}: {best} ({number(mean)}); not compared question by question."
    if len(summary.groups) == 1 and len(summary.finished) > 1:
        return (f"All {len(summary.finished)} systems returned identical per-question results on every shown metric: "
                f"no best system, nothing to compare.")
    if summary.single_best:
        return (f"Best by {primary}: {best} ({number(mean)}); every other system's paired {level} interval against it "
                f"excludes zero.")
    if len(summary.finished) == 1:
        return f"One system: {best} ({primary} {number(mean)})."
    tied_groups = [g for g in summary.groups if g[0] in summary.tied]
    head = f"No single best system by {primary}: the top one, {summary.label(best)} ({number(mean)})"
    if tied_groups:
        names = "; ".join(group_label(g) for g in tied_groups)
        others = len(summary.groups) - 1
        count = "" if len(tied_groups) == 1 else f"{len(tied_groups)} of the {others} others: "
        return (f"{head}, is tied with {count}{names} (paired {level} interval of the difference contains zero).")
    return f"{head}; every other system's paired {level} interval against it excludes zero."


def systems_table(summary: SweepSummary) -> str:
    names = [spec.name for spec in summary.show]
    rows = [("system", *names)]
    for rep in summary.representatives:
        row = summary.means.loc[rep]
        rows.append((summary.label(rep), *(number(row[n]) for n in names)))
    text = "Mean over questions\n" + format_table(rows, align="l" + "r" * len(names))
    long = [g for g in summary.groups if len(g) > LISTED_IN_LABEL]
    if long:
        text += "\n" + "\n".join(f"Identical per question: {' = '.join(g)}" for g in long)
    return text


def chunking_table(summary: SweepSummary) -> str:
    """What each chunked system indexed and what it cost: chunks, their tokens, the share of documents left whole,
    the index's size and the seconds chunking and indexing took (a chunking reused from an earlier job: 0 s). Empty
    when no system chunked."""
    done = [s for s in summary.finished if HOUSEKEEPING + "chunks" in s.metrics]
    if not done:
        return ""
    heads = {**SHOWN_STATS, INDEX_MB_METRIC.removeprefix(HOUSEKEEPING): "index MB", "time_chunk_s": "chunk s",
             "time_index_s": "index s"}
    rows = [("system", *heads.values())]
    for system in done:
        values = [system.metrics.get(HOUSEKEEPING + key) for key in heads]
        rows.append((system.name, *("--" if v is None else f"{v:.0%}" if key == "single_chunk_share" else
                                    f"{v:,.0f}" if key == "chunks" else f"{v:.1f}" if "tokens" in key else
                                    f"{v:.2f}" for key, v in zip(heads, values))))
    return "Chunking and indexing\n" + format_table(rows, align="l" + "r" * len(heads))


RANK_LEGEND = ("-- = not retrieved: the ranking ended without a relevant document; >N = beyond depth N: the ranking "
               "was full to depth N without one, and one may lie deeper")


def rank_label(rank: object, beyond: object) -> str:
    """``3``; ``>100`` (beyond the depth the ranking was full to); ``--`` (not retrieved)."""
    if not pd.isna(rank):
        return str(int(rank))
    return "--" if pd.isna(beyond) else f">{int(beyond)}"


def first_rank_table(summary: SweepSummary) -> str:
    columns = [rep for rep in summary.representatives if rep in summary.first_rank.columns]
    ranks = summary.first_rank[columns]
    beyond = summary.beyond.reindex(index=ranks.index, columns=columns)
    note = ""
    if len(ranks) > MAX_RANK_ROWS:
        missed = ranks[(ranks.isna() | (ranks > 3)).any(axis=1)]
        note = f"\n({len(ranks) - len(missed)} questions found in the top 3 by every system not shown)"
        if len(missed) > MAX_RANK_ROWS:
            note += f"\n(... and {len(missed) - MAX_RANK_ROWS} more; see first_relevant_rank.csv)"
        ranks = missed.head(MAX_RANK_ROWS)
    rows = [("question", *(summary.label(c) for c in columns))]
    for qid, row in ranks.iterrows():
        rows.append((str(qid), *(rank_label(v, beyond.at[qid, c]) for c, v in row.items())))
    return (f"Rank of the first relevant document\n({RANK_LEGEND})\n"
            + format_table(rows, align="l" + "r" * len(columns)) + note)


def differences_table(summary: SweepSummary) -> str:
    level = f"{summary.confidence:.0%}"
    rows = [("system", "metric", "difference", f"{level} interval", "")]
    for (system, metric), row in summary.differences.iterrows():
        mark = "*" if row.significant else ""
        if metric == summary.primary.name and system in summary.tied:
            mark = "tied"
        rows.append((summary.label(str(system)), str(metric), f"{row.difference:+.3f}",
                     f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}]", mark))
    top = summary.label(summary.best)
    head = (f"Paired differences against the top system, {top} (by {summary.primary.name}): system minus it, "
            f"bootstrap over questions; {SIGNIFICANT_MARK.format(level=level, alpha=f'{summary.alpha:.2g}')}; "
            f"tied = the interval contains zero on {summary.primary.name}")
    return head + "\n" + format_table(rows, align="llrll")


NEEDED_FOR = (0.01, 0.02, 0.05)  # differences whose question counts the reports give
# What a star means, wherever a difference carries one (the terminal, and every table of the HTML report): the rule of
# the pair matrix and the letters (pipeline.analysis.summary.significant_against_top)
SIGNIFICANT_MARK = ("* = significant: the {level} interval excludes zero and the Holm-adjusted p (over every pair on "
                    "that metric) is below {alpha}, as in the pair matrix")


def power_text(summary: SweepSummary) -> str:
    """What difference on the primary metric these questions can detect, and what smaller ones would need."""
    found = summary.detectable()
    if found is None:
        return ""
    pairs = summary.sensitivity[summary.sensitivity["sd"] > 0]
    spread = (f"median over {len(pairs)} pairs of distinct systems, from {pairs['mde'].min():.3f} to "
              f"{pairs['mde'].max():.3f}" if len(pairs) > 1 else "the one pair of distinct systems")
    lines = [f"What {found.n} questions can tell on {summary.primary.name} (paired t approximation, two-sided "
             f"alpha {found.alpha:.2g}, {found.power:.0%} power): a difference of {found.mde:.3f} ({spread})."]
    needed = [f"{d:g}: {_count(found.needed(d))}" for d in NEEDED_FOR]
    lines.append(f"Questions a difference would need (same spread of differences, sd {found.sd:.3f}): "
                 + "; ".join(needed) + ".")
    return "\n".join(lines)


def _count(n: int | None) -> str:
    return "more than 10 million" if n is None else f"{n:,}"


def number(value: float) -> str:
    return "--" if pd.isna(value) else f"{value:.3f}"


def format_table(rows: list[tuple[str, ...]], align: str) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(w) if a == "r" else cell.ljust(w) for cell, w, a in zip(row, widths, align)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


# -- what MLflow shows first: a run's description and the tags of its runs-table columns --------------------------


def interval_text(mean: float, low: float, high: float) -> str:
    """``0.668 [0.622, 0.713]``: a mean rounded, with its interval."""
    return f"{number(mean)} [{number(low)}, {number(high)}]"


def best_tag(summary: SweepSummary) -> str | None:
    """The parent's ``rankscope.best``: the best system by the primary metric, only when one is ahead of every
    other; else the systems tied at the top, named as tied (a tag never crowns one of them)."""
    best, primary = summary.best, summary.primary.name
    if best is None:
        return None
    if summary.single_best or len(summary.finished) == 1:
        return f"{best} ({primary})"
    if not summary.same_data:
        return f"highest mean: {best}, not compared per question ({primary})"
    if len(summary.groups) == 1:
        return f"tied: all {len(summary.finished)} identical ({primary})"
    top = [summary.label(best), *(group_label(g) for g in summary.groups if g[0] in summary.tied)]
    if len(top) == 1:
        return f"{top[0]} ({primary})"
    return f"tied: {', '.join(top)} ({primary})"


DESCRIBED_SYSTEMS = 20  # systems a parent run's description lists (MLflow keeps 8,000 characters of a tag)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[list[str]]) -> str:
    """A Markdown table (MLflow renders a description's), the second row its ``---`` rule."""
    return "\n".join("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)


def sweep_description(summary: SweepSummary, corpus: str | None, settings: list[str]) -> str:
    """The parent run's description (Markdown; MLflow shows it first on the run's page): the verdict in words, then
    each system's primary metric with its interval and its swept settings, best first."""
    primary, level = summary.primary.name, f"{summary.confidence:.0%}"
    on = f" on {corpus}" if corpus else ""
    questions = list(dict.fromkeys(len(s.per_question) for s in summary.finished if s.per_question is not None))
    counted = f", {questions[0]:,} questions" if len(questions) == 1 else ""
    means = summary.means
    best = summary.best
    if best is not None and best in means.index and primary in means.columns:
        row = means.loc[best]
        found = interval_text(row[primary], row[primary + "/ci_low"], row[primary + "/ci_high"])
        lead = (f"**{_cell(summary.label(best))}** has the highest {primary}{on}: **{found}** ({level} bootstrap "
                f"interval{counted}). ")
    else:
        lead = ""
    lines = [lead + verdict_text(summary)]
    if not means.empty and primary in means.columns:
        by_name = {s.name: s for s in summary.finished}
        order = means[primary].sort_values(ascending=False, kind="stable").index
        key = summary.primary.mlflow_key
        rows = [["system", primary, f"{level} interval", *settings], ["---"] * (3 + len(settings))]
        for name in order[:DESCRIBED_SYSTEMS]:
            row = means.loc[name]
            values = [by_name[name].params.get(s, "") if name in by_name else "" for s in settings]
            rows.append([name, f"**{number(row[primary])}**",
                         f"[{number(row[primary + '/ci_low'])}, {number(row[primary + '/ci_high'])}]", *values])
        lines.append(markdown_table(rows))
        if len(order) > DESCRIBED_SYSTEMS:
            lines.append(f"... and {len(order) - DESCRIBED_SYSTEMS} more systems: see the report.")
        lines.append(f"MLflow's metric `{key}` (bounds `{key}_ci_lower`, `{key}_ci_upper`) is the top system's. "
                     "The sweep's report, with every paired difference: `report.html` among this run's artifacts.")
    for system in summary.failed:
        lines.append(f"FAILED job {system.job} ({_cell(system.name)}): {_cell(system.error or system.status)}")
    return "\n\n".join(lines)


def job_description(result: Measured) -> str:
    """A job run's description (Markdown): what was measured, then each shown metric with its interval, the
    primary one first."""
    c, e, plan = result.collection, result.evaluation, result.plan
    level = f"{plan.confidence:.0%}"
    primary = plan.primary
    if primary.name not in result.intervals:  # no question judged: ranked, written, nothing to score yet
        return (f"**{_cell(result.system)}** on {c.name} ({c.split}): ranked, not scored (no question has a "
                "judgment yet: pool and judge it, `python -m pipeline.judge pool`).")
    head = (f"**{_cell(result.system)}** on {c.name} ({c.split}), {len(e.per_question):,} questions: "
            f"**{primary.name} {interval_text(*_bounds(result.intervals[primary.name]))}** ({level} bootstrap "
            f"interval; MLflow's `{primary.mlflow_key}`, `{primary.mlflow_key}_ci_lower`, "
            f"`{primary.mlflow_key}_ci_upper`).")
    shown = [s for s in dict.fromkeys([primary, *plan.show]) if s.name in result.intervals]
    rows = [["metric", "mean", f"{level} interval"], ["---"] * 3]
    for spec in shown:
        iv = result.intervals[spec.name]
        rows.append([spec.name, number(iv.mean), f"[{number(iv.low)}, {number(iv.high)}]"])
    return head + "\n\n" + markdown_table(rows)


def _bounds(interval: Interval) -> tuple[float, float, float]:
    return interval.mean, interval.low, interval.high
