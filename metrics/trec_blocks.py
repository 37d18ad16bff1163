"""A large TREC run scored a block of questions at a time: read with pyarrow's CSV reader, joined with the judgments
into one :class:`~metrics.judged.Judged` per block, never held whole.

``python -m metrics`` reads a run of a few megabytes or more this way (:data:`FAST_BYTES`; below, pyarrow's import
costs more than it saves). The file is cut into blocks of about :data:`BLOCK_BYTES` at line ends; a block's last
question is held back and joined to the next block, so that when the run lists each question's lines together (as
every TREC run does), memory holds one block and its questions, whatever the size of the file. A question found again
after its block was scored means the run is not grouped by question: the file is then read as one block (memory
grows with the file, as any reader's does).

The blocks read exactly what :func:`metrics.trec.read_trec_run` reads, ordered as trec_eval orders (score as a 32-bit
float descending, ties by docno descending, ``form_res_rels.c``). Whatever this reader is not sure to read as the line
reader does (a line of other than six fields, several spaces or a tab among spaces, a ``#`` comment, a byte that is
not UTF-8, a NUL, a score that is not a finite number, a document listed twice) raises :class:`Unsure`, and the
caller reads the file with the line reader instead, which reads it or names the line that is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from metrics.judged import Judged
from metrics.qrels import Qrels
from metrics.ranking import Hits
from metrics.textfile import check_file

if TYPE_CHECKING:
    import pyarrow as pa

FAST_BYTES = 4 << 20  # runs of this size and more are read in blocks with pyarrow
BLOCK_BYTES = 32 << 20  # text read and scored at a time
COLUMNS = ["q", "q0", "d", "rank", "s", "tag"]


class Unsure(Exception):
    """The block reader cannot be sure to read this file as the line reader does: read it line by line."""


class NotGrouped(Exception):
    """A question's lines are not all together: the run is read as one block."""


@dataclass(frozen=True)
class JudgmentIndex:
    """The judgments as the blocks join them: their documents as a pyarrow array (looked up in C), each
    (question, document) pair as one sorted integer, and each question's grades best first."""

    qrels: Qrels
    docs: Any  # pyarrow string array of the judged document ids
    query_at: dict[str, int]
    keys: np.ndarray  # query code * number of documents + document code, sorted
    grades: np.ndarray  # aligned with keys
    ideal_grades: np.ndarray  # every judgment's grade, by question, best first
    ideal_starts: np.ndarray  # where each question's grades start in ideal_grades (one more: the end)

    @classmethod
    def of(cls, qrels: Qrels) -> JudgmentIndex:
        import pyarrow as pa

        codes = qrels.codes
        n_docs = max(len(codes.doc_vocab), 1)
        keys = codes.query_codes.astype(np.int64) * n_docs + codes.doc_codes
        order = np.argsort(keys, kind="stable")
        by_query = np.lexsort((-qrels.grades, codes.query_codes))
        counts = np.bincount(codes.query_codes, minlength=len(codes.query_vocab))
        return cls(qrels, pa.array(codes.doc_vocab.tolist(), type=pa.string()),
                   {q: i for i, q in enumerate(codes.query_vocab.tolist())}, keys[order], qrels.grades[order],
                   qrels.grades[by_query], np.concatenate(([0], np.cumsum(counts))))

    def ideal(self, query_ids: list[str]) -> Hits:
        """Every judgment of these questions, best first, as rows of Hits (positions 0, 1, ...)."""
        at = np.array([self.query_at.get(q, -1) for q in query_ids], dtype=np.int64)
        present = at >= 0
        starts = np.where(present, self.ideal_starts[np.maximum(at, 0)], 0)
        counts = np.where(present, self.ideal_starts[np.maximum(at, 0) + 1] - starts, 0)
        rows = np.repeat(np.arange(len(query_ids)), counts)
        offsets = np.concatenate(([0], np.cumsum(counts)))
        cols = np.arange(len(rows)) - offsets[rows]
        return Hits(rows, cols, self.ideal_grades[starts[rows] + cols], len(query_ids))


