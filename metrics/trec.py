"""TREC qrels and run files, read the way trec_eval reads them (BEIR's qrels TSV too), and run files written so that
trec_eval reads back the order they were written in.

trec_eval keeps each score as a C ``float`` (32 bits: ``TEXT_RESULTS.sim`` in its ``trec_format.h``) and orders a
question's documents by that score descending, ties by docno descending. :func:`read_trec_run` orders the same way.

A ranking rankscope makes orders ties by document id *ascending* (docs/helpdesk-reference.md), and its figures are
computed in that order; a ranking from outside (a run file, a user's engine) is already in trec_eval's order. So that
``python -m metrics -c`` or trec_eval, re-scoring the run file a job wrote, gets the figures the job logged,
:func:`write_trec_run` writes the job's order into the scores themselves: within a question, in rank order, a score
that trec_eval would read as tied with the previous written score, or above it (a ranking not in descending order),
is written one unit in the last place of a 32-bit float below that previous score (repeated down a run of ties), so
the written scores strictly decrease as trec_eval reads them and as rankscope reads them. Every other score is
written exactly (``repr``: it reads back to the same 64-bit value). A nudged score differs from the computed one by
about one part in ten million; a 64-bit unit would not do, since trec_eval's 32-bit scores would tie again.

A run in which no question retrieved anything is written as one line for a question no qrels hold
(:data:`NO_RESULTS_LINE`), not as an empty file: trec_eval refuses a file without a result line ("Cannot read results
file"), and so does ``python -m metrics``; with that line both read it, leave the line's question out (it has no
judgment), and with ``-c`` score every judged question 0, as the job did.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from metrics.errors import InputError
from metrics.hashing import first_repeat, sorted_codes
from metrics.qrels import Qrels, QrelsBuilder
from metrics.run import PAD, Run
from metrics.textfile import shown, text_lines

if TYPE_CHECKING:
    import pandas as pd

BEIR_HEADER = ("query-id", "corpus-id", "score")
NO_RESULTS_QUERY, NO_RESULTS_DOC = "rankscope-no-results", "none"  # the line of a run that retrieved nothing
NO_RESULTS_LINE = f"{NO_RESULTS_QUERY} Q0 {NO_RESULTS_DOC} 1 0"  # ... and the run's tag


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    """Numbered, split lines; blank lines and ``#`` comment lines are skipped, as trec_eval skips them."""
    for number, line in text_lines(path):
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            yield number, fields


def _grade(text: str, path: str | Path, number: int, field: str = "relevance") -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{field} {shown(text)} is not an integer", path, number) from None


def read_trec_qrels(path: str | Path) -> Qrels:
    """``qid iter docno rel`` lines; a repeated (qid, docno) pair is an error naming both lines."""
    judgments = QrelsBuilder(path)
    for number, fields in _lines(path):
        if len(fields) != 4:
            raise InputError(f"expected 4 fields 'qid iter docno relevance', found {len(fields)}", path, number)
        judgments.add(fields[0], fields[2], _grade(fields[3], path, number), number)
    return judgments.build()


def read_beir_qrels(path: str | Path) -> Qrels:
    """BEIR's ``query-id<TAB>corpus-id<TAB>score`` lines, with or without that header line (ids may hold spaces
    when the fields are tab-separated); blank lines are skipped. A repeated pair is an error naming both lines."""
    judgments = QrelsBuilder(path)
    first = True
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.rstrip("\n\r").split("\t")]
        if len(fields) != 3:
            fields = line.split()
        if len(fields) != 3:
            raise InputError(f"expected 3 tab-separated fields 'query-id corpus-id score', found {len(fields)}",
                             path, number)
        if first and not _is_integer(fields[2]):
            first = False
            continue  # the header line ('query-id corpus-id score', or a header of other names)
        first = False
        judgments.add(fields[0], fields[1], _grade(fields[2], path, number, "score"), number)
    return judgments.build()


