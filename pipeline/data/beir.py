"""Load a BEIR-layout folder (corpus.jsonl[.gz], queries.jsonl, qrels/<split>.tsv) into a Collection."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from metrics.errors import InputError, Note
from metrics.textfile import check_file, text_lines
from metrics.trec import read_beir_qrels
from pipeline.common import progress
from pipeline.data.collection import Collection

SHOWN = 5  # how many offending ids a message lists before "and N more"


def _listing(ids: list[str]) -> str:
    head = ", ".join(ids[:SHOWN])
    return head + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


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
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed JSON ({exc.msg} at column {exc.colno})", path, number) from None
            if not isinstance(record, dict):
                raise InputError(f"expected a JSON object per {what}", path, number)
            if "_id" not in record or record["_id"] in (None, ""):
                raise InputError(f"{what} without an '_id'", path, number)
            title, text = record.get("title") or "", record.get("text") or ""
            if not isinstance(title, str) or not isinstance(text, str):
                raise InputError(f"{what} {record['_id']}: 'title' and 'text' must be strings", path, number)
            yield number, str(record["_id"]), f"{title} {text}".strip() if title else text.strip()


# the kinds of note a load makes (a job logs each one's count as the metric system/notes_<kind>)
EMPTY_DOCUMENTS = "documents_empty_text"
EMPTY_QUESTIONS = "questions_empty_text"
UNKNOWN_DOCUMENT = "judgments_unknown_document"
UNKNOWN_QUESTION = "judgments_unknown_question"
WITHOUT_RELEVANT = "questions_without_relevant"


class Notes(list):
    """The notes of one load; with ``strict``, the first one raises instead (``corpus.strict=true``)."""

    def __init__(self, strict: bool) -> None:
        super().__init__()
        self.strict = strict

    def add(self, text: str, kind: str, ids: list[str], count: int | None = None, kept: str = "") -> None:
        if self.strict:
            raise InputError(f"{text} (corpus.strict=true makes this an error)")
        self.append(Note(f"{text} {kept}".rstrip(), kind, len(ids) if count is None else count, ids[:SHOWN]))


def _read_records(path: Path, what: str, notes: Notes) -> tuple[list[str], list[str]]:
    ids, texts, first_line = [], [], {}
    empty = []
    for number, ident, text in read_jsonl(path, what):
        if ident in first_line:
            raise InputError(f"duplicate {what} id {ident!r} (first on line {first_line[ident]})", path, number)
        first_line[ident] = number
        ids.append(ident)
        texts.append(text)
        if not text:
            empty.append(ident)
    if not ids:  # said as it is: else every judgment names a missing question, and nothing is left to evaluate
        raise InputError(f"the file is empty: it holds no {what}", path)
    if empty:
        kind = EMPTY_DOCUMENTS if what == "document" else EMPTY_QUESTIONS
        notes.add(f"{path}: {len(empty)} {what}(s) with empty text: {_listing(empty)}", kind, empty,
                  kept="(kept; they can match nothing)")
    return ids, texts


def find_corpus_file(folder: Path) -> Path:
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (folder / name).is_file():
            return folder / name
    raise InputError("no corpus.jsonl or corpus.jsonl.gz in this folder", folder)


def load_beir(path: str | Path, split: str = "test", name: str | None = None, strict: bool = False) -> Collection:
    """Load and validate a BEIR folder; the questions are those judged in ``split``.

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
    doc_ids, doc_texts = _read_records(find_corpus_file(folder), "document", notes)
    all_qids, all_qtexts = _read_records(folder / "queries.jsonl", "question", notes)
    qrels = read_beir_qrels(qrels_path)

    known_docs, known_q = set(doc_ids), set(all_qids)
    bad_doc = np.array([d not in known_docs for d in qrels.doc_ids], dtype=bool)
    bad_q = np.array([q not in known_q for q in qrels.query_ids], dtype=bool)
    for mask, what in ((bad_doc, "documents"), (bad_q, "questions")):
        if mask.any():
            ids = list(dict.fromkeys((qrels.doc_ids if what == "documents" else qrels.query_ids)[mask].tolist()))
            notes.add(f"{qrels_path}: {int(mask.sum())} judgment(s) name {len(ids)} {what} missing from the "
                      f"{'corpus' if what == 'documents' else 'questions file'}: {_listing(ids)}",
                      UNKNOWN_DOCUMENT if what == "documents" else UNKNOWN_QUESTION, ids, int(mask.sum()), "(dropped)")
    qrels = qrels.subset(~(bad_doc | bad_q))

    judged = set(qrels.query_ids.tolist())
    keep = [i for i, q in enumerate(all_qids) if q in judged]
    query_ids = [all_qids[i] for i in keep]
    query_texts = [all_qtexts[i] for i in keep]
    relevant = set(qrels.relevant_queries(1))
    without = [q for q in query_ids if q not in relevant]
    if without:
        notes.add(f"{qrels_path}: {len(without)} question(s) have no relevant judgment in split {split!r}: "
                  f"{_listing(without)}", WITHOUT_RELEVANT, without, kept="(left out of the means)")
    return Collection(name or folder.name, doc_ids, doc_texts, query_ids, query_texts, qrels,
                      source=str(folder.resolve()), split=split, notes=list(notes),
                      judgments=str(qrels_path.resolve()))
