"""What assessors mark in a document, checked against its text: span judgments per assessor.

An assessor marks a pooled (question, document) pair in one of three ways (``MARK_COLUMNS``, one row per mark):

- a highlight: offsets into the document (end exclusive) at a grade above the scale's lowest, the highlighted text
  beside them when the tool keeps it (Label Studio does); or, from a sheet, only the text, located in the document;
- a grade above the lowest without offsets or text: the whole document;
- the lowest grade (not relevant): no evidence in it.

:func:`check_marks` checks every mark against the document's text as it is now. A mark that cannot be used is set
aside with one line saying why, and the rest are read: nothing judged is lost (the set-aside rows are kept, with
their text, for the version's files). Set aside: a document that changed since it was pooled (its digest differs),
one the corpus no longer holds, offsets outside the text, an empty highlight, a highlighted text that no longer
matches the document at its offsets, a text that occurs in the document more than once or not at all, and an
assessor who both marked a document not relevant and highlighted in it. Two highlights of one assessor that overlap
are read as one, each character at the higher grade, and said so in one line.

What is read is, per assessor, one grade per pair (the highest of its highlights, the lowest grade for "not
relevant": what kappa is computed on) and the highlights as disjoint ranges, each with its grade.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise

import pandas as pd

MARK_COLUMNS = ["query_id", "doc_id", "assessor", "grade", "start", "end", "text", "when", "where", "seen"]
HIGHLIGHT_COLUMNS = ["query_id", "doc_id", "assessor", "start", "end", "grade"]
ASSESSMENT_COLUMNS = ["query_id", "doc_id", "assessor", "grade", "when"]
SET_ASIDE_COLUMNS = ["where", "query_id", "doc_id", "assessor", "grade", "start", "end", "text", "reason"]
SHOWN_TEXT = 60  # characters of a highlighted text quoted in a line


def text_digest(text: str) -> str:
    """A document's digest as pooled: its text's SHA-256, 16 hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def occurrences(needle: str, haystack: str) -> list[int]:
    """Every position ``needle`` starts at in ``haystack``, overlapping ones included."""
    found, at = [], haystack.find(needle)
    while at >= 0 and needle:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found


def quoted(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= SHOWN_TEXT else flat[: SHOWN_TEXT - 3] + "...")


@dataclass
class Checked:
    """The marks that can be used, per assessor, and those set aside (with why)."""

    assessments: pd.DataFrame  # ASSESSMENT_COLUMNS: one grade per (pair, assessor)
    highlights: pd.DataFrame  # HIGHLIGHT_COLUMNS: disjoint ranges per (pair, assessor), each at its grade
    set_aside: pd.DataFrame  # SET_ASIDE_COLUMNS
    notes: list[str] = field(default_factory=list)  # overlapping highlights read as one

    def lines(self) -> list[str]:
        """One line per mark set aside, then one per overlap read as one."""
        said = [f"{r.where}: {r.reason}; not used" for r in self.set_aside.itertuples()]
        return said + self.notes


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value) or value is pd.NA or str(value) == ""


def _where(row: object) -> str:
    return str(row.where)


