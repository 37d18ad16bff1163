"""Score a Run against Qrels: one row per question, one column per metric spec."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from metrics import ranking
from metrics.bootstrap import exact_mean
from metrics.judged import Judged, judge
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.spec import MetricSpec, parse_metrics


@dataclass(frozen=True)
class EvalSettings:
    """How judgments are read: ``level`` and above counts as relevant; nDCG keeps the graded gains."""

    level: int = 1
    gain: str = "linear"
    missing: str = "zero"  # a judged question absent from the run: "zero" scores it 0, "skip" leaves it out


@dataclass(frozen=True)
class Evaluation:
    """Per-question scores plus what was left out of the means and why."""

    per_question: pd.DataFrame
    metrics: list[MetricSpec]
    settings: EvalSettings
    without_judgments: list[str] = field(default_factory=list)
    missing_from_run: list[str] = field(default_factory=list)
    first_relevant_rank: pd.Series | None = None
    counts: pd.DataFrame | None = None  # per question: num_ret, num_rel, num_rel_ret (trec_eval's counts)

    def means(self) -> pd.Series:
        """Each metric's mean over the scored questions (its sum correctly rounded: see ``exact_mean``)."""
        names = [m.name for m in self.metrics]
        return pd.Series(exact_mean(self.per_question[names].to_numpy(dtype=np.float64)), index=names)


def compute(judged: Judged, metrics: Sequence[MetricSpec], settings: EvalSettings) -> dict[str, np.ndarray]:
    """Every requested metric from one join: a dict ``name -> per-question array``."""
    rel = judged.relevant(settings.level)
    n_rel = judged.n_relevant(settings.level)
    out: dict[str, np.ndarray] = {}
    gain = ideal = None
    for spec in metrics:
        if spec.measure == "hit_rate":
            out[spec.name] = ranking.hit_rate(rel, spec.k)
        elif spec.measure == "recall":
            out[spec.name] = ranking.recall(rel, n_rel, spec.k)
        elif spec.measure == "precision":
            out[spec.name] = ranking.precision(rel, spec.k)
        elif spec.measure == "mrr":
            out[spec.name] = ranking.reciprocal_rank(rel)
        elif spec.measure == "map":
            out[spec.name] = ranking.average_precision(rel, n_rel)
        elif spec.measure == "r_precision":
            out[spec.name] = ranking.r_precision(rel, n_rel)
        elif spec.measure == "bpref":
            out[spec.name] = ranking.bpref(judged.judged(), max(settings.level, 0), n_rel,
                                           judged.n_nonrelevant(settings.level))
        elif spec.measure == "judged":
            out[spec.name] = ranking.judged_share(judged.judged(), judged.lengths, spec.k)
        elif spec.measure == "ndcg":
            if gain is None:
                gain, ideal = judged.gains(settings.gain)
            out[spec.name] = ranking.ndcg(gain, ideal, spec.k)
        else:  # pragma: no cover - parse_metric rejects unknown measures
            raise ValueError(spec.measure)
    return out


def evaluate(
    run: Run,
    qrels: Qrels,
    metrics: Sequence[MetricSpec | str] | str,
    settings: EvalSettings | None = None,
    query_ids: Sequence[str] | None = None,
) -> Evaluation:
    """Score ``run`` against ``qrels``.

    The questions scored are those with at least one relevant judgment (``query_ids`` narrows them); the
    others are listed in ``without_judgments``. A scored question missing from the run scores 0 (or is left
    out, with ``missing="skip"``, as trec_eval does without ``-c``).
    """
    settings = settings or EvalSettings()
    specs = parse_metrics(metrics) if isinstance(metrics, str) else [
        m if isinstance(m, MetricSpec) else parse_metrics([m])[0] for m in metrics
    ]
    relevant = set(qrels.relevant_queries(settings.level))
    if query_ids is None:
        query_ids = list(dict.fromkeys(qrels.judged_queries() + [str(q) for q in run.query_ids]))
    scored = [q for q in query_ids if q in relevant]
    without = [q for q in query_ids if q not in relevant]
    in_run = set(run.query_ids.tolist())
    missing = [q for q in scored if q not in in_run]
    if settings.missing == "skip":
        scored = [q for q in scored if q in in_run]
    judged = judge(run, qrels, scored)
    values = compute(judged, specs, settings)
    per_question = pd.DataFrame(values, index=pd.Index(scored, name="query_id"))
    rel = judged.relevant(settings.level)
    first = pd.Series(ranking.first_relevant_rank(rel), index=per_question.index, name="first_relevant_rank")
    counts = pd.DataFrame(
        {"num_ret": judged.lengths, "num_rel": judged.n_relevant(settings.level), "num_rel_ret": rel.count()},
        index=per_question.index,
    )
    return Evaluation(per_question, list(specs), settings, without, missing, first, counts)
