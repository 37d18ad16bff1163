"""Exact top-k with rankscope's tie rule: score descending, ties by document position ascending.

Retrievers keep their document axis sorted by id, so "position ascending" is "id ascending".
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from metrics.run import PAD


def top_k_dense(scores: np.ndarray, k: int, threshold: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` columns of each row of a dense score matrix, keeping only scores above ``threshold``.

    Returns ``(docs, scores)`` of shape (rows, k), padded with ``PAD`` / NaN.
    """
    n, m = scores.shape
    k = min(k, m)
    out_docs = np.full((n, k), PAD, dtype=np.int64)
    out_scores = np.full((n, k), np.nan)
    if k == 0 or n == 0:
        return out_docs, out_scores
    if k < m:
        kth = -np.partition(-scores, k - 1, axis=1)[:, k - 1]
        keep = scores >= kth[:, None]
    else:
        keep = np.ones_like(scores, dtype=bool)
    if threshold is not None:
        keep &= scores > threshold
    rows, cols = np.nonzero(keep)
    vals = scores[rows, cols]
    order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    starts = np.searchsorted(rows, np.arange(n))
    pos = np.arange(len(rows)) - starts[rows]
    sel = pos < k
    out_docs[rows[sel], pos[sel]] = cols[sel]
    out_scores[rows[sel], pos[sel]] = vals[sel]
    return out_docs, out_scores


def top_k_sparse(scores: sp.csr_matrix, k: int, threshold: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` of each row of a sparse score matrix (absent entries are never results).

    One sort of the stored entries by (row, score descending, column), vectorised over all rows.
    """
    scores = scores.tocsr()
    n = scores.shape[0]
    out_docs = np.full((n, k), PAD, dtype=np.int64)
    out_scores = np.full((n, k), np.nan)
    rows = np.repeat(np.arange(n), np.diff(scores.indptr))
    cols, vals = scores.indices, scores.data
    if threshold is not None:
        keep = vals > threshold
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
    if k == 0 or len(vals) == 0:
        return out_docs, out_scores
    order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    pos = np.arange(len(rows)) - np.searchsorted(rows, rows)
    sel = pos < k
    out_docs[rows[sel], pos[sel]] = cols[sel]
    out_scores[rows[sel], pos[sel]] = vals[sel]
    return out_docs, out_scores
