"""Bootstrap over questions: intervals for a mean and for the paired difference of two systems.

The default (percentile, 5,000 resamples, seed 0, 95%) draws resamples exactly as SPEC.md describes, one
``rng.choice(d, size=n)`` (i.e. ``rng.integers(0, n, n)``) per resample, so its figures are reproducible
to the digit. One set of resample indices serves every metric column at once.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 5000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95
_CHUNK_CELLS = 2**20
_GATHER_CELLS = 2**16  # indices gathered at a time: 512 KB of values stay in the cache (a whole 8 MB chunk: slower)


@dataclass(frozen=True)
class Interval:
    """A mean with its confidence interval."""

    mean: float
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _questions_by_columns(values: np.ndarray) -> np.ndarray:
    """``values`` as a float matrix, one row per question (a vector is one column); refused when empty."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.shape[0] == 0:
        raise ValueError("cannot bootstrap an empty set of questions")
    return values


def resample_means(values: np.ndarray, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                   progress: Callable[[int], object] | None = None) -> np.ndarray:
    """Means of ``resamples`` bootstrap resamples of the rows of ``values`` (questions x columns).

    Returns (resamples x columns). Rows are resampled together, so paired columns stay paired. ``progress`` is
    told how many resamples each chunk completed (a progress bar's ``update``).

    A column's resample means depend on nothing but its values, ``resamples`` and ``seed``: the means of a column
    seen before (a sweep's points often agree on every question of a metric: a quarter of a BM25 k1/b sweep's
    columns) are remembered (:data:`REMEMBERED_COLUMNS`) rather than drawn again, the same to the bit.
    """
    values = _questions_by_columns(values)
    n = values.shape[0]
    first, copies, keys = _distinct_columns(values)
    out = np.empty((resamples, len(first)))
    todo = []
    for k, key in enumerate(keys):
        found = _REMEMBERED.get((key, resamples, seed))
        if found is None:
            todo.append(k)
        else:
            out[:, k] = found
            _REMEMBERED.move_to_end((key, resamples, seed))
    if not todo and progress is not None:
        progress(resamples)
    if todo:
        columns = [np.ascontiguousarray(values[:, first[k]]) for k in todo]
        rows = max(1, _GATHER_CELLS // n)  # a gathered part stays in the cache; each row's mean is the same
        for start, stop, block in _index_blocks(n, resamples, seed):
            for k, column in zip(todo, columns):
                for first_row in range(0, stop - start, rows):
                    last_row = min(first_row + rows, stop - start)
                    out[start + first_row:start + last_row, k] = np.take(column, block[first_row:last_row]).mean(1)
            if progress is not None:
                progress(stop - start)
        for k in todo:
            _REMEMBERED[(keys[k], resamples, seed)] = out[:, k].copy()
        while len(_REMEMBERED) > REMEMBERED_COLUMNS:
            _REMEMBERED.popitem(last=False)
    return out[:, copies]


REMEMBERED_COLUMNS = 256  # columns whose resample means are kept (5,000 resamples: 40 KB each), least recent out
_REMEMBERED: OrderedDict[tuple[bytes, int, int], np.ndarray] = OrderedDict()


KEPT_INDEX_BYTES = 2**25  # resample indices kept (5,000 resamples of up to 838 questions), least recent out
_INDICES: OrderedDict[tuple[int, int, int], list[tuple[int, int, np.ndarray]]] = OrderedDict()


def _index_blocks(n: int, resamples: int, seed: int) -> Iterable[tuple[int, int, np.ndarray]]:
    """The resamples of ``n`` questions as (first resample, end, question indices) blocks of at most
    :data:`_CHUNK_CELLS` indices: one ``rng.integers`` call per block draws the same stream as one ``rng.choice``
    per resample (checked in the tests).

    They depend only on ``n``, ``resamples`` and ``seed``: every job of a sweep on one question set, and its end's
    comparisons, resample the same questions, so the indices are kept (up to :data:`KEPT_INDEX_BYTES`) instead of
    drawn again: 1.5 million draws, 3-6 ms, for 300 questions. More are drawn a block at a time as they
    are used, never all at once (5,000 resamples of 10,000 questions would be 400 MB).

    The kept blocks stay writeable (nothing here changes them): numpy's ``take`` copies a read-only index array on
    every call, which made each gather three times slower."""
    key = (n, resamples, seed)
    found = _INDICES.get(key)
    if found is not None:
        _INDICES.move_to_end(key)
        return found
    if resamples * n * 8 > KEPT_INDEX_BYTES:
        return _drawn_blocks(n, resamples, seed)
    blocks = list(_drawn_blocks(n, resamples, seed))
    _INDICES[key] = blocks
    while sum(r * q * 8 for q, r, _ in _INDICES) > KEPT_INDEX_BYTES:
        _INDICES.popitem(last=False)
    return blocks


def _drawn_blocks(n: int, resamples: int, seed: int) -> Iterator[tuple[int, int, np.ndarray]]:
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        stop = min(start + step, resamples)
        block = rng.integers(0, n, size=(stop - start, n))
        yield start, stop, block


def _distinct_columns(values: np.ndarray) -> tuple[list[int], np.ndarray, list[bytes]]:
    """The first of each set of bit-identical columns, for every column the place of its set among them, and each
    set's values as bytes.

    Metrics often agree question by question (hit rate, precision and nDCG at 1 with binary judgments; judged@k and
    precision@k where only relevant documents are judged): a column equal to an earlier one has the same resample
    means, to the bit, so they are computed once."""
    seen: dict[bytes, int] = {}
    copies = np.array([seen.setdefault(values[:, j].tobytes(), len(seen)) for j in range(values.shape[1])],
                      dtype=np.int64)
    first = [int(np.flatnonzero(copies == k)[0]) for k in range(len(seen))]
    return first, copies, list(seen)


def resample_means_by_counts(values: np.ndarray, resamples: int = DEFAULT_RESAMPLES,
                             seed: int = DEFAULT_SEED) -> np.ndarray:
    """:func:`resample_means` for many columns (every pair of a sweep's systems): the same resamples, each turned
    into how often it drew every question, and all column means as one matrix product (counts x values).

    Equal to :func:`resample_means` up to float rounding (the sums run in another order), and an order of magnitude
    faster for hundreds of columns; :func:`resample_means` stays the SPEC-exact one.
    """
    values = _questions_by_columns(values)
    n = values.shape[0]
    out = np.empty((resamples, values.shape[1]))
    for start, stop, block in _index_blocks(n, resamples, seed):  # the resamples resample_means draws
        rows = np.arange(stop - start)[:, None] * n
        counts = np.bincount((block + rows).ravel(), minlength=(stop - start) * n).reshape(stop - start, n)
        out[start:stop] = counts @ values / n
    return out


def percentile_bounds(means: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """The sorted resample means at ranks B*a/2 and B*(1-a/2) (SPEC.md: indices 125 and 4874 of 5,000).

    Each column is partitioned around the two ranks rather than sorted: the same two values (a value's place in
    sorted order does not depend on how the rest is ordered), in half the time or less (a sweep's end bounds about
    a thousand columns)."""
    b = means.shape[0]
    alpha = 1.0 - confidence
    lo = min(int(np.floor(b * alpha / 2 + 1e-9)), b - 1)
    hi = max(min(int(np.ceil(b * (1 - alpha / 2) - 1e-9)) - 1, b - 1), 0)
    if b == 0:
        ordered = np.sort(means, axis=0)  # nothing to bound: the index error sorting gives
        return ordered[lo], ordered[hi]
    ordered = np.partition(means, sorted({lo, hi}), axis=0)
    return ordered[lo], ordered[hi]


def exact_mean(values: np.ndarray) -> np.ndarray:
    """Each column's mean, its sum correctly rounded (``math.fsum``): the same whatever the order of the questions,
    so a mean logged by a job equals the mean of the same per-question values computed anywhere else, to the bit."""
    columns = np.asarray(values, dtype=np.float64)
    columns = columns[:, None] if columns.ndim == 1 else columns
    sums = np.array([math.fsum(column) for column in columns.T.tolist()])
    return sums / columns.shape[0] if columns.shape[0] else np.full(columns.shape[1], np.nan)


def bootstrap_ci(
    values: np.ndarray,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    method: str = "percentile",
    progress: Callable[[int], object] | None = None,
) -> list[Interval]:
    """A confidence interval for each column's mean (a 1-d input gives one interval); ``progress`` as in
    :func:`resample_means` (percentile method only)."""
    values = np.asarray(values, dtype=np.float64)
    columns = values[:, None] if values.ndim == 1 else values
    if columns.shape[0] == 0:
        raise ValueError("cannot bootstrap an empty set of questions")
    mean = exact_mean(columns)
    if method == "percentile":
        low, high = percentile_bounds(resample_means(columns, resamples, seed, progress), confidence)
    elif method == "bca":
        low, high = _bca(columns, resamples, seed, confidence)
    else:
        raise ValueError(f"unknown bootstrap method {method!r}: use 'percentile' or 'bca'")
    return [Interval(float(m), float(lo), float(hi)) for m, lo, hi in zip(mean, low, high)]


def paired_difference(
    a: np.ndarray,
    b: np.ndarray,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    method: str = "percentile",
) -> list[Interval]:
    """Interval for mean(a - b), questions resampled as pairs; a and b are aligned by question."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores must align question by question: {a.shape} vs {b.shape}")
    return bootstrap_ci(a - b, resamples, seed, confidence, method)


def _bca(columns: np.ndarray, resamples: int, seed: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    import scipy.stats  # 1-2 s to import: only the BCa method needs it

    lows, highs = [], []
    for column in columns.T:
        if np.all(column == column[0]):  # a constant column has no spread; BCa would divide by zero
            lows.append(column[0])
            highs.append(column[0])
            continue
        res = scipy.stats.bootstrap(
            (column,), np.mean, n_resamples=resamples, confidence_level=confidence, method="BCa",
            random_state=np.random.default_rng(seed), vectorized=True,
        )
        lows.append(res.confidence_interval.low)
        highs.append(res.confidence_interval.high)
    return np.array(lows), np.array(highs)
