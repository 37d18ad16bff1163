"""Your own files, mapped by config: any of JSONL, CSV/TSV and Parquet reads the same data the same way, and every
bad input is one line naming the file and the line (or row)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from metrics.errors import InputError
from pipeline.data import Judgments, OwnFiles, Table
from pipeline.data.assemble import EMPTY_DOCUMENTS, UNJUDGED, UNKNOWN_DOCUMENT

SAMPLE = Path(__file__).parent / "own_files"  # the help-desk corpus kept as a RAG team keeps it


def sample(**changes) -> OwnFiles:
    """conf/experiment/own_files.yaml's mapping of the shipped sample."""
    settings = dict(
        documents=Table(str(SAMPLE / "chunks.parquet"), id="chunk_id", text=["title", "body"], metadata=["source"]),
        questions=Table(str(SAMPLE / "questions.csv"), id="qid", text="question", metadata=["team"]),
        judgments=Judgments(str(SAMPLE / "judgments.csv"), question="qid", document="chunk_id", grade="grade"),
        name="helpdesk_chunks")
    return OwnFiles(**{**settings, **changes})


def test_the_sample_is_the_embedded_helpdesk_corpus_reached_another_way(helpdesk_collection):
    c = sample(unjudged="drop").load()
    assert c.corpus_digest == helpdesk_collection.corpus_digest
    assert c.queries_digest == helpdesk_collection.queries_digest
    assert c.qrels.digest() == helpdesk_collection.qrels.digest()
    assert c.digest == helpdesk_collection.digest  # the same corpus to compare and the gate


def test_questions_without_a_judgment_are_ranked_and_counted(helpdesk_collection):
    c = sample().load()
    assert c.query_ids == [*helpdesk_collection.query_ids, "q15", "q16"]
    (note,) = [n for n in c.notes if n.kind == UNJUDGED]
    assert note.count == 2 and note.ids == ("q15", "q16")
    assert "questions.csv: 2 question(s) have no judgment at all: q15, q16" in note
    assert c.summary()["questions_without_relevant"] == 2  # left out of the means


def test_metadata_columns_are_kept_beside_each_record():
    c = sample().load()
    assert c.doc_metadata["source"][c.doc_ids.index("refund2")] == "kb/refund.md"
    assert c.query_metadata["team"][c.query_ids.index("q16")] == "billing"
    assert len(c.query_metadata["team"]) == len(c.query_ids)


