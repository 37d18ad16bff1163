"""BM25, Lucene flavour (docs/helpdesk-reference.md): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), each distinct query
term once.

Ranking is exact: its scores equal those of the sparse product of questions and weights to the last bit, and
ties are broken by document id ascending. How it avoids scoring what cannot matter depends on the corpus size
(see :mod:`retrievers.maxscore`): a small corpus is scored whole with frequent terms as dense rows, a large one
by MaxScore over the posting lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp

from metrics.run import Run
from retrievers import maxscore
from retrievers.base import (
    MIN_SCORE,
    Documents,
    NotIndexedError,
    ScoringRetriever,
    _assemble,
    _check_batch,
    array_bytes,
    counts_of,
)
from retrievers.maxscore import Postings
from retrievers.text import TermCounts, Tokenizer, encode

QUESTION_CHUNK = 4096  # questions encoded at a time: bounds the memory of a large batch


def bm25_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def bm25_weights(counts: sp.csr_matrix, k1: float, b: float) -> sp.csr_matrix:
    """Each (document, term) cell's BM25 contribution; lengths are token counts after stop words."""
    counts = counts.tocsr()
    return weigh(counts.T.tocsr(), length_norms(counts, k1, b), k1).T.tocsr()


def length_norms(counts: sp.csr_matrix, k1: float, b: float) -> np.ndarray:
    """``k1 * (1 - b + b * |d| / avgdl)`` per document of a (documents x terms) count matrix."""
    return norms_of(np.asarray(counts.sum(axis=1)).ravel(), k1, b)


def norms_of(lengths: np.ndarray, k1: float, b: float) -> np.ndarray:
    """:func:`length_norms` from the documents' lengths (token counts after stop words)."""
    avgdl = lengths.mean() if len(lengths) and lengths.mean() > 0 else 1.0
    return k1 * (1.0 - b + b * lengths / avgdl)


def weigh(by_term: sp.csr_matrix, norms: np.ndarray, k1: float, chunk: int = 2**20) -> sp.csr_matrix:
    """Turn a (terms x documents) count matrix into BM25 weights, in place, a chunk of postings at a time.

    ``idf * f * (k1 + 1) / (f + norm)`` evaluated left to right: bit for bit the formula's values, with
    temporaries bounded by ``chunk``.
    """
    if by_term.dtype != np.float64:
        by_term = by_term.astype(np.float64)
    by_term.sort_indices()
    idf = bm25_idf(np.diff(by_term.indptr), by_term.shape[1])
    for lo in range(0, by_term.nnz, chunk):
        hi = min(lo + chunk, by_term.nnz)
        first = int(np.searchsorted(by_term.indptr, lo, side="right")) - 1
        last = int(np.searchsorted(by_term.indptr, hi, side="left"))
        counts_in = np.minimum(by_term.indptr[first + 1 : last + 1], hi) - np.maximum(by_term.indptr[first:last], lo)
        f = by_term.data[lo:hi]
        weights = np.repeat(idf[first:last], counts_in)
        weights *= f
        weights *= k1 + 1.0
        denominator = norms[by_term.indices[lo:hi]]
        denominator += f
        weights /= denominator
        f[:] = weights
    return by_term


# Layouts of term counts with at most this many postings are kept with the counts (TermCounts.derived), for every
# later k1 and b: a second copy of the counts (12 bytes a posting: 100 MB at this size) as long as the counts live.
KEPT_LAYOUT_POSTINGS = 2**23
LAYOUT_KEY = "bm25_layout"  # its place in TermCounts.derived


@dataclass(frozen=True)
class Layout:
    """What a BM25 index takes from term counts whatever its k1 and b: the documents in id order (the tie rule's),
    the counts as (terms x documents) rows in the index's order, float, and each document's length.

    A corpus scored whole (:mod:`retrievers.maxscore`) gets its rows by decreasing document frequency: a question's
    frequent terms then lead its sum, their dense rows added first and every other posting in one ``np.add.at``; a
    larger corpus keeps the vocabulary's order (its MaxScore path is left as it was)."""

    doc_ids: np.ndarray
    by_term: sp.csr_matrix  # read-only when kept: each index then weighs its own copy of the values
    row_of: np.ndarray  # vocabulary position -> row of the index
    lengths: np.ndarray
    kept: bool = False

    def counts(self) -> sp.csr_matrix:
        """The counts to weigh in place: a kept layout's values copied (its row structure shared), a layout made
        for one index handed over whole (no second copy of a large corpus's postings)."""
        if not self.kept:
            return self.by_term
        rows = self.by_term
        own = sp.csr_matrix((rows.data.copy(), rows.indices, rows.indptr), shape=rows.shape, copy=False)
        own.has_sorted_indices = True
        return own


