"""A chunk is its document id plus its offsets, defined once; a document takes the rank of its best chunk; a job's
chunks.tsv reads back as the ranking it wrote."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.chunks import ChunkRun, Chunks, chunk_id, chunks_bytes, parse_chunk_id, read_chunks, to_documents
from metrics.errors import InputError
from metrics.run import Run


def chunk_run(rankings: dict[str, list[tuple[str, int, int, float]]], tokens: int = 10) -> ChunkRun:
    run = Run.from_rankings({q: [(chunk_id(d, s, e), score) for d, s, e, score in found]
                             for q, found in rankings.items()})
    return ChunkRun(run, Chunks.from_ids(run.doc_ids, [tokens] * len(run.doc_ids)))


def test_a_chunk_id_reads_back_as_its_document_and_offsets_even_when_the_id_holds_the_separator():
    for doc, start, end in [("d1", 0, 12), ("a#b", 7, 9), ("page 3", 120, 9_999_999_999)]:
        assert parse_chunk_id(chunk_id(doc, start, end)) == (doc, start, end)


@pytest.mark.parametrize("text", ["d1", "d1#12-40", "d1#0000000012", "d1#000000001a-0000000040"])
def test_what_is_not_a_chunk_id_is_refused(text):
    with pytest.raises(ValueError, match="not a chunk id"):
        parse_chunk_id(text)


def test_chunk_ids_sort_by_document_then_start_as_ties_must_break():
    chunks = [("d1", 100, 200), ("d1", 20, 100), ("d10", 0, 5), ("d2", 3, 9)]
    ordered = sorted(chunks, key=lambda c: chunk_id(*c))
    assert ordered == [("d1", 20, 100), ("d1", 100, 200), ("d10", 0, 5), ("d2", 3, 9)]


def test_a_document_takes_the_rank_and_score_of_its_best_chunk():
    found = chunk_run({"q": [("b", 10, 20, 9.0), ("a", 0, 10, 8.0), ("b", 0, 10, 7.0), ("c", 0, 5, 6.0),
                             ("a", 10, 20, 5.0)]})
    docs = to_documents(found, depth=10)
    assert docs.ranking("q") == [("b", 9.0), ("a", 8.0), ("c", 6.0)]


def test_documents_are_cut_at_depth_and_questions_keep_their_rows():
    found = chunk_run({"q1": [("a", 0, 1, 3.0), ("b", 0, 1, 2.0), ("c", 0, 1, 1.0)], "q2": [("c", 0, 1, 1.0)]})
    docs = to_documents(found, depth=2)
    assert list(docs.query_ids) == ["q1", "q2"]
    assert docs.top("q1", 5) == ["a", "b"] and docs.top("q2", 5) == ["c"]
    assert docs.depth == 2


def test_one_chunk_per_document_gives_back_the_document_ranking_exactly():
    """chunker=fixed with a size larger than any document must give chunker=none's figures: the same ranking."""
    rng = np.random.default_rng(3)
    docs = {f"d{i}": int(rng.integers(5, 50)) for i in range(40)}
    rankings = {}
    for q in range(12):
        chosen = rng.choice(list(docs), size=15, replace=False)
        scores = np.round(rng.random(15), 1)  # ties on purpose
        order = sorted(zip(chosen, scores), key=lambda p: (-p[1], p[0]))
        rankings[f"q{q}"] = [(d, 0, docs[d], float(s)) for d, s in order]
    documents = to_documents(chunk_run(rankings), depth=100)
    for q, found in rankings.items():
        assert documents.ranking(q) == [(d, s) for d, _, _, s in found]


def test_chunks_tsv_reads_back_as_the_ranking_written(tmp_path):
    found = chunk_run({"q1": [("a", 0, 10, 2.5), ("b", 3, 9, 1.0 / 3.0)], "q2": [("a", 0, 10, 0.1)]}, tokens=7)
    path = tmp_path / "chunks.tsv"
    path.write_bytes(chunks_bytes(found))
    assert path.read_text().splitlines()[0] == "query_id\trank\tdoc_id\tstart\tend\tscore\ttokens"
    back = read_chunks(path)
    for q in ("q1", "q2"):
        assert back.run.ranking(q) == found.run.ranking(q)
    assert set(back.chunks.tokens.tolist()) == {7}


@pytest.mark.parametrize(("body", "reason"), [
    ("q\t1\ta\t5\t5\t1.0\t3\n", r"chunks\.tsv:2: offsets 5:5 are not a chunk"),
    ("q\t1\ta\tx\t5\t1.0\t3\n", r"chunks\.tsv:2: start 'x' is not an integer"),
    ("q\t2\ta\t0\t5\t1.0\t3\nq\t1\tb\t0\t5\t1.0\t3\n", r"question q: its ranks do not rise"),
    ("q\t1\ta\t0\t5\n", r"chunks\.tsv:2: expected 7 tab-separated fields, found 5"),
])
def test_a_damaged_chunks_file_is_one_line_naming_file_and_line(tmp_path, body, reason):
    path = tmp_path / "chunks.tsv"
    path.write_text("query_id\trank\tdoc_id\tstart\tend\tscore\ttokens\n" + body)
    with pytest.raises(InputError, match=reason):
        read_chunks(path)


def test_a_file_without_the_header_is_not_taken_for_chunks(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q Q0 a 1 1.0 x\n")
    with pytest.raises(InputError, match="expected the header query_id rank doc_id"):
        read_chunks(path)
