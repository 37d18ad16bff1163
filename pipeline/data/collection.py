"""A Collection: documents, questions and judgments, validated at the door, with digests of each."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

from metrics.qrels import Qrels, combined_digest
from metrics.spans import Spans, judgments_digest


@dataclass(frozen=True)
class Collection:
    """Everything a study needs, already checked; nothing downstream re-validates it.

    ``query_ids`` are the questions of the chosen split (those with at least one judgment there);
    ``notes`` lists what validation found and did about it (dropped judgments, empty texts ...).
    """

    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: Qrels
    source: str = ""
    split: str = "test"
    notes: list[str] = field(default_factory=list)
    judgments: str = ""  # the judgments read (``<source>/qrels/<split>.tsv``): a record of which split was used
    origin: dict[str, str] = field(default_factory=dict)  # how it was reached: {"route": "ir_datasets", "id": ...}
    doc_metadata: dict[str, list] = field(default_factory=dict)  # own files' extra columns, one list per column
    query_metadata: dict[str, list] = field(default_factory=dict)  # the same for the questions kept
    spans: Spans | None = None  # span judgments (character offsets), when the judgments carry them; ``qrels`` then
    # holds each judged pair at its best span's grade (metrics.spans)

    @property
    def label(self) -> str:
        return corpus_label(self.name, self.split)

    @property
    def dataset_name(self) -> str:
        """The name of its MLflow dataset: ``scifact/test``, the split always said (once: ``beir/scifact/test``)."""
        return self.name if self.name.endswith(f"/{self.split}") else f"{self.name}/{self.split}"

    @cached_property
    def digest(self) -> str:
        """One digest for documents, questions and judgments together: runs on different data never match."""
        return combined_digest(self.corpus_digest, self.queries_digest, self.judgments_digest)

    @cached_property
    def judgments_digest(self) -> str:
        """The judgments' version: the qrels' digest, and their spans' when there are any."""
        return judgments_digest(self.qrels, self.spans)

    @cached_property
    def doc_lengths(self) -> dict[str, int]:
        """Each document's length in characters (what a judgment without offsets spans)."""
        return {d: len(t) for d, t in zip(self.doc_ids, self.doc_texts)}

    def all_spans(self) -> Spans:
        """The span judgments, plus every judged document without a span as a span of its whole text."""
        return (self.spans or Spans.empty()).with_documents(self.qrels, self.doc_lengths)

    @cached_property  # computed once: hashing a million documents takes a second, and several stages ask
    def corpus_digest(self) -> str:
        return texts_digest(self.doc_ids, self.doc_texts)

    @cached_property
    def queries_digest(self) -> str:
        return texts_digest(self.query_ids, self.query_texts)

    def query_text(self, query_id: str) -> str:
        return self.query_texts[self.query_ids.index(query_id)]

    def summary(self) -> dict[str, int]:
        level_one = set(self.qrels.relevant_queries(1))
        return {
            "documents": len(self.doc_ids),
            "questions": len(self.query_ids),
            "judgments": len(self.qrels),
            "questions_without_relevant": sum(q not in level_one for q in self.query_ids),
        }


def texts_digest(ids: list[str], texts: list[str]) -> str:
    """The digest of (id, text) pairs in order: a collection's documents or questions (a question set made elsewhere
    computes its own with it, so a job on the set records the same)."""
    h = hashlib.sha256()
    for i, t in zip(ids, texts):
        h.update(i.encode())
        h.update(b"\0")
        h.update(t.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def corpus_label(name: str, split: str) -> str:
    """How runs name a corpus: ``scifact``; ``scifact/train`` when the split is not ``test`` and the name does not
    already end in it (an ir_datasets id such as ``beir/scifact/train`` does)."""
    if split in ("test", "") or name.endswith(f"/{split}"):
        return name
    return f"{name}/{split}"
