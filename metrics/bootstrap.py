"""Bootstrap over questions: intervals for a mean and for the paired difference of two systems.

The default (percentile, 5,000 resamples, seed 0, 95%) draws resamples exactly as docs/helpdesk-reference.md describes,
one ``rng.choice(d, size=n)`` (i.e. ``rng.integers(0, n, n)``) per resample, so its figures are reproducible to the
digit. One set of resample indices serves every metric column at once.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_RESAMPLES = 5000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95
_BATCH_CELLS = 2**20
_GATHER_CELLS = 2**16  # indices gathered at a time: 512 KB of values stay in the cache (a whole 8 MB chunk: slower)


@dataclass(frozen=True)
class Interval:
    """A mean with its confidence interval: what it is the mean of (``metric``, when known), at which confidence
    ``level`` and by which bootstrap ``method``."""

    mean: float
    low: float
    high: float
    metric: str | None = None
    level: float = DEFAULT_CONFIDENCE
    method: str = "percentile"

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def __str__(self) -> str:
        name = f"{self.metric} " if self.metric else ""
        return f"{name}{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}] ({self.level:.0%} {self.method})"


class Intervals(dict[str, Interval]):
    """Intervals keyed by metric, in the order the metrics were given; printed as a table."""

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([(i.mean, i.low, i.high, i.level, i.method) for i in self.values()],
                            index=pd.Index(list(self), name="metric"),
                            columns=["mean", "low", "high", "level", "method"])

    def __str__(self) -> str:
        width = max((len(name) for name in self), default=6)
        lines = [f"{'metric':<{width}}   mean    low   high  (level, method)"]
        lines += [f"{name:<{width}}  {i.mean:5.3f}  {i.low:5.3f}  {i.high:5.3f}  ({i.level:.0%}, {i.method})"
                  for name, i in self.items()]
        return "\n".join(lines)

    __repr__ = __str__


@dataclass(frozen=True)
class Difference:
    """The paired difference ``a - b`` of two systems on the same questions, naming both sides. It also reads as
    the one-interval list :func:`paired_difference` used to return (``[interval] = ...``, ``...[0]``)."""

    interval: Interval
    a: str = "a"
    b: str = "b"
    questions: int = 0

    @property
    def mean(self) -> float:
        return self.interval.mean

    @property
    def low(self) -> float:
        return self.interval.low

    @property
    def high(self) -> float:
        return self.interval.high

    def excludes_zero(self) -> bool:
        return self.interval.excludes_zero()

    def __iter__(self) -> Iterator[Interval]:
        return iter((self.interval,))

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> Interval:
        return (self.interval,)[index]

    def __str__(self) -> str:
        i = self.interval
        metric = f"{i.metric}: " if i.metric else ""
        return (f"{metric}{self.a} - {self.b} = {i.mean:+.3f} [{i.low:+.3f}, {i.high:+.3f}] "
                f"({i.level:.0%} {i.method}, {self.questions} questions paired)")


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
    :data:`_BATCH_CELLS` indices: one ``rng.integers`` call per block draws the same stream as one ``rng.choice``
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
    step = max(1, _BATCH_CELLS // n)
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
    faster for hundreds of columns; :func:`resample_means` stays the reference-exact one.
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
    """The sorted resample means at ranks B*a/2 and B*(1-a/2) (docs/helpdesk-reference.md: indices 125 and 4874 of
    5,000).

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
    values: Any,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    method: str = "percentile",
    progress: Callable[[int], object] | None = None,
) -> Any:
    """A confidence interval for each column's mean; ``progress`` as in :func:`resample_means` (percentile method
    only). A DataFrame (or a named Series) gives :class:`Intervals` keyed by its columns; an array gives a list in
    column order (a 1-d array: one interval), each interval carrying its level and method."""
    labels = _labels(values)
    array = np.asarray(values, dtype=np.float64)
    columns = array[:, None] if array.ndim == 1 else array
    if columns.shape[0] == 0:
        raise ValueError("cannot bootstrap an empty set of questions")
    mean = exact_mean(columns)
    if method == "percentile":
        low, high = percentile_bounds(resample_means(columns, resamples, seed, progress), confidence)
    elif method == "bca":
        low, high = _bca(columns, resamples, seed, confidence)
    else:
        raise ValueError(f"unknown bootstrap method {method!r}: use 'percentile' or 'bca'")
    names = labels or [None] * len(mean)
    found = [Interval(float(m), float(lo), float(hi), name, confidence, method)
             for m, lo, hi, name in zip(mean, low, high, names)]
    return Intervals(zip(labels, found)) if labels else found


def _labels(values: Any) -> list[str] | None:
    """The metric names a pandas input carries: a DataFrame's columns, a named Series' name."""
    columns = getattr(values, "columns", None)
    if columns is not None:
        return [str(c) for c in columns]
    name = getattr(values, "name", None)
    return [str(name)] if name is not None and getattr(values, "ndim", 0) == 1 else None


def paired_difference(
    a: Any,
    b: Any,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    method: str = "percentile",
    names: tuple[str, str] = ("a", "b"),
) -> Difference:
    """The interval for mean(a - b), questions resampled as pairs; a and b are aligned by question (two Series are
    aligned by their index first). ``names`` says which systems a and b are; the metric is a Series' name."""
    metric = getattr(a, "name", None) if getattr(a, "ndim", 0) == 1 else None
    if hasattr(a, "index") and hasattr(b, "index") and getattr(a, "ndim", 0) == 1:
        if set(a.index) != set(b.index):
            raise ValueError(f"paired scores must cover the same questions: {len(a)} vs {len(b)}")
        b = b.reindex(a.index)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores must align question by question: {a.shape} vs {b.shape}")
    [found] = bootstrap_ci(a - b, resamples, seed, confidence, method)
    labelled = Interval(found.mean, found.low, found.high, None if metric is None else str(metric), confidence,
                        method)
    return Difference(labelled, names[0], names[1], len(a))


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
