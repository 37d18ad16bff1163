"""Large TREC files read with pyarrow's CSV reader: judgments at once, a run a block of questions at a time, each block
joined with the judgments into one :class:`~metrics.judged.Judged`, the run never held whole.

``python -m metrics`` reads a run of two megabytes or more this way (:data:`FAST_BYTES`; below, pyarrow's import
costs more than it saves). The file is cut into blocks of about :data:`BLOCK_BYTES` at line ends; a block's last
question is held back and joined to the next block, so that when the run lists each question's lines together (as
every TREC run does), memory holds one block and its questions, whatever the size of the file. A question found again
after its block was scored means the run is not grouped by question: :class:`NotGrouped`, and the caller reads the
file as one block (memory grows with the file, as any reader's does).

The blocks read exactly what :func:`metrics.trec.read_trec_run` reads, ordered as trec_eval orders (score as a 32-bit
float descending, ties by docno descending, ``form_res_rels.c``). Document ids are compared as the bytes of their
text (each id's bytes as big-endian 64-bit words, zero padded: their order is ``strcmp``'s), not hashed one by one.
Whatever this reader is not sure to read as the line reader does (a line of other than six fields, several spaces or a
tab among spaces, a ``#`` comment, a byte that is not UTF-8, a NUL, a score that is not a finite number, a document
listed twice) raises :class:`Unsure`, and the caller reads the file with the line reader instead, which reads it or
names the line that is wrong.
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

UNJUDGED = -(2**62)  # the grade of a retrieved document nobody judged
FAST_BYTES = 2 << 20  # runs of this size (about 60,000 lines) and more are read in blocks with pyarrow
FAST_QRELS_BYTES = 256 << 10  # judgments of this size and more are read with pyarrow, when a run is
BLOCK_BYTES = 8 << 20  # text read and scored at a time
RUN_COLUMNS = ["q", "q0", "d", "rank", "s", "tag"]
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class Unsure(Exception):
    """The pyarrow reader cannot be sure to read this file as the line reader does: read it line by line."""


class NotGrouped(Exception):
    """A question's lines are not all together: the run is read as one block."""


def _options(columns: list[str], types: dict[str, Any], delimiter: str, skip: int = 0) -> dict[str, Any]:
    """pyarrow's CSV options for a whitespace-separated TREC file: no quoting, no nulls, ``types`` converted."""
    from pyarrow import csv

    return {
        "read_options": csv.ReadOptions(column_names=columns, skip_rows=skip),
        "parse_options": csv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False, escape_char=False,
                                          newlines_in_values=False, ignore_empty_lines=True),
        "convert_options": csv.ConvertOptions(column_types=types, include_columns=list(types), null_values=[],
                                              strings_can_be_null=False, quoted_strings_can_be_null=False,
                                              check_utf8=False),
    }


_NUMPY = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "double": np.float64}


def _numpy(array: pa.Array) -> np.ndarray:
    """A pyarrow array of numbers, without nulls, as numpy, read from its buffer (pyarrow's own to_numpy imports
    pandas, half a second this command does not need)."""
    dtype = np.dtype(_NUMPY[str(array.type)])
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def _valid(array: pa.Array) -> np.ndarray:
    """Which entries of a pyarrow array are not null (from its validity bitmap)."""
    bitmap = array.buffers()[0]
    if bitmap is None:
        return np.ones(len(array), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[array.offset: array.offset + len(array)].astype(bool)


def _strings(values: list[str]) -> pa.Array:
    """A pyarrow string array of ``values``, built from its buffers (``pa.array`` imports pandas)."""
    import pyarrow as pa

    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return pa.StringArray.from_buffers(len(encoded), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(encoded)))


def _read(text: bytes, **options: Any) -> pa.Table:
    import pyarrow as pa
    from pyarrow import csv

    try:
        return csv.read_csv(pa.py_buffer(text), **options)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise Unsure(str(err)) from None


