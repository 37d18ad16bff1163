"""Paired randomisation (sign-flip permutation) test and Holm's adjustment across metrics."""

from __future__ import annotations

import numpy as np

_CHUNK_CELLS = 2**23


def randomisation_test(a: np.ndarray, b: np.ndarray, permutations: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value that mean(a - b) is 0, flipping each question's difference at random.

    ``(count of |permuted mean| >= |observed mean| + 1) / (permutations + 1)``: never exactly 0.
    """
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim != 1 or len(d) == 0:
        raise ValueError("paired scores must be two equal-length, non-empty vectors")
    return float(randomisation_p_values(d[:, None], permutations, seed)[0])


def randomisation_p_values(differences: np.ndarray, permutations: int = 10000, seed: int = 0) -> np.ndarray:
    """:func:`randomisation_test` for every column of ``differences`` (questions x pairs) at once: the same sign
    flips serve every column (one matrix product per chunk), so each p-value is the one the column alone gets."""
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] == 0:
        raise ValueError("differences must be a non-empty questions x pairs matrix")
    n, k = d.shape
    observed = np.abs(d.mean(axis=0))
    rng = np.random.default_rng(seed)
    hits = np.zeros(k, dtype=np.int64)
    step = max(1, _CHUNK_CELLS // n)
    tolerance = 1e-12 * np.maximum(1.0, observed)
    for start in range(0, permutations, step):
        size = min(step, permutations - start)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        means = np.abs(signs @ d) / n
        hits += (means >= observed - tolerance).sum(axis=0)
    p = (hits + 1) / (permutations + 1)
    p[np.all(d == 0, axis=0)] = 1.0
    return p


def holm(p_values: list[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (monotone, capped at 1), in the input order."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out
