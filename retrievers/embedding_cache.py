"""Document embeddings cached on disk, so a sweep encodes a corpus once per model.

One ``.npz`` file per (corpus digest, model fingerprint, settings): plain numpy arrays, read with
``allow_pickle=False`` (nothing in the cache can run code). Each file carries its key and a sha256 of the
matrix; a file that is unreadable, truncated, for another key, of the wrong shape or whose checksum does not
match is counted as corrupt, deleted and rebuilt. Writes go to a temporary file first and are renamed into
place, so parallel sweep jobs never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

FORMAT = 1
EMBEDDINGS = "embeddings"  # the folder inside rankscope's cache folder (retrievers.cache.cache_root)


def matrix_checksum(matrix: np.ndarray) -> str:
    h = hashlib.sha256(f"{matrix.dtype.str}{matrix.shape}".encode())
    h.update(np.ascontiguousarray(matrix).tobytes())
    return h.hexdigest()


class EmbeddingCache:
    """A folder of ``<key>.npz`` files; :meth:`get_or_compute` is the whole interface most callers need.

    ``stats`` counts, like the term-count cache's: ``disk_hits`` (served from a file), ``encoded`` (computed),
    ``stored`` (files written), ``corrupt`` (files found damaged, removed and rebuilt).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.stats: Counter[str] = Counter()

    @staticmethod
    def key(corpus: str, fingerprint: str, settings: Mapping[str, object]) -> str:
        blob = json.dumps({"format": FORMAT, "corpus": corpus, "model": fingerprint, "settings": dict(settings)},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def path(self, key: str) -> Path:
        return self.root / f"{key}.npz"

    def get_or_compute(self, key: str, rows: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The cached matrix for ``key`` (``rows`` rows), or ``compute()`` saved under it."""
        cached = self.load(key, rows)
        if cached is not None:
            self.stats["disk_hits"] += 1
            return cached
        self.stats["encoded"] += 1
        matrix = np.ascontiguousarray(compute(), dtype=np.float32)
        try:
            self.save(key, matrix)
            self.stats["stored"] += 1
        except OSError as exc:  # a read-only or full disk costs the next run time, not this run its result
            warnings.warn(f"embedding cache not written to {self.root}: {exc}", RuntimeWarning, stacklevel=2)
        return matrix

    def load(self, key: str, rows: int) -> np.ndarray | None:
        """The stored matrix, or None when absent; a corrupt file is counted and removed."""
        path = self.path(key)
        if not path.is_file():
            return None
        matrix = _read_valid(path, key, rows)
        if matrix is None:
            self.stats["corrupt"] += 1
            path.unlink(missing_ok=True)
        return matrix

    def save(self, key: str, matrix: np.ndarray) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.path(key)
        handle, temp = tempfile.mkstemp(prefix=f".{key}.", suffix=".npz", dir=self.root)
        try:
            with os.fdopen(handle, "wb") as out:
                np.savez(out, embeddings=matrix, key=np.array(key), checksum=np.array(matrix_checksum(matrix)))
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return target


def _read_valid(path: Path, key: str, rows: int) -> np.ndarray | None:
    try:
        with np.load(path, allow_pickle=False) as stored:
            matrix = stored["embeddings"]
            stored_key = str(stored["key"])
            checksum = str(stored["checksum"])
    except Exception:  # a damaged zip or npy header can fail in many ways; all mean "rebuild"
        return None
    if stored_key != key or matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != rows:
        return None
    if checksum != matrix_checksum(matrix) or not np.isfinite(matrix).all():
        return None
    return matrix
