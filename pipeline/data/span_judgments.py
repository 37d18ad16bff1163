"""Judgments that may carry character offsets (``start``, ``end``; end exclusive): read row by row from a BEIR-style
qrels file with ``start end`` columns or from own files mapped with ``corpus.judgments.start`` / ``.end``.

A row with offsets is a span judgment (several per question and document are fine: each marks evidence); a row
without is a judgment of the whole document (once per pair, as in any qrels). The document judgments every metric
reads hold each pair at its best grade. Offsets are checked twice: as read (integers, ``0 <= start < end``) and
against the documents once they are loaded (:func:`check_spans`: the document exists, the span ends inside it),
each problem one line naming the file and the line (or row).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from metrics.errors import InputError
from metrics.qrels import Qrels, QrelsBuilder
from metrics.spans import Spans

SPAN_HEADER = ("start", "end")  # the columns a BEIR qrels header names for offsets


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


def check_spans(spans: Spans | None, lines: list[int], ids: Iterable[str], texts: Iterable[str], path: str | Path,
                place: str = "line") -> None:
    """Every span on a document the corpus holds and inside its text; the first that is not is one line naming the
    file and the line (or row)."""
    if spans is None:
        return
    lengths = {i: len(t) for i, t in zip(ids, texts)}
    for number, q, d, s, e in zip(lines, spans.query_ids, spans.doc_ids, spans.starts.tolist(), spans.ends.tolist()):
        where = (path, number) if place == "line" else (path,)
        prefix = "" if place == "line" else f"row {number}: "
        if d not in lengths:
            raise InputError(f"{prefix}a span of question {q} is on document {d}, which the corpus does not hold",
                             *where)
        if e > lengths[d]:
            raise InputError(f"{prefix}the span {s}:{e} of question {q} ends past the end of document {d} "
                             f"({lengths[d]} characters)", *where)


def read_beir_spans(path: Path) -> tuple[Qrels, Spans | None, list[int]]:
    """A BEIR qrels TSV whose header names ``start`` and ``end`` columns beside ``query-id corpus-id score``."""
    found = SpanRows(path)
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        header = [h.strip().lower() for h in next(reader, [])]
        place = {name: header.index(name) for name in ("start", "end")}
        for number, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) < 3:
                raise InputError(f"expected 'query-id corpus-id score' and the offsets, found {len(row)} field(s)",
                                 path, number)
            try:
                grade = int(float(row[2]))
            except ValueError:
                raise InputError(f"score {row[2]!r} is not an integer", path, number) from None
            start, end = (row[place[k]] if place[k] < len(row) else "" for k in ("start", "end"))
            found.add(row[0].strip(), row[1].strip(), grade, start, end, number)
    return found.build()


def has_span_header(path: Path) -> bool:
    """Whether a BEIR qrels TSV's first line is a header naming ``start`` and ``end``."""
    with open(path, encoding="utf-8", newline="") as handle:
        first = handle.readline()
    names = {h.strip().lower() for h in first.rstrip("\r\n").split("\t")}
    return all(name in names for name in SPAN_HEADER)
