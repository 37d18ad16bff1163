"""The loop without Label Studio: the pool as a CSV/TSV sheet a person fills in a spreadsheet (a grade per row), read
back with one clear line per bad row. Each assessor fills a copy; the ``assessor`` column (or, left blank, the file's
name) says whose grades they are. Rows left without a grade are not judged yet.

A span pool's sheet (:func:`write_span_sheet`) has ``start``, ``end`` and ``text`` columns beside ``grade``: a row per
highlight (copy a pair's row for a second one), its offsets into the document (end exclusive) or the highlighted text
itself, located in the document when the pull checks it; a grade without either judges the whole document, the
lowest grade marks it not relevant. ``pooled_chunks`` says where the systems' chunks are (``start:end``), to start
there. Read back as marks (:func:`read_span_sheets`), each checked by :mod:`pipeline.judging_maths.spans`."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd

from metrics.errors import InputError
from pipeline.annotation_tools import ANNOTATION_COLUMNS
from pipeline.judging_maths.scale import Scale
from pipeline.judging_maths.spans import MARK_COLUMNS

COLUMNS = ["order", "query_id", "doc_id", "grade", "assessor", "question", "document"]
SPAN_COLUMNS = ["order", "query_id", "doc_id", "grade", "start", "end", "text", "assessor", "pooled_chunks", "question",
                "document"]
SUFFIXES = {".csv": ",", ".tsv": "\t"}


def delimiter(path: Path) -> str:
    try:
        return SUFFIXES[path.suffix.lower()]
    except KeyError:
        raise InputError(f"a sheet is a .csv or .tsv file, not {path.suffix or 'a file without an ending'}",
                         path) from None


POOL_LINE = "# pool: "


def write_sheet(path: Path, pairs: pd.DataFrame, questions: dict[str, str], documents: dict[str, str],
                scale: Scale, pool: Path) -> Path:
    """The pool as a sheet, in judging order; the pool's folder and the scale's meanings in comment lines above the
    header."""
    sep = delimiter(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8", newline="") as handle:
        handle.write(f"{POOL_LINE}{pool.resolve()}\n# grades: {scale.describe()}\n")
        writer = csv.writer(handle, delimiter=sep)
        writer.writerow(COLUMNS)
        for i, (query, doc) in enumerate(zip(pairs["query_id"], pairs["doc_id"]), 1):
            writer.writerow([i, query, doc, "", "", questions.get(query, ""), documents.get(doc, "")])
    partial.replace(path)  # whole or not at all
    return path


def write_span_sheet(path: Path, pairs: pd.DataFrame, questions: dict[str, str], documents: dict[str, str],
                     scale: Scale, pool: Path, marked: dict[tuple[str, str], list[tuple[int, int]]]) -> Path:
    """A span pool as a sheet (:data:`SPAN_COLUMNS`), in judging order, each pair's pooled chunks as ``start:end``."""
    sep = delimiter(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8", newline="") as handle:
        handle.write(f"{POOL_LINE}{pool.resolve()}\n# grades: {scale.describe()}\n# a row per highlight: start and "
                     f"end (characters, end exclusive) or the highlighted text; a grade alone judges the whole "
                     f"document; {scale.low} marks it not relevant\n")
        writer = csv.writer(handle, delimiter=sep)
        writer.writerow(SPAN_COLUMNS)
        for i, (query, doc) in enumerate(zip(pairs["query_id"], pairs["doc_id"]), 1):
            chunks = " ".join(f"{s}:{e}" for s, e in marked.get((query, doc), []))
            writer.writerow([i, query, doc, "", "", "", "", "", chunks, questions.get(query, ""),
                             documents.get(doc, "")])
    partial.replace(path)
    return path


def is_span_sheet(path: Path) -> bool:
    """Whether a sheet's header names ``start`` and ``end`` (a span pool's)."""
    header = _header(path)
    return "start" in header and "end" in header


def _header(path: Path) -> list[str]:
    if not path.is_file():
        raise InputError("no such sheet", path)
    with path.open(encoding="utf-8-sig", newline="") as handle:
        for record in csv.reader(handle, delimiter=delimiter(path)):
            if record and not record[0].startswith("#"):
                return [h.strip() for h in record]
    return []


def read_span_sheets(paths: Sequence[Path], pool: set[tuple[str, str]], scale: Scale) -> pd.DataFrame:
    """Every graded row of span sheets as marks (``MARK_COLUMNS``, ``where`` naming the file and line); a row that
    is no pair of the pool, a grade outside the scale or offsets that are not whole numbers stop with one line."""
    rows = []
    for path, where, values in _graded_rows(paths, pool):
        offsets = [_offset(values.get(k), k, where) for k in ("start", "end")]
        rows.append((values["query_id"].strip(), values["doc_id"].strip(), _assessor(values, path),
                     scale.check(values["grade"], where + ": "), *offsets, values.get("text") or "", "", where, ""))
    return pd.DataFrame(rows, columns=MARK_COLUMNS)


def _assessor(values: dict[str, str], path: Path) -> str:
    """Whose row it is: its ``assessor``, else the file's name."""
    return (values.get("assessor") or "").strip() or path.stem


def _graded_rows(paths: Sequence[Path], pool: set[tuple[str, str]]) -> Iterator[tuple[Path, str, dict[str, str]]]:
    """Each graded row of the sheets (a blank grade is not judged yet): its file, where it is (``file:line``), its
    values by column; a sheet without the columns, or a row that is no pair of the pool, stops with one line."""
    for path in paths:
        if not path.is_file():
            raise InputError("no such sheet", path)
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter=delimiter(path))
            header: list[str] | None = None
            ended = 0  # the line the previous record ended on: a record (its document spans lines) starts after it
            for row_number, record in enumerate(reader, 1):
                begun, ended = ended + 1, reader.line_num
                if not record or (record[0].startswith("#") and header is None):
                    continue
                if header is None:
                    header = [h.strip() for h in record]
                    missing = [c for c in ("query_id", "doc_id", "grade") if c not in header]
                    if missing:
                        raise InputError(f"no column {', '.join(missing)}; the columns found: {', '.join(header)}",
                                         path, reader.line_num)
                    continue
                values = dict(zip(header, record))
                if not (values.get("grade") or "").strip():
                    continue
                query, doc = values["query_id"].strip(), values["doc_id"].strip()
                where = f"{path}:{_place(begun, row_number)}"
                if (query, doc) not in pool:
                    raise InputError(f"{where}: question {query!r} and document {doc!r} are not a pair of this pool "
                                     f"(a row added by hand, or a sheet of another pool)")
                yield path, where, values


