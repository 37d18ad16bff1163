"""From records to a :class:`Collection`: the checks every route shares (a BEIR folder, ir_datasets, own files).

A reader yields ``(place, id, text)`` for documents and questions (``place``: the line or row it read them from)
and a :class:`~metrics.qrels.Qrels`; :func:`assemble` refuses what cannot be measured (a duplicate id, naming both
places) and notes what it goes on with: empty texts (kept), judgments naming unknown ids (dropped), questions
without any judgment or without a relevant one (left out of the means). With ``strict`` every note is an error.
The same data read by two routes gives the same :class:`Collection`, digests included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metrics.errors import InputError, Note
from metrics.qrels import Qrels
from metrics.spans import Spans
from pipeline.data.collection import Collection
from pipeline.data.grades import Grading

SHOWN = 5  # how many offending ids a message lists before "and N more"

# the kinds of note a load makes (a job logs each one's count as the metric system/notes_<kind>)
EMPTY_DOCUMENTS = "documents_empty_text"
EMPTY_QUESTIONS = "questions_empty_text"
UNKNOWN_DOCUMENT = "judgments_unknown_document"
UNKNOWN_QUESTION = "judgments_unknown_question"
WITHOUT_RELEVANT = "questions_without_relevant"
UNJUDGED = "questions_unjudged"  # kept questions with no judgment at all (own files): ranked, to be judged


def listing(ids: Sequence[str]) -> str:
    """The first few ids, then how many more."""
    head = ", ".join(ids[:SHOWN])
    return head + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def join_text(parts: Iterable[str | None]) -> str:
    """A record's text from its fields, in the order given: non-empty ones joined by one space, the ends stripped.
    BEIR's rule (``title text``), shared by every route so the same data gives the same digest."""
    return " ".join(p for p in parts if p).strip()


def json_object(line: str, path: Path, number: int, what: str = "line") -> dict[str, Any]:
    """One JSON Lines record, which must be an object; anything else is refused naming the file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", path, number) from None
    if not isinstance(record, dict):
        raise InputError(f"expected a JSON object per {what}", path, number)
    return record


class Notes(list):
    """The notes of one load; with ``strict``, the first one raises instead (``corpus.strict=true``)."""

    def __init__(self, strict: bool) -> None:
        super().__init__()
        self.strict = strict

    def add(self, text: str, kind: str, ids: Sequence[str], count: int | None = None, kept: str = "") -> None:
        if self.strict:
            raise InputError(f"{text} (corpus.strict=true makes this an error)")
        self.append(Note(f"{text} {kept}".rstrip(), kind, len(ids) if count is None else count, list(ids[:SHOWN])))


@dataclass
class Records:
    """Ids and texts in reading order, each id once (a repeat is refused where it is read)."""

    what: str  # "document" or "question"
    where: str  # the file (or dataset) read, for messages
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, records: Iterable[tuple[int, str, str]], what: str, where: str | Path,
             place: str = "line") -> Records:
        """Collect ``(place, id, text)``; a repeated id is an InputError naming both places (``line`` or ``row``)."""
        found = cls(what, str(where))
        first: dict[str, int] = {}
        ids, texts = found.ids, found.texts
        for number, ident, text in records:
            if ident in first:
                message = f"duplicate {what} id {ident!r} (first on {place} {first[ident]})"
                if place == "line":
                    raise InputError(message, where, number)
                raise InputError(f"{place} {number}: {message}", where)
            first[ident] = number
            ids.append(ident)
            texts.append(text)
        if not ids:  # said as it is: else every judgment names a missing question, and nothing is left to evaluate
            raise InputError(f"the file is empty: it holds no {what}", where)
        return found

    def note_empty(self, notes: Notes) -> None:
        empty = [i for i, t in zip(self.ids, self.texts) if not t]
        if empty:
            kind = EMPTY_DOCUMENTS if self.what == "document" else EMPTY_QUESTIONS
            notes.add(f"{self.where}: {len(empty)} {self.what}(s) with empty text: {listing(empty)}", kind, empty,
                      kept="(kept; they can match nothing)")


def assemble(name: str, documents: Records, questions: Records, qrels: Qrels, *, judgments: str, split: str,
             notes: Notes, source: str, keep_unjudged: bool = False, origin: dict[str, str] | None = None,
             metadata: dict[str, list] | None = None, question_metadata: dict[str, list] | None = None,
             grading: Grading | None = None, spans: Spans | None = None) -> Collection:
    """The checked Collection. ``judgments`` names the qrels read (for messages and the record); the questions are
    those judged in it, in reading order, or every question with ``keep_unjudged`` (own files: a question set not
    judged yet is measured once it is). ``metadata``, ``question_metadata``: columns aligned with the records.
    ``grading`` turns the grades kept into the gains measured (``corpus.grades``, ``corpus.negative_grades``), the
    spans' grades as the judgments'; ``spans``: the judgments' character offsets, already checked against the
    documents."""
    documents.note_empty(notes)
    questions.note_empty(notes)
    known_docs, known_q = set(documents.ids), set(questions.ids)
    bad_doc = np.fromiter((d not in known_docs for d in qrels.doc_ids), dtype=bool, count=len(qrels))
    bad_q = np.fromiter((q not in known_q for q in qrels.query_ids), dtype=bool, count=len(qrels))
    for mask, what in ((bad_doc, "documents"), (bad_q, "questions")):
        if mask.any():
            ids = list(dict.fromkeys((qrels.doc_ids if what == "documents" else qrels.query_ids)[mask].tolist()))
            missing_from = "corpus" if what == "documents" else "questions file"
            notes.add(f"{judgments}: {int(mask.sum())} judgment(s) name {len(ids)} {what} missing from the "
                      f"{missing_from}: {listing(ids)}", UNKNOWN_DOCUMENT if what == "documents" else UNKNOWN_QUESTION,
                      ids, int(mask.sum()), "(dropped)")
    if bad_doc.any() or bad_q.any():
        qrels = qrels.subset(~(bad_doc | bad_q))
    grading = grading or Grading()
    qrels = grading.apply(qrels, judgments)
    spans = None if spans is None else grading.apply_spans(spans, judgments)

    judged = set(qrels.query_ids.tolist())
    keep = [i for i, q in enumerate(questions.ids) if keep_unjudged or q in judged]
    query_ids = [questions.ids[i] for i in keep]
    query_texts = [questions.texts[i] for i in keep]
    query_metadata = {column: [values[i] for i in keep] for column, values in (question_metadata or {}).items()}
    unjudged = [q for q in query_ids if q not in judged]
    if unjudged:
        notes.add(f"{questions.where}: {len(unjudged)} question(s) have no judgment at all: {listing(unjudged)}",
                  UNJUDGED, unjudged, kept="(ranked; left out of the means until judged)")
    relevant = set(qrels.relevant_queries(1))
    without = [q for q in query_ids if q in judged and q not in relevant]
    if without:
        notes.add(f"{judgments}: {len(without)} question(s) have no relevant judgment in split {split!r}: "
                  f"{listing(without)}", WITHOUT_RELEVANT, without, kept="(left out of the means)")
    return Collection(name, documents.ids, documents.texts, query_ids, query_texts, qrels, source=source, split=split,
                      notes=list(notes), judgments=judgments, origin={**(origin or {}), **grading.record()},
                      doc_metadata=dict(metadata or {}), query_metadata=query_metadata, spans=spans)
