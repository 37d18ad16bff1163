"""What a job indexes and ranks: the documents themselves, or their chunks (``chunker``, cut once per corpus and
settings); either way the ranking of documents every document metric reads, and, beside it, the ranking of chunks
(each document at its best chunk's rank: MaxP) with what span and budget measures read of it (:class:`Chunked`).

A job that does not chunk but asks for span or budget measures has each retrieved document as one chunk of its whole
text, its tokens counted with the chunker's tokenizer (``chunker=none`` has one too). A retriever that ranks chunks of
its own (``ranks_chunks``: a traced application whose documents point inside the corpus's) is read the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from omegaconf import DictConfig

from metrics.chunks import ChunkRun, Chunks, to_documents
from metrics.errors import InputError, Note
from metrics.run import PAD, Run
from pipeline.chunking.chunked import Chunking, describe
from pipeline.chunking.chunkers import chunk_depth
from pipeline.job import engine

if TYPE_CHECKING:
    from metrics.spans import Spans
    from pipeline.config.plan import JobPlan
    from pipeline.data.collection import Collection
    from pipeline.job.reuse import JobReuse
    from retrievers import Retriever

Stage = Callable[[str], AbstractContextManager[None]]  # the job's timed stage ('chunk', 'index', 'rank')


@dataclass(frozen=True)
class Chunked:
    """What a job that ranks chunks (or scores span and budget measures) keeps beside its ranking of documents: the
    ranking of chunks (``chunks.tsv``), the spans it scored with (``spans.tsv``), every chunk of the documents holding
    evidence (``chunking.tsv``), the chunking itself and the chunker."""

    chunks: ChunkRun | None
    spans: Spans | None
    table: Chunks | None
    chunking: Chunking | None
    chunker: Any

    def metrics(self) -> dict[str, float]:
        """The chunking's figures (chunks, their tokens' percentiles ...), as ``system/`` metrics' names without the
        prefix; none when the job did not chunk."""
        return {} if self.chunking is None else self.chunking.stats()

    def notes(self) -> list[Note]:
        """A warning when most documents are one chunk: the job then measures document retrieval."""
        return [] if self.chunking is None else self.chunking.notes(describe(self.chunker))


class Indexed:
    """One job's index and rankings: documents, or chunks when the plan chunks."""

    def __init__(self, plan: JobPlan, reuse: JobReuse, node: DictConfig) -> None:
        self.plan, self.reuse, self.node = plan, reuse, node
        self.chunking: Chunking | None = None
        self.chunks: ChunkRun | None = None

    def index(self, retriever: Retriever, collection: Collection, stage: Stage) -> None:
        """Index the documents, or their chunks (cut under the stage ``chunk``, indexed under ``index``)."""
        documents = collection
        if self.plan.chunked:
            with stage("chunk"):
                self.chunking = self.reuse.chunking(collection, self.plan.chunker)
            documents = self.chunking.collection
        with stage("index"):
            engine.index(retriever, self.reuse, self.node, documents)

    def rank(self, retriever: Retriever, collection: Collection, system: str) -> Run:
        """Every question's ranking of documents; when the job chunks, its ranking of chunks is kept (``chunks``)."""
        plan = self.plan
        if self.chunking is None and getattr(retriever, "ranks_chunks", False):  # chunks a traced application ranked
            ranking = engine.rank(retriever, self.reuse, self.node, collection,
                                  chunk_depth(plan.chunker.depth, plan.depth), system)
            self.chunks = own_chunks(ranking, collection, plan.chunker)
            return to_documents(self.chunks, plan.depth)
        if self.chunking is None:
            return engine.rank(retriever, self.reuse, self.node, collection, plan.depth, system)
        ranking = engine.rank(retriever, self.reuse, self.node, self.chunking.collection,
                              chunk_depth(plan.chunker.depth, plan.depth), system)
        self.chunks = ranked_chunks(ranking, self.chunking)
        return to_documents(self.chunks, plan.depth)

    def scored(self, collection: Collection, run: Run) -> Chunked:
        """What the span and budget measures read: the ranking of chunks (the documents', whole, when the job does not
        chunk), the spans (judgments without offsets as whole documents) and the evidence documents' chunks."""
        metrics = self.plan.metrics
        chunks = self.chunks
        if chunks is None and metrics.reads_chunks:
            chunks = whole_documents(run, collection, self.plan.chunker)
        spans = collection.all_spans() if metrics.reads_spans else None
        table = evidence_chunks(collection, spans, self.chunking) if metrics.reads_chunking else None
        return Chunked(chunks, spans, table, self.chunking, self.plan.chunker)


def ranked_chunks(ranking: Run, chunking: Chunking) -> ChunkRun:
    """A retriever's ranking over the chunking's ids, each entry of its axis described by the chunking's table."""
    rows = chunking.rows_of(ranking.doc_ids)
    if (rows < 0).any():  # a retriever that names chunks this chunking never made
        unknown = ranking.doc_ids[rows < 0][:3].tolist()
        raise InputError(f"the ranking names chunks this chunking does not hold: {', '.join(map(str, unknown))}")
    return ChunkRun(ranking, chunking.table.take(rows))


def own_chunks(ranking: Run, collection: Collection, chunker: Any) -> ChunkRun:
    """A ranking of chunks a retriever made of its own (a traced application's): each id read as a chunk, checked
    inside its document, its tokens counted with the chunker's tokenizer."""
    chunks = Chunks.from_ids(ranking.doc_ids)
    lengths = collection.doc_lengths
    for doc, start, end in zip(chunks.doc_ids, chunks.starts.tolist(), chunks.ends.tolist()):
        if not 0 <= start < end <= lengths.get(doc, -1):
            raise InputError(f"the ranking holds a chunk {start}:{end} of document {doc}, which is not inside it")
    texts = dict(zip(collection.doc_ids, collection.doc_texts))
    counted = chunker.tokens().count([texts[d][s:e] for d, s, e in zip(chunks.doc_ids, chunks.starts.tolist(),
                                                                       chunks.ends.tolist())])
    return ChunkRun(ranking, Chunks(chunks.doc_ids, chunks.starts, chunks.ends, counted))


def whole_documents(run: Run, collection: Collection, chunker: Any) -> ChunkRun:
    """A ranking of whole documents as chunks (chunker=none), for span and budget measures: each document's tokens
    counted, only for the documents the run retrieved."""
    used = np.unique(run.docs[run.docs != PAD])
    ids = run.doc_ids[used].tolist()
    texts = dict(zip(collection.doc_ids, collection.doc_texts))
    counted = chunker.tokens().count([texts.get(d, "") for d in ids])
    return ChunkRun.of_documents(run, collection.doc_lengths, dict(zip(ids, counted.tolist())))


def evidence_chunks(collection: Collection, spans: Spans, chunking: Chunking | None) -> Chunks:
    """Every chunk of the documents that hold evidence: what ``span_precision_omega`` reads (the documents
    themselves, whole, when the job does not chunk)."""
    wanted = set(spans.doc_ids.tolist())
    if chunking is None:
        lengths = collection.doc_lengths
        ids = [d for d in collection.doc_ids if d in wanted]
        return Chunks.whole(ids, [lengths[d] for d in ids])
    table = chunking.table
    keep = np.fromiter((d in wanted for d in table.doc_ids), dtype=bool, count=len(table))
    return table.take(np.flatnonzero(keep))
