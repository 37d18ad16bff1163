"""What a job produced (:class:`JobResult`), how it is scored (every metric per question, on condensed lists too,
each mean's bootstrap interval) and its per-question table; the files it writes are :mod:`pipeline.job.files`'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from metrics.bootstrap import Interval, bootstrap_ci
from metrics.errors import InputError, Note
from metrics.evaluation import Evaluation, evaluate, figure
from metrics.judged import judged_only
from metrics.run import PAD, Run
from pipeline.common import commands, progress
from pipeline.common.names import (
    CONDENSED,
    DOCUMENTS_METRIC,
    HOUSEKEEPING,
    INDEX_MB_METRIC,
    JUDGE_SHEET,
    LOWER,
    NOT_RELEVANT_METRIC,
    NOTES_PREFIX,
    QUESTIONS_PREFIX,
    RUN_FILE,
    TIME_PREFIX,
    UPPER,
)
from pipeline.config.build import MetricPlan
from pipeline.data.collection import Collection
from pipeline.reports.text import job_text
from retrievers import Retriever

if TYPE_CHECKING:
    from pipeline.job.indexed import Chunked

TOP_SHOWN = 3  # top document ids kept per question in the per-question table
IDS_SHOWN = 5  # ids a merged note keeps
OWN_NOTE = "retriever"  # the kind of a note that is a plain line (a user's own retriever's notes())


@dataclass
class JobResult:
    """Everything one job produced, before anything is logged: the seam for diagnosis, plots and reports."""

    system: str
    collection: Collection
    retriever: Retriever
    run: Run
    evaluation: Evaluation
    plan: MetricPlan
    intervals: dict[str, Interval]  # metric name ('ndcg@5') -> mean with its bootstrap interval
    table: pd.DataFrame  # one row per evaluated question: see per_question_table()
    seconds: dict[str, float] = field(default_factory=dict)
    extra_metrics: dict[str, float] = field(default_factory=dict)  # cache/* reuse counts; later stages add theirs
    notes: list[str] = field(default_factory=list)  # what loading and ranking dropped or corrected: see note_lines()
    condensed: dict[str, Interval] = field(default_factory=dict)  # metrics.judged_only: the same metrics on
    # condensed lists (unjudged documents removed), logged as condensed/<key>, never mixed with the standard ones
    rankings_from: str | None = None  # where the rankings came from, when the retriever read them (Retriever.source)
    kept: dict[str, bytes] = field(default_factory=dict)  # files the retriever keeps beside the run (Retriever.files)
    chunked: Chunked | None = None  # a job that ranks chunks, or scores span or budget measures

    @classmethod
    def of(cls, system: str, collection: Collection, retriever: Retriever, run: Run, evaluation: Evaluation,
           plan: MetricPlan, intervals: dict[str, Interval], seconds: dict[str, float],
           extra: dict[str, float]) -> JobResult:
        """A job's result, its per-question table and its notes (what loading and ranking dropped) included."""
        return cls(system, collection, retriever, run, evaluation, plan, intervals,
                   per_question_table(collection, run, evaluation), seconds, extra,
                   [*collection.notes, *retriever.notes()], rankings_from=retriever.source(),
                   kept=retriever.files())

    def add_chunks(self, chunked: Chunked) -> None:
        """What the job ranked chunks with and kept of them; a chunking's figures become ``system/`` metrics (chunks,
        their tokens' percentiles, chunks per document ...) and a warning when most documents are one chunk."""
        if chunked.chunks is None and chunked.chunking is None:
            return
        self.chunked = chunked
        self.extra_metrics.update({HOUSEKEEPING + k: v for k, v in chunked.metrics().items()})
        self.notes.extend(chunked.notes())

    def add_index_size(self, size: int | None) -> None:
        """The retriever's index in memory, when it can tell (``system/index_mb``)."""
        if size is not None:
            self.extra_metrics[INDEX_MB_METRIC] = round(size / 2**20, 4)

    def add_condensed(self) -> None:
        """``metrics.judged_only``: the same metrics on condensed lists, their intervals and their per-question
        columns, beside and apart from the standard figures."""
        condensed = score_condensed(self.run, self.collection, self.plan)
        self.condensed = bootstrap(condensed, self.plan)
        for name in condensed.per_question.columns:
            self.table[condensed_column(name)] = condensed.per_question[name].reindex(self.table["query_id"]).to_numpy()

    @property
    def scored(self) -> bool:
        """False for a job none of whose questions is judged: it ranked, but has no retrieval metric."""
        return bool(self.intervals)

    def metrics(self) -> dict[str, float]:
        """The run's MLflow metrics: each mean and its bounds (none when nothing is judged), question counts, stage
        timings, extra metrics."""
        out: dict[str, float] = {}
        for spec in self.plan.specs if self.scored else []:
            interval = self.intervals[spec.name]
            out[spec.mlflow_key] = interval.mean
            out[spec.mlflow_key + LOWER] = interval.low
            out[spec.mlflow_key + UPPER] = interval.high
        for spec in self.plan.specs if self.condensed else []:
            interval, key = self.condensed[spec.name], condensed_key(spec.mlflow_key)
            out.update({key: interval.mean, key + LOWER: interval.low, key + UPPER: interval.high})
        evaluation = self.evaluation
        out[QUESTIONS_PREFIX + "evaluated"] = len(evaluation.per_question)
        out[QUESTIONS_PREFIX + "without_judgments"] = len(evaluation.without_judgments)
        out[QUESTIONS_PREFIX + "missing_from_run"] = len(evaluation.missing_from_run)
        out[QUESTIONS_PREFIX + "no_results"] = (int((self.table["retrieved"] == 0).sum()) if self.scored else
                                                len(self.collection.query_ids) - int((self.run.lengths > 0).sum()))
        out[DOCUMENTS_METRIC] = len(self.collection.doc_ids)
        out[NOT_RELEVANT_METRIC] = int((self.collection.qrels.grades < self.plan.settings.level).sum())
        out.update({f"{TIME_PREFIX}{stage}_s": round(s, 4) for stage, s in self.seconds.items()})
        out.update({f"{NOTES_PREFIX}{note.kind}": note.count for note in self.note_lines()})
        out.update(self.extra_metrics)
        return out

    def note_lines(self) -> list[Note]:
        """The notes, one per kind, in the order the kinds first came: what the job printed, logs (the metric
        ``system/notes_<kind>`` counts, the tag and ``notes.txt`` hold the text) and keeps."""
        return merged_notes(self.notes)

    def text(self) -> str:
        """The terminal table: each metric's mean with its interval, under a line saying what was measured."""
        return job_text(self)

    def means_frame(self) -> pd.DataFrame:
        rows = [(name, iv.mean, iv.low, iv.high) for name, iv in self.intervals.items()]
        return pd.DataFrame(rows, columns=["metric", "mean", "ci_low", "ci_high"]).set_index("metric")


