"""Re-score without re-ranking: each selected run's stored ``run.trec`` scored against the qrels version it was
scored with and against the new one, with the metrics its job was configured with; what changed (each system's
primary metric and judged@k before and after, the ordering's Kendall's tau, every flipped pairwise verdict). A run
that ranked chunks is scored again from its ``chunks.tsv`` against each version's spans (span and token-budget
measures: :mod:`~pipeline.judge_steps.chunk_scoring`), so one re-scoring takes every chunker of a sweep at once. The
gates decided again are :mod:`~pipeline.judge_steps.gates_again`'s, the report
:mod:`~pipeline.judge_steps.changes_report`'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from metrics.bootstrap import Interval, bootstrap_ci
from metrics.evaluation import evaluate, figure
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.spec import MetricSpec
from pipeline.common.names import LOWER, QUESTIONS_PREFIX, UPPER
from pipeline.config.build import MetricPlan, metric_plan
from pipeline.job.table import top_shown
from pipeline.judge_steps.sources import Ranked
from pipeline.judging_maths.changes import Changes, changes

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
                  texts: dict[str, str] | None = None, **chunked: Any) -> Scored:
    """``ranking`` against ``qrels`` over ``questions`` (those with a relevant judgment count), as a job scores (span
    and token-budget measures from ``chunked``: ``chunks``, ``spans`` and ``chunking``, as ``metrics.evaluate``
    takes them)."""
    evaluation = evaluate(ranking, qrels, specs_of(plan), plan.settings, query_ids=questions, **chunked)
    per_question = evaluation.per_question
    names = list(per_question.columns)
    intervals = {}
    if not per_question.empty:
        found = bootstrap_ci(per_question[names].to_numpy(dtype=np.float64), plan.resamples, plan.seed,
                             plan.confidence, plan.method)
        intervals = {spec.name: figure(spec, interval) for spec, interval in zip(evaluation.metrics, found)}
    ids = per_question.index.tolist()
    first = evaluation.first_relevant_rank.reindex(ids).to_numpy()
    tops, lengths = top_shown(ranking, ids)
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