@dataclass(frozen=True)
class Block:
    """The questions of one block in the file's order, their join with the judgments, and the run's tag so far."""

    query_ids: list[str]
    judged: Judged
    tag: str | None
    lines: int = 0  # result lines of the block in the file


def blocks(path: str | Path, qrels: Qrels, max_docs: int | None = None, judged_only: bool = False,
           block_bytes: int | None = BLOCK_BYTES) -> Iterator[Block]:
    """The run at ``path`` a block of questions at a time (``block_bytes=None``: as one block), each joined with
    ``qrels``, trec_eval's ``-M`` then ``-J`` applied. Raises :class:`Unsure` when the line reader must read the
    file, :class:`NotGrouped` when a question comes back after its block (read it as one block): either may come
    after blocks were given, and the caller starts again."""
    import pyarrow as pa

    path = check_file(path)
    index = JudgmentIndex.of(qrels)
    delimiter = _delimiter(path)
    held: pa.Table | None = None
    seen: set[str] = set()
    for text, last in _texts(path, block_bytes):
        parts = [t for t in (held, _parse(text, delimiter) if text.strip() else None) if t is not None]
        if not parts:
            continue
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        tag = table.column("tag")[-1].as_py() if table.num_rows else None
        table, held = (table, None) if last else _split_last(table)  # the last question may go on in the next
        if table.num_rows:
            block = _block(table, index, max_docs, judged_only, seen)
            seen.update(block.query_ids)
            yield Block(block.query_ids, block.judged, tag, table.num_rows)


def _texts(path: Path, block_bytes: int | None) -> Iterator[tuple[bytes, bool]]:
    """The file's bytes in pieces that end at a line end, each checked to be text, and whether it is the last."""
    with path.open("rb") as handle:
        if block_bytes is None:
            yield _checked(handle.read()), True
            return
        rest = b""
        while True:
            piece = handle.read(block_bytes)
            if not piece:
                yield _checked(rest), True
                return
            piece = rest + piece
            cut = piece.rfind(b"\n") + 1
            rest = piece[cut:]
            if cut:
                yield _checked(piece[:cut]), False


def _checked(text: bytes) -> bytes:
    if b"\0" in text:
        raise Unsure("a NUL byte")
    if not text.isascii():
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            raise Unsure("not UTF-8") from None
    return text


def _delimiter(path: Path) -> str:
    """A tab when the first line holds one, else a space (a file that mixes them is the line reader's)."""
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                return "\t" if b"\t" in line else " "
    return " "