def condensed_key(key: str) -> str:
    """The MLflow name of a metric scored on condensed lists: ``condensed/ndcg_at_10`` (a section of its own in the
    UI's charts, never beside the standard ``ndcg_at_10``)."""
    return f"{CONDENSED}/{key}"


def condensed_column(name: str) -> str:
    """The per-question table's column of a metric scored on condensed lists: ``ndcg@10 (condensed)``, which no
    comparison or gate takes for a metric."""
    return f"{name} ({CONDENSED})"


def score_condensed(run: Run, collection: Collection, plan: MetricPlan) -> Evaluation:
    """Every metric of the plan on condensed lists: each ranking with its unjudged documents removed (Sakai 2007;
    trec_eval -J, python -m metrics -J), over the same questions."""
    return evaluate(judged_only(run, collection.qrels), collection.qrels, plan.specs, plan.settings,
                    query_ids=collection.query_ids)


def merged_notes(notes: list[str]) -> list[Note]:
    """One note per kind: the texts of notes of one kind (several components of a fusion, say) joined with "; ",
    their counts added. A plain line (a user's own retriever's note) is of kind ``retriever`` and counts 1."""
    kinds: dict[str, list[Note]] = {}
    for note in notes:
        if not isinstance(note, Note):
            note = Note(str(note), OWN_NOTE, 1)
        kinds.setdefault(note.kind, []).append(note)
    return [group[0] if len(group) == 1 else
            Note("; ".join(group), kind, sum(n.count for n in group), [i for n in group for i in n.ids][:IDS_SHOWN])
            for kind, group in kinds.items()]


