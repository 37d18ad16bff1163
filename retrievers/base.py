"""The retriever seam: index a corpus once, then rank every question in one call."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from metrics.run import Run
from retrievers.text import TermCounts, Tokenizer, term_counts
from retrievers.topk import top_k_dense

# A score not above this is not a result (SPEC.md): rankings can be empty.
MIN_SCORE = 1e-9
# Dense score blocks are kept under this many cells, so memory is bounded by chunking questions.
BLOCK_CELLS = 2**24


class Documents(Protocol):
    """What a retriever indexes: ids and texts in the same order (a Collection satisfies this)."""

    doc_ids: Sequence[str]
    doc_texts: Sequence[str]


class NotIndexedError(RuntimeError):
    pass


def counts_of(docs: Documents, tokenizer: Tokenizer) -> TermCounts:
    """Term counts for ``docs``: from its cache when it has one (``CachedDocuments``), else tokenised now."""
    cached = getattr(docs, "term_counts", None)
    if callable(cached):
        return cached(tokenizer)
    return term_counts(docs.doc_ids, docs.doc_texts, tokenizer)


class Retriever(ABC):
    """Index once with :meth:`index`, then :meth:`rank` a batch of questions into a :class:`Run`."""

    name: str = "retriever"

    @abstractmethod
    def index(self, docs: Documents) -> Retriever:
        """Build the index; returns self so ``BM25().index(docs)`` reads naturally."""

    @abstractmethod
    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        """Rank every question; rows follow ``query_ids``."""


class ScoringRetriever(Retriever):
    """A retriever that can score every document for a question: the form fusions combine.

    ``doc_ids`` is the document axis of :meth:`scores`, sorted by id so that ties resolve by id.
    """

    threshold: float | None = MIN_SCORE
    doc_ids: np.ndarray

    @abstractmethod
    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """A dense (questions x documents) score matrix over ``doc_ids``."""

    def chunk_size(self) -> int:
        return max(1, BLOCK_CELLS // max(1, len(self.doc_ids)))

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        docs, scores = [], []
        step = self.chunk_size()
        for start in range(0, len(texts), step):
            d, s = top_k_dense(self.scores(texts[start : start + step]), depth, self.threshold)
            docs.append(d)
            scores.append(s)
        return _assemble(self, query_ids, docs, scores, depth)


def _check_batch(query_ids: Sequence[str], texts: Sequence[str]) -> None:
    if len(query_ids) != len(texts):
        raise ValueError(f"{len(query_ids)} question ids but {len(texts)} texts")


def _assemble(retriever: ScoringRetriever, query_ids, docs: list, scores: list, depth: int) -> Run:
    width = min(depth, len(retriever.doc_ids))
    if not docs:
        return Run(np.array(query_ids, dtype=object), retriever.doc_ids, np.zeros((0, width)), np.zeros((0, width)),
                   retriever.name)
    return Run(np.array(query_ids, dtype=object), retriever.doc_ids, np.vstack(docs), np.vstack(scores),
               retriever.name)


def same_axis(components: Sequence[ScoringRetriever]) -> np.ndarray:
    """The shared document axis of several retrievers; they must have indexed the same corpus."""
    axis = components[0].doc_ids
    for c in components[1:]:
        if len(c.doc_ids) != len(axis) or not np.array_equal(c.doc_ids, axis):
            raise ValueError(f"{c.name} indexed a different corpus than {components[0].name}")
    return axis
