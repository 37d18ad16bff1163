"""Loading a BEIR folder: validated at the door, errors name the file and line, nothing lost silently."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from metrics.errors import InputError
from pipeline.data.beir import load_beir


def write_beir(folder: Path, docs, queries, qrels: str, gz: bool = False) -> Path:
    (folder / "qrels").mkdir(parents=True)
    corpus = "".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in docs)
    if gz:
        with gzip.open(folder / "corpus.jsonl.gz", "wt") as handle:
            handle.write(corpus)
    else:
        (folder / "corpus.jsonl").write_text(corpus)
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


DOCS = [("d1", "apple pie"), ("d2", "banana bread"), ("d3", "cherry tart")]
QUERIES = [("q1", "apple"), ("q2", "banana"), ("q3", "unjudged question")]


def test_the_embedded_helpdesk_loads_clean(helpdesk_collection):
    assert helpdesk_collection.summary() == {
        "documents": 28, "questions": 14, "judgments": 27, "questions_without_relevant": 0}
    assert helpdesk_collection.notes == []


def test_only_questions_judged_in_the_split_are_kept(tmp_path):
    c = load_beir(write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\nq2\td2\t2\n"))
    assert c.query_ids == ["q1", "q2"]
    assert c.qrels.to_dict() == {"q1": {"d1": 1}, "q2": {"d2": 2}}


def test_gzipped_corpus_reads_the_same(tmp_path):
    plain = load_beir(write_beir(tmp_path / "a", DOCS, QUERIES, "q1\td1\t1\n"))
    packed = load_beir(write_beir(tmp_path / "b", DOCS, QUERIES, "q1\td1\t1\n", gz=True))
    assert plain.corpus_digest == packed.corpus_digest


def test_malformed_json_names_file_and_line(tmp_path):
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\n")
    with (folder / "corpus.jsonl").open("a") as handle:
        handle.write('{"_id": "d4", "text": \n')
    with pytest.raises(InputError, match=r"corpus\.jsonl:4: malformed JSON"):
        load_beir(folder)


def test_missing_id_names_file_and_line(tmp_path):
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\n")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"text": "no id"}\n')
    with pytest.raises(InputError, match=r"queries\.jsonl:2: question without an '_id'"):
        load_beir(folder)


def test_duplicate_document_id_is_an_error(tmp_path):
    folder = write_beir(tmp_path, [*DOCS, ("d2", "again")], QUERIES, "q1\td1\t1\n")
    with pytest.raises(InputError, match=r"corpus\.jsonl:4: duplicate document id 'd2' \(first on line 2\)"):
        load_beir(folder)


def test_duplicate_judgment_is_an_error(tmp_path):
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\nq1\td1\t2\n")
    with pytest.raises(InputError, match=r"test\.tsv:3: duplicate judgment"):
        load_beir(folder)


def test_malformed_judgment_line_is_an_error(tmp_path):
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\nq2\td2\n")
    with pytest.raises(InputError, match=r"test\.tsv:3: expected 3 tab-separated fields"):
        load_beir(folder)
    folder = write_beir(tmp_path / "x", DOCS, QUERIES, "q1\td1\tone\n")
    with pytest.raises(InputError, match=r"test\.tsv:2: score 'one' is not an integer"):
        load_beir(folder)


def test_judgments_of_unknown_documents_are_dropped_and_reported(tmp_path):
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\nq1\tghost\t1\nq9\td2\t1\n")
    c = load_beir(folder)
    assert c.qrels.to_dict() == {"q1": {"d1": 1}}
    assert any("1 judgment(s) name 1 documents missing from the corpus: ghost (dropped)" in n for n in c.notes)
    assert any("questions missing from the questions file: q9" in n for n in c.notes)
    with pytest.raises(InputError, match="ghost"):
        load_beir(folder, strict=True)


def test_questions_without_relevant_judgment_are_reported(tmp_path):
    c = load_beir(write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\nq2\td2\t0\n"))
    assert c.query_ids == ["q1", "q2"]
    assert c.summary()["questions_without_relevant"] == 1
    assert any("1 question(s) have no relevant judgment" in n and "q2" in n for n in c.notes)


@pytest.mark.parametrize("which, what", [("queries.jsonl", "question"), ("corpus.jsonl", "document")])
@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_file_says_it_is_empty(tmp_path, which, what, content):
    """Not "no question has a judgment" (every judgment then names a missing question): the file is empty."""
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\n")
    (folder / which).write_text(content)
    with pytest.raises(InputError) as refused:
        load_beir(folder)
    assert str(refused.value) == f"{folder / which}: the file is empty: it holds no {what}"


def test_empty_texts_are_reported_not_fatal(tmp_path):
    c = load_beir(write_beir(tmp_path, [*DOCS, ("d4", "")], [("q1", "apple"), ("q2", "")], "q1\td1\t1\nq2\td1\t1\n"))
    assert any("1 document(s) with empty text: d4" in n for n in c.notes)
    assert any("1 question(s) with empty text: q2" in n for n in c.notes)


def test_missing_folder_and_split_are_plain_errors(tmp_path):
    with pytest.raises(InputError, match="corpus folder does not exist"):
        load_beir(tmp_path / "nope")
    folder = write_beir(tmp_path / "f", DOCS, QUERIES, "q1\td1\t1\n")
    with pytest.raises(InputError, match=r"no judgments for split 'dev' \(available: test\)"):
        load_beir(folder, split="dev")


def test_digests_tell_different_data_apart(tmp_path):
    a = load_beir(write_beir(tmp_path / "a", DOCS, QUERIES, "q1\td1\t1\n"))
    b = load_beir(write_beir(tmp_path / "b", DOCS, QUERIES, "q1\td1\t2\n"))
    assert a.corpus_digest == b.corpus_digest and a.digest != b.digest


def test_scifact_loads_with_its_counts(scifact_folder):
    c = load_beir(scifact_folder, "test")
    assert (len(c.doc_ids), len(c.query_ids), len(c.qrels)) == (5183, 300, 339)


def test_cranfield_reports_its_two_empty_documents(cranfield_folder):
    c = load_beir(cranfield_folder, "test")
    assert (len(c.doc_ids), len(c.query_ids), len(c.qrels)) == (1400, 225, 1612)
    assert any("2 document(s) with empty text: 471, 995" in n for n in c.notes)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_a_byte_that_is_not_utf8_names_the_file_the_line_and_the_byte_offset(tmp_path, gz):
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\n", gz=gz)
    name = "corpus.jsonl.gz" if gz else "corpus.jsonl"
    lines = (gzip.decompress if gz else bytes)((folder / name).read_bytes()).splitlines(keepends=True)
    lines[1] = lines[1].replace(b"banana", b"ban\xe9na")  # Latin-1 e-acute
    data = b"".join(lines)
    (folder / name).write_bytes(gzip.compress(data) if gz else data)
    offset = data.index(b"\xe9")
    with pytest.raises(InputError) as err:
        load_beir(folder)
    assert str(err.value) == (f"{folder / name}:2: byte 0xe9 at byte offset {offset} is not UTF-8 (save the file as "
                              f"UTF-8)")


@pytest.mark.parametrize("name", ["queries.jsonl", "qrels/test.tsv"])
def test_questions_and_judgments_are_checked_for_utf8_too(tmp_path, name):
    folder = write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\n")
    (folder / name).write_bytes((folder / name).read_bytes() + b"q\xff\td1\t1\n")
    with pytest.raises(InputError, match=r"byte 0xff at byte offset \d+ is not UTF-8"):
        load_beir(folder)


@pytest.mark.parametrize(
    ("docs", "queries", "qrels", "says"),
    [
        (DOCS, QUERIES, "q1\td1\t1\nq1\tghost\t1\n", "name 1 documents missing from the corpus: ghost"),
        (DOCS, QUERIES, "q1\td1\t1\nq9\td1\t1\n", "name 1 questions missing from the questions file: q9"),
        ([*DOCS, ("d4", "")], QUERIES, "q1\td1\t1\n", "1 document(s) with empty text: d4"),
        (DOCS, [*QUERIES, ("q4", "")], "q1\td1\t1\n", "1 question(s) with empty text: q4"),
        (DOCS, QUERIES, "q1\td1\t1\nq2\td2\t0\n", "1 question(s) have no relevant judgment in split 'test': q2"),
    ],
    ids=["unknown document", "unknown question", "empty document", "empty question", "no relevant judgment"],
)
def test_strict_makes_every_note_an_error(tmp_path, docs, queries, qrels, says):
    folder = write_beir(tmp_path, docs, queries, qrels)
    assert [n for n in load_beir(folder).notes if says in n]
    with pytest.raises(InputError, match=re.escape(f"{says} (corpus.strict=true makes this an error)") + "$"):
        load_beir(folder, strict=True)


def test_each_note_says_its_kind_how_many_and_the_first_ids(tmp_path):
    ghosts = "".join(f"q1\tghost{i}\t1\n" for i in range(7))
    (note,) = load_beir(write_beir(tmp_path, DOCS, QUERIES, "q1\td1\t1\n" + ghosts)).notes
    assert (note.kind, note.count, note.ids) == ("judgments_unknown_document", 7, tuple(f"ghost{i}" for i in range(5)))
    assert "ghost0, ghost1, ghost2, ghost3, ghost4 and 2 more (dropped)" in note
