"""Work a sweep does once, not once per job: loaded corpora, term counts, component rankings.

Every memo here lives for the process, so what it saves depends on the launcher:

- the basic launcher runs every job in the driver's process: a sweep loads and tokenises a corpus once, and an
  RRF job takes its components' rankings from the jobs that ranked them before it;
- joblib, submitit and Ray run jobs in other processes: term counts come from the on-disk cache
  (``retrievers.cache``, keyed by corpus digest + tokenizer + code version), and a worker that runs several jobs
  keeps its memos between them.

:class:`JobReuse` counts what one job computed and what it reused; the counts are logged as ``system/cache_*`` metrics
of the job's MLflow run (what tests assert on: never timings).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from metrics.errors import InputError
from metrics.run import Run
from pipeline.common.names import CACHE_PREFIX, CHUNKS_DIR
from pipeline.config.build import plain
from pipeline.data.collection import Collection
from pipeline.data.sources import CorpusSource
from retrievers import Retriever, Tokenizer
from retrievers.cache import DEFAULT_LIMIT_BYTES, CachedDocuments, TermCountCache, cache_root, parse_size
from retrievers.text import TFIDF_STATS

if TYPE_CHECKING:
    from pipeline.chunking.chunked import Chunking

COLLECTIONS_KEPT = 2
CHUNKINGS_KEPT = 4  # chunkings a process keeps (a sweep over chunk sizes and retrievers: each size chunked once)
RUNS_BYTES = 512 * 2**20  # rankings kept in memory, least recently used dropped first

_caches: dict[tuple[str | None, int], TermCountCache] = {}
_collections: OrderedDict[str, Collection] = OrderedDict()
_loaded_ahead: set[str] = set()  # corpora read before the job that needs them (load_ahead): it counts the load
_runs: OrderedDict[str, tuple[int, Run]] = OrderedDict()
_chunkings: OrderedDict[str, Chunking] = OrderedDict()
STATS: Counter = Counter()  # runs_ranked/_reused: this process's totals


def shared_cache(directory: Path | None, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> TermCountCache:
    """The process's term-count cache for ``directory`` (None: memory only), shared by every job it runs."""
    key = (None if directory is None else str(directory), limit_bytes)
    if key not in _caches:
        _caches[key] = TermCountCache(directory, limit_bytes)
    return _caches[key]


def shared_collection(source: CorpusSource, node: DictConfig) -> tuple[Collection, str]:
    """The corpus, loaded once per process while its files are unchanged; and how this request was served,
    ``"loaded"`` or ``"reused"``."""
    key = _collection_key(source, node)
    if key is not None and key in _collections:
        _collections.move_to_end(key)
        if key in _loaded_ahead:
            _loaded_ahead.discard(key)
            return _collections[key], "loaded"
        return _collections[key], "reused"
    collection = source.load()
    if key is not None:
        _collections[key] = collection
        while len(_collections) > COLLECTIONS_KEPT:
            _collections.popitem(last=False)
    return collection, "loaded"


def load_ahead(source: CorpusSource, node: DictConfig) -> None:
    """Read a corpus before the job that needs it: a sweep's driver does this while the store process, still
    starting, creates the parent run. That job then finds the corpus loaded and counts the load as its own
    (``collections_loaded``). Whatever goes wrong is left for the job to find and report in its own words."""
    key = _collection_key(source, node)
    if key is None or key in _collections:
        return
    try:
        shared_collection(source, node)
    except Exception:  # a missing or malformed corpus: the job says so
        return
    _loaded_ahead.add(key)


def _collection_key(source: CorpusSource, node: DictConfig) -> str | None:
    """What identifies a loaded corpus: its config entry and the size and time of each file it reads (None when a
    file is missing: the loader reports it)."""
    try:
        stamp = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in source.files()]
    except (InputError, OSError):
        return None
    return json.dumps([plain(node), stamp], sort_keys=True, default=str)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _without_names(tree: Any) -> Any:
    """A retriever config minus display names: two configs that rank alike share their rankings."""
    if isinstance(tree, dict):
        return {k: _without_names(v) for k, v in tree.items() if k != "name"}
    return tree


