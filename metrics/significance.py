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
    observed = abs(d.mean())
    if np.all(d == 0):
        return 1.0
    rng = np.random.default_rng(seed)
    n = len(d)
    hits = 0
    step = max(1, _CHUNK_CELLS // n)
    tolerance = 1e-12 * max(1.0, observed)
    for start in range(0, permutations, step):
        size = min(step, permutations - start)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        means = np.abs(signs @ d) / n
        hits += int((means >= observed - tolerance).sum())
    return (hits + 1) / (permutations + 1)


def holm(p_values: list[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (monotone, capped at 1), in the input order."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out
