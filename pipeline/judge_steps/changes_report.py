"""What a re-scoring says it changed: the "Judgments" section (each system's primary metric and judged@k before
and after, the ordering, every flipped verdict, the gates decided again) as text, and the re-scoring's
``report.html``: the sweep report's sections over the re-scored systems, after that one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pipeline.common.names import CHANGES_TABLE, CHANGES_TEXT, REPORT_FILE
from pipeline.common.redact import redact_text
from pipeline.judge_steps.rescoring import JUDGED_K, Outcome
from pipeline.judge_steps.settings import JUDGING_DIR
from pipeline.reports.html import write_report
from pipeline.reports.text import format_table


def changes_text(outcome: Outcome) -> str:
    """The "Judgments" section: figures before and after, the ordering, flipped verdicts, gates decided again."""
    c = outcome.changes
    metric = c.metric
    judged = f"judged@{JUDGED_K}"
    rows = [("system", f"{metric} before", "after", "moved", f"{judged} before", "after")]
    for system, row in c.table.iterrows():
        rows.append((str(system), _n(row.before), _n(row.after), _n(row.moved, "+.3f"), _n(row.judged_before),
                     _n(row.judged_after)))
    unscored = c.table["before"].isna().all()
    before_order = "nothing scored" if unscored else " > ".join(c.table.sort_values("rank_before").index)
    after_order = " > ".join(c.table.sort_values("rank_after").index)
    tau = "n/a (fewer than two systems scored both times)" if np.isnan(c.tau) else f"{c.tau:.3f}"
    lines = [f"Judgments: re-scored against qrels version {outcome.digest} (parent {outcome.parent})", "",
             format_table(rows, align="lrrrrr"), "",
             f"Ordering by {metric}: before {before_order}; after {after_order}; Kendall's tau {tau}"]
    flipped = c.flipped
    total = len(c.verdicts)
    lines.append(f"Pairwise verdicts on {metric} (paired bootstrap and randomisation test, Holm-adjusted): "
                 f"{len(flipped)} of {total} flipped" + (":" if len(flipped) else ""))
    for (a, b), row in flipped.iterrows():
        lines.append(f"  {a} vs {b}: {_said(row.before, a, b)} -> {_said(row.after, a, b)}")
    for g in outcome.gates:
        lines.append(f"Gate {g.candidate} vs baseline {g.baseline}: on the old version {g.before}; on the new one "
                     f"{g.after}")
    return "\n".join(lines)


def report_html(outcome: Outcome, text: str, meta: dict[str, str]) -> str:
    """A re-scoring's report.html: the sweep report's sections over the re-scored systems, after a "Judgments"
    section saying what changed."""
    from pipeline.analysis.summary import SystemRun, summarize
    from pipeline.reports.html import Section
    from pipeline.reports.sweep_page import PageFiles, sweep_page

    plan = outcome.rescored[0].plan
    systems = [SystemRun(r.run_id or r.ranked.run_id, r.ranked.system, "FINISHED", i, r.after.metrics(plan),
                         per_question=r.after.table.set_index("query_id"), params=dict(r.ranked.run.data.params))
               for i, r in enumerate(outcome.rescored) if len(r.after.table)]
    summary = summarize(systems, "", plan.show, plan.primary, plan.confidence, min(plan.resamples, 5000), plan.seed)
    judgments = Section("Judgments", "What re-scoring against the new qrels version changed.",
                        table=outcome.changes.table.round(4).reset_index(), preformatted=text, anchor="judgments")
    return sweep_page(summary, f"Re-scored with qrels {outcome.digest}", meta, [], None, {}, PageFiles(),
                      first=[judgments])


def _n(value: float, form: str = ".3f") -> str:
    return "--" if np.isnan(value) else format(value, form)


def _said(verdict: str, a: str, b: str) -> str:
    return {"a better": f"{a} better", "b better": f"{b} better"}.get(verdict, "tied")


def write_changes(outcome: Outcome, text: str, meta: Mapping[str, str], folder: Path) -> list[Path]:
    """What changed, in ``folder``: the text, the table (CSV) and ``report.html`` (the page last)."""
    report = folder / CHANGES_TEXT
    report.write_text(redact_text(text) + "\n", encoding="utf-8")
    outcome.changes.table.to_csv(folder / CHANGES_TABLE)
    page = write_report(report_html(outcome, text, dict(meta)), folder / REPORT_FILE)
    return [report, folder / CHANGES_TABLE, page]


def keep_changes(made: list[Path], digest: str) -> Path:
    """Copies of what :func:`write_changes` made under ``judging/rescored/<digest>``; the page's copy."""
    kept = Path(JUDGING_DIR) / "rescored" / digest
    kept.mkdir(parents=True, exist_ok=True)
    for path in made:
        (kept / path.name).write_bytes(path.read_bytes())
    return kept / REPORT_FILE