def _parse(text: bytes, delimiter: str) -> pa.Table:
    import pyarrow as pa
    from pyarrow import csv

    try:
        table = csv.read_csv(
            pa.py_buffer(text),
            read_options=csv.ReadOptions(column_names=COLUMNS),
            parse_options=csv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False,
                                           escape_char=False, newlines_in_values=False, ignore_empty_lines=True),
            convert_options=csv.ConvertOptions(
                column_types={"q": pa.string(), "d": pa.string(), "s": pa.float64(), "tag": pa.string()},
                include_columns=["q", "d", "s", "tag"], null_values=[], strings_can_be_null=False,
                quoted_strings_can_be_null=False, check_utf8=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise Unsure(str(err)) from None
    return table


def _split_last(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The table without its last question's lines, and those lines."""
    import pyarrow.compute as pc

    q = table.column("q")
    last = pc.equal(q, q[-1])
    return table.filter(pc.invert(last)), table.filter(last)


def _block(table: pa.Table, index: JudgmentIndex, max_docs: int | None, judged_only: bool,
           seen: set[str]) -> Block:
    """One block's questions joined with the judgments, in trec_eval's order."""
    import pyarrow.compute as pc

    q = table.column("q").combine_chunks().dictionary_encode()
    d = table.column("d").combine_chunks().dictionary_encode()
    query_ids = q.dictionary.to_pylist()
    if seen.intersection(query_ids):
        raise NotGrouped
    if any(name.startswith("#") for name in query_ids):
        raise Unsure("a comment line")
    qcodes = q.indices.to_numpy().astype(np.int64)
    dcodes = d.indices.to_numpy().astype(np.int64)
    scores = table.column("s").to_numpy()
    if not np.isfinite(scores).all():
        raise Unsure("a score that is not a finite number")
    n_docs = len(d.dictionary)
    if pc.count_distinct(qcodes * n_docs + dcodes).as_py() < len(qcodes):
        raise Unsure("a document listed twice for a question")

    order = _trec_order(qcodes, dcodes, scores, d.dictionary)
    qcodes, dcodes = qcodes[order], dcodes[order]
    n = len(query_ids)
    counts = np.bincount(qcodes, minlength=n)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    ranks = np.arange(len(qcodes)) - starts[qcodes]
    keep = None if max_docs is None else ranks < max_docs

    # the grade of each retrieved document judged for its question
    doc_at = pc.fill_null(pc.index_in(d.dictionary, value_set=index.docs), -1).to_numpy().astype(np.int64)
    query_at = np.array([index.query_at.get(name, -1) for name in query_ids], dtype=np.int64)
    qi, di = query_at[qcodes], doc_at[dcodes]
    candidate = (qi >= 0) & (di >= 0)
    if keep is not None:
        candidate &= keep
    cells = np.flatnonzero(candidate)
    keys = qi[cells] * max(len(index.docs), 1) + di[cells]
    at = np.minimum(np.searchsorted(index.keys, keys), max(len(index.keys) - 1, 0))
    found = index.keys[at] == keys if len(index.keys) else np.zeros(len(keys), dtype=bool)
    cells, grades = cells[found], index.grades[at[found]]

    lengths = counts if max_docs is None else np.minimum(counts, max_docs)
    rows, cols = qcodes[cells], ranks[cells]
    if judged_only:  # trec_eval -J: unjudged documents (and those judged negative) leave the ranking
        judged = grades >= 0
        rows, grades = rows[judged], grades[judged]
        lengths = np.bincount(rows, minlength=n)
        cols = np.arange(len(rows)) - np.concatenate(([0], np.cumsum(lengths)[:-1]))[rows]
    judged_block = Judged(query_ids, Hits(rows, cols, grades, n), lengths, index.ideal(query_ids))
    return Block(query_ids, judged_block, None)


def _trec_order(qcodes: np.ndarray, dcodes: np.ndarray, scores: np.ndarray, docs: pa.Array) -> np.ndarray:
    """The rows' order as trec_eval ranks them: by question, score as a 32-bit float descending, docno descending.
    A run written in that order (the usual case) is only checked."""
    import pyarrow.compute as pc

    with np.errstate(over="ignore"):
        kept = scores.astype(np.float32)
    same_question = qcodes[1:] == qcodes[:-1]
    if (qcodes[1:] >= qcodes[:-1]).all() and ((kept[1:] <= kept[:-1]) | ~same_question).all():
        order = np.arange(len(qcodes))
    else:
        order = np.lexsort((-kept, qcodes))
        kept, same_question = kept[order], (qcodes[order][1:] == qcodes[order][:-1])
    tied = same_question & (kept[1:] == kept[:-1])
    if not tied.any():
        return order
    member = np.zeros(len(order), dtype=bool)
    member[1:] |= tied
    member[:-1] |= tied
    at = np.flatnonzero(member)
    run_ids = np.cumsum(np.concatenate(([True], ~tied[at[1:] - 1])))  # a new run of ties where the tie breaks
    codes = dcodes[order[at]]
    distinct, inverse = np.unique(codes, return_inverse=True)
    by_name = pc.array_sort_indices(docs.take(distinct), order="descending").to_numpy()
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[by_name] = np.arange(len(distinct))
    order[at] = order[at][np.lexsort((rank[inverse], run_ids))]
    return order
