"""A collection cut into chunks, once per (corpus, chunker settings): the table of chunks and the chunks as documents.

:func:`chunking` cuts every document with a chunker, counts each chunk's tokens with the chunker's tokenizer and
checks the offsets (a user's chunker that returns something else is one line naming the document). The result is
kept on disk (``<cache>/chunks/<key>.npz``, written atomically) under a key of the corpus digest, the chunker's class
and settings, its tokenizer's digest and the libraries' versions: a sweep over retrievers chunks each size once, and
a later sweep not at all. Its :attr:`Chunking.collection` is what every retriever indexes: one "document" per chunk,
its id :func:`metrics.chunks.chunk_id`, its text the chunk's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import inspect
import json
import os
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from metrics.chunks import Chunks
from metrics.errors import InputError, Note
from pipeline.chunking.chunkers import ChunkerFailed, OwnChunker
from pipeline.common import progress
from pipeline.data.collection import Collection

FORMAT = "1"
BATCH = 512  # documents chunked at a time (a progress bar ticks between batches)
LIBRARIES = ("semantic-text-splitter", "tokenizers", "nltk", "markdown-it-py")
SINGLE_SHARE = 0.5  # above this share of documents as one chunk, the job warns: it measures document retrieval
SINGLE_CHUNK_NOTE = "chunks_single"  # that note's kind (system/notes_chunks_single)
# what a chunked job logs of its chunking (as system/<key>), and the heading each has in a sweep's table
SHOWN_STATS = {"chunks": "chunks", "chunk_tokens_p50": "tokens p50", "chunk_tokens_p95": "tokens p95",
               "single_chunk_share": "docs as 1 chunk"}


@dataclass(frozen=True)
class Chunking:
    """Every chunk of a collection: ``table`` in document order then offset, ``doc_rows`` each chunk's document (its
    index in the collection), and :attr:`collection`, the chunks as the documents retrievers index."""

    source: Collection
    table: Chunks
    doc_rows: np.ndarray
    key: str
    seconds: float = 0.0  # spent cutting the documents now (0 when read from the cache) ...
    counting_seconds: float = 0.0  # ... and counting the chunks' tokens

    @cached_property
    def collection(self) -> Collection:
        """The chunks as a collection: ids :func:`~metrics.chunks.chunk_id`, texts ``text[start:end]``, the
        source's questions and judgments."""
        c, t = self.source, self.table
        texts = [c.doc_texts[d][s:e] for d, s, e in zip(self.doc_rows.tolist(), t.starts.tolist(), t.ends.tolist())]
        return dataclasses.replace(c, doc_ids=t.ids.tolist(), doc_texts=texts, notes=[])

    @cached_property
    def _positions(self) -> Any:
        import pandas as pd

        return pd.Index(self.table.ids, dtype=object)

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """The table rows of some chunk ids (-1 for an id that is no chunk of this chunking)."""
        return self._positions.get_indexer(np.asarray(ids, dtype=object))

    def stats(self) -> dict[str, float]:
        """What the chunking made: chunks, their tokens' percentiles, chunks per document, the share of documents
        that became one chunk (and those with none: an empty text)."""
        n_docs = len(self.source.doc_ids)
        per_doc = np.bincount(self.doc_rows, minlength=n_docs) if n_docs else np.zeros(0, dtype=np.int64)
        tokens = self.table.tokens
        out = {"chunks": float(len(self.table)),
               "chunks_per_document": float(len(self.table) / n_docs) if n_docs else 0.0,
               "single_chunk_share": float((per_doc == 1).mean()) if n_docs else 0.0,
               "documents_without_chunk": float((per_doc == 0).sum())}
        for q in (5, 50, 95):
            out[f"chunk_tokens_p{q}"] = float(np.percentile(tokens, q)) if len(tokens) else 0.0
        out["chunk_tokens_max"] = float(tokens.max()) if len(tokens) else 0.0
        return out

    def notes(self, settings: str) -> list[Note]:
        """A warning when most documents are a single chunk: the job then measures document retrieval."""
        share = self.stats()["single_chunk_share"]
        if share <= SINGLE_SHARE:
            return []
        text = (f"{share:.0%} of the documents are a single chunk ({settings}): this measures document retrieval, "
                f"not chunking; choose a smaller size, or longer documents (a stitched collection, docs/chunking.md)")
        return [Note(text, SINGLE_CHUNK_NOTE, round(share * len(self.source.doc_ids)))]


def describe(chunker: Any) -> str:
    """The chunker in a few words: ``recursive 256 tokens, overlap 32``."""
    kind = type(chunker).__name__.lower() if not isinstance(chunker, OwnChunker) else chunker.name
    size = getattr(chunker, "size", None)
    if size is None:
        return kind
    overlap = f", overlap {chunker.overlap}" if getattr(chunker, "overlap", 0) else ""
    return f"{kind} {size} {chunker.unit}{overlap}"


