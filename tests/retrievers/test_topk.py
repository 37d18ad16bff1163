"""Exact top-k: score descending, ties by document position ascending, nothing at or below the threshold.

Every fast path (dense rows, sparse rows, MaxScore over posting lists) must agree with a plain sort.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from metrics.run import PAD
from retrievers import maxscore
from retrievers.maxscore import Postings
from retrievers.topk import top_k_dense, top_k_sparse


def by_sorting(scores: np.ndarray, k: int, threshold: float | None) -> tuple[list[list[int]], list[list[float]]]:
    """The specification: sort each row's (-score, position) pairs and keep the first k above the threshold."""
    docs, values = [], []
    for row in scores:
        ranked = sorted((-s, j) for j, s in enumerate(row.tolist()) if threshold is None or s > threshold)[:k]
        docs.append([j for _, j in ranked])
        values.append([-s for s, _ in ranked])
    return docs, values


def as_lists(docs: np.ndarray, scores: np.ndarray) -> tuple[list[list[int]], list[list[float]]]:
    keep = docs != PAD
    assert np.all(np.isnan(scores[~keep])), "padding carries NaN scores"
    return [d[m].tolist() for d, m in zip(docs, keep)], [s[m].tolist() for s, m in zip(scores, keep)]


def postings_top_k(matrix: np.ndarray, questions: np.ndarray, k: int, threshold: float):
    """Top k of questions @ matrix via MaxScore; also the dense product it must agree with."""
    index = Postings.build(sp.csr_matrix(matrix))
    found = index.top_k(sp.csr_matrix(questions), k, threshold)
    dense = (sp.csr_matrix(questions) @ sp.csr_matrix(matrix)).toarray()
    return found, dense


CRAFTED = np.array([
    [0.5, 2.0, 0.5, 2.0, 0.0, 1.0],   # ties at the top and in the middle
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],   # nothing above the threshold: an empty ranking
    [1e-9, 2e-9, 1e-9, 0.0, 3.0, 3.0],  # exactly 1e-9 is not a result, 2e-9 is
    [7.0, 7.0, 7.0, 7.0, 7.0, 7.0],   # all tied: positions in order
])


@pytest.mark.parametrize("k", [1, 2, 3, 6, 10])
def test_dense_ties_go_to_the_lower_position_and_the_threshold_is_strict(k):
    docs, scores = top_k_dense(CRAFTED, k, 1e-9)
    assert as_lists(docs, scores) == by_sorting(CRAFTED, k, 1e-9)
    assert docs.shape == (4, min(k, 6))
    for sparse in (False, True):
        docs, scores = (top_k_sparse(sp.csr_matrix(CRAFTED), k, 1e-9) if sparse else top_k_dense(CRAFTED, k, 1e-9))
        assert as_lists(docs, scores)[0][0] == [1, 3, 5, 0, 2][:k]


def test_crafted_rankings_spelled_out():
    docs, _ = top_k_dense(CRAFTED, 6, 1e-9)
    assert as_lists(docs, _)[0] == [[1, 3, 5, 0, 2], [], [4, 5, 1], [0, 1, 2, 3, 4, 5]]
    docs, _ = top_k_sparse(sp.csr_matrix(CRAFTED), 6, 1e-9)
    assert as_lists(docs, _)[0] == [[1, 3, 5, 0, 2], [], [4, 5, 1], [0, 1, 2, 3, 4, 5]]


def test_without_threshold_every_dense_cell_ranks_including_negative_and_minus_infinity():
    scores = np.array([[-1.0, -np.inf, 0.0, -1.0]])
    docs, values = top_k_dense(scores, 4, None)
    assert docs.tolist() == [[2, 0, 3, 1]]
    docs, values = top_k_dense(scores, 4, -np.inf)  # a floor of -inf drops only -inf cells
    assert as_lists(docs, values)[0] == [[2, 0, 3]]


def test_sparse_rows_never_return_absent_entries():
    matrix = sp.csr_matrix(np.array([[0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]))
    docs, scores = top_k_sparse(matrix, 3, None)
    assert as_lists(docs, scores) == ([[1], []], [[3.0], []])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 5, 40])