# Besides its delimiter, whitespace that would split a field where Python's str.split() splits it
_OTHER_SPACE = {" ": (b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f"),
                "\t": (b" ", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")}


def _checked(text: bytes, delimiter: str | None = None) -> bytes:
    """``text`` when it is plain ASCII text (no NUL) whose fields only ``delimiter`` separates: the line reader reads
    anything else (or names the line that is wrong)."""
    if b"\0" in text or not text.isascii():
        raise Unsure("a NUL byte, or a byte that is not ASCII")
    if delimiter is not None and any(space in text for space in _OTHER_SPACE[delimiter]):
        raise Unsure("fields split by other whitespace than the delimiter")
    return text


def _first_line(text: bytes) -> bytes:
    """The first line that is not blank (b"" when there is none)."""
    start = 0
    while start < len(text):
        end = text.find(b"\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return text[start:end]
        start = end + 1
    return b""


def _delimiter(line: bytes) -> str:
    return "\t" if b"\t" in line else " "


def read_qrels(path: str | Path) -> Qrels:
    """TREC qrels (``qid iter docno rel``) or BEIR's qrels TSV (header line optional), as
    :func:`metrics.trec.read_qrels` reads them; :class:`Unsure` for what it must read line by line."""
    import pyarrow as pa

    text = check_file(path).read_bytes()
    first = _first_line(text)
    tabs = b"\t" in first
    _checked(text, _delimiter(first))
    fields = first.split(b"\t") if tabs else first.split()
    if len(fields) == 4:
        columns, types, skip = ["q", "iter", "d", "g"], {"q": pa.string(), "d": pa.string(), "g": pa.int64()}, 0
    elif len(fields) == 3 and tabs:
        header = not fields[2].strip().lstrip(b"+-").isdigit()
        columns, types, skip = ["q", "d", "g"], {"q": pa.string(), "d": pa.string(), "g": pa.int64()}, int(header)
        if header and text.startswith((b"\n", b"\r", b" ")):
            raise Unsure("a header after blank lines")
    else:
        raise Unsure("not the usual layout")
    table = _read(text, **_options(columns, types, "\t" if tabs else " ", skip))
    query_codes, query_vocab, _ = _factorize(table.column("q").combine_chunks())
    if any(name.startswith("#") for name in query_vocab):
        raise Unsure("a comment line")
    doc_codes, doc_vocab, words = _factorize(table.column("d").combine_chunks())
    try:
        qrels = ReadQrels.from_codes(np.array(query_vocab, dtype=object), query_codes,
                                     np.array(doc_vocab, dtype=object), doc_codes,
                                     _numpy(table.column("g").combine_chunks()).copy())
    except ValueError:  # a pair judged twice: the line reader names both lines
        raise Unsure("a pair judged twice") from None
    object.__setattr__(qrels, "doc_words", words)
    return qrels


class ReadQrels(Qrels):
    """Judgments read by :func:`read_qrels`, which keep their documents' words (:func:`doc_words`) for the blocks'
    lookups rather than have them made again from the ids."""

    doc_words: np.ndarray


@dataclass(frozen=True)
class JudgmentIndex:
    """The judgments as the blocks join them: their documents as a pyarrow array (looked up in C), each
    (question, document) pair as one sorted integer, and each question's grades best first."""

    doc_keys: np.ndarray  # each judged document's key (:func:`_hash` of its words), sorted
    doc_of_key: np.ndarray  # the document code of each key
    doc_words: np.ndarray  # each judged document's words (:func:`doc_words`), by code
    marked: np.ndarray  # a bit table of the keys' slots: most unjudged documents are discarded with one gather
    n_docs: int
    query_at: dict[str, int]
    keys: np.ndarray  # query code * number of documents + document code, sorted
    grades: np.ndarray  # aligned with keys
    ideal_grades: np.ndarray  # every judgment's grade, by question, best first
    ideal_starts: np.ndarray  # where each question's grades start in ideal_grades (one more: the end)

    @classmethod
    def of(cls, qrels: Qrels) -> JudgmentIndex:
        codes = qrels.codes
        n_docs = max(len(codes.doc_vocab), 1)
        keys = codes.query_codes.astype(np.int64) * n_docs + codes.doc_codes
        order = np.argsort(keys, kind="stable")
        by_query = np.lexsort((-qrels.grades, codes.query_codes))
        counts = np.bincount(codes.query_codes, minlength=len(codes.query_vocab))
        words = getattr(qrels, "doc_words", None)
        if words is None:
            words = doc_words(_strings(codes.doc_vocab.tolist()))
        doc_keys = _hash(words)
        by_key = np.argsort(doc_keys, kind="stable")
        marked = np.zeros(1 << _slot_bits(len(doc_keys)), dtype=bool)
        marked[_slots(doc_keys, len(marked))] = True
        return cls(doc_keys[by_key], by_key, words, marked, len(codes.doc_vocab),
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

    def doc_codes(self, words: np.ndarray) -> np.ndarray:
        """The code of each row's document among the judged ones, -1 where it is none of them: keys looked up in the
        sorted keys, each match checked word for word (keys of equal hash are tried in turn)."""
        out = np.full(len(words), -1, dtype=np.int64)
        if not self.n_docs or not len(words):
            return out
        width = max(words.shape[1], self.doc_words.shape[1])
        mine = np.pad(words, ((0, 0), (0, width - words.shape[1]))) if words.shape[1] < width else words
        theirs = (np.pad(self.doc_words, ((0, 0), (0, width - self.doc_words.shape[1])))
                  if self.doc_words.shape[1] < width else self.doc_words)
        keys = _hash(mine)
        candidates = np.flatnonzero(self.marked[_slots(keys, len(self.marked))])
        keys = keys[candidates]
        first = np.searchsorted(self.doc_keys, keys)
        found = np.full(len(candidates), -1, dtype=np.int64)
        step = 0
        while True:  # the k-th document of equal key, for each candidate still unmatched
            at = first + step
            open_ = (at < len(self.doc_keys)) & (found < 0)
            open_[open_] &= self.doc_keys[at[open_]] == keys[open_]
            if not open_.any():
                out[candidates] = found
                return out
            rows = np.flatnonzero(open_)
            codes = self.doc_of_key[at[rows]]
            same = (theirs[codes] == mine[candidates[rows]]).all(axis=1)
            found[rows[same]] = codes[same]
            step += 1

    def grades_of(self, query_at: np.ndarray, words: np.ndarray) -> np.ndarray:
        """The grade of each (question, document) row, :data:`UNJUDGED` where it is not judged."""
        doc_at = self.doc_codes(words)
        out = np.full(len(doc_at), UNJUDGED, dtype=np.int64)
        cells = np.flatnonzero((doc_at >= 0) & (query_at >= 0))
        if len(cells) and len(self.keys):
            keys = query_at[cells] * max(self.n_docs, 1) + doc_at[cells]
            at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
            found = self.keys[at] == keys
            out[cells[found]] = self.grades[at[found]]
        return out


@dataclass(frozen=True)
class Block:
    """The questions of one block in the file's order, their join with the judgments, the run's tag so far (the last
    line's) and the block's result lines."""

    query_ids: list[str]
    judged: Judged
    tag: str | None
    lines: int


def blocks(path: str | Path, qrels: Qrels, max_docs: int | None = None, judged_only: bool = False,
           block_bytes: int | None = BLOCK_BYTES) -> Iterator[Block]:
    """The run at ``path`` a block of questions at a time (``block_bytes=None``: as one block), each joined with
    ``qrels``, trec_eval's ``-M`` then ``-J`` applied. Raises :class:`Unsure` when the line reader must read the
    file, :class:`NotGrouped` when a question comes back after its block (read it as one block): either may come
    after blocks were given, and the caller starts again."""
    import pyarrow as pa

    path = check_file(path)
    index = JudgmentIndex.of(qrels)
    held: pa.Table | None = None
    seen: set[str] = set()
    delimiter = tag = None
    for text, last in _texts(path, block_bytes):
        first = _first_line(text)
        if delimiter is None and first:
            delimiter = _delimiter(first)
        if first:
            _checked(text, delimiter)
        parsed = _read(text, **_options(RUN_COLUMNS, {"q": pa.string(), "d": pa.string(), "s": pa.float64()},
                                        delimiter)) if first else None
        parts = [t for t in (held, parsed) if t is not None and t.num_rows]
        if not parts:
            continue
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        tag = _last_tag(text) if first else tag
        table, held = (table, None) if last else _split_last(table)  # the last question may go on in the next
        if table.num_rows:
            block = _block(table, index, max_docs, judged_only, seen)
            seen.update(block.query_ids)
            yield Block(block.query_ids, block.judged, tag, table.num_rows)


def _texts(path: Path, block_bytes: int | None) -> Iterator[tuple[bytes, bool]]:
    """The file's bytes in pieces that end at a line end, each checked to be text, and whether it is the last."""
    with path.open("rb") as handle:
        if block_bytes is None:
            yield handle.read(), True
            return
        rest = b""
        while True:
            piece = handle.read(block_bytes)
            if not piece:
                yield rest, True
                return
            piece = rest + piece
            cut = piece.rfind(b"\n") + 1
            rest = piece[cut:]
            if cut:
                yield piece[:cut], False


def _last_tag(text: bytes) -> str:
    """The run tag of the text's last line that is not blank (trec_eval's runid is the last line's)."""
    end = len(text.rstrip())
    line = text[text.rfind(b"\n", 0, end) + 1: end]
    fields = line.split()
    return fields[5].decode() if len(fields) > 5 else ""


def _split_last(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The table without its last question's lines, and those lines."""
    import pyarrow.compute as pc

    q = table.column("q")
    last = pc.equal(q, q[-1])
    return table.filter(pc.invert(last)), table.filter(last)


_KEEP_BYTES = np.array([0] + [(2**64 - 1) ^ (2 ** (8 * (8 - n)) - 1) for n in range(1, 9)], dtype=np.uint64)


def doc_words(docs: pa.Array, width: int = 0) -> np.ndarray:
    """Each id's bytes as big-endian 64-bit words, zero padded (one row per id, at least ``width`` words): equal rows
    are equal ids, and rows in lexicographic order are ids in ``strcmp`` order. Each word is one unaligned 8-byte load
    from the ids' buffer, the bytes past the id's end masked off."""
    offsets = np.frombuffer(docs.buffers()[1], dtype=np.int32, count=len(docs) + 1, offset=docs.offset * 4)
    data = np.frombuffer(docs.buffers()[2], dtype=np.uint8) if docs.buffers()[2] is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    words = max(width, 1, -(-int(lengths.max(initial=0)) // 8))
    padded = np.zeros(len(data) + 8 * words, dtype=np.uint8)
    padded[: len(data)] = data
    loads = np.ndarray(shape=(len(padded) - 7,), dtype=">u8", buffer=padded, strides=(1,))
    out = np.empty((len(docs), words), dtype=np.uint64)
    for j in range(words):
        out[:, j] = loads[offsets[:-1] + 8 * j]
        out[:, j] &= _KEEP_BYTES[np.clip(lengths - 8 * j, 0, 8)]
    return out


def _factorize(strings: pa.Array) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each string's code among the distinct strings, in first-seen order, those strings and their words: their
    words' keys sorted (pyarrow's dictionary encoding holds a hash table several times the ids' size)."""
    import pyarrow as pa

    words = doc_words(strings)
    keys = _hash(words)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if words.shape[1] > 1 and not (words == words[first[inverse]]).all():
        raise Unsure("two ids of one hash")  # never seen; the line reader reads them
    by_first = np.argsort(first)
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_first] = np.arange(len(first))
    picks = first[by_first].astype(np.int64)
    taken = strings.take(pa.Array.from_buffers(pa.int64(), len(picks), [None, pa.py_buffer(picks.tobytes())]))
    return rank[inverse.reshape(-1)], taken.to_pylist(), words[picks]


def _slot_bits(n_keys: int) -> int:
    """Slots of a bit table, as a power of two: about 16 per key, within [2^10, 2^26]."""
    return int(min(max(np.ceil(np.log2(max(n_keys, 1) * 16)), 10), 26))


def _slots(keys: np.ndarray, size: int) -> np.ndarray:
    """Fibonacci hashing of 64-bit keys into ``size`` (a power of two) slots."""
    return ((keys * _GOLDEN) >> np.uint64(64 - size.bit_length() + 1)).astype(np.intp)


def _hash(words: np.ndarray) -> np.ndarray:
    """One 64-bit key per row of words: the word itself for ids of up to 8 bytes (exact), else a hash."""
    h = words[:, 0].copy()
    for j in range(1, words.shape[1]):
        h = (h * _GOLDEN) ^ words[:, j]
    return h


def _block(table: pa.Table, index: JudgmentIndex, max_docs: int | None, judged_only: bool,
           seen: set[str]) -> Block:
    """One block's questions joined with the judgments, in trec_eval's order."""
    q = table.column("q").combine_chunks().dictionary_encode()
    query_ids = q.dictionary.to_pylist()
    if seen.intersection(query_ids):
        raise NotGrouped
    if any(name.startswith("#") for name in query_ids):
        raise Unsure("a comment line")
    scores = _numpy(table.column("s").combine_chunks())
    if not np.isfinite(scores).all():
        raise Unsure("a score that is not a finite number")
    docs = table.column("d").combine_chunks()
    words = doc_words(docs)
    qcodes = _numpy(q.indices).astype(np.int64)
    if _listed_twice(qcodes, words, len(query_ids)):
        raise Unsure("a document listed twice for a question")

    order = _trec_order(qcodes, scores, words)
    qcodes = qcodes[order]
    n = len(query_ids)
    counts = np.bincount(qcodes, minlength=n)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    ranks = np.arange(len(qcodes)) - starts[qcodes]
    query_at = np.array([index.query_at.get(name, -1) for name in query_ids], dtype=np.int64)
    grades = index.grades_of(query_at[_numpy(q.indices)], words)[order]
    judged = grades != UNJUDGED
    if max_docs is not None:
        judged &= ranks < max_docs
    cells = np.flatnonzero(judged)
    lengths = counts if max_docs is None else np.minimum(counts, max_docs)
    rows, cols, grades = qcodes[cells], ranks[cells], grades[cells]
    if judged_only:  # trec_eval -J: unjudged documents (and those judged negative) leave the ranking
        kept = grades >= 0
        rows, grades = rows[kept], grades[kept]
        lengths = np.bincount(rows, minlength=n)
        cols = np.arange(len(rows)) - np.concatenate(([0], np.cumsum(lengths)[:-1]))[rows]
    join = Judged(query_ids, Hits(rows, cols, grades, n), lengths, index.ideal(query_ids))
    return Block(query_ids, join, None, len(qcodes))


def _listed_twice(qcodes: np.ndarray, words: np.ndarray, n: int) -> bool:
    """Whether a question lists a document twice: each question's keys sorted (a question a row of a matrix when the
    questions list about as many documents each, as runs do; else all keys with the question in their top bits), a
    repeated key then checked word for word."""
    keys = _hash(words)
    counts = np.bincount(qcodes, minlength=n)
    grouped = (qcodes[1:] >= qcodes[:-1]).all()
    if grouped and n * int(counts.max(initial=0)) <= 2 * len(keys) + 1024:
        empty = np.iinfo(np.uint64).max  # no ASCII id's key: 8 bytes of 0xff
        matrix = np.full((n, int(counts.max(initial=0))), empty, dtype=np.uint64)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        matrix[qcodes, np.arange(len(keys)) - starts[qcodes]] = keys
        matrix.sort(axis=1)
        if not ((matrix[:, 1:] == matrix[:, :-1]) & (matrix[:, 1:] != empty)).any():
            return False
    else:
        bits = max(int(n - 1).bit_length(), 1)
        top = (qcodes.astype(np.uint64) << np.uint64(64 - bits)) | (keys >> np.uint64(bits))
        ordered = np.sort(top)
        if not (ordered[1:] == ordered[:-1]).any():
            return False
    order = np.lexsort((keys, qcodes))  # a repeated key (rare): find the rows and compare them word for word
    again = np.flatnonzero((keys[order][1:] == keys[order][:-1]) & (qcodes[order][1:] == qcodes[order][:-1]))
    first, second = order[again], order[again + 1]
    return bool((words[first] == words[second]).all(axis=1).any())


def _trec_order(qcodes: np.ndarray, scores: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The rows' order as trec_eval ranks them: by question, score as a 32-bit float descending, docno descending.
    A run written in that order (the usual case) is only checked."""
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
    tied_words = words[order[at]]
    keys = [~tied_words[:, j] for j in range(words.shape[1] - 1, -1, -1)]  # docno descending, last word least
    order[at] = order[at][np.lexsort((*keys, run_ids))]
    return order