def _offset(value: str | None, column: str, where: str) -> int | None:
    text = (value or "").strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not number.is_integer() or number < 0:
        raise InputError(f"{where}: {column} {text!r} is not a whole number of characters")
    return int(number)


def _place(line: int, row: int) -> str:
    """Where a record is: the line it starts on, and its row as a spreadsheet numbers it when that differs (the
    documents of the rows above span several lines)."""
    return str(line) if line == row else f"{line} (row {row})"


def pool_of(sheet: Path) -> Path:
    """The folder of the pool a sheet was written from (its first line says)."""
    if not sheet.is_file():
        raise InputError("no such sheet", sheet)
    with sheet.open(encoding="utf-8-sig") as handle:
        first = handle.readline().strip()
    if not first.startswith(POOL_LINE):
        raise InputError("this sheet does not say which pool it is of: give --pool FOLDER", sheet)
    return Path(first[len(POOL_LINE):])


def read_sheets(paths: Sequence[Path], pool: set[tuple[str, str]], scale: Scale) -> pd.DataFrame:
    """Every graded row of the sheets (``ANNOTATION_COLUMNS``); a bad row stops with one line naming it."""
    rows = [(values["query_id"].strip(), values["doc_id"].strip(), _assessor(values, path),
             scale.check(values["grade"], where + ": "), "") for path, where, values in _graded_rows(paths, pool)]
    return pd.DataFrame(rows, columns=ANNOTATION_COLUMNS)


def sheet_texts(paths: Sequence[Path]) -> dict[tuple[str, str], tuple[str, str]]:
    """Each row's pair with the question and the document the sheet showed (what an adjudicator reads again)."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for path in paths:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header: list[str] | None = None
            for record in csv.reader(handle, delimiter=delimiter(path)):
                if not record or (header is None and record[0].startswith("#")):
                    continue
                if header is None:
                    header = [h.strip() for h in record]
                    continue
                row = dict(zip(header, record))
                pair = ((row.get("query_id") or "").strip(), (row.get("doc_id") or "").strip())
                found[pair] = (row.get("question") or "", row.get("document") or "")
    return found
