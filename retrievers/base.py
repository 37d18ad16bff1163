"""The retriever seam: index a corpus once, then rank every question in one call.

A retriever is built from its config entry (``conf/retriever/NAME.yaml``, whose ``_target_`` names the class):
the entry's keys are the constructor's arguments, except those the class lists in ``context_fields``, which come
from the job's :class:`BuildContext` (the tokenizer every lexical retriever shares, the cache folder). A class that
must do more than call its constructor (resolve a path, check an optional package) defines ``from_config``.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np

from metrics.run import PAD, Run
from retrievers.text import TermCounts, Tokenizer, term_counts
from retrievers.topk import top_k_dense

# A score not above this is not a result (docs/helpdesk-reference.md): rankings can be empty.
MIN_SCORE = 1e-9
# Dense score blocks are kept under this many cells, so memory is bounded by batching questions.
BLOCK_CELLS = 2**24


class Documents(Protocol):
    """What a retriever indexes: ids and texts in the same order (a Collection satisfies this)."""

    doc_ids: Sequence[str]
    doc_texts: Sequence[str]


class NotIndexedError(RuntimeError):
    pass


@dataclass(frozen=True)
class BuildContext:
    """What a retriever takes from the job rather than from its own config entry."""

    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    base: Path = field(default_factory=Path.cwd)  # relative paths in a config entry start here (the launch folder)
    cache: bool = True  # keep expensive per-corpus work (embeddings) on disk
    cache_dir: Path | None = None  # rankscope's cache folder (None: retrievers.cache.cache_root())
    # the job's progress bars: ``progress(total, label, unit)`` gives a context whose value ticks ``done`` units
    progress: Callable[[float | None, str, str], AbstractContextManager[Callable[[int], object]]] | None = None

    def path(self, value: str | Path) -> Path:
        """A path from a config entry: absolute as given, else relative to :attr:`base`."""
        found = Path(value).expanduser()
        return found if found.is_absolute() else (self.base / found).resolve()


def corpus_digest(doc_ids: Sequence[str], texts: Sequence[str]) -> str:
    """Digest of the (id, text) pairs in the order given: any change of a text, an id or the order changes it."""
    h = hashlib.sha256()
    for ident, text in zip(doc_ids, texts, strict=True):
        h.update(str(ident).encode())
        h.update(b"\0")
        h.update(text.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def counts_of(docs: Documents, tokenizer: Tokenizer) -> TermCounts:
    """Term counts for ``docs``: from its cache when it has one (``CachedDocuments``), else tokenised now."""
    cached = getattr(docs, "term_counts", None)
    if callable(cached):
        return cached(tokenizer)
    return term_counts(docs.doc_ids, docs.doc_texts, tokenizer)


class Retriever(ABC):
    """Index once with :meth:`index`, then :meth:`rank` a batch of questions into a :class:`Run`.

    ``deterministic``: the same config, corpus and questions always give the same ranking, so a sweep may reuse a
    ranking instead of computing it again (a run file's content can change under the same path: it is not).
    ``context_fields``: constructor arguments that come from the :class:`BuildContext`, not the config entry.
    """

    name: str = "retriever"
    deterministic: ClassVar[bool] = False
    context_fields: ClassVar[tuple[str, ...]] = ()
    ranks_components: ClassVar[bool] = False  # a fusion that reads its ``components`` only through rank()

    @abstractmethod
    def index(self, docs: Documents) -> Retriever:
        """Build the index; returns self so ``BM25().index(docs)`` reads naturally."""

    @abstractmethod
    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        """Rank every question; rows follow ``query_ids``."""

    def notes(self) -> list[str]:
        """What the retriever dropped or corrected in what it was given (unknown document ids ...), one line each."""
        return []

    def source(self) -> str | None:
        """Where the rankings came from when the retriever did not compute them (MLflow traces ...): one line the job
        prints and tags its run with; None for a retriever that ranks by itself."""
        return None

    def traces(self) -> tuple[str | None, list[str]]:
        """The MLflow traces the rankings were read from: their store's URI and their ids (linked to the run when it
        is logged to that store); ``(None, [])`` for a retriever that ranks by itself."""
        return None, []

    def index_bytes(self) -> int | None:
        """How many bytes the index holds in memory (its arrays), for a job's record; a fusion's is its components';
        None when it cannot tell (a user's engine, a service)."""
        parts = [c.index_bytes() for c in getattr(self, "components", None) or ()]
        return sum(parts) if parts and None not in parts else None

    def files(self) -> dict[str, bytes]:
        """Files to keep beside the run, name -> content (what the rankings were read from, to trace a result back
        to it): written into the job's folder and logged with the run. Asked after ranking."""
        return {}


class ScoringRetriever(Retriever):
    """A retriever that can score every document for a question: the form fusions combine.

    ``doc_ids`` is the document axis of :meth:`scores`, sorted by id so that ties resolve by id.
    """

    threshold: float | None = MIN_SCORE
    doc_ids: np.ndarray

    @abstractmethod
    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """A dense (questions x documents) score matrix over ``doc_ids``."""

    def block_size(self) -> int:
        return max(1, BLOCK_CELLS // max(1, len(self.doc_ids)))

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        docs, scores = [], []
        step = self.block_size()
        for start in range(0, len(texts), step):
            d, s = top_k_dense(self.scores(texts[start : start + step]), depth, self.threshold)
            docs.append(d)
            scores.append(s)
        return _assemble(self, query_ids, docs, scores, depth)


def _check_batch(query_ids: Sequence[str], texts: Sequence[str]) -> None:
    if len(query_ids) != len(texts):
        raise ValueError(f"{len(query_ids)} question ids but {len(texts)} texts")


def _assemble(retriever: ScoringRetriever, query_ids, docs: list, scores: list, depth: int) -> Run:
    width = min(depth, len(retriever.doc_ids))
    if not docs:
        return Run(np.array(query_ids, dtype=object), retriever.doc_ids, np.zeros((0, width)), np.zeros((0, width)),
                   retriever.name)
    return Run(np.array(query_ids, dtype=object), retriever.doc_ids, np.vstack(docs), np.vstack(scores),
               retriever.name)


def array_bytes(*things: object) -> int:
    """The bytes held by arrays: numpy arrays, scipy sparse matrices, and those among an object's attributes (one
    level down: a dataclass of arrays)."""
    total = 0
    for thing in things:
        if isinstance(thing, np.ndarray):
            total += thing.nbytes
        elif hasattr(thing, "indptr") and hasattr(thing, "data") and hasattr(thing, "indices"):  # scipy sparse
            total += thing.data.nbytes + thing.indices.nbytes + thing.indptr.nbytes
        elif hasattr(thing, "__dict__"):
            total += sum(v.nbytes for v in vars(thing).values() if isinstance(v, np.ndarray))
    return total


def select_rows(run: Run, query_ids: Sequence[str], depth: int, name: str) -> Run:
    """``run``'s rankings for ``query_ids``, in that order, cut to ``depth``; a question it lacks ranks nothing."""
    rows = run.query_index.get_indexer(list(query_ids)) if len(run.query_ids) else np.full(len(query_ids), -1)
    width = min(depth, run.depth)
    docs = np.full((len(query_ids), width), PAD, dtype=np.int64)
    scores = np.full(docs.shape, np.nan)
    found = rows >= 0
    docs[found] = run.docs[rows[found], :width]
    scores[found] = run.scores[rows[found], :width]
    return Run(np.array(query_ids, dtype=object), run.doc_ids, docs, scores, name)


def same_axis(components: Sequence[ScoringRetriever]) -> np.ndarray:
    """The shared document axis of several retrievers; they must have indexed the same corpus."""
    axis = components[0].doc_ids
    for c in components[1:]:
        if len(c.doc_ids) != len(axis) or not np.array_equal(c.doc_ids, axis):
            raise ValueError(f"{c.name} indexed a different corpus than {components[0].name}")
    return axis
