"""Per-question ranking metrics: plain functions over the arrays of a Judged join.

``rel`` is a boolean (questions x ranks) matrix, True where the document at that rank is relevant; ``n_rel``
the number of relevant judgments per question. A question without relevant judgments scores 0 everywhere
(callers leave such questions out of means).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(np.broadcast_shapes(num.shape, den.shape)), where=den > 0)


def hit_rate(rel: np.ndarray, k: int) -> np.ndarray:
    """1 if any relevant document is in the top k, else 0."""
    return rel[:, :k].any(axis=1).astype(np.float64)


def recall(rel: np.ndarray, n_rel: np.ndarray, k: int) -> np.ndarray:
    """Relevant documents in the top k over all relevant documents of the question."""
    return _safe_div(rel[:, :k].sum(axis=1), n_rel)


def precision(rel: np.ndarray, k: int) -> np.ndarray:
    """Relevant documents in the top k over k (trec_eval's P_k: a short ranking is not rewarded)."""
    return rel[:, :k].sum(axis=1) / float(k)


def reciprocal_rank(rel: np.ndarray) -> np.ndarray:
    """1 / rank of the first relevant document, 0 if none is retrieved; its mean is the MRR."""
    if rel.shape[1] == 0:
        return np.zeros(rel.shape[0])
    first = rel.argmax(axis=1)
    return np.where(rel.any(axis=1), 1.0 / (first + 1.0), 0.0)


def first_relevant_rank(rel: np.ndarray) -> np.ndarray:
    """Rank (from 1) of the first relevant document, 0 when none is retrieved."""
    if rel.shape[1] == 0:
        return np.zeros(rel.shape[0], dtype=np.int64)
    return np.where(rel.any(axis=1), rel.argmax(axis=1) + 1, 0)


def _running_total(terms: np.ndarray) -> np.ndarray:
    """Row sums added left to right (trec_eval's order, so results match it to the last bit, not just 1e-16)."""
    if terms.shape[1] == 0:
        return np.zeros(terms.shape[0])
    return np.cumsum(terms, axis=1)[:, -1]


def average_precision(rel: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    """Mean of the precision at each relevant document's rank, over all relevant documents (MAP's term)."""
    ranks = np.arange(1, rel.shape[1] + 1)
    prec = np.cumsum(rel, axis=1) / ranks
    return _safe_div(_running_total(prec * rel), n_rel)


def r_precision(rel: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    """Precision at rank R, R being the question's number of relevant documents."""
    cum = np.concatenate([np.zeros((rel.shape[0], 1)), np.cumsum(rel, axis=1)], axis=1)
    r = np.minimum(n_rel, rel.shape[1])
    return _safe_div(cum[np.arange(rel.shape[0]), r], n_rel)


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


def dcg(gain: np.ndarray, k: int | None) -> np.ndarray:
    """Sum of gain / log2(rank + 1) over the top k (all ranks when k is None), added rank by rank."""
    g = gain if k is None else gain[:, :k]
    return _running_total(g / log2_positions(g.shape[1]))


def ndcg(gain: np.ndarray, ideal_gain: np.ndarray, k: int | None) -> np.ndarray:
    """DCG@k of the ranking over DCG@k of the ideal ordering of *all* judged documents of the question."""
    return _safe_div(dcg(gain, k), dcg(ideal_gain, k))
