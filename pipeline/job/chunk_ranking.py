"""A job that ranks chunks: the retriever's ranking of chunk ids read as chunks, the documents it ranks (each at its
best chunk: MaxP), and what the chunk measures read when the job does not chunk (each retrieved document one chunk
of its whole text, its tokens counted with the chunker's tokenizer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from metrics.chunks import ChunkRun, Chunks
from metrics.errors import InputError
from metrics.run import PAD, Run

if TYPE_CHECKING:
    from metrics.spans import Spans
    from pipeline.chunking.chunked import Chunking
    from pipeline.data.collection import Collection


def ranked_chunks(ranking: Run, chunking: Chunking) -> ChunkRun:
    """A retriever's ranking over the chunking's ids, each entry of its axis described by the chunking's table."""
    rows = chunking.rows_of(ranking.doc_ids)
    if (rows < 0).any():  # a retriever that names chunks this chunking never made
        unknown = ranking.doc_ids[rows < 0][:3].tolist()
        raise InputError(f"the ranking names chunks this chunking does not hold: {', '.join(map(str, unknown))}")
    return ChunkRun(ranking, chunking.table.take(rows))


def whole_documents(run: Run, collection: Collection, chunker: Any) -> ChunkRun:
    """A ranking of whole documents as chunks (chunker=none), for span and budget measures: each document's tokens
    counted, only for the documents the run retrieved."""
    used = np.unique(run.docs[run.docs != PAD])
    ids = run.doc_ids[used].tolist()
    texts = dict(zip(collection.doc_ids, collection.doc_texts))
    counted = chunker.tokens().count([texts.get(d, "") for d in ids])
    tokens = dict(zip(ids, counted.tolist()))
    return ChunkRun.of_documents(run, collection.doc_lengths, tokens)


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
