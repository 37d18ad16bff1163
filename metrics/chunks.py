"""Chunks: pieces of documents, each its document id plus character offsets (end exclusive), and rankings of them.

A chunk is ``(doc_id, start, end)``: ``text[start:end]`` is the chunk, always. Its id, what a retriever indexes and
ranks, is :func:`chunk_id` (the one definition): ``doc12#0000000120-0000000512``. The offsets are zero-padded to
:data:`WIDTH` digits so that chunk ids sort as (document id, start, end): a ranking that breaks ties by id breaks
them by document id first, as it does for whole documents.

A :class:`ChunkRun` is a :class:`~metrics.run.Run` over chunk ids with each chunk's document, offsets and token
count beside it. :func:`to_documents` turns it into the document ranking every document metric reads: a document
takes the rank of its best chunk (MaxP; its first occurrence), so every qrels file keeps working.
:func:`write_chunks` and :func:`read_chunks` are the ``chunks.tsv`` a job writes beside ``run.trec``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from pathlib import Path

import numpy as np

from metrics.errors import InputError
from metrics.run import PAD, Run
from metrics.textfile import tsv_rows

SEP = "#"
WIDTH = 10  # digits of each offset in a chunk id: documents up to 10**10 characters
CHUNK_COLUMNS = ("query_id", "rank", "doc_id", "start", "end", "score", "tokens")  # chunks.tsv's header
CHUNK_TABLE_COLUMNS = ("doc_id", "start", "end", "tokens")  # a chunking's table (chunking.tsv)


def chunk_id(doc_id: str, start: int, end: int) -> str:
    """The id of the chunk ``text[start:end]`` of document ``doc_id``."""
    return f"{doc_id}{SEP}{int(start):0{WIDTH}d}-{int(end):0{WIDTH}d}"


def parse_chunk_id(value: str) -> tuple[str, int, int]:
    """``(doc_id, start, end)`` of a chunk id; a ValueError when ``value`` is not one."""
    doc, sep, offsets = str(value).rpartition(SEP)
    first, dash, second = offsets.partition("-")
    if not sep or not dash or len(first) != WIDTH or len(second) != WIDTH or not (first + second).isdigit():
        raise ValueError(f"not a chunk id: {value!r} (expected DOC{SEP}{'0' * WIDTH}-{'0' * (WIDTH - 2)}42)")
    return doc, int(first), int(second)


@dataclass(frozen=True)
class Chunks:
    """A table of chunks: row ``i`` is ``doc_ids[i]``'s characters ``starts[i]:ends[i]``, ``tokens[i]`` tokens long
    (-1 where not counted)."""

    doc_ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    tokens: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "doc_ids", np.asarray(self.doc_ids, dtype=object))
        for name in ("starts", "ends", "tokens"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64))
        if not len(self.doc_ids) == len(self.starts) == len(self.ends) == len(self.tokens):
            raise ValueError("doc_ids, starts, ends and tokens must have the same length")

    def __len__(self) -> int:
        return len(self.doc_ids)

    @cached_property
    def ids(self) -> np.ndarray:
        """Each row's :func:`chunk_id`."""
        return np.array([chunk_id(d, s, e) for d, s, e in zip(self.doc_ids, self.starts, self.ends)], dtype=object)

    @property
    def lengths(self) -> np.ndarray:
        """Each chunk's length in characters."""
        return self.ends - self.starts

    def take(self, rows: np.ndarray) -> Chunks:
        return Chunks(self.doc_ids[rows], self.starts[rows], self.ends[rows], self.tokens[rows])

    @classmethod
    def from_ids(cls, ids: Sequence[str], tokens: Sequence[int] | None = None) -> Chunks:
        """The table of some chunk ids (a ValueError names the first that is not one)."""
        parts = [parse_chunk_id(i) for i in ids]
        doc_ids = np.array([p[0] for p in parts], dtype=object)
        starts = np.array([p[1] for p in parts], dtype=np.int64)
        ends = np.array([p[2] for p in parts], dtype=np.int64)
        counted = np.full(len(parts), -1, dtype=np.int64) if tokens is None else np.asarray(tokens, dtype=np.int64)
        return cls(doc_ids, starts, ends, counted)

    @classmethod
    def whole(cls, doc_ids: Sequence[str], lengths: Sequence[int], tokens: Sequence[int] | None = None) -> Chunks:
        """Every document as one chunk of its whole text: a ranking of documents seen as a ranking of chunks."""
        n = len(doc_ids)
        counted = np.full(n, -1, dtype=np.int64) if tokens is None else np.asarray(tokens, dtype=np.int64)
        return cls(np.asarray(doc_ids, dtype=object), np.zeros(n, dtype=np.int64), np.asarray(lengths, np.int64),
                   counted)


