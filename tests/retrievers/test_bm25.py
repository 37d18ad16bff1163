"""BM25 follows docs/helpdesk-reference.md's Lucene formula, term by term."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from retrievers import BM25
from retrievers import bm25 as bm25_module
from retrievers.base import counts_of
from retrievers.bm25 import LAYOUT_KEY, layout_of
from retrievers.text import Tokenizer


class Docs:
    def __init__(self, ids, texts):
        self.doc_ids, self.doc_texts = ids, texts


def reference_bm25(docs: Docs, question: str, k1: float, b: float) -> dict[str, float]:
    tok = Tokenizer()
    tokens = [tok(t) for t in docs.doc_texts]
    n, avgdl = len(tokens), sum(map(len, tokens)) / len(tokens)
    df = Counter(t for d in tokens for t in set(d))
    out = {}
    for doc_id, d in zip(docs.doc_ids, tokens):
        tf, score = Counter(d), 0.0
        for term in set(tok(question)):
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(d) / avgdl))
        out[doc_id] = score
    return out


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (0.9, 0.4), (0.0, 0.0), (2.0, 1.0)])
def test_scores_match_the_formula(helpdesk_collection, k1, b):
    c = helpdesk_collection
    bm25 = BM25(k1=k1, b=b).index(c)
    for qid, text in zip(c.query_ids, c.query_texts):
        expected = reference_bm25(c, text, k1, b)
        got = dict(zip(bm25.doc_ids, bm25.scores([text])[0]))
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), qid


def test_a_repeated_question_term_counts_once():
    docs = Docs(["d1", "d2"], ["refund refund policy", "shipping"])
    bm25 = BM25().index(docs)
    assert np.allclose(bm25.scores(["refund"]), bm25.scores(["refund refund refund"]))


def test_ranking_drops_zero_scores_and_breaks_ties_by_id():
    docs = Docs(["b", "a", "c"], ["apple pie", "apple pie", "banana"])
    run = BM25().index(docs).rank(["q"], ["apple"], depth=10)
    assert [d for d, _ in run.ranking("q")] == ["a", "b"]


def test_unknown_terms_give_an_empty_ranking():
    run = BM25().index(Docs(["a"], ["apple"])).rank(["q"], ["zebra"], depth=10)
    assert run.ranking("q") == []


@pytest.mark.parametrize("params", [{"k1": -1}, {"b": 1.5}])
def test_invalid_parameters_are_refused(params):
    with pytest.raises(ValueError):
        BM25(**params)


def test_a_k1_b_sweep_on_shared_counts_lays_them_out_once_and_scores_as_fresh_indexes_do(helpdesk_collection):
    c = helpdesk_collection
    shared = counts_of(c, Tokenizer())
    points = [(0.6, 0.3), (1.2, 0.75), (0.9, 0.4), (2.0, 1.0)]
    indexes = [BM25(k1=k1, b=b).index(c, shared) for k1, b in points]  # later ones reuse the first's layout
    assert shared.derived[LAYOUT_KEY] is layout_of(shared)
    for (k1, b), index in zip(points, indexes):
        fresh = BM25(k1=k1, b=b).index(c)  # its own counts, its own layout
        assert np.array_equal(index.scores(c.query_texts), fresh.scores(c.query_texts))  # bit for bit
        ranked, expected = index.rank(c.query_ids, c.query_texts), fresh.rank(c.query_ids, c.query_texts)
        assert np.array_equal(ranked.doc_ids[ranked.docs], expected.doc_ids[expected.docs])
        assert np.array_equal(ranked.scores, expected.scores, equal_nan=True)  # NaN pads a short ranking
    layout = shared.derived[LAYOUT_KEY]
    assert not (layout.by_term.data.flags.writeable or layout.by_term.indices.flags.writeable)
    assert layout.by_term.data.max() == max(int(v) for v in shared.counts.data)  # still counts, never weighed


def test_a_layout_too_large_to_keep_is_handed_to_its_one_index(helpdesk_collection, monkeypatch):
    monkeypatch.setattr(bm25_module, "KEPT_LAYOUT_POSTINGS", 10)
    shared = counts_of(helpdesk_collection, Tokenizer())
    layout = layout_of(shared)
    assert LAYOUT_KEY not in shared.derived and layout.counts() is layout.by_term  # no second copy
