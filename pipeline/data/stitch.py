"""Long documents from short ones, with span judgments: each page a Markdown document of sections of the original
documents' texts, and each judgment of an original document a span judgment of its text on its page.

What the long-document chunking studies do ("Rethinking chunk size for long-document retrieval"): a collection whose
documents are too short to chunk (SciFact's abstracts, the help-desk's sentences) becomes one where chunk size
matters, while its judgments stay exact: the evidence is the original document's characters. :func:`stitch` makes
the pages and spans; :func:`write_beir` writes them as a BEIR folder whose qrels carry ``start end`` columns, what
``corpus=beir`` (and the shipped ``corpus=helpdesk_pages``) reads. ``python -m bench.stitch`` builds both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metrics.spans import Spans
from pipeline.data.collection import Collection

HEADER = ("query-id", "corpus-id", "score", "start", "end")


@dataclass(frozen=True)
class Page:
    """A page to make: its id and title, and its sections, each a heading and the documents it holds in order."""

    id: str
    title: str
    sections: Sequence[tuple[str, Sequence[str]]]


@dataclass(frozen=True)
class Stitched:
    """Pages (ids and Markdown texts), where each original document landed (page, start, end), and the span
    judgments the original judgments become."""

    ids: list[str]
    texts: list[str]
    placed: dict[str, tuple[str, int, int]]
    spans: Spans


def stitch(collection: Collection, pages: Sequence[Page]) -> Stitched:
    """Each page as ``# title``, then per section ``## heading`` and its documents' texts, blank lines between; a
    judgment of an original document becomes a span of its text on its page (documents on no page are dropped, and
    so are their judgments)."""
    texts = dict(zip(collection.doc_ids, collection.doc_texts))
    ids, bodies, placed = [], [], {}
    for page in pages:
        parts = [f"# {page.title}"]
        length = len(parts[0])
        for heading, docs in page.sections:
            parts.append(f"## {heading}")
            length += 2 + len(parts[-1])
            for doc in docs:
                length += 2
                placed[doc] = (page.id, length, length + len(texts[doc]))
                parts.append(texts[doc])
                length += len(texts[doc])
        ids.append(page.id)
        bodies.append("\n\n".join(parts))
    rows = [(q, *placed[d], g) for q, d, g in zip(collection.qrels.query_ids.tolist(),
                                                  collection.qrels.doc_ids.tolist(),
                                                  collection.qrels.grades.tolist()) if d in placed]
    q, p, s, e, g = zip(*rows) if rows else ((), (), (), (), ())
    spans = Spans(np.array(q, dtype=object), np.array(p, dtype=object), s, e, g)
    return Stitched(ids, bodies, placed, spans)


def in_pages_of(collection: Collection, size: int) -> list[Page]:
    """Pages of ``size`` consecutive documents each, one section per document headed by its id: the stitching of a
    collection without topics (SciFact's abstracts)."""
    ids = collection.doc_ids
    return [Page(f"page{n:05d}", f"Page {n}", [(d, [d]) for d in ids[i : i + size]])
            for n, i in enumerate(range(0, len(ids), size), start=1)]


def write_beir(stitched: Stitched, collection: Collection, folder: Path, split: str = "test") -> None:
    """The pages as a BEIR folder: ``corpus.jsonl``, the collection's questions in ``queries.jsonl``, and
    ``qrels/<split>.tsv`` with span columns (:data:`HEADER`), in the order of the original judgments."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for ident, text in zip(stitched.ids, stitched.texts):
            out.write(json.dumps({"_id": ident, "title": "", "text": text}, ensure_ascii=False) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as out:
        for ident, text in zip(collection.query_ids, collection.query_texts):
            out.write(json.dumps({"_id": ident, "text": text}, ensure_ascii=False) + "\n")
    s = stitched.spans
    with open(folder / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as out:
        out.write("\t".join(HEADER) + "\n")
        for row in zip(s.query_ids, s.doc_ids, s.grades.tolist(), s.starts.tolist(), s.ends.tolist()):
            out.write("\t".join(map(str, row)) + "\n")
