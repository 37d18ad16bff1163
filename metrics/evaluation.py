"""Score a Run against Qrels: one row per question, one column per metric spec (pandas tables over
:func:`metrics.scoring.score`, which computes them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from metrics.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    Intervals,
    bootstrap_ci,
    exact_mean,
)
from metrics.chunks import ChunkRun, Chunks
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.scoring import EvalSettings, compute, score
from metrics.spans import Spans
from metrics.spec import GEOMETRIC, MetricSpec

__all__ = ["EvalSettings", "Evaluation", "compute", "evaluate", "figure"]


def figure(spec: MetricSpec, interval: Interval) -> Interval:
    """A metric's figure from the mean and interval of its per-question values: as they are, except gm_map's and
    gm_bpref's, whose per-question values are logs (trec_eval's ``log(max(value, 1e-5))``): their figure is the
    exponential of that mean and of its bounds, the geometric mean and its interval."""
    if spec.measure not in GEOMETRIC:
        return interval
    return replace(interval, mean=math.exp(interval.mean), low=math.exp(interval.low), high=math.exp(interval.high))


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
        means = exact_mean(self.per_question[names].to_numpy(dtype=np.float64))
        return pd.Series([math.exp(v) if m.measure in GEOMETRIC else v for m, v in zip(self.metrics, means)],
                         index=names, dtype=np.float64)

    def intervals(self, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                  confidence: float = DEFAULT_CONFIDENCE, method: str = "percentile") -> Intervals:
        """Each metric's mean with its bootstrap interval, keyed by metric (see :func:`metrics.bootstrap_ci`; gm_map's
        and gm_bpref's are geometric: :func:`figure`)."""
        names = [m.name for m in self.metrics]
        found = bootstrap_ci(self.per_question[names], resamples, seed, confidence, method)
        return Intervals((m.name, figure(m, found[m.name])) for m in self.metrics)


def evaluate(
    run: Run,
    qrels: Qrels,
    metrics: Sequence[MetricSpec | str] | str,
    settings: EvalSettings | None = None,
    query_ids: Sequence[str] | None = None,
    chunks: ChunkRun | None = None,
    spans: Spans | None = None,
    chunking: Chunks | None = None,
) -> Evaluation:
    """Score ``run`` against ``qrels`` (see :func:`metrics.scoring.score`) into pandas tables indexed by question;
    span and token-budget measures read ``chunks``, ``spans`` and ``chunking`` as ``score`` says."""
    scores = score(run, qrels, metrics, settings, query_ids, chunks, spans, chunking)
    index = pd.Index(scores.query_ids, name="query_id")
    per_question = pd.DataFrame(scores.values, index=index)
    first = pd.Series(scores.first_relevant_rank, index=index, name="first_relevant_rank")
    counts = pd.DataFrame(scores.counts, index=index)
    return Evaluation(per_question, scores.metrics, scores.settings, scores.without_judgments,
                      scores.missing_from_run, first, counts)
