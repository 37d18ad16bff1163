"""Span judgments as a corpus's judgments carry them: checked against the documents once they are loaded.

Reading them (a BEIR-style qrels file with ``start end`` columns, own files mapped with ``corpus.judgments.start`` /
``.end``) is :class:`metrics.spans.SpanRows`'s: a row with offsets is a span judgment (several per question and
document are fine), a row without judges the whole document. Here, :func:`check_spans` checks each span against the
loaded documents (the document exists, the span ends inside it), a problem one line naming the file and the line
(or row).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from metrics.errors import InputError
from metrics.spans import Spans


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