@dataclass(frozen=True)
class ChunkRun:
    """Every question's ranked chunks: ``run`` ranks chunk ids (its ``doc_ids`` axis), ``chunks`` describes each entry
    of that axis (row ``i`` is ``run.doc_ids[i]``)."""

    run: Run
    chunks: Chunks

    def __post_init__(self) -> None:
        if len(self.chunks) != len(self.run.doc_ids):
            raise ValueError("one row of chunks per entry of the run's axis is required")

    @property
    def query_ids(self) -> np.ndarray:
        return self.run.query_ids

    @cached_property
    def doc_vocab(self) -> tuple[np.ndarray, np.ndarray]:
        """``(codes, vocabulary)``: each axis entry's document as an index into the distinct documents."""
        import pandas as pd

        codes, vocab = pd.factorize(pd.Index(self.chunks.doc_ids, dtype=object), sort=False)
        return codes.astype(np.int64), np.asarray(vocab, dtype=object)

    def rows(self, query_ids: Sequence[str]) -> ChunkRun:
        """The rankings of ``query_ids`` in that order (a question the run lacks ranks nothing)."""
        run = self.run
        rows = run.query_index.get_indexer(list(query_ids)) if len(run.query_ids) else np.full(len(query_ids), -1)
        docs = np.full((len(query_ids), run.depth), PAD, dtype=np.int64)
        scores = np.full(docs.shape, np.nan)
        found = rows >= 0
        docs[found], scores[found] = run.docs[rows[found]], run.scores[rows[found]]
        return ChunkRun(Run(np.array(list(query_ids), dtype=object), run.doc_ids, docs, scores, run.name), self.chunks)

    def field(self, values: np.ndarray, fill: int = -1) -> np.ndarray:
        """A per-axis array laid out as the run: ``(questions, depth)``, ``fill`` where a ranking has ended."""
        out = values[np.maximum(self.run.docs, 0)]
        return np.where(self.run.docs == PAD, fill, out)

    @classmethod
    def of_documents(cls, run: Run, lengths: dict[str, int], tokens: dict[str, int] | None = None) -> ChunkRun:
        """A ranking of whole documents as a ranking of chunks (each document one chunk of its whole text)."""
        axis = [str(d) for d in run.doc_ids]
        counted = None if tokens is None else [tokens.get(d, -1) for d in axis]
        return cls(run, Chunks.whole(axis, [lengths.get(d, 0) for d in axis], counted))


def to_documents(chunk_run: ChunkRun, depth: int, name: str | None = None) -> Run:
    """The document ranking of a chunk ranking: each document at the rank of its best chunk (its first occurrence;
    MaxP), scored by that chunk's score, cut to ``depth`` documents. Ties keep the chunks' order, which breaks them by
    chunk id: by document id."""
    run = chunk_run.run
    codes, vocab = chunk_run.doc_vocab
    n_q, width = run.docs.shape
    valid = run.docs != PAD
    doc = np.where(valid, codes[np.maximum(run.docs, 0)], -1)
    first = np.zeros(n_q * width, dtype=bool)
    if valid.any():
        key = np.arange(n_q, dtype=np.int64)[:, None] * (len(vocab) + 1) + (doc + 1)
        flat = np.where(valid, key, -1).ravel()
        _, where = np.unique(flat, return_index=True)  # the first position of each (question, document) pair
        first[where] = True
    first = first.reshape(n_q, width) & valid
    place = np.cumsum(first, axis=1) - 1
    keep = first & (place < depth)
    out_width = min(depth, int(first.sum(axis=1).max())) if n_q and first.any() else 0
    docs = np.full((n_q, out_width), PAD, dtype=np.int64)
    scores = np.full((n_q, out_width), np.nan)
    rows, cols = np.nonzero(keep)
    docs[rows, place[rows, cols]] = doc[rows, cols]
    scores[rows, place[rows, cols]] = run.scores[rows, cols]
    return Run(run.query_ids, vocab, docs, scores, name or run.name)