def write(frame: pd.DataFrame, path: Path) -> Path:
    """The frame in the format its file name says."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
        return path
    if name.endswith(".jsonl"):
        text = "".join(json.dumps(row) + "\n" for row in frame.to_dict("records"))
    else:
        text = frame.to_csv(index=False, sep="\t" if name.endswith(".tsv") else ",")
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("ending", ["jsonl", "csv", "tsv", "parquet", "jsonl.gz", "csv.gz"])
def test_every_format_reads_the_same_data(tmp_path, ending, helpdesk_collection):
    chunks = pd.read_parquet(SAMPLE / "chunks.parquet")
    questions = pd.read_csv(SAMPLE / "questions.csv")
    judgments = pd.read_csv(SAMPLE / "judgments.csv")
    c = OwnFiles(Table(str(write(chunks, tmp_path / f"chunks.{ending}")), id="chunk_id", text=["title", "body"]),
                 Table(str(write(questions, tmp_path / f"questions.{ending}")), id="qid", text="question"),
                 Judgments(str(write(judgments, tmp_path / f"judgments.{ending}")), question="qid",
                           document="chunk_id"), unjudged="drop").load()
    assert c.digest == helpdesk_collection.digest


def test_text_columns_are_joined_in_the_order_given(tmp_path):
    docs = write(pd.DataFrame({"id": ["a"], "title": ["Refunds"], "body": ["within 30 days"]}), tmp_path / "d.csv")
    questions = write(pd.DataFrame({"id": ["q"], "text": ["refund"]}), tmp_path / "q.csv")
    forward = OwnFiles(Table(str(docs), text=["title", "body"]), Table(str(questions))).load()
    backward = OwnFiles(Table(str(docs), text=["body", "title"]), Table(str(questions))).load()
    assert forward.doc_texts == ["Refunds within 30 days"] and backward.doc_texts == ["within 30 days Refunds"]


def test_a_missing_column_lists_the_columns_found(tmp_path):
    with pytest.raises(InputError, match=r"questions\.csv: no column 'text' \(corpus\.questions\); the columns found: "
                                         r"qid, question, team"):
        sample(questions=Table(str(SAMPLE / "questions.csv"), id="qid")).load()
    with pytest.raises(InputError, match=r"chunks\.parquet: no column 'text' \(corpus\.documents\); the columns found: "
                                         r"chunk_id, title, body, source, tokens"):
        sample(documents=Table(str(SAMPLE / "chunks.parquet"), id="chunk_id")).load()


def test_a_jsonl_record_may_leave_out_a_field_that_no_record_may_lack(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"chunk_id": "a", "body": "x"}\n{"chunk_id": "b", "title": "T", "body": "y"}\n')
    records, _ = Table(str(path), id="chunk_id", text=["title", "body"]).read("document", "corpus.documents")
    assert records.texts == ["x", "T y"]
    with pytest.raises(InputError, match=r"docs\.jsonl: no field 'text' in any record \(corpus\.documents\); the "
                                         r"fields found: chunk_id, body, title"):
        Table(str(path), id="chunk_id").read("document", "corpus.documents")
    path.write_text('{"chunk_id": "a", "text": "x"}\n{"text": "y"}\n')
    with pytest.raises(InputError, match=r"docs\.jsonl:2: document without an id \('chunk_id' is empty\)"):
        Table(str(path), id="chunk_id").read("document", "corpus.documents")



def test_a_misnamed_jsonl_id_is_said_as_a_field_no_record_has_not_as_an_empty_id_at_line_1(tmp_path):
    """It used to be "docs.jsonl:1: document without an id ('pmid' is empty)": true of line 1, and of every line."""
    path = tmp_path / "docs.jsonl"
    path.write_text('{"PMID": "1", "text": "x"}\n{"PMID": "2", "text": "y", "year": 2001}\n')
    with pytest.raises(InputError, match=r"docs\.jsonl: no field 'pmid' in any record \(corpus\.documents\); the "
                                         r"fields found: PMID, text, year$"):
        Table(str(path), id="pmid").read("document", "corpus.documents")
    path.write_text('{"text": "x"}\n{"pmid": "2", "text": "y"}\n')  # the field is there: line 1 lacks it
    with pytest.raises(InputError, match=r"docs\.jsonl:1: document without an id \('pmid' is empty\)"):
        Table(str(path), id="pmid").read("document", "corpus.documents")


def test_misnamed_jsonl_judgment_fields_are_said_as_fields_no_record_has(tmp_path):
    path = tmp_path / "judgments.jsonl"
    path.write_text('{"qid": "q01", "chunk_id": "pricing1", "relevance": 2}\n')
    for settings, missing in (({"question": "query"}, "query"), ({"document": "doc"}, "doc"),
                              ({"grade": "grade"}, "grade")):
        mapping = {"question": "qid", "document": "chunk_id", "grade": "relevance", **settings}
        with pytest.raises(InputError, match=rf"judgments\.jsonl: no field '{missing}' in any record "
                                             rf"\(corpus\.judgments\); the fields found: qid, chunk_id, relevance$"):
            Judgments(str(path), **mapping).read("corpus.judgments")


def test_nested_jsonl_fields_are_named_with_dots(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"meta": {"pmid": 11, "source": {"kind": "abstract"}}, "title": "T", "body": "x"}\n'
                    '{"meta": {"pmid": 12, "source": {"kind": "review"}}, "body": "y", "meta.note": "literal"}\n')
    records, metadata = Table(str(path), id="meta.pmid", text=["title", "body"],
                              metadata=["meta.source.kind", "meta.note"]).read("document", "corpus.documents")
    assert records.ids == ["11", "12"] and records.texts == ["T x", "y"]
    assert metadata == {"meta.source.kind": ["abstract", "review"], "meta.note": [None, "literal"]}  # a key first
    with pytest.raises(InputError, match=r"docs\.jsonl: no field 'meta\.pmd' in any record \(corpus\.documents\); "
                                         r"the fields found: meta\.pmid, meta\.source\.kind, title, body, meta\.note$"):
        Table(str(path), id="meta.pmd", text="body").read("document", "corpus.documents")


def test_a_dot_in_a_csv_or_parquet_column_name_is_part_of_the_name(tmp_path):
    csv_file = tmp_path / "q.csv"
    csv_file.write_text("meta.id,text\nq1,one\n")
    records, _ = Table(str(csv_file), id="meta.id").read("question", "corpus.questions")
    assert records.ids == ["q1"]
    parquet = write(pd.DataFrame({"meta": [{"id": "a"}], "text": ["x"]}), tmp_path / "d.parquet")
    with pytest.raises(InputError, match=r"d\.parquet: no column 'meta\.id' \(corpus\.documents\); the columns "
                                         r"found: meta, text \(a dot is part of a column's name in CSV and Parquet: "
                                         r"nested fields are read from JSONL only\)"):
        Table(str(parquet), id="meta.id").read("document", "corpus.documents")

def test_a_duplicate_id_names_both_places(tmp_path):
    csv_file = tmp_path / "q.csv"
    csv_file.write_text("id,text\nq1,one\nq2,two\nq1,three\n")
    with pytest.raises(InputError, match=r"q\.csv:4: duplicate question id 'q1' \(first on line 2\)"):
        Table(str(csv_file)).read("question", "corpus.questions")
    parquet = write(pd.DataFrame({"id": ["a", "b", "a"], "text": ["x", "y", "z"]}), tmp_path / "d.parquet")
    with pytest.raises(InputError, match=r"d\.parquet: row 3: duplicate document id 'a' \(first on row 1\)"):
        Table(str(parquet)).read("document", "corpus.documents")


def test_a_quoted_field_spanning_lines_keeps_line_numbers_right(tmp_path):
    csv_file = tmp_path / "q.csv"
    csv_file.write_text('id,text\nq1,"one\nline more"\nq1,again\n')
    with pytest.raises(InputError, match=r"q\.csv:4: duplicate question id 'q1' \(first on line 3\)"):
        Table(str(csv_file)).read("question", "corpus.questions")


def test_an_empty_text_is_noted_and_kept(tmp_path):
    docs = write(pd.DataFrame({"id": ["a", "b"], "text": ["apple", ""]}), tmp_path / "d.csv")
    questions = write(pd.DataFrame({"id": ["q"], "text": ["apple"]}), tmp_path / "q.csv")
    c = OwnFiles(Table(str(docs)), Table(str(questions))).load()
    assert c.doc_ids == ["a", "b"]
    (note,) = [n for n in c.notes if n.kind == EMPTY_DOCUMENTS]
    assert note.ids == ("b",)


def test_a_judgment_of_an_unknown_document_is_dropped_and_counted_unless_strict(tmp_path):
    judgments = write(pd.DataFrame({"query_id": ["q01", "q01"], "doc_id": ["pricing1", "ghost"], "grade": [2, 1]}),
                      tmp_path / "j.csv")
    c = sample(judgments=Judgments(str(judgments))).load()
    (note,) = [n for n in c.notes if n.kind == UNKNOWN_DOCUMENT]
    assert note.count == 1 and note.ids == ("ghost",)
    assert c.qrels.to_dict() == {"q01": {"pricing1": 2}}
    with pytest.raises(InputError, match="name 1 documents missing from the corpus: ghost"):
        sample(judgments=Judgments(str(judgments)), strict=True).load()


def test_a_grade_that_is_not_an_integer_names_the_line(tmp_path):
    path = tmp_path / "j.csv"
    path.write_text("query_id,doc_id,grade\nq01,pricing1,2\nq01,pricing2,high\n")
    with pytest.raises(InputError, match=r"j\.csv:3: grade 'high' in column 'grade' is not an integer"):
        Judgments(str(path)).read("corpus.judgments")


def test_judgments_without_a_grade_column_count_every_pair_as_relevant(tmp_path):
    path = write(pd.DataFrame({"q": ["q01"], "chunk": ["pricing1"]}), tmp_path / "j.tsv")
    assert Judgments(str(path), question="q", document="chunk", grade=None).read("j").to_dict() == {
        "q01": {"pricing1": 1}}


def test_judgments_may_be_trec_or_beir_qrels(tmp_path, helpdesk_folder, helpdesk_collection):
    trec, qrels = tmp_path / "test.qrels", helpdesk_collection.qrels
    trec.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in zip(qrels.query_ids, qrels.doc_ids, qrels.grades)))
    beir = helpdesk_folder / "qrels" / "test.tsv"
    for path, fmt in ((trec, None), (beir, "qrels")):
        c = sample(judgments=Judgments(str(path), format=fmt), unjudged="drop").load()
        assert c.digest == helpdesk_collection.digest


def test_a_row_with_too_many_fields_and_an_unknown_format_are_one_line_each(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text("id,text\nq1,one\nq2,two,three\n")
    with pytest.raises(InputError, match=r"q\.csv:3: 3 fields where the header has 2"):
        Table(str(path)).read("question", "corpus.questions")
    odd = tmp_path / "q.xlsx"
    odd.write_text("x")
    with pytest.raises(InputError, match=r"q\.xlsx: cannot tell the format from the file name: set "
                                         r"corpus\.questions\.format"):
        Table(str(odd)).read("question", "corpus.questions")
    with pytest.raises(InputError, match=r"corpus\.questions\.format=excel: expected one of"):
        Table(str(odd), format="excel").read("question", "corpus.questions")


def test_no_judgments_at_all_leaves_every_question_unjudged():
    c = sample(judgments=None).load()
    assert len(c.query_ids) == 16 and len(c.qrels) == 0
    assert c.summary()["questions_without_relevant"] == 16
