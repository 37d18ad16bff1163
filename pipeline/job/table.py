"""A job's per-question table: id, text, every metric, the first relevant rank, what was retrieved, and the slice
each question is in (``metrics.slices``); the same metrics on condensed lists as columns of their own; and the job's
figures by slice, its MLflow metrics of the primary metric per slice.

The slices are columns ``slice:<field>`` (:data:`pipeline.common.names.SLICE_COLUMN`): a question field of the
collection (own files' ``questions.metadata``, an ir_datasets query field), a tag of the trace the question was
answered in (``retriever=traces``), or the built-in ``question_length``; a field the job cannot find is one line
naming those it can. Everything by slice is a group-by of that table: ``per_question.csv`` recomputes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from metrics.errors import InputError, Note
from metrics.evaluation import Evaluation, evaluate
from metrics.judged import judged_only
from metrics.run import PAD, Run
from pipeline.analysis.slices import slice_means
from pipeline.analysis.slicing import MISSING, QUESTION_LENGTH, one_question, question_length, slicing
from pipeline.common.names import CONDENSED, LOWER, SLICE_COLUMN, SLICE_PREFIX, UPPER
from pipeline.config.build import MetricPlan
from pipeline.data.collection import Collection

TOP_SHOWN = 3  # top document ids kept per question in the per-question table
KEY_PART = 80  # characters of a field or a slice kept in an MLflow metric's name
_UNSAFE = re.compile(r"[^\w.\- ]+")  # what an MLflow metric's name may not hold (a colon neither, on Windows)

# note kinds (a job logs each one's count as system/notes_<kind>)
SLICE_BINNED, SLICE_ONE, SLICE_MISSING = "slices_binned", "slices_one_question", "slices_missing_value"


def top_shown(run: Run, ids: Sequence[str]) -> tuple[list[str], list[int]]:
    """Each question's top document ids (space-separated, ``top_N`` of the table) and how many documents it
    retrieved; a question missing from ``run`` retrieved none."""
    rows = pd.Index(run.query_ids).get_indexer(list(ids)) if len(run.query_ids) else np.full(len(ids), -1)
    tops, lengths = [], []
    for row in rows:
        if row < 0:
            tops.append("")
            lengths.append(0)
            continue
        docs = run.docs[row, :TOP_SHOWN]
        tops.append(" ".join(str(run.doc_ids[d]) for d in docs[docs != PAD]))
        lengths.append(int(run.lengths[row]))
    return tops, lengths


def per_question_table(collection: Collection, run: Run, evaluation: Evaluation,
                       slices: Mapping[str, list[str]] | None = None) -> pd.DataFrame:
    """One row per evaluated question: id, text, every metric, rank of the first relevant document (empty
    when none was retrieved), how many documents were retrieved, the top document ids, and each of ``slices``
    (field -> each evaluated question's slice, in the evaluation's order) as ``slice:<field>``."""
    per_question = evaluation.per_question
    ids = per_question.index.tolist()
    texts = dict(zip(collection.query_ids, collection.query_texts))
    tops, lengths = top_shown(run, ids)
    first = evaluation.first_relevant_rank.reindex(ids).to_numpy()
    columns: dict[str, object] = {"query_id": ids, "question": [texts.get(q, "") for q in ids]}
    columns.update({column: per_question[column].to_numpy() for column in per_question.columns})
    columns["first_relevant_rank"] = pd.Series(first, dtype="Int64").where(lambda r: r > 0).to_numpy()  # 0: none
    columns["retrieved"] = lengths
    columns[f"top_{TOP_SHOWN}"] = tops
    columns.update({SLICE_COLUMN + name: labels for name, labels in (slices or {}).items()})
    return pd.DataFrame(columns)  # made at once: a column added at a time was 5 ms of a job


def question_slices(collection: Collection, ids: Sequence[str], names: Sequence[str],
                    tags: Mapping[str, Mapping[str, str]]) -> tuple[dict[str, list[str]], list[Note]]:
    """Each of ``names``' slice for the questions ``ids`` (:func:`pipeline.analysis.slicing.slicing`), and the notes
    to say: a numeric field binned (and how), slices of one question, questions without the value. A name that is
    no field of these questions is an InputError naming those that are."""
    fields = collection.query_metadata
    tag_names = sorted({k for found in tags.values() for k in found})
    place = {q: i for i, q in enumerate(collection.query_ids)}
    out: dict[str, list[str]] = {}
    notes: list[Note] = []
    for name in names:
        if name in fields:
            values: list[object] = [fields[name][place[q]] for q in ids]
            found = slicing(name, values)
        elif name in tag_names:
            found = slicing(name, [tags.get(q, {}).get(name) for q in ids])
        elif name == QUESTION_LENGTH:
            texts = collection.query_texts
            found = slicing(name, [question_length(texts[place[q]]) for q in ids], binned_always=True,
                            unit="word tokens")
        else:
            raise InputError(f"metrics.slices: {collection.name} has no question field {name!r} "
                             f"({available(fields, tag_names)})")
        out[name] = found.labels
        if found.binned:
            notes.append(Note(f"metrics.slices: {found.binned}", SLICE_BINNED, 1))
        for label in one_question(found):
            which = [q for q, lab in zip(ids, found.labels) if lab == label]
            notes.append(Note(f"metrics.slices: {name}={label} holds one question ({which[0]}): its figures are "
                              f"shown, its differences never tested", SLICE_ONE, 1, which))
        absent = [q for q, lab in zip(ids, found.labels) if lab == MISSING]
        if absent:
            notes.append(Note(f"metrics.slices: {len(absent)} question(s) have no {name}: they form the slice "
                              f"{name}={MISSING}", SLICE_MISSING, len(absent), absent[:5]))
    return out, notes


def available(fields: Mapping[str, list], tags: Sequence[str]) -> str:
    """What a job may slice by: the questions' fields, the traces' tags, and the built-in question_length."""
    parts = [f"question fields: {', '.join(fields)}" if fields else "the questions have no field of their own",
             *([f"trace tags: {', '.join(tags)}"] if tags else []), f"built in: {QUESTION_LENGTH}"]
    return "; ".join(parts)


def slice_figures(table: pd.DataFrame, plan: MetricPlan) -> pd.DataFrame:
    """One job's figures by slice (every metric, the questions in each slice): ``slices.csv``."""
    return slice_means(table, [s.name for s in plan.specs], plan.slices, plan.resamples, plan.seed, plan.confidence,
                       plan.method)


