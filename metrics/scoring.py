"""Score a Run against Qrels into plain per-question arrays: the core that ``metrics.evaluate`` tabulates with
pandas and ``python -m metrics`` prints without it (numpy only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from metrics import ranking, trec_measures
from metrics.chunks import ChunkRun, Chunks
from metrics.errors import InputError
from metrics.judged import Judged, judge
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.spans import Spans
from metrics.spec import TREC_MEASURES, MetricSpec, parse_metrics

COUNTS = ("num_ret", "num_rel", "num_rel_ret")  # trec_eval's counts, per question


@dataclass(frozen=True)
class EvalSettings:
    """How judgments are read: ``level`` and above counts as relevant; nDCG keeps the graded gains."""

    level: int = 1
    gain: str = "linear"
    missing: str = "zero"  # a judged question absent from the run: "zero" scores it 0, "skip" leaves it out


@dataclass(frozen=True)
class Scores:
    """Per-question arrays, aligned with ``query_ids``, plus what was left out of the means and why."""

    query_ids: list[str]
    values: dict[str, np.ndarray]  # metric name -> one float per question
    metrics: list[MetricSpec]
    settings: EvalSettings
    first_relevant_rank: np.ndarray  # 0 where no relevant document is retrieved
    counts: dict[str, np.ndarray]  # COUNTS -> one integer per question
    without_judgments: list[str] = field(default_factory=list)
    missing_from_run: list[str] = field(default_factory=list)


def compute(judged: Judged, metrics: Sequence[MetricSpec], settings: EvalSettings,
            trec: trec_measures.TrecMeasures | None = None) -> dict[str, np.ndarray]:
    """Every requested metric from one join: a dict ``name -> per-question array``; ``trec``: the join's
    trec_eval measures when the caller has them already (built with the same level and gain), else made on demand."""
    rel = judged.relevant(settings.level)
    n_rel = judged.n_relevant(settings.level)
    out: dict[str, np.ndarray] = {}
    gain = ideal = None
    more = trec
    for spec in metrics:
        if spec.needs_chunks:  # a ranking of chunks' measure: metrics.context computes it
            continue
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
        elif spec.measure in TREC_MEASURES:  # the rest of trec_eval's all_trec (issue 47)
            more = more or trec_measures.TrecMeasures(judged, settings.level, settings.gain)
            out[spec.name] = trec_measures.value(more, spec)
        else:  # pragma: no cover - parse_metric rejects unknown measures
            raise ValueError(spec.measure)
    return out


def specs_of(metrics: Sequence[MetricSpec | str] | str) -> list[MetricSpec]:
    """Metric specs from specs or their string forms (one comma-separated string too)."""
    if isinstance(metrics, str):
        return parse_metrics(metrics)
    return [m if isinstance(m, MetricSpec) else parse_metrics([m])[0] for m in metrics]


def score(
    run: Run,
    qrels: Qrels,
    metrics: Sequence[MetricSpec | str] | str,
    settings: EvalSettings | None = None,
    query_ids: Sequence[str] | None = None,
    chunks: ChunkRun | None = None,
    spans: Spans | None = None,
    chunking: Chunks | None = None,
) -> Scores:
    """Score ``run`` against ``qrels``.

    The questions scored are those with at least one relevant judgment (``query_ids`` narrows them); the
    others are listed in ``without_judgments``. A scored question missing from the run scores 0 (or is left
    out, with ``missing="skip"``, as trec_eval does without ``-c``).

    Span and token-budget measures (:mod:`metrics.context`) read ``chunks``, the ranking of chunks ``run`` was made
    from, and ``spans``, the span judgments (``chunking``: every chunk, for ``span_precision_omega``).
    """
    settings = settings or EvalSettings()
    specs = specs_of(metrics)
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
    rel = judged.relevant(settings.level)
    counts = dict(zip(COUNTS, (judged.lengths, judged.n_relevant(settings.level), rel.count())))
    values = compute(judged, specs, settings)
    chunk_specs = [s for s in specs if s.needs_chunks]
    if chunk_specs:
        if chunks is None:
            raise InputError(f"{', '.join(s.name for s in chunk_specs)}: these read a ranking of chunks "
                             f"(python -m metrics: --chunks chunks.tsv)")
        from metrics.context import chunk_values

        values.update(chunk_values(chunks, qrels, spans, chunk_specs, scored, settings.level, settings.gain,
                                   chunking))
    values = {s.name: values[s.name] for s in specs}  # in the order asked
    return Scores(scored, values, specs, settings, ranking.first_relevant_rank(rel), counts, without, missing)
