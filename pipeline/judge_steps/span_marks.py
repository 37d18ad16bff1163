"""A span pool's marks, read and checked: the documents read again as they are now (from the corpus config its pool
kept) and every highlight checked against them (``judging_maths.spans.check_marks``); its adjudication round, whose
tasks show each pair's document with every assessor's highlights marked, for a third assessor to highlight anew."""

from __future__ import annotations

import argparse

import pandas as pd

from metrics.errors import InputError
from pipeline.annotation_tools.label_studio import ADJUDICATING_SPANS, EARLIER
from pipeline.data.collection import Collection
from pipeline.judge_steps.adjudication import ROUND, open_round, remember_round, round_project
from pipeline.judge_steps.saved import SavedPool
from pipeline.judge_steps.settings import JudgeSettings
from pipeline.judge_steps.sources import pooled_collection
from pipeline.judging_maths.span_agreement import by_assessor, tied_span_pairs
from pipeline.judging_maths.spans import Checked, check_marks, disjoint


def pool_documents(saved: SavedPool) -> Collection:
    """The pool's corpus as it is now (read once per command: the marks and the round are checked against it)."""
    return pooled_collection(saved.meta)


def checked_marks(documents: Collection, saved: SavedPool, marks: pd.DataFrame, low: int) -> Checked:
    """``marks`` checked against the pool's ``documents`` as they are now (a document they no longer hold: absent),
    and against their digests when pooled."""
    wanted = set(marks["doc_id"].astype(str))
    texts = {d: t for d, t in zip(documents.doc_ids, documents.doc_texts) if d in wanted}
    return check_marks(marks, texts, saved.digests, low)


def push_span_round(args: argparse.Namespace, settings: JudgeSettings, saved: SavedPool, checked: Checked,
                    collection: Collection) -> str:
    """Push the pairs whose characters the rule leaves tied, not in the round's project yet, each task marked with
    every assessor's highlights and listing them; remember the round in the pool; what to say."""
    if checked.assessments.empty:
        raise InputError(f"no pair of the pool in {saved.folder} is judged yet: nothing to adjudicate")
    low = settings.grades.low
    tied = tied_span_pairs(checked.highlights, checked.assessments, settings.rule, low)
    if not tied:
        return (f"No pair is left tied by the {settings.rule} rule, character by character "
                f"({len(checked.assessments)} judgment(s)): nothing to adjudicate")
    studio, title, project, made, there = open_round(settings, saved, args.url, "span pool", len(tied),
                                                     ADJUDICATING_SPANS)
    documents = dict(zip(collection.doc_ids, collection.doc_texts))
    questions = dict(zip(collection.query_ids, collection.query_texts))
    given = by_assessor(checked.highlights, tied)
    graded = {(q, d, w): g for q, d, w, g in checked.assessments[["query_id", "doc_id", "assessor", "grade"]]
              .itertuples(index=False)}
    tasks = []
    for i, (query, doc) in enumerate(tied, 1):
        if (query, doc) in there:
            continue
        grades = "; ".join(f"{w} graded {g}" for (q, d, w), g in graded.items() if (q, d) == (query, doc))
        earlier = grades + (f". Highlights (start:end, grade): {given[(query, doc)]}" if given.get((query, doc))
                            else "")
        rows = checked.highlights[(checked.highlights["query_id"] == query) & (checked.highlights["doc_id"] == doc)]
        marks = [(s, e) for s, e, _ in disjoint([(int(s), int(e), 1) for s, e in zip(rows["start"], rows["end"])])[0]]
        tasks.append(({"query_id": query, "doc_id": doc, "question": questions.get(query, ""),
                       "document": documents.get(doc, ""), EARLIER: earlier, "order": i,
                       "doc_digest": saved.digests.get(doc, "")}, marks))
    pushed = studio.push_marked(project["id"], tasks, ADJUDICATING_SPANS)
    return remember_round(saved, studio, title, project, made, len(tied), pushed, len(tied) - len(tasks),
                          f"pair(s) whose highlights the {settings.rule} rule leaves tied",
                          "each marks the highlights given so far", "highlights them anew")


def read_span_round(settings: JudgeSettings, saved: SavedPool, documents: Collection, url: str | None = None
                    ) -> tuple[tuple[pd.DataFrame, pd.DataFrame] | None, list[str]]:
    """The round's highlights and grades, checked as the pool's are (None when the pool has no round), and the lines
    of what was set aside."""
    if ROUND not in saved.meta:
        return None, []
    studio, project = round_project(settings, saved, url)
    marks, problems = studio.marks(project["id"], settings.grades, saved.keys)
    checked = checked_marks(documents, saved, marks, settings.grades.low)
    return (checked.highlights, checked.assessments), problems + checked.lines()