def score(run: Run, collection: Collection, plan: MetricPlan, chunked: Chunked | None = None) -> Evaluation:
    """Every metric of the plan, per question (span and budget measures from ``chunked``'s ranking of chunks, spans
    and chunks: :func:`metrics.evaluate`). A collection none of whose questions is judged at all (own files not judged
    yet) gives an empty evaluation: the job ranks and logs, unscored (:func:`unjudged`). An InputError when questions
    are judged but none at or above the relevance level."""
    chunks, spans, table = (chunked.chunks, chunked.spans, chunked.table) if chunked else (None, None, None)
    evaluation = evaluate(run, collection.qrels, plan.specs, plan.settings, query_ids=collection.query_ids,
                          chunks=chunks, spans=spans, chunking=table)
    if evaluation.per_question.empty and not unjudged(collection):
        raise InputError(f"no question of {collection.name} has a judgment at or above relevance level "
                         f"{plan.settings.level}: nothing to evaluate")
    return evaluation


def unjudged(collection: Collection) -> bool:
    """True when no question of the collection has any judgment: nothing can be scored until some are judged."""
    judged = set(collection.qrels.judged_queries())
    return not any(q in judged for q in collection.query_ids)


def nothing_judged_line(result: JobResult, run_id: str | None) -> str:
    """The one line an unscored job says: why it has no retrieval metric, and how to pool its ranking."""
    c = result.collection
    what = run_id or "RUN_ID"
    pool = commands.line(commands.module("pipeline.judge", "pool", what, "--to", JUDGE_SHEET))
    return (f"nothing is judged yet: none of the {len(c.query_ids)} questions of {c.name} has a judgment, so no "
            f"retrieval metric was computed (the ranking is kept in {RUN_FILE}); to judge its top documents: {pool}")


def bootstrap(evaluation: Evaluation, plan: MetricPlan) -> dict[str, Interval]:
    """Each metric's mean with its bootstrap interval over questions (one set of resamples for every metric; gm_map's
    and gm_bpref's geometric: :func:`metrics.evaluation.figure`); none when no question was scored."""
    if evaluation.per_question.empty:
        return {}
    names = [s.name for s in plan.specs]
    values = evaluation.per_question[names].to_numpy(dtype=np.float64)
    with progress.ticker(plan.resamples, "bootstrap", "resample", unit_scale=True) as tick:
        found = bootstrap_ci(values, plan.resamples, plan.seed, plan.confidence, plan.method, progress=tick)
    return {spec.name: figure(spec, interval) for spec, interval in zip(plan.specs, found)}


def per_question_table(collection: Collection, run: Run, evaluation: Evaluation) -> pd.DataFrame:
    """One row per evaluated question: id, text, every metric, rank of the first relevant document (empty
    when none was retrieved), how many documents were retrieved and the top document ids."""
    per_question = evaluation.per_question
    ids = per_question.index.tolist()
    texts = dict(zip(collection.query_ids, collection.query_texts))
    rows = pd.Index(run.query_ids).get_indexer(ids) if len(run.query_ids) else np.full(len(ids), -1)
    shown = run.docs[:, :TOP_SHOWN] if len(run.query_ids) else np.zeros((0, 0), dtype=np.int64)
    tops, lengths = [], []
    for row in rows:
        if row < 0:
            tops.append("")
            lengths.append(0)
            continue
        docs = shown[row]
        tops.append(" ".join(str(run.doc_ids[d]) for d in docs[docs != PAD]))
        lengths.append(int(run.lengths[row]))
    first = evaluation.first_relevant_rank.reindex(ids).to_numpy()
    columns: dict[str, object] = {"query_id": ids, "question": [texts.get(q, "") for q in ids]}
    columns.update({column: per_question[column].to_numpy() for column in per_question.columns})
    columns["first_relevant_rank"] = pd.Series(first, dtype="Int64").where(lambda r: r > 0).to_numpy()  # 0: none
    columns["retrieved"] = lengths
    columns[f"top_{TOP_SHOWN}"] = tops
    return pd.DataFrame(columns)  # made at once: a column added at a time was 5 ms of a job


def first_columns(table: pd.DataFrame, primary: str) -> pd.DataFrame:
    """The per-question table with what a reader looks for first at its left (MLflow's table view shows the first
    columns; the rest is off to the right): the question's id, the primary metric, the rank of the first relevant
    document, the failure classes, then the question and everything else in its order."""
    lead = [c for c in ("query_id", primary, "first_relevant_rank", "failure_classes", "question") if c in table]
    return table[lead + [c for c in table.columns if c not in lead]]
