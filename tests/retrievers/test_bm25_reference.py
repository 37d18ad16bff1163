"""BM25 against an independent implementation (``bm25s``, Lucene variant) on SciFact, and its published quality.

bm25s is fed rankscope's own tokens so both see the same vocabulary. Its Lucene variant leaves out the constant
factor (k1 + 1) of the term weight (rankings are unaffected), so its scores are multiplied by it before being
compared; it computes in float32, hence the 1e-5 relative tolerance. Where several documents tie on the 100th
score, which of them make the cut is a tie rule: rankscope's is document id ascending, bm25s has none, so
documents may differ only among those tied (to that tolerance) with the 100th score.
"""

from __future__ import annotations

import numpy as np
import pytest

from metrics.evaluation import evaluate
from pipeline.data.beir import load_beir
from retrievers import BM25, maxscore
from retrievers.text import Tokenizer
from retrievers.topk import top_k_dense

bm25s = pytest.importorskip("bm25s", reason="bm25s (a dev dependency) is needed for the reference comparison")

DEPTH = 100
REL = 1e-5


@pytest.fixture(scope="module")
def scifact(scifact_folder):
    return load_beir(scifact_folder, "test")


@pytest.fixture(scope="module")
def tokens(scifact):
    tok = Tokenizer()  # a question's repeated term counts once in rankscope: give bm25s each term once too
    return [tok(t) for t in scifact.doc_texts], [list(dict.fromkeys(tok(t))) for t in scifact.query_texts]


def bm25s_scores(doc_tokens, query_tokens, k1: float, b: float) -> np.ndarray:
    """bm25s's full (questions x documents, corpus order) score matrix, rescaled by (k1 + 1)."""
    reference = bm25s.BM25(method="lucene", k1=k1, b=b)
    reference.index(doc_tokens, show_progress=False)
    rows = [reference.get_scores(q) if reference.get_tokens_ids(q) else np.zeros(len(doc_tokens))
            for q in query_tokens]
    return np.vstack(rows).astype(np.float64) * (k1 + 1.0)


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (0.9, 0.4)])
def test_top_100_and_scores_agree_with_bm25s(scifact, tokens, k1, b):
    bm25 = BM25(k1=k1, b=b).index(scifact)
    run = bm25.rank(scifact.query_ids, scifact.query_texts, DEPTH)
    corpus_position = {d: i for i, d in enumerate(scifact.doc_ids)}
    axis = np.array([corpus_position[d] for d in bm25.doc_ids])  # rankscope's axis -> corpus order
    theirs = bm25s_scores(*tokens, k1, b)[:, axis]  # now on rankscope's axis (ids ascending)

    compared = 0
    for i, qid in enumerate(scifact.query_ids):
        n = int(run.lengths[i])
        docs, scores = run.docs[i, :n], run.scores[i, :n]
        # scores: equal to 1e-5 relative, for every document rankscope returns
        np.testing.assert_allclose(theirs[i, docs], scores, rtol=REL, err_msg=qid)
        # rankscope's order: score descending, ties by id ascending
        assert all((scores[j], -docs[j]) > (scores[j + 1], -docs[j + 1]) for j in range(n - 1)), qid
        # the same top-100: bm25s's own top 100 (positive scores) differs only among ties with the 100th score
        top = np.argsort(-theirs[i], kind="stable")[:DEPTH]
        top = top[theirs[i, top] > 0]
        differing = np.setxor1d(top, docs)
        if len(differing):
            assert n == DEPTH, qid
            np.testing.assert_allclose(theirs[i, differing], scores[-1], rtol=REL, err_msg=qid)
        compared += n
    assert compared > 0.9 * DEPTH * len(scifact.query_ids)  # nearly every question has 100 results


@pytest.mark.parametrize("path", [{}, {"WHOLE_DOCS": 0}], ids=["whole", "MaxScore"])
@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (0.9, 0.4)])
def test_ranking_equals_exhaustive_scoring(scifact, k1, b, path, monkeypatch):
    """Each search path (see retrievers.maxscore) returns exactly what sorting every document's score gives."""
    for name, value in path.items():
        monkeypatch.setattr(maxscore, name, value)
    bm25 = BM25(k1=k1, b=b).index(scifact)
    run = bm25.rank(scifact.query_ids, scifact.query_texts, DEPTH)
    docs, scores = top_k_dense(bm25.scores(scifact.query_texts), DEPTH, 1e-9)
    np.testing.assert_array_equal(run.docs, docs)
    np.testing.assert_array_equal(run.scores, scores)


@pytest.mark.parametrize(("k1", "b", "low", "high"), [(1.2, 0.75, 0.655, 0.675), (0.9, 0.4, 0.650, 0.670)])
def test_scifact_ndcg_at_10_is_near_the_published_figure(scifact, k1, b, low, high):
    """BEIR reports 0.665 (Lucene BM25 with stemming); plain BM25 without stemming lands close to it."""
    run = BM25(k1=k1, b=b).index(scifact).rank(scifact.query_ids, scifact.query_texts, DEPTH)
    ndcg = evaluate(run, scifact.qrels, ["ndcg@10"]).means()["ndcg@10"]
    assert low <= ndcg <= high
