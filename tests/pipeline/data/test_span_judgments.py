"""Span judgments come through two routes, a BEIR folder whose qrels carry ``start end`` and own files mapped with
``corpus.judgments.start``/``.end``, to the same collection; a document's grade is its best span's; a bad span is one
line naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from metrics.errors import InputError
from pipeline.data import BeirFolder, HelpdeskPages, Judgments, OwnFiles, Table
from pipeline.data.stitch import write_beir

PAGES = Path(__file__).resolve().parents[3] / "pipeline" / "data" / "helpdesk_pages"


def own_files(folder: Path, judgments: pd.DataFrame, fmt: str = "csv") -> OwnFiles:
    """The shipped pages as a user keeps them: JSONL documents, a CSV of questions, judgments in ``fmt``."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = [json.loads(line) for line in (PAGES / "corpus.jsonl").read_text().splitlines()]
    (folder / "pages.jsonl").write_text("".join(json.dumps({"page": d["_id"], "body": d["text"]}) + "\n"
                                                for d in docs))
    questions = [json.loads(line) for line in (PAGES / "queries.jsonl").read_text().splitlines()]
    pd.DataFrame({"qid": [q["_id"] for q in questions], "q": [q["text"] for q in questions]}).to_csv(
        folder / "questions.csv", index=False)
    path = folder / f"judgments.{fmt}"
    judgments.to_parquet(path) if fmt == "parquet" else judgments.to_csv(path, index=False)
    return OwnFiles(Table(str(folder / "pages.jsonl"), id="page", text="body"),
                    Table(str(folder / "questions.csv"), id="qid", text="q"),
                    Judgments(str(path), question="qid", document="page", grade="grade", start="from", end="to"),
                    name="helpdesk_pages")


def shipped_judgments() -> pd.DataFrame:
    found = pd.read_csv(PAGES / "qrels" / "test.tsv", sep="\t", dtype={"query-id": str, "corpus-id": str})
    return found.rename(columns={"query-id": "qid", "corpus-id": "page", "score": "grade", "start": "from",
                                 "end": "to"})


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_the_same_spans_by_own_files_or_a_beir_folder_are_the_same_collection(tmp_path, fmt):
    beir = HelpdeskPages().load()
    own = own_files(tmp_path, shipped_judgments(), fmt).load()
    assert (own.corpus_digest, own.queries_digest, own.judgments_digest) == (
        beir.corpus_digest, beir.queries_digest, beir.judgments_digest)
    assert own.spans.digest() == beir.spans.digest() and len(beir.spans) == 27


def test_a_pages_grade_is_its_best_spans_and_spans_mark_the_original_sentences():
    from pipeline.data import helpdesk

    pages, sentences = HelpdeskPages().load(), helpdesk()
    texts = dict(zip(pages.doc_ids, pages.doc_texts))
    originals = set(sentences.doc_texts)
    for d, s, e in zip(pages.spans.doc_ids, pages.spans.starts, pages.spans.ends):
        assert texts[d][s:e] in originals
    assert pages.qrels.to_dict()["q01"] == {"billing": 2}  # pricing1 (2) and pricing2 (1), both on the billing page
    assert pages.qrels.to_dict()["q14"] == {"access": 2, "billing": 1}


def test_a_row_without_offsets_judges_the_whole_document(tmp_path):
    rows = shipped_judgments()
    rows.loc[rows["qid"] == "q09", ["from", "to"]] = None
    collection = own_files(tmp_path, rows).load()
    assert "q09" not in set(collection.spans.query_ids)
    evidence = collection.all_spans().evidence(1)["q09"]
    assert evidence == {"other": [(0, len(dict(zip(collection.doc_ids, collection.doc_texts))["other"]))]}


@pytest.mark.parametrize(("change", "reason"), [
    ({"to": 9999}, r"judgments\.csv:2: the span 23:9999 of question q01 ends past the end of document billing"),
    ({"page": "nowhere"}, r"judgments\.csv:2: a span of question q01 is on document nowhere, which the corpus"),
    ({"to": 23}, r"judgments\.csv:2: the span 23:23 is empty or negative"),
    ({"to": None}, r"judgments\.csv:2: a span needs both start and end"),
    ({"from": "x"}, r"judgments\.csv:2: start 'x' and end '81' must be whole numbers"),
])
def test_a_span_that_cannot_be_is_one_line_naming_file_and_line(tmp_path, change, reason):
    rows = shipped_judgments()
    for column, value in change.items():
        rows[column] = rows[column].astype(object)
        rows.loc[0, column] = value
    with pytest.raises(InputError, match=reason):
        own_files(tmp_path, rows).load()


def test_a_beir_folder_with_a_span_past_a_document_names_its_qrels_line(tmp_path):
    collection = HelpdeskPages().load()
    from pipeline.data.stitch import Stitched

    spans = collection.spans
    bad = Stitched(collection.doc_ids, collection.doc_texts, {},
                   type(spans)(spans.query_ids, spans.doc_ids, spans.starts, spans.ends + 5000, spans.grades))
    write_beir(bad, collection, tmp_path / "bad")
    with pytest.raises(InputError, match=r"qrels/test\.tsv:2: the span 23:5081 of question q01 ends past"):
        BeirFolder(tmp_path / "bad").load()