def test_dense_and_sparse_paths_equal_a_plain_sort_with_many_ties(seed, k):
    rng = np.random.default_rng(seed)
    scores = rng.choice([0.0, 0.25, 0.5, 1.0, 1.5], size=(25, 60), p=[0.5, 0.2, 0.15, 0.1, 0.05])
    for threshold in (1e-9, 0.5, None):
        assert as_lists(*top_k_dense(scores, k, threshold)) == by_sorting(scores, k, threshold)
        expected = by_sorting(scores, k, threshold if threshold is not None else 0.0)  # zeros are absent
        assert as_lists(*top_k_sparse(sp.csr_matrix(scores), k, threshold)) == expected


def test_maxscore_crafted_ties_and_threshold(maxscore_settings):
    # terms x documents: documents 1 and 3 tie on term 0; term 2 alone lifts document 4
    matrix = np.array([
        [0.0, 1.0, 0.0, 1.0, 0.0],
        [0.5, 0.5, 0.5, 0.5, 0.0],
        [0.0, 0.0, 0.0, 0.0, 3.0],
        [1e-9, 0.0, 0.0, 0.0, 0.0],
    ])
    questions = np.array([[1, 1, 0, 0], [0, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0]])
    (docs, scores), dense = postings_top_k(matrix, questions, 3, 1e-9)
    assert as_lists(docs, scores)[0] == [[1, 3, 0], [], [4, 1, 3], []]
    assert as_lists(docs, scores) == by_sorting(dense, 3, 1e-9)


SETTINGS = {
    # small corpora: every document scored in float64 (frequent terms as rows, runs of others via add.at)
    "whole": {},
    "whole, no frequent term": {"DENSE_SHARE": 0},
    "whole, every term frequent": {"DENSE_SHARE": 10**9},
    "whole, a question at a time": {"RARE_POSTINGS": 0},
    "whole, blocks of questions": {"RARE_POSTINGS": 50},
    # large corpora: MaxScore over the posting lists
    "MaxScore": {"WHOLE_DOCS": 0},
    "MaxScore, tiny seed": {"WHOLE_DOCS": 0, "SEED_POSTINGS": 3, "SEED_DOCS": 2},
    "MaxScore, always search": {"WHOLE_DOCS": 0, "SCAN_RATIO": 0},
    "MaxScore, always scan": {"WHOLE_DOCS": 0, "SCAN_RATIO": 10**9},
    "MaxScore, no 8-bit bounds": {"WHOLE_DOCS": 0, "DENSE_SHARE": 0},
    "MaxScore, 8-bit bounds for every term": {"WHOLE_DOCS": 0, "DENSE_SHARE": 10**9},
    "MaxScore, always dense sums": {"WHOLE_DOCS": 0, "DENSE_MERGE": 10**9},
    "MaxScore, never dense sums": {"WHOLE_DOCS": 0, "DENSE_MERGE": 0},
    # many blocks, positions counted across block boundaries
    "MaxScore, tiny rank blocks": {"WHOLE_DOCS": 0, "RANK_BLOCK": 3, "DENSE_SHARE": 10**9},
}


@pytest.fixture(params=list(SETTINGS))
def maxscore_settings(request, monkeypatch):
    """Run the top-k tests under settings that force each path and each of its branches."""
    for name, value in SETTINGS[request.param].items():
        monkeypatch.setattr(maxscore, name, value)
    return request.param


@pytest.mark.parametrize("seed", range(8))
def test_maxscore_equals_a_plain_sort_of_the_full_product(seed, maxscore_settings):
    rng = np.random.default_rng(seed)
    n_terms, n_docs = 40, 300
    # Zipf-like document frequencies and a handful of distinct weights: many exact ties
    df = np.maximum(1, (n_docs / np.arange(1, n_terms + 1) ** 0.9).astype(int))
    matrix = np.zeros((n_terms, n_docs))
    for t in range(n_terms):
        docs = rng.choice(n_docs, df[t], replace=False)
        matrix[t, docs] = rng.choice([0.125, 0.25, 0.5, 1.0], df[t]) * (1 + t / 8)
    questions = (rng.random((30, n_terms)) < 0.15).astype(float)
    questions[0] = 0.0  # a question without known terms
    questions[1, :] = 0.0
    questions[1, 0] = 1.0  # only the most frequent term: hundreds of tied candidates
    for k in (1, 10, 100, 400):
        (docs, scores), dense = postings_top_k(matrix, questions, k, 1e-9)
        assert as_lists(docs, scores) == by_sorting(dense, k, 1e-9), k


