"""Weighted-sum and Reciprocal Rank Fusion follow docs/helpdesk-reference.md's definitions."""

from __future__ import annotations

import numpy as np
import pytest

from retrievers import BM25, LSA, RRF, WeightedSum
from retrievers.weighted import min_max


def test_min_max_rescales_rows_and_flattens_constant_rows():
    out = min_max(np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 5.0]]))
    assert out.tolist() == [[0.0, 1.0, 0.5], [0.0, 0.0, 0.0]]


def test_weighted_scores_are_alpha_mix_of_normalised_scores(helpdesk_collection):
    c = helpdesk_collection
    bm25, lsa = BM25().index(c), LSA().index(c)
    fused = WeightedSum([BM25(), LSA()], alpha=0.3).index(c)
    expected = 0.3 * min_max(bm25.scores(c.query_texts)) + 0.7 * min_max(lsa.scores(c.query_texts))
    assert np.allclose(fused.scores(c.query_texts), expected)


def test_weighted_keeps_top_depth_without_threshold(helpdesk_collection):
    c = helpdesk_collection
    run = WeightedSum([BM25(), LSA()]).index(c).rank(c.query_ids, c.query_texts, 100)
    lengths = dict(zip(run.query_ids, run.lengths))
    assert lengths["q02"] == 0  # BM25 best is 0 and LSA best not above 0: empty
    assert all(n == 10 for q, n in lengths.items() if q != "q02")


def test_rrf_scores_are_reciprocal_rank_sums(helpdesk_collection):
    c = helpdesk_collection
    bm25 = BM25().index(c).rank(c.query_ids, c.query_texts, 10)
    lsa = LSA().index(c).rank(c.query_ids, c.query_texts, 10)
    fused = RRF([BM25(), LSA()], k=10).index(c).rank(c.query_ids, c.query_texts, 100)
    for q in c.query_ids:
        expected: dict[str, float] = {}
        for run in (bm25, lsa):
            for pos, (doc, _) in enumerate(run.ranking(q), 1):
                expected[doc] = expected.get(doc, 0.0) + 1.0 / (10 + pos)
        order = sorted(expected, key=lambda d: (-expected[d], d))
        got = fused.ranking(q)
        assert [d for d, _ in got] == order
        assert [s for _, s in got] == pytest.approx([expected[d] for d in order])


@pytest.mark.parametrize("make", [lambda: WeightedSum([BM25()]), lambda: RRF([LSA()]),
                                  lambda: WeightedSum([BM25(), LSA()], alpha=1.5)])
def test_fusions_refuse_bad_settings(make):
    with pytest.raises(ValueError):
        make()