class JobReuse:
    """One job's view of the process's memos; :meth:`counters` tells what the job reused (``cache/*``)."""

    def __init__(self, cfg: DictConfig, tokenizer: Tokenizer, base: Path) -> None:
        self.tokenizer = tokenizer
        self.chunk_folder: Path | None = None
        if cfg.cache.enabled:
            self.term_cache = shared_cache(cache_root(cfg.cache.dir, base), parse_size(cfg.cache.limit))
            self.chunk_folder = cache_root(cfg.cache.dir, base) / CHUNKS_DIR
        else:  # the job's own, in memory: its retrievers and diagnosis count terms once, and cache_tokenised says so
            self.term_cache = TermCountCache(None)
        self._start = self._totals()
        self._collection_origin: str | None = None

    def _totals(self) -> Counter:
        return Counter({f"tfidf_{k}": v for k, v in TFIDF_STATS.items()}) + STATS + self.term_cache.stats

    def counters(self) -> dict[str, int]:
        """What this job did, since it started: every counter, zeros included (a 0 is a claim tests check)."""
        names = ["tokenised", "memory_hits", "disk_hits", "corrupt", "stored", "evicted", "tfidf_computed",
                 "tfidf_reused", "runs_ranked", "runs_reused", "chunkings_computed", "chunkings_read",
                 "chunkings_reused"]
        now = self._totals()
        counts = {name: int(now[name] - self._start[name]) for name in names}
        counts["collections_loaded"] = int(self._collection_origin == "loaded")
        counts["collections_reused"] = int(self._collection_origin == "reused")
        return counts

    def reused_metrics(self) -> dict[str, int]:
        """The counters as the job's metrics (``cache/<counter>``)."""
        return {CACHE_PREFIX + name: count for name, count in self.counters().items()}

    # -- corpus ------------------------------------------------------------------------------------------------

    def collection(self, source: CorpusSource, node: DictConfig) -> Collection:
        """The job's corpus, loaded once per process."""
        collection, self._collection_origin = shared_collection(source, node)
        return collection

    def documents(self, collection: Collection):
        """What retrievers index: the corpus through the term-count cache (the job's own when it is disabled)."""
        return CachedDocuments(collection.doc_ids, collection.doc_texts, collection.corpus_digest, self.term_cache)

    # -- chunks ------------------------------------------------------------------------------------------------

    def chunking(self, collection: Collection, chunker: Any) -> Chunking:
        """The collection's chunks: kept in this process, else read from the cache folder, else cut now (counted as
        ``chunkings_reused``, ``_read`` or ``_computed``)."""
        from pipeline.chunking.chunked import chunking, settings_key  # only a job that chunks pays for it

        key = settings_key(chunker, collection.corpus_digest)
        if key in _chunkings:
            _chunkings.move_to_end(key)
            STATS["chunkings_reused"] += 1
            return dataclasses.replace(_chunkings[key], seconds=0.0)
        found, how = chunking(collection, chunker, self.chunk_folder, key)
        STATS[f"chunkings_{how}"] += 1
        _chunkings[key] = found
        while len(_chunkings) > CHUNKINGS_KEPT:
            _chunkings.popitem(last=False)
        return found

    # -- rankings ----------------------------------------------------------------------------------------------

    def _run_key(self, retriever: Retriever, node: DictConfig, collection: Collection) -> str | None:
        """The memo key of a retriever's rankings: its config entry (names aside), the tokenizer and the corpus;
        None when the retriever is not deterministic (its rankings are never reused)."""
        if not retriever.deterministic:
            return None
        return _digest(_without_names(plain(node)), self.tokenizer.digest, collection.corpus_digest)

    def ranking(self, retriever: Retriever, node: DictConfig, collection: Collection) -> Retriever:
        """``retriever`` (already indexed) as it should rank in this job: through the memo when it is
        deterministic, so its ranking serves later jobs (a fusion with it as a component) and a repeat of it."""
        key = self._run_key(retriever, node, collection)
        if key is None:
            return retriever
        shared = SharedRanking(retriever, key)
        shared._indexed = True
        return shared

    def share_components(self, retriever: Retriever, node: DictConfig, collection: Collection) -> None:
        """Before indexing: the components of a fusion that reads them only through rank() (at any nesting) take
        rankings that earlier jobs kept, and are indexed only if they must rank themselves."""
        if not retriever.ranks_components:
            return
        wrapped = []
        for component, child in zip(retriever.components, node.components.values()):
            self.share_components(component, child, collection)
            key = self._run_key(component, child, collection)
            wrapped.append(component if key is None else SharedRanking(component, key))
        retriever.components = wrapped


def _lookup(key: str, depth: int, name: str) -> Run | None:
    if key not in _runs:
        return None
    kept_depth, run = _runs[key]
    if kept_depth < depth:
        return None
    _runs.move_to_end(key)
    STATS["runs_reused"] += 1
    shown = run.truncated(depth) if run.depth > depth else run
    return dataclasses.replace(shown, name=name)


def _store(key: str, depth: int, run: Run) -> None:
    STATS["runs_ranked"] += 1
    if key in _runs and _runs[key][0] >= depth:
        return
    _runs[key] = (depth, run)
    while len(_runs) > 1 and sum(_bytes(r) for _, r in _runs.values()) > RUNS_BYTES:
        _runs.popitem(last=False)


def _bytes(run: Run) -> int:
    return run.docs.nbytes + run.scores.nbytes


class SharedRanking(Retriever):
    """A fusion component that ranks through the process's memo, indexing only when it must rank itself.

    Any other use (``scores``, ``doc_ids`` ...) indexes it first and is passed to the wrapped retriever.
    """

    def __init__(self, inner: Retriever, key: str) -> None:
        self.inner, self.key = inner, key
        self.name = inner.name
        self._docs = None
        self._indexed = False

    def index(self, docs) -> SharedRanking:
        self._docs, self._indexed = docs, False
        return self

    def _ensure_indexed(self) -> None:
        if not self._indexed:
            self.inner.index(self._docs)
            self._indexed = True

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        key = _digest(self.key, list(query_ids), list(texts))
        run = _lookup(key, depth, self.inner.name)
        if run is None:
            self._ensure_indexed()
            run = self.inner.rank(query_ids, texts, depth)
            _store(key, depth, run)
        return run

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        return self.inner.deterministic

    def notes(self) -> list[str]:
        return self.inner.notes()

    def index_bytes(self) -> int | None:
        return self.inner.index_bytes() if self._indexed else 0  # a ranking from the memo: no index of its own

    def __getattr__(self, attribute: str):
        if attribute.startswith("_") or attribute in ("inner", "key"):
            raise AttributeError(attribute)
        self._ensure_indexed()
        return getattr(self.inner, attribute)
