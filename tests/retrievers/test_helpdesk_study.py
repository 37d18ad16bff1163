"""SPEC.md's help-desk study, reproduced to the printed precision with default settings."""

from __future__ import annotations

import pytest

from metrics.evaluation import evaluate

# SPEC.md, "Expected results": hit@3, recall@5, MRR (2 decimals), nDCG@5 (3 decimals)
EXPECTED = {
    "BM25": (0.86, 0.67, 0.82, 0.691),
    "LSA": (0.86, 0.68, 0.83, 0.679),
    "weighted": (0.86, 0.74, 0.86, 0.734),
    "RRF": (0.86, 0.74, 0.86, 0.737),
}

# SPEC.md, "Rank of the first relevant document" (0 = not retrieved); all other questions rank 1
NOT_FIRST = {
    "BM25": {"q02": 0, "q10": 0, "q12": 2},
    "LSA": {"q01": 2, "q02": 0, "q10": 13},
    "weighted": {"q02": 0, "q10": 0},
    "RRF": {"q02": 0, "q10": 0},
}


@pytest.fixture(scope="module")
def runs(helpdesk_runs):
    return helpdesk_runs


@pytest.mark.parametrize("system", list(EXPECTED))
def test_means_match_the_spec_table(system, runs, helpdesk_collection):
    means = evaluate(runs[system], helpdesk_collection.qrels, "hit_rate@3,recall@5,mrr,ndcg@5").means()
    hit, rec, mrr, ndcg = EXPECTED[system]
    assert round(means["hit_rate@3"], 2) == hit
    assert round(means["recall@5"], 2) == rec
    assert round(means["mrr"], 2) == mrr
    assert round(means["ndcg@5"], 3) == ndcg


@pytest.mark.parametrize("system", list(EXPECTED))
def test_rank_of_first_relevant_document(system, runs, helpdesk_collection):
    ranks = evaluate(runs[system], helpdesk_collection.qrels, "mrr").first_relevant_rank.to_dict()
    expected = {q: NOT_FIRST[system].get(q, 1) for q in helpdesk_collection.query_ids}
    assert ranks == expected


def test_first_results_of_q01(runs):
    assert runs["BM25"].top("q01", 3) == ["pricing1", "sso1", "pricing2"]
    assert runs["LSA"].top("q01", 3) == ["sso1", "pricing1", "pricing2"]


@pytest.mark.parametrize("system", ["BM25", "LSA", "weighted", "RRF"])
def test_q02_retrieves_nothing(system, runs):
    assert runs[system].ranking("q02") == []


def test_every_question_is_scored_and_none_left_out(helpdesk_collection, runs):
    ev = evaluate(runs["BM25"], helpdesk_collection.qrels, "mrr")
    assert len(ev.per_question) == 14
    assert ev.without_judgments == [] and ev.missing_from_run == []
