"""Span judgments: the characters of a document that answer a question, so a judgment outlives every chunking.

A span judgment is ``(question, document, start, end, grade)``, character offsets into the document's text, end
exclusive. A question may have several spans in one document; the document's grade is the highest of them (a
document with a relevant span is a relevant document, so every document metric keeps working). A judgment of a
whole document (a qrels line, no offsets) marks its whole text: :meth:`Spans.with_documents` adds those.

The *evidence* of a question is the union of its spans graded at or above the relevance level: per document, a
sorted list of disjoint character ranges (:meth:`Spans.evidence`). The span metrics read only that.

``spans.tsv`` (:func:`write_spans`, :func:`read_spans`) is the file a job writes of the spans it scored with, whole
documents included, so ``python -m metrics --spans spans.tsv`` recomputes its span metrics.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from metrics.errors import InputError
from metrics.qrels import Qrels, QrelsBuilder, combined_digest
from metrics.textfile import text_lines, tsv_rows

SPAN_COLUMNS = ("query_id", "doc_id", "start", "end", "grade")  # spans.tsv's header
SPAN_HEADER = ("start", "end")  # the columns a BEIR qrels header names for offsets

Ranges = list[tuple[int, int]]


def merged(ranges: Sequence[tuple[int, int]]) -> Ranges:
    """Sorted, disjoint ranges covering the same characters (touching ranges join)."""
    out: Ranges = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def covered(ranges: Ranges) -> int:
    """Characters in sorted, disjoint ranges."""
    return sum(end - start for start, end in ranges)


def overlap(a: Ranges, b: Ranges) -> int:
    """Characters in both of two sorted, disjoint range lists (a merge walk)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if high > low:
            total += high - low
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass(frozen=True)
class Spans:
    """Span judgments as parallel arrays, one row per span."""

    query_ids: np.ndarray
    doc_ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    grades: np.ndarray

    def __post_init__(self) -> None:
        for name in ("query_ids", "doc_ids"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=object))
        for name in ("starts", "ends", "grades"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64))
        if not len(self.query_ids) == len(self.doc_ids) == len(self.starts) == len(self.ends) == len(self.grades):
            raise ValueError("query_ids, doc_ids, starts, ends and grades must have the same length")

    def __len__(self) -> int:
        return len(self.grades)

    @classmethod
    def empty(cls) -> Spans:
        return cls(np.array([], dtype=object), np.array([], dtype=object), [], [], [])

    def digest(self) -> str:
        """A content digest independent of line order."""
        h = hashlib.sha256()
        for row in sorted(zip(self.query_ids.astype(str), self.doc_ids.astype(str), self.starts.tolist(),
                              self.ends.tolist(), self.grades.tolist())):
            h.update("\t".join(map(str, row)).encode() + b"\n")
        return h.hexdigest()[:16]

    def qrels(self) -> Qrels:
        """Document judgments: each (question, document) pair at the highest grade of its spans."""
        best: dict[tuple[str, str], int] = {}
        for q, d, g in zip(self.query_ids, self.doc_ids, self.grades):
            key = (str(q), str(d))
            best[key] = max(best.get(key, int(g)), int(g))
        return Qrels(np.array([k[0] for k in best], dtype=object), np.array([k[1] for k in best], dtype=object),
                     np.array(list(best.values()), dtype=np.int64))

    def with_documents(self, qrels: Qrels, lengths: Mapping[str, int]) -> Spans:
        """These spans plus, for every judged (question, document) pair without a span, the document's whole text at
        its grade: what a judgment without offsets marks."""
        have = set(zip(self.query_ids.tolist(), self.doc_ids.tolist()))
        extra = [(q, d, g) for q, d, g in zip(qrels.query_ids.tolist(), qrels.doc_ids.tolist(), qrels.grades.tolist())
                 if (q, d) not in have and lengths.get(d, 0) > 0]
        if not extra:
            return self
        q, d, g = zip(*extra)
        return Spans(np.concatenate([self.query_ids, np.array(q, dtype=object)]),
                     np.concatenate([self.doc_ids, np.array(d, dtype=object)]),
                     np.concatenate([self.starts, np.zeros(len(extra), dtype=np.int64)]),
                     np.concatenate([self.ends, np.array([lengths[x] for x in d], dtype=np.int64)]),
                     np.concatenate([self.grades, np.array(g, dtype=np.int64)]))

    def evidence(self, level: int = 1) -> dict[str, dict[str, Ranges]]:
        """question -> document -> the merged ranges of its spans graded at ``level`` or above (never a negative
        grade)."""
        grouped: dict[str, dict[str, list[tuple[int, int]]]] = {}
        keep = self.grades >= max(level, 0)
        for q, d, s, e in zip(self.query_ids[keep], self.doc_ids[keep], self.starts[keep], self.ends[keep]):
            grouped.setdefault(str(q), {}).setdefault(str(d), []).append((int(s), int(e)))
        return {q: {d: merged(r) for d, r in docs.items()} for q, docs in grouped.items()}


def judgments_digest(qrels: Qrels, spans: Spans | None = None) -> str:
    """The digest of a version of judgments: the qrels' own, or, with spans, one of the qrels' and the spans' together
    (what a job records as ``rankscope.qrels_digest``, and what a span judgment version is named by)."""
    if spans is None or not len(spans):
        return qrels.digest()
    return combined_digest(qrels.digest(), spans.digest(), "spans")