def _number(text: str, column: str, path: Path, line: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{column} {text!r} is not an integer", path, line) from None


def chunks_bytes(chunk_run: ChunkRun) -> bytes:
    """``chunks.tsv``'s content: one line per ranked chunk, :data:`CHUNK_COLUMNS` as its header, questions in run
    order, scores as Python writes floats (they read back exactly)."""
    run, chunks = chunk_run.run, chunk_run.chunks
    lines = ["\t".join(CHUNK_COLUMNS)]
    for i, qid in enumerate(run.query_ids):
        n = int(run.lengths[i])
        for rank, (c, score) in enumerate(zip(run.docs[i, :n].tolist(), run.scores[i, :n].tolist()), start=1):
            lines.append(f"{qid}\t{rank}\t{chunks.doc_ids[c]}\t{chunks.starts[c]}\t{chunks.ends[c]}\t{score!r}\t"
                         f"{chunks.tokens[c]}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_chunks(chunk_run: ChunkRun, path: Path) -> None:
    """Write ``chunks.tsv`` (:func:`chunks_bytes`)."""
    Path(path).write_bytes(chunks_bytes(chunk_run))


def read_chunks(path: str | Path) -> ChunkRun:
    """A ``chunks.tsv``: every question's chunks in rank order (ranks need not start at 1 but must rise)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such chunks file", path)
    rankings: dict[str, list[tuple[int, tuple[str, int, int, int], float]]] = {}
    for line, row in tsv_rows(path, CHUNK_COLUMNS, "a job's chunks.tsv"):
        qid, rank, doc, start, end, score, tokens = row[: len(CHUNK_COLUMNS)]
        s, e = _number(start, "start", path, line), _number(end, "end", path, line)
        if not 0 <= s < e:
            raise InputError(f"offsets {s}:{e} are not a chunk (0 <= start < end)", path, line)
        try:
            value = float(score)
        except ValueError:
            raise InputError(f"score {score!r} is not a number", path, line) from None
        rankings.setdefault(qid, []).append(
            (_number(rank, "rank", path, line), (doc, s, e, _number(tokens, "tokens", path, line)), value))
    axis: dict[tuple[str, int, int], int] = {}
    table: list[tuple[str, int, int, int]] = []
    depth = max((len(r) for r in rankings.values()), default=0)
    docs = np.full((len(rankings), depth), PAD, dtype=np.int64)
    scores = np.full(docs.shape, np.nan)
    for i, (qid, ranked) in enumerate(rankings.items()):
        ranks = [r for r, _, _ in ranked]
        if any(b <= a for a, b in pairwise(ranks)):
            raise InputError(f"question {qid}: its ranks do not rise line by line", path)
        for j, (_, (doc, s, e, tokens), value) in enumerate(ranked):
            key = (doc, s, e)
            if key not in axis:
                axis[key] = len(table)
                table.append((doc, s, e, tokens))
            docs[i, j] = axis[key]
            scores[i, j] = value
    chunks = Chunks(np.array([t[0] for t in table], dtype=object), [t[1] for t in table], [t[2] for t in table],
                    [t[3] for t in table])
    run = Run(np.array(list(rankings), dtype=object), chunks.ids, docs, scores, path.stem)
    return ChunkRun(run, chunks)


def chunk_table_bytes(chunks: Chunks) -> bytes:
    """A chunking's table (``chunking.tsv``): :data:`CHUNK_TABLE_COLUMNS`, one chunk per line."""
    lines = ["\t".join(CHUNK_TABLE_COLUMNS)]
    lines.extend(f"{d}\t{s}\t{e}\t{n}" for d, s, e, n in zip(chunks.doc_ids, chunks.starts.tolist(),
                                                            chunks.ends.tolist(), chunks.tokens.tolist()))
    return ("\n".join(lines) + "\n").encode("utf-8")


def read_chunk_table(path: str | Path) -> Chunks:
    """A ``chunking.tsv`` (:data:`CHUNK_TABLE_COLUMNS`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such chunking file", path)
    rows = [(row[0], _number(row[1], "start", path, line), _number(row[2], "end", path, line),
             _number(row[3], "tokens", path, line))
            for line, row in tsv_rows(path, CHUNK_TABLE_COLUMNS, "a job's chunking.tsv")]
    return Chunks(np.array([r[0] for r in rows], dtype=object), [r[1] for r in rows], [r[2] for r in rows],
                  [r[3] for r in rows])