@pytest.mark.parametrize("spread", [1.0, 2.0**-21], ids=["any weights", "weights within float32's resolution"])
@pytest.mark.parametrize("seed", range(3))
def test_scores_are_summed_in_term_order_and_ranked_exactly(seed, spread, maxscore_settings):
    """Weights that are not binary fractions: a sum's last bits depend on the order of its terms, so every path
    must add them in ascending term order, as the product does; weights a few float32 ulps apart leave only the
    exact scores to order the documents."""
    rng = np.random.default_rng(seed)
    n_terms, n_docs = 12, 400
    present = rng.random((n_terms, n_docs)) < rng.permutation(np.linspace(0.95, 0.02, n_terms))[:, None]
    matrix = np.where(present, 1.0 + spread * rng.random((n_terms, n_docs)), 0.0)
    matrix[:, :40] = 0.0  # documents without any term
    questions = (rng.random((20, n_terms)) < 0.5).astype(float)
    questions[0] = 0.0  # a question without terms before the others: per-question bookkeeping stays aligned
    for k in (1, 7, 100):
        (docs, scores), dense = postings_top_k(matrix, questions, k, 1e-9)
        assert as_lists(docs, scores) == by_sorting(dense, k, 1e-9), k


def test_questions_with_unsorted_or_repeated_terms_rank_as_their_canonical_form(maxscore_settings):
    """Term indicators stored out of order or twice (not canonical CSR) mean the same question."""
    rng = np.random.default_rng(11)
    matrix = np.where(rng.random((8, 50)) < 0.4, rng.choice([0.25, 0.5, 1.0], (8, 50)), 0.0)
    index = Postings.build(sp.csr_matrix(matrix))
    messy = sp.csr_matrix((np.ones(5), np.array([5, 1, 3, 1, 0]), np.array([0, 3, 5])), shape=(2, 8))
    assert not messy.has_canonical_format
    clean = sp.csr_matrix((messy.toarray() > 0).astype(float))
    for got, want in zip(index.top_k(messy, 10, 1e-9), index.top_k(clean, 10, 1e-9)):
        np.testing.assert_array_equal(got, want)


def test_a_question_whose_frequent_terms_cannot_reach_the_bound_is_scored_at_its_rarer_terms_documents(monkeypatch):
    """Term 0 is in every document with a small weight, terms 1 and 2 in a few with large ones: a document with
    only term 0 cannot reach the k-th best score, so only the rarer terms' documents are scored, each exactly as
    the whole corpus would be (ties included, a document listed by both rarer terms once)."""
    n_docs = 200  # a term in fewer than 200 / 16 documents is not kept as a dense row
    matrix = np.zeros((3, n_docs))
    matrix[0] = 0.01 * (1 + np.arange(n_docs) % 3)  # frequent: a dense row
    matrix[1, [3, 10, 20, 30, 40]] = [2.0, 1.5, 2.0, 1.0, 0.5]
    matrix[2, [10, 20, 50]] = [1.0, 0.5, 2.0]
    questions = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    seen = []
    scored = Postings._rare_only
    monkeypatch.setattr(Postings, "_rare_only", lambda self, rows, docs, *rest: seen.append(sorted(set(docs.tolist())))
                        or scored(self, rows, docs, *rest))
    for k in (1, 2, 3):
        seen.clear()
        (docs, scores), dense = postings_top_k(matrix, questions, k, 1e-9)
        assert as_lists(docs, scores) == by_sorting(dense, k, 1e-9), k
        # the first two questions only (the third has no rarer term): their rarer terms' documents, not all 200
        assert seen == [[3, 10, 20, 30, 40, 50], [3, 10, 20, 30, 40]], k