def spans_bytes(spans: Spans) -> bytes:
    """``spans.tsv``'s content: :data:`SPAN_COLUMNS`, one span per line, in the order held."""
    lines = ["\t".join(SPAN_COLUMNS)]
    lines.extend("\t".join(map(str, row)) for row in zip(spans.query_ids, spans.doc_ids, spans.starts.tolist(),
                                                          spans.ends.tolist(), spans.grades.tolist()))
    return ("\n".join(lines) + "\n").encode("utf-8")


def read_spans(path: str | Path) -> Spans:
    """A ``spans.tsv`` (:data:`SPAN_COLUMNS`, tab-separated, with its header)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such spans file", path)
    rows: list[tuple[str, str, int, int, int]] = []
    for line, row in tsv_rows(path, SPAN_COLUMNS, "a job's spans.tsv"):
        try:
            start, end, grade = int(row[2]), int(row[3]), int(row[4])
        except ValueError:
            raise InputError("start, end and grade must be integers", path, line) from None
        if not 0 <= start < end:
            raise InputError(f"the span {start}:{end} is empty or negative (0 <= start < end)", path, line)
        rows.append((row[0], row[1], start, end, grade))
    if not rows:
        return Spans.empty()
    q, d, s, e, g = zip(*rows)
    return Spans(np.array(q, dtype=object), np.array(d, dtype=object), s, e, g)


@dataclass
class SpanRows:
    """Judgment rows collected as read; :meth:`build` gives the qrels and the spans (None when no row had offsets)."""

    path: Path
    place: str = "line"  # "line", or "row" (Parquet)
    whole: QrelsBuilder = field(init=False)
    rows: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.whole = QrelsBuilder(self.path)

    def where(self, number: int) -> tuple[object, ...]:
        return (self.path, number) if self.place == "line" else (self.path,)

    def said(self, number: int, message: str) -> str:
        return message if self.place == "line" else f"row {number}: {message}"

    def add(self, query: str, doc: str, grade: int, start: object, end: object, number: int) -> None:
        """One row; ``start`` and ``end`` both blank for a whole document's judgment."""
        blank = [v is None or str(v).strip() == "" for v in (start, end)]
        if all(blank):
            self.whole.add(query, doc, grade, number)
            return
        if any(blank):
            raise InputError(self.said(number, f"a span needs both start and end (question {query}, document "
                                               f"{doc})"), *self.where(number))
        try:
            s, e = _offset(start), _offset(end)
        except ValueError:
            raise InputError(self.said(number, f"start {start!r} and end {end!r} must be whole numbers of characters"),
                             *self.where(number)) from None
        if not 0 <= s < e:
            raise InputError(self.said(number, f"the span {s}:{e} is empty or negative (0 <= start < end)"),
                             *self.where(number))
        self.rows.append((query, doc, s, e, grade))
        self.numbers.append(number)

    def build(self) -> tuple[Qrels, Spans | None, list[int]]:
        """The document judgments (each pair at its best grade, whole-document rows included), the spans and the line
        (or row) of each span."""
        qrels = self.whole.build()
        if not self.rows:
            return qrels, None, []
        q, d, s, e, g = zip(*self.rows)
        spans = Spans(np.array(q, dtype=object), np.array(d, dtype=object), s, e, g)
        best = spans.qrels().to_dict()
        for query, docs in qrels.to_dict().items():
            for doc, grade in docs.items():
                best.setdefault(query, {})[doc] = max(grade, best.get(query, {}).get(doc, grade))
        return Qrels.from_dict(best), spans, list(self.numbers)


def _offset(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    number = float(str(value).strip())
    if not number.is_integer():
        raise ValueError(value)
    return int(number)


def read_beir_spans(path: Path) -> tuple[Qrels, Spans | None, list[int]]:
    """A BEIR qrels TSV whose header names ``start`` and ``end`` columns beside ``query-id corpus-id score``; read as
    text lines are (a byte that is not UTF-8 is one line naming the file, the line and the byte)."""
    found = SpanRows(path)
    place: dict[str, int] = {}
    for number, line in text_lines(path):
        row = line.rstrip("\r\n").split("\t")
        if not place:
            header = [h.strip().lower() for h in row]
            place = {name: header.index(name) for name in SPAN_HEADER}
            continue
        if not line.strip():
            continue
        if len(row) < 3:
            raise InputError(f"expected 'query-id corpus-id score' and the offsets, found {len(row)} field(s)",
                             path, number)
        try:
            grade = int(float(row[2]))
        except ValueError:
            raise InputError(f"score {row[2]!r} is not an integer", path, number) from None
        start, end = (row[place[k]] if place[k] < len(row) else "" for k in SPAN_HEADER)
        found.add(row[0].strip(), row[1].strip(), grade, start, end, number)
    return found.build()


def has_span_header(path: Path) -> bool:
    """Whether a BEIR qrels TSV's first line is a header naming ``start`` and ``end`` (read as bytes: a file that is
    not UTF-8 is said so by whichever reader reads it)."""
    with open(path, "rb") as handle:
        first = handle.readline().decode("utf-8", errors="replace")
    names = {h.strip().lower() for h in first.rstrip("\r\n").split("\t")}
    return all(name in names for name in SPAN_HEADER)
