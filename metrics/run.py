"""A Run: every question's ranked documents, as padded arrays rather than lists of dicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from metrics.hashing import Positions

if TYPE_CHECKING:
    import pandas as pd

PAD = -1


@dataclass(frozen=True)
class Run:
    """Ranked results for a batch of questions.

    ``docs[i, j]`` indexes ``doc_ids`` for question ``query_ids[i]`` at rank ``j + 1``; ``PAD`` (-1) ends a
    shorter ranking, and its score is NaN. Rows are already in final rank order.
    """

    query_ids: np.ndarray
    doc_ids: np.ndarray
    docs: np.ndarray
    scores: np.ndarray
    name: str = "run"
    _lengths: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "query_ids", np.asarray(self.query_ids, dtype=object))
        object.__setattr__(self, "doc_ids", np.asarray(self.doc_ids, dtype=object))
        docs = np.asarray(self.docs)
        if docs.ndim != 2:
            docs = docs.reshape(len(self.query_ids), -1)
        object.__setattr__(self, "docs", docs.astype(np.int64, copy=False))
        scores = np.asarray(self.scores, dtype=np.float64).reshape(docs.shape)
        object.__setattr__(self, "scores", scores)
        if len(self.query_ids) != docs.shape[0]:
            raise ValueError("one row of docs per query id is required")
        object.__setattr__(self, "_lengths", (docs != PAD).sum(axis=1))

    @property
    def depth(self) -> int:
        return int(self.docs.shape[1])

    @cached_property
    def query_positions(self) -> Positions:
        """Where each of some query ids is among ``query_ids`` (a hash table built on first use)."""
        return Positions(self.query_ids)

    @cached_property
    def doc_positions(self) -> Positions:
        """Where each of some document ids is among ``doc_ids``, built on first use: a run from a retriever shares
        its corpus's ids."""
        return Positions(self.doc_ids)

    @cached_property
    def query_index(self) -> pd.Index:
        """pandas Index of ``query_ids`` (object dtype: pandas' string dtype would convert on every lookup)."""
        import pandas as pd

        return pd.Index(self.query_ids, dtype=object)

    @property
    def lengths(self) -> np.ndarray:
        """How many documents each question retrieved."""
        return self._lengths

    def ranking(self, query_id: str) -> list[tuple[str, float]]:
        """One question's ranking as ``(doc_id, score)`` pairs, best first."""
        hits = np.flatnonzero(self.query_ids == query_id)
        if len(hits) == 0:
            return []
        i = int(hits[0])
        n = int(self._lengths[i])
        return [(str(self.doc_ids[d]), float(s)) for d, s in zip(self.docs[i, :n], self.scores[i, :n])]

    def top(self, query_id: str, k: int) -> list[str]:
        return [d for d, _ in self.ranking(query_id)[:k]]

    def truncated(self, depth: int) -> Run:
        return Run(self.query_ids, self.doc_ids, self.docs[:, :depth], self.scores[:, :depth], self.name)

    @classmethod
    def from_rankings(
        cls, rankings: dict[str, Sequence[tuple[str, float]]], name: str = "run"
    ) -> Run:
        """Build a Run from already-ordered ``{query_id: [(doc_id, score), ...]}``."""
        query_ids = list(rankings)
        universe: dict[str, int] = {}
        depth = max((len(r) for r in rankings.values()), default=0)
        docs = np.full((len(query_ids), depth), PAD, dtype=np.int64)
        scores = np.full((len(query_ids), depth), np.nan)
        for i, qid in enumerate(query_ids):
            for j, (doc, score) in enumerate(rankings[qid]):
                docs[i, j] = universe.setdefault(doc, len(universe))
                scores[i, j] = score
        return cls(np.array(query_ids, dtype=object), np.array(list(universe), dtype=object), docs, scores, name)
