"""Re-score without re-ranking: each selected run's stored ``run.trec`` scored against the qrels version it was
scored with and against the new one, with the metrics its job was configured with; what changed (each system's
primary metric and judged@k before and after, the ordering's Kendall's tau, every flipped pairwise verdict) and the
regression gates decided on the old version, decided again on the new one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from metrics.bootstrap import Interval, bootstrap_ci
from metrics.comparison import compare, gate
from metrics.evaluation import evaluate
from metrics.qrels import Qrels
from metrics.run import PAD, Run
from metrics.spec import MetricSpec
from pipeline.common.names import LOWER, QUESTIONS_PREFIX, UPPER
from pipeline.config.build import MetricPlan, metric_plan
from pipeline.judging.sources import Ranked
from pipeline.judgments.changes import Changes, changes
from pipeline.reports.text import format_table

JUDGED_K = 10
TOP_SHOWN = 3


@dataclass
class Scored:
    """One ranking scored against one qrels version."""

    table: pd.DataFrame  # one row per scored question: query_id, question, metrics, first_relevant_rank, retrieved
    intervals: dict[str, Interval]
    counts: dict[str, int]

    def metrics(self, plan: MetricPlan) -> dict[str, float]:
        out: dict[str, float] = {}
        for spec in specs_of(plan):
            if spec.name in self.intervals:
                iv, key = self.intervals[spec.name], spec.mlflow_key
                out.update({key: iv.mean, key + LOWER: iv.low, key + UPPER: iv.high})
        out.update({QUESTIONS_PREFIX + k: v for k, v in self.counts.items()})
        return out


def plan_of(config_path: Path) -> MetricPlan:
    """The metrics plan of the job whose ``config.yaml`` this is."""
    return metric_plan(OmegaConf.load(config_path).metrics)


def specs_of(plan: MetricPlan) -> list[MetricSpec]:
    """The plan's metrics, and judged@10 (what re-scoring reports of every system) when the plan lacks it."""
    judged = MetricSpec("judged", JUDGED_K)
    return list(dict.fromkeys([*plan.specs, judged]))


def score_ranking(ranking: Run, qrels: Qrels, plan: MetricPlan, questions: list[str],
                  texts: dict[str, str] | None = None) -> Scored:
    """``ranking`` against ``qrels`` over ``questions`` (those with a relevant judgment count), as a job scores."""
    evaluation = evaluate(ranking, qrels, specs_of(plan), plan.settings, query_ids=questions)
    per_question = evaluation.per_question
    names = list(per_question.columns)
    intervals = {}
    if not per_question.empty:
        found = bootstrap_ci(per_question[names].to_numpy(dtype=np.float64), plan.resamples, plan.seed,
                             plan.confidence, plan.method)
        intervals = dict(zip(names, found))
    ids = per_question.index.tolist()
    rows = ranking.query_positions(np.asarray(ids, dtype=object)) if ids else np.zeros(0, dtype=np.int64)
    first = evaluation.first_relevant_rank.reindex(ids).to_numpy()
    tops, lengths = [], []
    for row in rows:
        if row < 0:
            tops.append("")
            lengths.append(0)
            continue
        docs = ranking.docs[row, :TOP_SHOWN]
        tops.append(" ".join(str(ranking.doc_ids[d]) for d in docs[docs != PAD]))
        lengths.append(int(ranking.lengths[row]))
    table = pd.DataFrame({"query_id": ids, "question": [(texts or {}).get(q, "") for q in ids],
                          **{n: per_question[n].to_numpy() for n in names},
                          "first_relevant_rank": pd.Series(first, dtype="Int64").where(lambda r: r > 0).to_numpy(),
                          "retrieved": lengths, f"top_{TOP_SHOWN}": tops})
    counts = {"evaluated": len(ids), "without_judgments": len(evaluation.without_judgments),
              "missing_from_run": len(evaluation.missing_from_run)}
    return Scored(table, intervals, counts)


@dataclass
class Rescored:
    """One run under both versions."""

    ranked: Ranked
    plan: MetricPlan
    before: Scored
    after: Scored
    run_id: str | None = None  # the re-scored run, once logged
    reused: bool = False


@dataclass
class GateAgain:
    """A regression gate decided on the old version, and decided again on the new one."""

    candidate: str
    baseline: str
    before: str  # the gate's line on the old version
    after: str  # ... and on the new one


@dataclass
class Outcome:
    rescored: list[Rescored]
    changes: Changes
    digest: str
    parent: str
    gates: list[GateAgain] = field(default_factory=list)


def what_changed(rescored: list[Rescored]) -> Changes:
    plan = rescored[0].plan
    metric = plan.primary.name
    before = {r.ranked.system: r.before.table.set_index("query_id") for r in rescored}
    after = {r.ranked.system: r.after.table.set_index("query_id") for r in rescored}
    return changes(before, after, metric, f"judged@{JUDGED_K}", plan.confidence, min(plan.resamples, 5000),
                   10000, plan.seed)


def gate_again(before: pd.DataFrame, after: pd.DataFrame, base_before: pd.DataFrame, base_after: pd.DataFrame,
               metrics: list[str], tolerance: float, confidence: float, resamples: int, permutations: int,
               seed: int) -> tuple[str, str]:
    """The gate's line on the old tables and on the new ones (``metrics.comparison.gate``)."""
    said = []
    for candidate, baseline in ((before, base_before), (after, base_after)):
        comparison = compare(baseline.set_index("query_id"), candidate.set_index("query_id"), metrics, confidence,
                             resamples, permutations, seed)
        said.append(gate(comparison, metrics, tolerance).reason)
    return said[0], said[1]


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
