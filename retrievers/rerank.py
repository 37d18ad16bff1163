"""Two-stage retrieval: a first retriever proposes candidates, a second one re-orders them.

With a dense second stage (e.g. BM25 top 100 re-scored by :class:`retrievers.dense.Dense`) this is a
*bi-encoder re-scoring*: question and documents are still embedded separately and compared by cosine. It is
not a cross-encoder, which reads question and document together; expect it to fix ordering among lexical
candidates, never to find a document the first stage missed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from metrics.errors import Note
from metrics.run import PAD, Run
from retrievers.base import Documents, Retriever, ScoringRetriever, _assemble, _check_batch
from retrievers.topk import top_k_dense


@dataclass
class Rerank(Retriever):
    """The first stage's top ``candidates`` documents, ordered by the second stage's scores.

    Only first-stage candidates can appear; they are ordered by the second score descending, ties by document
    id ascending; a candidate the second stage scores not above its threshold (1e-9 for BM25, LSA and dense) is
    dropped, as everywhere in rankscope. Candidates outside the second stage's corpus (a run file naming
    unknown documents) cannot be scored and are counted in ``unscored``.
    """

    first: Retriever | None = None
    second: ScoringRetriever | None = None
    candidates: int = 100
    name: str = "rerank"

    def __post_init__(self) -> None:
        if self.first is None or self.second is None:
            raise ValueError("rerank needs a first-stage and a second-stage retriever")
        if not isinstance(self.second, ScoringRetriever):
            raise ValueError(f"the second stage must score documents; {self.second.name} only ranks them")
        if self.candidates < 1:
            raise ValueError(f"rerank candidates must be >= 1, got {self.candidates}")
        self.unscored = 0

    def notes(self) -> list[str]:
        found = self.first.notes() + self.second.notes()
        if self.unscored:
            found.append(Note(f"{self.unscored} first-stage candidate(s) are not in the second stage's corpus: they "
                              f"cannot be re-scored and were dropped", "candidates_unscored", self.unscored))
        return found

    def index(self, docs: Documents) -> Rerank:
        self.first.index(docs)
        self.second.index(docs)
        self.doc_ids = self.second.doc_ids
        return self

    def index_bytes(self) -> int | None:
        parts = [self.first.index_bytes(), self.second.index_bytes()]
        return None if None in parts else sum(parts)

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        first = self.first.rank(query_ids, texts, self.candidates)
        positions = self._on_second_axis(first)
        width = min(depth, positions.shape[1])
        floor = -np.inf if self.second.threshold is None else self.second.threshold
        docs, scores = [], []
        step = self.second.block_size()
        for start in range(0, len(texts), step):
            block = positions[start : start + step]
            second = self.second.scores(texts[start : start + step])
            masked = np.full(second.shape, -np.inf)
            rows, cols = np.nonzero(block != PAD)
            masked[rows, block[rows, cols]] = second[rows, block[rows, cols]]
            d, s = top_k_dense(masked, width, floor)
            docs.append(d)
            scores.append(s)
        self.doc_ids = self.second.doc_ids
        return _assemble(self, query_ids, docs, scores, width)

    def _on_second_axis(self, run: Run) -> np.ndarray:
        """The first run's candidates as positions on the second stage's document axis (PAD where none)."""
        if run.docs.size == 0:
            return np.full(run.docs.shape, PAD, dtype=np.int64)
        axis = pd.Index(self.second.doc_ids).get_indexer(run.doc_ids)
        present = run.docs != PAD
        mapped = np.where(present, axis[np.where(present, run.docs, 0)], PAD)
        self.unscored = int((present & (mapped == PAD)).sum())
        return mapped