def settings_key(chunker: Any, corpus_digest: str) -> str:
    """What a chunking depends on: the corpus, the chunker's class, code and settings, its tokenizer, the libraries."""
    inner = chunker.inner if isinstance(chunker, OwnChunker) else chunker
    settings = {f.name: getattr(chunker, f.name) for f in dataclasses.fields(chunker)
                if not f.name.startswith("_") and f.name not in ("inner", "depth")}
    parts = [FORMAT, corpus_digest, f"{type(inner).__module__}.{type(inner).__qualname__}", _code(type(inner)),
             json.dumps(settings, sort_keys=True, default=str), chunker.tokens().digest, _versions()]
    if isinstance(chunker, OwnChunker):
        parts.append(repr(inner))
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


@lru_cache(maxsize=32)
def _code(cls: type) -> str:
    """A digest of the file that defines a chunker's class: editing it invalidates its chunkings."""
    try:
        return hashlib.sha256(Path(inspect.getfile(cls)).read_bytes()).hexdigest()[:12]
    except (TypeError, OSError):
        return ""


@lru_cache(maxsize=1)
def _versions() -> list[str]:
    """The chunking libraries' versions (a package's metadata is read once per process)."""
    found = []
    for name in LIBRARIES:
        try:
            found.append(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            found.append("")
    return found


def chunking(collection: Collection, chunker: Any, folder: Path | None, key: str | None = None
             ) -> tuple[Chunking, str]:
    """The collection's chunks, and how they were had: ``"computed"`` or ``"read"`` (from ``folder``, the cache's
    ``chunks`` folder; None: no disk cache). ``key``: :func:`settings_key`, when the caller has it."""
    key = key or settings_key(chunker, collection.corpus_digest)
    path = None if folder is None else folder / f"{key}.npz"
    if path is not None and path.is_file():
        found = _read(path, collection, key)
        if found is not None:
            return found, "read"
    start = time.perf_counter()
    doc_rows, starts, ends, tokens = _cut(collection, chunker)
    cut = time.perf_counter()
    unknown = np.flatnonzero(tokens < 0)
    if len(unknown):  # what the chunker did not count itself: each chunk's text through the tokenizer
        texts = collection.doc_texts
        tokens[unknown] = chunker.tokens().count([texts[d][s:e] for d, s, e in zip(
            doc_rows[unknown].tolist(), starts[unknown].tolist(), ends[unknown].tolist())])
    table = Chunks(np.asarray(collection.doc_ids, dtype=object)[doc_rows], starts, ends, tokens)
    found = Chunking(collection, table, doc_rows, key, cut - start, time.perf_counter() - cut)
    if path is not None:
        _write(path, found)
    return found, "computed"


def _cut(collection: Collection, chunker: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every document's chunks, in document order: (document row, start, end, tokens) arrays, tokens -1 where the
    chunker did not count them."""
    texts = collection.doc_texts
    rows: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    tokens: list[int] = []
    with progress.ticker(len(texts), "chunking", "document", unit_scale=True) as tick:
        for first in range(0, len(texts), BATCH):
            batch = texts[first : first + BATCH]
            try:
                found = chunker.spans_of(batch)
            except ChunkerFailed as exc:
                raise InputError(f"chunker {describe(chunker)}: {_failed_on(chunker, batch, first, collection)}"
                                 f"{exc}") from None
            for offset, spans in enumerate(found):
                _check(spans, batch[offset], collection.doc_ids[first + offset], chunker)
                rows.extend([first + offset] * len(spans))
                starts.extend(s[0] for s in spans)
                ends.extend(s[1] for s in spans)
                tokens.extend(s[2] if len(s) > 2 else -1 for s in spans)
            tick(len(batch))
    return tuple(np.asarray(a, dtype=np.int64) for a in (rows, starts, ends, tokens))  # type: ignore[return-value]


def _failed_on(chunker: Any, batch: list[str], first: int, collection: Collection) -> str:
    """Which document a user's chunker failed on (each of the batch asked again, alone)."""
    for offset, text in enumerate(batch):
        try:
            chunker.spans_of([text])
        except ChunkerFailed:
            return f"on document {collection.doc_ids[first + offset]}, "
    return ""


def _check(spans: list[tuple[int, ...]], text: str, doc_id: str, chunker: Any) -> None:
    """Every range a chunk of the text: a library's output is checked as a user's is."""
    for start, end, *_ in spans:
        if not 0 <= start < end <= len(text):
            raise InputError(f"chunker {describe(chunker)}: on document {doc_id}, a chunk at {start}:{end} lies "
                             f"outside its {len(text)} characters")


def _write(path: Path, found: Chunking) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, doc_rows=found.doc_rows, starts=found.table.starts, ends=found.table.ends,
                     tokens=found.table.tokens, documents=np.array([len(found.source.doc_ids)]))
        os.replace(temporary, path)
    except OSError:  # a full or read-only cache folder: the chunking is still used, just not kept
        Path(temporary).unlink(missing_ok=True)


def _read(path: Path, collection: Collection, key: str) -> Chunking | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            doc_rows, starts, ends, tokens = (data[k] for k in ("doc_rows", "starts", "ends", "tokens"))
            documents = int(data["documents"][0])
    except (OSError, ValueError, KeyError):  # damaged: chunk again (and overwrite it)
        return None
    if documents != len(collection.doc_ids) or (len(doc_rows) and doc_rows.max() >= documents):
        return None
    table = Chunks(np.asarray(collection.doc_ids, dtype=object)[doc_rows], starts, ends, tokens)
    return Chunking(collection, table, doc_rows, key, 0.0)

