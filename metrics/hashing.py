"""Hash lookups over ids (codes, positions, repeats) that do not make anyone pay for pandas' import.

When pandas is already imported (the pipeline, ``metrics.evaluate`` and every caller that builds DataFrames have
it), its C hash tables are used; otherwise plain dicts, and numpy sorting for integers. So ``python -m metrics``
never imports pandas (about half a second), and its dict lookups cost what its line-by-line reading of the files
already costs. Both ways give the same answers (checked in tests/metrics/test_hashing.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType

import numpy as np


def loaded_pandas() -> ModuleType | None:
    """pandas if this process has already imported it, else None (never imports it)."""
    return sys.modules.get("pandas")


def factorize(values: Sequence[object] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)``: each value's position among the distinct values, in first-seen order (int64), and
    those distinct values (object array)."""
    values = np.asarray(values, dtype=object)
    pd = loaded_pandas()
    if pd is not None:
        codes, uniques = pd.factorize(values)
        return codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=object)
    seen: dict[object, int] = {}
    add = seen.setdefault
    codes = np.fromiter((add(v, len(seen)) for v in values.tolist()), dtype=np.int64, count=len(values))
    uniques = np.empty(len(seen), dtype=object)
    uniques[:] = list(seen)
    return codes, uniques


def sorted_codes(values: Sequence[object] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`factorize`, the distinct values sorted ascending and the codes following them (a code's order is its
    value's order)."""
    codes, uniques = factorize(values)
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], uniques[order]


class Positions:
    """Position of each of some values among ``keys`` (distinct), -1 where absent; the table is built once.

    Ids (object arrays) go through a hash table, kept of object dtype under pandas too (its string dtype would
    convert on every lookup, three times slower on a 200,000-document run); integers without pandas go through a
    sorted copy of the keys.
    """

    def __init__(self, keys: np.ndarray) -> None:
        keys = np.asarray(keys)
        self._size = len(keys)
        self._integers = keys.dtype.kind in "iu"
        pd = loaded_pandas()
        if pd is not None:
            self._index = pd.Index(keys) if self._integers else pd.Index(keys, dtype=object)
        elif self._integers:
            self._order = np.argsort(keys, kind="stable")
            self._sorted = keys[self._order]
        else:
            self._table = dict(zip(keys.tolist(), range(len(keys))))

    def __call__(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values) if self._integers else np.asarray(values, dtype=object)
        if self._size == 0 or len(values) == 0:
            return np.full(len(values), -1, dtype=np.int64)
        if hasattr(self, "_index"):
            pd = sys.modules["pandas"]
            wanted = values if self._integers else pd.Index(values, dtype=object)
            return self._index.get_indexer(wanted).astype(np.int64, copy=False)
        if self._integers:
            at = np.minimum(np.searchsorted(self._sorted, values), self._size - 1)
            return np.where(self._sorted[at] == values, self._order[at], -1).astype(np.int64, copy=False)
        get = self._table.get
        return np.fromiter((get(v, -1) for v in values.tolist()), dtype=np.int64, count=len(values))


def positions(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Position of each of ``values`` in ``keys`` (distinct), -1 where absent."""
    return Positions(keys)(values)


def first_repeat(values: np.ndarray) -> tuple[int, int] | None:
    """``(i, j)``: ``i`` the first index whose integer value appeared before, ``j`` where it first appeared; None
    when the values are distinct."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")  # equal values keep their order: the first of a run came first
    ordered = values[order]
    again = ordered[1:] == ordered[:-1]
    if not again.any():
        return None
    i = int(order[1:][again].min())
    return i, int(np.flatnonzero(values == values[i])[0])