def read_qrels(path: str | Path) -> Qrels:
    """TREC qrels (4 fields) or BEIR's qrels TSV (3 fields, header optional), told apart by the first line that
    is neither blank nor a ``#`` comment."""
    for number, fields in _lines(path):
        if len(fields) == 4:
            return read_trec_qrels(path)
        if len(fields) == 3 or tuple(f.lower() for f in fields) == BEIR_HEADER:
            return read_beir_qrels(path)
        raise InputError(f"expected TREC qrels (4 fields 'qid iter docno relevance') or BEIR qrels (3 tab-separated "
                         f"fields 'query-id corpus-id score'), found {len(fields)} fields", path, number)
    return read_trec_qrels(path)  # no judgment at all: an empty Qrels


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def read_trec_run(path: str | Path, name: str | None = None) -> Run:
    """``qid Q0 docno rank score tag`` lines (anything after the sixth column is ignored, as trec_eval does).

    Each question's documents are ordered as trec_eval orders them: score descending, ties by docno
    descending; the rank column is ignored. A document listed twice for one question is an error. The run's
    name defaults to the tag of the last line (trec_eval's runid).
    """
    q, d, s, where = [], [], [], []
    tag = None
    for number, fields in _lines(path):
        if len(fields) < 6:
            raise InputError(f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}", path, number)
        try:
            score = float(fields[4])
        except ValueError:
            raise InputError(f"score {shown(fields[4])} is not a number", path, number) from None
        if not math.isfinite(score):
            raise InputError(f"score {shown(fields[4])} is not finite", path, number)
        q.append(fields[0])
        d.append(fields[2])
        s.append(score)
        where.append(number)
        tag = fields[5]
    qcodes, queries = sorted_codes(q)
    dcodes, docs = sorted_codes(d)
    repeat = first_repeat(qcodes * len(docs) + dcodes)
    if repeat is not None:
        i, first = repeat
        raise InputError(f"document {d[i]} is listed twice for question {q[i]} (first on line {where[first]})",
                         path, where[i])
    return _ordered_run(qcodes, queries, dcodes, docs, np.array(s, dtype=np.float64), name or tag or Path(path).stem)


def run_from_columns(query_ids: Sequence[str], doc_ids: Sequence[str], scores: Sequence[float], name: str) -> Run:
    """One (question, document, score) per row, in any order -> a Run ordered score desc, docno desc (trec_eval's
    order).

    Scores are compared as trec_eval keeps them, as 32-bit floats: two scores it cannot tell apart are tied, and
    ordered by docno descending; each keeps its 64-bit value.
    """
    qcodes, queries = sorted_codes(np.asarray(query_ids, dtype=object))
    dcodes, docs = sorted_codes(np.asarray(doc_ids, dtype=object))
    return _ordered_run(qcodes, queries, dcodes, docs, np.asarray(scores, dtype=np.float64), name)


def run_from_frame(frame: pd.DataFrame, name: str) -> Run:
    """:func:`run_from_columns` over a DataFrame's columns ``q``, ``d``, ``s``."""
    return run_from_columns(frame["q"].to_numpy(dtype=object), frame["d"].to_numpy(dtype=object),
                            frame["s"].to_numpy(dtype=np.float64), name)


def _ordered_run(qcodes: np.ndarray, queries: np.ndarray, dcodes: np.ndarray, docs: np.ndarray, scores: np.ndarray,
                 name: str) -> Run:
    """The Run of rows given as codes into sorted ``queries`` and ``docs``, in trec_eval's order."""
    if len(qcodes) == 0:
        return Run(np.array([], dtype=object), np.array([], dtype=object), np.zeros((0, 0)), np.zeros((0, 0)), name)
    # dcodes follow sorted docno, so "docno descending" is "code descending"
    with np.errstate(over="ignore"):  # beyond float32's range trec_eval reads an infinity too
        kept = scores.astype(np.float32)
    order = np.lexsort((-dcodes, -kept, qcodes))
    qcodes, dcodes, scores = qcodes[order], dcodes[order], scores[order]
    counts = np.bincount(qcodes, minlength=len(queries))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.arange(len(qcodes)) - starts[qcodes]
    matrix = np.full((len(queries), counts.max()), PAD, dtype=np.int64)
    values = np.full(matrix.shape, np.nan)
    matrix[qcodes, pos] = dcodes
    values[qcodes, pos] = scores
    return Run(queries, docs, matrix, values, name)


