"""TREC qrels and run files, read the way trec_eval reads them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from metrics.errors import InputError
from metrics.qrels import Qrels, QrelsBuilder
from metrics.run import PAD, Run


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    """Numbered, split lines; blank lines and ``#`` comment lines are skipped, as trec_eval skips them."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", path)
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if fields and not fields[0].startswith("#"):
                yield number, fields


def read_trec_qrels(path: str | Path) -> Qrels:
    """``qid iter docno rel`` lines; a repeated (qid, docno) pair is an error naming both lines."""
    judgments = QrelsBuilder(path)
    for number, fields in _lines(path):
        if len(fields) != 4:
            raise InputError(f"expected 4 fields 'qid iter docno relevance', found {len(fields)}", path, number)
        try:
            grade = int(fields[3])
        except ValueError:
            raise InputError(f"relevance {fields[3]!r} is not an integer", path, number) from None
        judgments.add(fields[0], fields[2], grade, number)
    return judgments.build()


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
            raise InputError(f"score {fields[4]!r} is not a number", path, number) from None
        if not np.isfinite(score):
            raise InputError(f"score {fields[4]!r} is not finite", path, number)
        q.append(fields[0])
        d.append(fields[2])
        s.append(score)
        where.append(number)
        tag = fields[5]
    frame = pd.DataFrame({"q": pd.array(q, dtype=object), "d": pd.array(d, dtype=object), "s": s, "line": where})
    dup = frame.duplicated(["q", "d"], keep="first")
    if dup.any():
        row = frame[dup].iloc[0]
        first = frame[(frame.q == row.q) & (frame.d == row.d)].line.iloc[0]
        raise InputError(f"document {row.d} is listed twice for question {row.q} (first on line {first})",
                         path, int(row.line))
    return run_from_frame(frame, name or tag or Path(path).stem)


def run_from_frame(frame: pd.DataFrame, name: str) -> Run:
    """Columns ``q``, ``d``, ``s`` in any order -> a Run ordered score desc, docno desc (trec_eval's order)."""
    if frame.empty:
        return Run(np.array([], dtype=object), np.array([], dtype=object), np.zeros((0, 0)), np.zeros((0, 0)), name)
    qcodes, queries = pd.factorize(frame["q"], sort=True)
    dcodes, docs = pd.factorize(frame["d"], sort=True)
    # dcodes follow sorted docno, so "docno descending" is "code descending"
    order = np.lexsort((-dcodes, -frame["s"].to_numpy(), qcodes))
    qcodes, dcodes, scores = qcodes[order], dcodes[order], frame["s"].to_numpy()[order]
    counts = np.bincount(qcodes, minlength=len(queries))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.arange(len(qcodes)) - starts[qcodes]
    matrix = np.full((len(queries), counts.max()), PAD, dtype=np.int64)
    values = np.full(matrix.shape, np.nan)
    matrix[qcodes, pos] = dcodes
    values[qcodes, pos] = scores
    return Run(np.asarray(queries, dtype=object), np.asarray(docs, dtype=object), matrix, values, name)


def write_trec_run(run: Run, path: str | Path, tag: str | None = None) -> Path:
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for line in run.trec_lines(tag):
            handle.write(line + "\n")
    return path
