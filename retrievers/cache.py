"""Reuse of parameter-independent work across a sweep: tokenised term counts, keyed by digests.

In one process an in-memory dict; across processes (joblib, a cluster) ``.npz`` files in a cache folder, keyed
by corpus digest + tokenizer settings + code version, written atomically, checksummed (a corrupt or tampered
file is rebuilt, never trusted), loaded without pickle, and evicted oldest-first beyond a size limit.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
import warnings
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the module itself stays light: python -m retrievers.cache --help imports no pandas or scipy
    from retrievers.text import TermCounts, Tokenizer

FORMAT_VERSION = "1"
DEFAULT_LIMIT_BYTES = 4 * 2**30
MEMORY_ENTRIES = 2  # term-count matrices a process keeps in memory (a 1M-document corpus: ~1 GB each)


SIZE_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
              "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}


def parse_size(text: str | int) -> int:
    """``4GiB``, ``500 MB``, ``1.5G`` or a number of bytes (binary units: 1 GB = 2**30 bytes)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in SIZE_UNITS:
        raise ValueError(f"{text!r} is not a size (write e.g. 4GiB, 500MiB or a number of bytes)")
    return int(float(match.group(1)) * SIZE_UNITS[unit])


def cache_root(configured: str | Path | None = None, base: Path | None = None) -> Path:
    """rankscope's cache folder, by the one rule: ``configured`` (``cache.dir``; relative to ``base``, the launch
    folder), else ``$RANKSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/rankscope``, else ``~/.cache/rankscope``."""
    if configured:
        found = Path(configured).expanduser()
        return found if found.is_absolute() else ((base or Path.cwd()) / found).resolve()
    if os.environ.get("RANKSCOPE_CACHE_DIR"):
        return Path(os.environ["RANKSCOPE_CACHE_DIR"])
    home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(home) / "rankscope"


@functools.lru_cache(maxsize=1)
def tokenizer_code_digest() -> str:
    """A digest of the code that turns texts into term counts (``retrievers/text.py``): editing it, in a checkout
    or by upgrading rankscope, invalidates every cached entry."""
    import retrievers.text

    return hashlib.sha256(Path(retrievers.text.__file__).read_bytes()).hexdigest()[:12]