def layout_of(terms: TermCounts) -> Layout:
    """The :class:`Layout` of ``terms``: made once per counts object when it has at most
    :data:`KEPT_LAYOUT_POSTINGS` postings (a k1/b sweep's later points only weigh; 18 -> 9 ms a point on SciFact),
    every time otherwise."""
    known = terms.derived.get(LAYOUT_KEY)
    if known is not None:
        return known
    order = terms.id_order
    in_order = len(order) == 0 or bool(np.all(order[1:] > order[:-1]))
    matrix = terms.counts if in_order else terms.counts[order]
    by_term = matrix.T.tocsr()  # terms x docs: a question sums its terms' rows
    if by_term.shape[1] <= maxscore.WHOLE_DOCS:
        by_df = np.argsort(-np.diff(by_term.indptr), kind="stable")
        by_term = by_term[by_df]
    else:
        by_df = np.arange(by_term.shape[0])
    if by_term.dtype != np.float64:
        by_term = by_term.astype(np.float64)
    by_term.sort_indices()
    row_of = np.empty(len(by_df), dtype=np.int32)
    row_of[by_df] = np.arange(len(by_df), dtype=np.int32)
    kept = by_term.nnz <= KEPT_LAYOUT_POSTINGS
    layout = Layout(terms.doc_ids if in_order else terms.doc_ids[order], by_term, row_of,
                    np.asarray(matrix.sum(axis=1)).ravel(), kept)
    if kept:
        for array in (by_term.data, by_term.indices, by_term.indptr):
            array.flags.writeable = False  # shared by every index made from it: none may change it
        terms.derived[LAYOUT_KEY] = layout
    return layout


@dataclass
class BM25(ScoringRetriever):
    """Okapi BM25 with Lucene's idf and saturation; ``k1`` and ``b`` as in the literature."""

    k1: float = 1.2
    b: float = 0.75
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    name: str = "bm25"
    deterministic = True
    context_fields = ("tokenizer",)

    def __post_init__(self) -> None:
        if self.k1 < 0:
            raise ValueError(f"BM25 k1 must be >= 0, got {self.k1}")
        if not 0.0 <= self.b <= 1.0:
            raise ValueError(f"BM25 b must be within [0, 1], got {self.b}")
        self._vocab: pd.Index | None = None

    def index(self, docs: Documents, counts: TermCounts | None = None) -> BM25:
        """Index ``docs``; pass precomputed ``counts`` to skip tokenisation (sweeps share them, and the layout
        :func:`layout_of` takes from them)."""
        terms = counts if counts is not None else counts_of(docs, self.tokenizer)
        layout = layout_of(terms)
        self.doc_ids = layout.doc_ids
        self._vocab = terms.term_index  # only the vocabulary is kept: questions are encoded over it
        self._row_of = layout.row_of
        del terms  # counts made here are freed now (a cache's copy lives on in the cache)
        self._by_term = weigh(layout.counts(), norms_of(layout.lengths, self.k1, self.b), self.k1)
        self._postings = Postings.build(self._by_term)
        return self

    def index_bytes(self) -> int:
        return array_bytes(self._by_term, self._postings)

    def _questions(self, texts: Sequence[str]) -> sp.csr_matrix:
        """Questions as term indicators over the index's rows (see :meth:`index` for their order)."""
        if self._vocab is None:
            raise NotIndexedError("call index() before ranking")
        questions = encode(texts, self.tokenizer, self._vocab, binary=True)
        questions.indices = self._row_of[questions.indices]
        questions.has_sorted_indices = False
        questions.sort_indices()
        return questions

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        return (self._questions(texts) @ self._by_term).toarray()

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        docs, scores = [], []
        width = min(depth, len(self.doc_ids))
        for start in range(0, len(texts), QUESTION_CHUNK):
            questions = self._questions(texts[start : start + QUESTION_CHUNK])
            d, s = self._postings.top_k(questions, width, MIN_SCORE)
            docs.append(d)
            scores.append(s)
        return _assemble(self, query_ids, docs, scores, depth)