def written_scores(scores: np.ndarray) -> np.ndarray:
    """The scores a run file holds for ``scores`` (one row per question, in rank order, NaN after the last), strictly
    decreasing along each row as trec_eval reads them: see the module's docstring for the rule."""
    out = np.array(scores, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        kept = out.astype(np.float32)  # what trec_eval reads
        if out.shape[1] < 2 or not (kept[:, 1:] >= kept[:, :-1]).any():  # NaN compares False: padding never clashes
            return out
        for j in range(1, out.shape[1]):
            clash = kept[:, j] >= kept[:, j - 1]
            if clash.any():
                below = np.nextafter(kept[clash, j - 1], np.float32(-np.inf))
                kept[clash, j] = below
                out[clash, j] = below
    return out


LINES_PER_BLOCK = 50_000  # run-file lines formatted at once: the text of one block is held in memory


def trec_lines(run: Run, tag: str | None = None) -> Iterator[str]:
    """The run as TREC run-file lines (``qid Q0 docno rank score tag``), scores as :func:`written_scores` gives them."""
    for block in _line_blocks(run, tag):
        yield from block


def _line_blocks(run: Run, tag: str | None = None) -> Iterator[list[str]]:
    """:func:`trec_lines` a block of questions at a time, each line ``f"{qid} Q0 {doc} {rank} {score!r} {tag}"``.

    A job writes 30,000 lines; formatting them one f-string at a time was most of the time it spent writing its
    run file. Here the fields are put together per block (ids and rank texts picked with numpy, each score's
    ``repr`` made by ``map``) and each line is one ``str.join``: the same text, made in C."""
    tag = format(tag or run.name)
    scores = written_scores(run.scores)
    lengths = np.asarray(run.lengths, dtype=np.int64)
    if not len(lengths) or not lengths.any():
        yield [f"{NO_RESULTS_LINE} {tag}"]  # not an empty file, which trec_eval refuses (the module's docstring)
        return
    ranks = np.array([str(j) for j in range(1, run.depth + 1)], dtype=object)
    qids = np.array([format(q) for q in run.query_ids], dtype=object)
    ends = np.cumsum(lengths)
    start = 0
    while start < len(lengths):
        done = int(ends[start]) - int(lengths[start])  # lines before this block
        stop = max(int(np.searchsorted(ends, done + LINES_PER_BLOCK, side="right")), start + 1)
        rows = slice(start, stop)
        kept = np.arange(run.depth)[None, :] < lengths[rows, None]  # row-major: question by question, in rank order
        places = np.nonzero(kept)[1]
        names = map(format, run.doc_ids[run.docs[rows][kept]].tolist())
        texts = map(repr, scores[rows][kept].tolist())  # Python floats: the repr of float(score)
        lines = list(map(" ".join, zip(np.repeat(qids[rows], lengths[rows]).tolist(), repeat("Q0"), names,
                                       ranks[places].tolist(), texts, repeat(tag))))
        if lines:  # a block of questions that retrieved nothing writes nothing
            yield lines
        start = stop


def trec_run_bytes(run: Run, tag: str | None = None) -> bytes:
    """The file :func:`write_trec_run` writes, whole, as UTF-8 bytes (for a process that writes it for another)."""
    return "".join("\n".join(block) + "\n" for block in _line_blocks(run, tag)).encode("utf-8")


def write_trec_run(run: Run, path: str | Path, tag: str | None = None) -> Path:
    """Write ``run`` as a TREC run file whose order trec_eval (and :func:`read_trec_run`) reads back as written."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for block in _line_blocks(run, tag):
            handle.write("\n".join(block) + "\n")
    return path