def key_part(text: str) -> str:
    """A field's or a slice's name as part of an MLflow metric's name: what MLflow refuses made ``_``, ends
    trimmed, at most :data:`KEY_PART` characters (``(missing)`` -> ``missing``)."""
    return _UNSAFE.sub("_", text).strip(" _.")[:KEY_PART].strip(" _.") or "_"


def slice_metrics(figures: pd.DataFrame, plan: MetricPlan) -> dict[str, float]:
    """The primary metric per slice as MLflow metrics: ``slice/<field>/<slice>/ndcg_at_5`` with its bounds beside
    (``_ci_lower``, ``_ci_upper``): under one prefix, so they stay out of the way of the runs' own metrics (a
    section of their own in the chart view, after them in every sorted list). Two slices whose names clean alike
    are told apart by a number (``_2``)."""
    primary = plan.primary
    rows = figures[figures["metric"] == primary.name]
    out: dict[str, float] = {}
    for name, part in rows.groupby("slicing", sort=False):
        taken: dict[str, int] = {}
        for row in part.itertuples(index=False):
            label = key_part(str(row.slice))
            taken[label] = taken.get(label, 0) + 1
            if taken[label] > 1:
                label = f"{label}_{taken[label]}"
            key = f"{SLICE_PREFIX}{key_part(str(name))}/{label}/{primary.mlflow_key}"
            out.update({key: row.mean, key + LOWER: row.ci_low, key + UPPER: row.ci_high})
    return out


def condensed_column(name: str) -> str:
    """The per-question table's column of a metric scored on condensed lists: ``ndcg@10 (condensed)``, which no
    comparison or gate takes for a metric."""
    return f"{name} ({CONDENSED})"


def score_condensed(run: Run, collection: Collection, plan: MetricPlan) -> Evaluation:
    """Every metric of the plan on condensed lists: each ranking with its unjudged documents removed (Sakai 2007;
    trec_eval -J, python -m metrics -J), over the same questions."""
    return evaluate(judged_only(run, collection.qrels), collection.qrels, plan.specs, plan.settings,
                    query_ids=collection.query_ids)
