"""BM25, Lucene flavour (SPEC.md): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), each distinct query term once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from metrics.run import Run
from retrievers.base import (
    MIN_SCORE,
    Documents,
    NotIndexedError,
    ScoringRetriever,
    _assemble,
    _check_batch,
    counts_of,
)
from retrievers.text import TermCounts, Tokenizer
from retrievers.topk import top_k_sparse


def bm25_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def bm25_weights(counts: sp.csr_matrix, k1: float, b: float) -> sp.csr_matrix:
    """Each (document, term) cell's BM25 contribution; lengths are token counts after stop words."""
    counts = counts.tocsr()
    n_docs = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    avgdl = lengths.mean() if n_docs and lengths.mean() > 0 else 1.0
    norm = k1 * (1.0 - b + b * lengths / avgdl)
    row_norm = np.repeat(norm, np.diff(counts.indptr))
    f = counts.data
    data = bm25_idf(df, n_docs)[counts.indices] * f * (k1 + 1.0) / (f + row_norm)
    return sp.csr_matrix((data, counts.indices.copy(), counts.indptr.copy()), shape=counts.shape)


@dataclass
class BM25(ScoringRetriever):
    """Okapi BM25 with Lucene's idf and saturation; ``k1`` and ``b`` as in the literature."""

    k1: float = 1.2
    b: float = 0.75
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    name: str = "bm25"

    def __post_init__(self) -> None:
        if self.k1 < 0:
            raise ValueError(f"BM25 k1 must be >= 0, got {self.k1}")
        if not 0.0 <= self.b <= 1.0:
            raise ValueError(f"BM25 b must be within [0, 1], got {self.b}")
        self._terms: TermCounts | None = None

    def index(self, docs: Documents, counts: TermCounts | None = None) -> BM25:
        """Index ``docs``; pass precomputed ``counts`` to skip tokenisation (sweeps share them)."""
        terms = counts if counts is not None else counts_of(docs, self.tokenizer)
        order = terms.id_order
        self.doc_ids = terms.doc_ids[order]
        weights = bm25_weights(terms.counts[order], self.k1, self.b)
        self._by_term = weights.T.tocsr()  # terms x docs: a question sums its terms' rows
        self._terms = terms
        return self

    def _questions(self, texts: Sequence[str]) -> sp.csr_matrix:
        if self._terms is None:
            raise NotIndexedError("call index() before ranking")
        return self._terms.encode(texts, self.tokenizer, binary=True)

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        return (self._questions(texts) @ self._by_term).toarray()

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        docs, scores = [], []
        step = 256
        for start in range(0, len(texts), step):
            matrix = (self._questions(texts[start : start + step]) @ self._by_term).tocsr()
            d, s = top_k_sparse(matrix, min(depth, len(self.doc_ids)), MIN_SCORE)
            docs.append(d)
            scores.append(s)
        return _assemble(self, query_ids, docs, scores, depth)