@dataclass
class TermCountCache:
    """Term counts by (corpus digest, tokenizer); ``stats`` counts tokenisations and hits, for tests and logs."""

    directory: Path | None = None
    limit_bytes: int = DEFAULT_LIMIT_BYTES
    memory_entries: int = MEMORY_ENTRIES
    stats: Counter = field(default_factory=Counter)
    _memory: dict[str, TermCounts] = field(default_factory=dict)

    def key(self, corpus_digest: str, tokenizer: Tokenizer) -> str:
        text = f"{FORMAT_VERSION}\0{tokenizer_code_digest()}\0{corpus_digest}\0{tokenizer.digest}"
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def get(self, doc_ids: Sequence[str], texts: Sequence[str], tokenizer: Tokenizer, corpus_digest: str) -> TermCounts:
        key = self.key(corpus_digest, tokenizer)
        if key in self._memory:
            self.stats["memory_hits"] += 1
            self._memory[key] = self._memory.pop(key)  # most recently used last
            return self._memory[key]
        counts = self._load(key) if self.directory is not None else None
        if counts is not None:
            self.stats["disk_hits"] += 1
        else:
            from retrievers.text import term_counts

            counts = term_counts(doc_ids, texts, tokenizer)
            self.stats["tokenised"] += 1
            if self.directory is not None:
                try:
                    self._store(key, counts)
                except OSError as exc:  # a read-only or full disk costs the next job time, not this one its result
                    warnings.warn(f"term-count cache not written to {self.directory}: {exc}", RuntimeWarning,
                                  stacklevel=2)
        self._memory[key] = counts
        while len(self._memory) > max(1, self.memory_entries):
            del self._memory[next(iter(self._memory))]
        return counts

    def path(self, key: str) -> Path:
        assert self.directory is not None
        return Path(self.directory) / f"terms-{key}.npz"

    def _store(self, key: str, counts: TermCounts) -> None:
        directory = Path(self.directory)
        directory.mkdir(parents=True, exist_ok=True)
        arrays = _to_arrays(counts)
        arrays["checksum"] = np.array(_checksum(arrays))
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, **arrays)
            os.replace(temporary, self.path(key))  # atomic: a parallel reader never sees half a file
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        self.stats["stored"] += 1
        self._evict()

    def _load(self, key: str) -> TermCounts | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            stored = str(arrays.pop("checksum"))
            if stored != _checksum(arrays):
                raise ValueError("checksum mismatch")
            counts = _from_arrays(arrays)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
            self.stats["corrupt"] += 1
            path.unlink(missing_ok=True)
            return None
        os.utime(path)  # eviction is least-recently-used
        return counts

    def _evict(self) -> None:
        files = sorted(Path(self.directory).glob("terms-*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
        total = 0
        for path in files:
            total += path.stat().st_size
            if total > self.limit_bytes:
                path.unlink(missing_ok=True)
                self.stats["evicted"] += 1

    def clear(self) -> int:
        """Delete every cache file; returns how many were removed."""
        self._memory.clear()
        if self.directory is None or not Path(self.directory).is_dir():
            return 0
        removed = 0
        for path in Path(self.directory).glob("terms-*.npz"):
            path.unlink(missing_ok=True)
            removed += 1
        return removed


def _to_arrays(counts: TermCounts) -> dict[str, np.ndarray]:
    matrix = counts.counts.tocsr()
    return {
        "doc_ids": np.asarray(counts.doc_ids, dtype=str),
        "vocab": np.asarray(counts.vocab, dtype=str),
        "data": matrix.data,
        "indices": matrix.indices,
        "indptr": matrix.indptr,
        "shape": np.asarray(matrix.shape, dtype=np.int64),
    }


def _from_arrays(arrays: dict[str, np.ndarray]) -> TermCounts:
    import scipy.sparse as sp

    from retrievers.text import TermCounts

    shape = tuple(int(x) for x in arrays["shape"])
    matrix = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=shape)
    return TermCounts(arrays["doc_ids"].astype(object), arrays["vocab"].astype(object), matrix)


def _checksum(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode())
        h.update(np.ascontiguousarray(arrays[name]).tobytes())
    return h.hexdigest()


@dataclass
class CachedDocuments:
    """A corpus seen through a cache: retrievers (and every component of a fusion) ask it for term counts."""

    doc_ids: Sequence[str]
    doc_texts: Sequence[str]
    corpus_digest: str
    cache: TermCountCache

    def term_counts(self, tokenizer: Tokenizer) -> TermCounts:
        return self.cache.get(self.doc_ids, self.doc_texts, tokenizer, self.corpus_digest)


def main(argv: list[str] | None = None) -> int:
    """``python -m retrievers.cache {info,clear} [--dir DIR]``: show or empty the on-disk cache."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m retrievers.cache", description=main.__doc__)
    parser.add_argument("action", choices=["info", "clear"])
    parser.add_argument("--dir", type=Path, default=None, help=f"cache folder (default: {cache_root()})")
    args = parser.parse_args(argv)
    cache = TermCountCache(args.dir or cache_root())
    if args.action == "clear":
        print(f"removed {cache.clear()} file(s) from {cache.directory}")
    else:
        files = list(Path(cache.directory).glob("terms-*.npz")) if Path(cache.directory).is_dir() else []
        size = sum(p.stat().st_size for p in files)
        limit = cache.limit_bytes / 2**30
        print(f"{cache.directory}: {len(files)} file(s), {size / 2**20:.1f} MiB (limit {limit:.0f} GiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
