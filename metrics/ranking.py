"""Per-question ranking metrics: plain functions over the ranks of the judged documents a run retrieved.

A question's ranking is mostly unjudged, so the metrics read only the cells that matter: ``Hits`` lists them
row-major (question, then rank), which is the order trec_eval adds them in, so sums match it to the last bit.
``n_rel`` is the number of relevant judgments per question. A question without relevant judgments scores 0
everywhere (callers leave such questions out of means).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Hits:
    """Cells of a (questions x ranks) matrix: question ``rows[i]`` at rank ``cols[i] + 1``, with ``values[i]``.

    Sorted by row then column; ``n`` is the number of questions (rows without a cell score 0).
    """

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    n: int

    def where(self, mask: np.ndarray) -> Hits:
        return Hits(self.rows[mask], self.cols[mask], self.values[mask], self.n)

    def top(self, k: int | None) -> Hits:
        """Only the cells within the first ``k`` ranks (all of them when ``k`` is None)."""
        return self if k is None else self.where(self.cols < k)

    def count(self, k: int | None = None) -> np.ndarray:
        """Cells per question within the top ``k``."""
        return np.bincount(self.top(k).rows, minlength=self.n)

    def total(self, weights: np.ndarray) -> np.ndarray:
        """Per-question sum of ``weights`` (one per cell), added left to right as trec_eval does."""
        return np.bincount(self.rows, weights=weights, minlength=self.n).astype(np.float64, copy=False)

    def firsts(self) -> np.ndarray:
        """Index of each question's first cell (for the questions that have one)."""
        if len(self.rows) == 0:
            return np.zeros(0, dtype=np.intp)
        return np.flatnonzero(np.concatenate(([True], self.rows[1:] != self.rows[:-1])))


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(np.broadcast_shapes(num.shape, den.shape)), where=den > 0)


def hit_rate(rel: Hits, k: int) -> np.ndarray:
    """1 if any relevant document is in the top k, else 0."""
    return (rel.count(k) > 0).astype(np.float64)


def recall(rel: Hits, n_rel: np.ndarray, k: int) -> np.ndarray:
    """Relevant documents in the top k over all relevant documents of the question."""
    return _safe_div(rel.count(k), n_rel)


def precision(rel: Hits, k: int) -> np.ndarray:
    """Relevant documents in the top k over k (trec_eval's P_k: a short ranking is not rewarded)."""
    return rel.count(k) / float(k)


def first_relevant_rank(rel: Hits) -> np.ndarray:
    """Rank (from 1) of the first relevant document, 0 when none is retrieved."""
    first = np.zeros(rel.n, dtype=np.int64)
    starts = rel.firsts()
    first[rel.rows[starts]] = rel.cols[starts] + 1
    return first


def reciprocal_rank(rel: Hits) -> np.ndarray:
    """1 / rank of the first relevant document, 0 if none is retrieved; its mean is the MRR."""
    first = first_relevant_rank(rel)
    return np.divide(1.0, first, out=np.zeros(rel.n), where=first > 0)


def _ordinals(rel: Hits) -> np.ndarray:
    """For each relevant cell, how many relevant documents its question has at or above its rank."""
    starts = rel.firsts()
    row_start = np.zeros(rel.n, dtype=np.int64)
    row_start[rel.rows[starts]] = starts
    return np.arange(1, len(rel.rows) + 1) - row_start[rel.rows]


def average_precision(rel: Hits, n_rel: np.ndarray) -> np.ndarray:
    """Mean of the precision at each relevant document's rank, over all relevant documents (MAP's term)."""
    precision_at = _ordinals(rel) / (rel.cols + 1)
    return _safe_div(rel.total(precision_at), n_rel)


def r_precision(rel: Hits, n_rel: np.ndarray) -> np.ndarray:
    """Precision at rank R, R being the question's number of relevant documents."""
    within = rel.where(rel.cols < n_rel[rel.rows])
    return _safe_div(within.count(), n_rel)


def judged_share(judged: Hits, lengths: np.ndarray, k: int) -> np.ndarray:
    """Share of the top k that is judged, any grade (ir_measures' Judged@k).

    ``judged`` holds the retrieved documents with a judgment, ``lengths`` how many each question retrieved. As in
    ir_measures, a question that retrieved fewer than k documents is divided by what it retrieved, not by k; one that
    retrieved nothing scores 0 (ir_measures has no value for it).
    """
    return _safe_div(judged.count(k), np.minimum(lengths, k))


def bpref(judged: Hits, level: int, n_rel: np.ndarray, n_nonrel: np.ndarray) -> np.ndarray:
    """trec_eval's bpref: for each relevant document retrieved, one minus the share of judged non-relevant documents
    ranked above it (at most R of them counted, over min(R, N)), summed and divided by R.

    ``judged`` holds the retrieved documents with a judgment, valued with their grade (``level`` and above is
    relevant); unjudged documents are ignored. ``n_rel`` is R, ``n_nonrel`` N: each question's relevant and
    non-relevant judgments, retrieved or not. Terms are added rank by rank, as trec_eval adds them.
    """
    nonrel = judged.values < level
    seen = np.cumsum(nonrel) - nonrel  # non-relevant cells before each cell, counted from the first question
    starts = judged.firsts()
    base = np.zeros(judged.n, dtype=np.int64)
    base[judged.rows[starts]] = seen[starts]
    above = (seen - base[judged.rows])[~nonrel]
    rows = judged.rows[~nonrel]
    r, n = n_rel[rows], n_nonrel[rows]
    share = np.divide(np.minimum(above, r), np.minimum(n, r), out=np.zeros(len(rows)), where=above > 0)
    relevant = Hits(rows, judged.cols[~nonrel], judged.values[~nonrel], judged.n)
    return _safe_div(relevant.total(1.0 - share), n_rel)


def gains(grades: np.ndarray, kind: str = "linear") -> np.ndarray:
    """Gain of each grade: the grade itself (linear) or 2^grade - 1 (exponential); non-positive grades gain 0."""
    g = np.maximum(grades, 0).astype(np.float64)
    if kind == "linear":
        return g
    if kind == "exponential":
        return np.exp2(g) - 1.0
    raise ValueError(f"unknown gain {kind!r}: use 'linear' or 'exponential'")


@lru_cache(maxsize=16)
def log2_positions(n: int) -> np.ndarray:
    """log2(rank + 1) for ranks 1..n, from C's log2 (numpy's vectorised log2 differs in the last bit for some
    ranks, e.g. 1620), so DCG is bit-for-bit trec_eval's."""
    values = np.array([math.log2(rank + 1) for rank in range(1, n + 1)])
    values.flags.writeable = False
    return values


def dcg(gain: Hits, k: int | None) -> np.ndarray:
    """Sum of gain / log2(rank + 1) over the top k (all ranks when k is None), added rank by rank."""
    g = gain.top(k)
    depth = int(g.cols.max()) + 1 if len(g.cols) else 0
    return g.total(g.values / log2_positions(depth)[g.cols])


def ndcg(gain: Hits, ideal_gain: Hits, k: int | None) -> np.ndarray:
    """DCG@k of the ranking over DCG@k of the ideal ordering of *all* judged documents of the question."""
    return _safe_div(dcg(gain, k), dcg(ideal_gain, k))