def check_marks(marks: pd.DataFrame, documents: Mapping[str, str], pooled: Mapping[str, str], low: int = 0
                ) -> Checked:
    """The usable marks of ``marks`` (``MARK_COLUMNS``) against ``documents`` (document id -> its text now);
    ``pooled``: each document's digest when it was pooled (a document missing there is not checked for change), or,
    where a mark says so (``seen``: the digest of the text its task showed), that one; ``low``: the scale's lowest
    grade (not relevant)."""
    aside: list[tuple] = []
    kept: list[tuple[str, str, str, int, int | None, int | None, str, str]] = []  # q, d, who, grade, s, e, when, where
    now = {d: text_digest(t) for d, t in documents.items()}

    def drop(row: object, reason: str) -> None:
        aside.append((_where(row), row.query_id, row.doc_id, row.assessor, int(row.grade),
                      None if _blank(row.start) else int(row.start), None if _blank(row.end) else int(row.end),
                      "" if _blank(row.text) else str(row.text), reason))

    for row in marks.itertuples(index=False):
        doc, grade = str(row.doc_id), int(row.grade)
        text = documents.get(doc)
        if text is None:
            drop(row, f"document {doc!r} is no longer in the corpus")
            continue
        before = str(row.seen) if not _blank(row.seen) else pooled.get(doc)
        if before and before != now[doc]:
            drop(row, f"document {doc!r} changed since it was pooled (digest {before}, now {now[doc]}): pool it "
                      f"again to judge it anew")
            continue
        if grade <= low:
            kept.append((row.query_id, doc, row.assessor, low, None, None, str(row.when), _where(row)))
            continue
        has_offsets = not (_blank(row.start) and _blank(row.end))
        said = "" if _blank(row.text) else str(row.text)
        if has_offsets:
            if _blank(row.start) or _blank(row.end):
                drop(row, "a highlight needs both start and end")
                continue
            start, end = int(row.start), int(row.end)
            if start == end:
                drop(row, f"the highlight {start}:{end} of document {doc!r} is empty")
                continue
            if not 0 <= start < end <= len(text):
                drop(row, f"the highlight {start}:{end} is outside document {doc!r} ({len(text)} characters)")
                continue
            if said and text[start:end] != said:
                drop(row, f"the highlighted text {quoted(said)} no longer matches document {doc!r} at {start}:{end} "
                          f"(which reads {quoted(text[start:end])})")
                continue
        elif said.strip():
            found = occurrences(said.strip(), text)
            if len(found) != 1:
                at = ", ".join(map(str, found[:5])) + (", ..." if len(found) > 5 else "")
                many = f"occurs {len(found)} times (at {at})" if found else "does not occur"
                drop(row, f"the text {quoted(said)} {many} in document {doc!r}: give start and end instead")
                continue
            start, end = found[0], found[0] + len(said.strip())
        elif said:
            drop(row, f"the highlight of document {doc!r} is empty (only blanks)")
            continue
        else:
            if not text:
                drop(row, f"document {doc!r} is empty: there is nothing to judge in it")
                continue
            start, end = 0, len(text)  # a grade without a span: the whole document
        kept.append((row.query_id, doc, row.assessor, grade, start, end, str(row.when), _where(row)))
    assessments, highlights, notes = _per_assessor(kept, low, aside)
    return Checked(assessments, highlights, pd.DataFrame(aside, columns=SET_ASIDE_COLUMNS), notes)


def _per_assessor(kept: list[tuple], low: int, aside: list[tuple]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """One grade and disjoint highlights per (pair, assessor); a "not relevant" mark beside highlights sets both
    aside; overlapping highlights merge, each character at the higher grade."""
    groups: dict[tuple[str, str, str], list[tuple]] = {}
    for mark in kept:
        groups.setdefault((str(mark[0]), str(mark[1]), str(mark[2])), []).append(mark)
    assessments, highlights, notes = [], [], []
    for (query, doc, who), group in groups.items():
        spans = [m for m in group if m[4] is not None]
        verdicts = [m for m in group if m[4] is None]
        when = max((m[6] for m in group if m[6] and m[6] != "nan"), default="")
        if spans and verdicts:
            for m in group:
                aside.append((m[7], query, doc, who, m[3], m[4], m[5], "", f"{who} marked document {doc!r} not "
                              f"relevant to question {query!r} and also highlighted {len(spans)} span(s) in it: "
                              f"which is meant? (change the annotation, then pull again)"))
            continue
        if not spans:
            assessments.append((query, doc, who, low, when))
            continue
        ranges, overlaps = disjoint([(m[4], m[5], m[3]) for m in spans])
        for (a, b, ga), (c, d, gc) in overlaps:
            notes.append(f"{spans[0][7]}: {who}'s highlights {a}:{b} (grade {ga}) and {c}:{d} (grade {gc}) of document "
                         f"{doc!r} overlap: read as one, each character at the higher grade")
        highlights.extend((query, doc, who, s, e, g) for s, e, g in ranges)
        assessments.append((query, doc, who, max(g for _, _, g in ranges), when))
    return (pd.DataFrame(assessments, columns=ASSESSMENT_COLUMNS),
            pd.DataFrame(highlights, columns=HIGHLIGHT_COLUMNS).astype({"start": "int64", "end": "int64",
                                                                        "grade": "int64"}), notes)


def disjoint(ranges: list[tuple[int, int, int]]) -> tuple[list[tuple[int, int, int]], list[tuple]]:
    """Graded ranges ``(start, end, grade)`` as sorted, disjoint ones, each character at the highest grade covering it
    (touching ranges of one grade join), and every two ranges that overlapped."""
    ordered = sorted(ranges)
    overlaps = [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1:] if b[0] < a[1]]
    cuts = sorted({p for s, e, _ in ordered for p in (s, e)})
    out: list[tuple[int, int, int]] = []
    for left, right in pairwise(cuts):
        grades = [g for s, e, g in ordered if s <= left and right <= e]
        if not grades:
            continue
        grade = max(grades)
        if out and out[-1][1] == left and out[-1][2] == grade:
            out[-1] = (out[-1][0], right, grade)
        else:
            out.append((left, right, grade))
    return out, overlaps
