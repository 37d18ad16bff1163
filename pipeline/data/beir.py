"""Load a BEIR-layout folder (corpus.jsonl[.gz], queries.jsonl, qrels/<split>.tsv) into a Collection; a qrels file
whose header names ``start`` and ``end`` columns holds span judgments (:mod:`pipeline.data.span_judgments`)."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

from metrics.errors import InputError
from metrics.spans import has_span_header, read_beir_spans
from metrics.textfile import check_file, text_lines
from metrics.trec import read_beir_qrels
from pipeline.common import progress
from pipeline.data.assemble import Notes, Records, assemble, join_text, json_object
from pipeline.data.collection import Collection
from pipeline.data.grades import Grading
from pipeline.data.span_judgments import check_spans


def _opener(path: Path):
    """What opens the file's bytes (decompressed for .gz); :func:`metrics.textfile.text_lines` decodes them, so a
    byte that is not UTF-8 is one line naming the file, the line and the byte offset."""
    return (lambda: gzip.open(path, "rb")) if path.suffix == ".gz" else (lambda: path.open("rb"))


def read_jsonl(path: Path, what: str) -> Iterator[tuple[int, str, str]]:
    """Stream ``(line, _id, text)``; a title is prepended to the text as BEIR does."""
    try:
        yield from _records(check_file(path), what)
    except (OSError, EOFError) as exc:  # a damaged .gz file
        raise InputError(f"cannot be read: {exc}", path) from None


def _records(path: Path, what: str) -> Iterator[tuple[int, str, str]]:
    size = path.stat().st_size if path.suffix != ".gz" else None  # characters read track bytes closely enough
    with progress.ticker(size, f"reading {path.name}", "B", unit_scale=True) as tick:
        for number, line in text_lines(path, _opener(path)):
            tick(len(line))
            if not line.strip():
                continue
            record = json_object(line, path, number, what)
            if "_id" not in record or record["_id"] in (None, ""):
                raise InputError(f"{what} without an '_id'", path, number)
            title, text = record.get("title") or "", record.get("text") or ""
            if not isinstance(title, str) or not isinstance(text, str):
                raise InputError(f"{what} {record['_id']}: 'title' and 'text' must be strings", path, number)
            yield number, str(record["_id"]), join_text((title, text))


def find_corpus_file(folder: Path) -> Path:
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (folder / name).is_file():
            return folder / name
    raise InputError("no corpus.jsonl or corpus.jsonl.gz in this folder", folder)


def load_beir(path: str | Path, split: str = "test", name: str | None = None, strict: bool = False,
              grading: Grading | None = None) -> Collection:
    """Load and validate a BEIR folder; the questions are those judged in ``split``, the grades read as ``grading``
    says (:mod:`pipeline.data.grades`; default: as they are).

    What the load goes on with is reported in ``notes``, one :class:`~metrics.errors.Note` per kind: judgments naming
    unknown documents or questions (dropped), documents or questions with empty text (kept), questions without a
    relevant judgment (left out of the means). With ``strict`` each of them raises instead. Malformed lines,
    duplicate ids and bytes that are not UTF-8 always raise :class:`InputError` with file and line.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise InputError("corpus folder does not exist", folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise InputError(f"no judgments for split {split!r} (available: {', '.join(available) or 'none'})",
                         qrels_path)
    notes = Notes(strict)
    corpus_file = find_corpus_file(folder)
    documents = Records.read(read_jsonl(corpus_file, "document"), "document", corpus_file)
    questions = Records.read(read_jsonl(folder / "queries.jsonl", "question"), "question", folder / "queries.jsonl")
    spans = None
    if has_span_header(qrels_path):  # judgments with character offsets: 'query-id corpus-id score start end'
        qrels, spans, lines = read_beir_spans(qrels_path)
        check_spans(spans, lines, documents.ids, documents.texts, qrels_path)
    else:
        qrels = read_beir_qrels(qrels_path)
    return assemble(name or folder.name, documents, questions, qrels, judgments=str(qrels_path.resolve()),
                    split=split, notes=notes, source=str(folder.resolve()), origin={"route": "beir"}, grading=grading,
                    spans=spans)
