"""A precomputed TREC run is served as a system, in trec_eval's order."""

from __future__ import annotations

from metrics.evaluation import evaluate
from metrics.trec import write_trec_run
from retrievers import BM25, RunFile


def test_a_written_run_evaluates_like_the_original(tmp_path, helpdesk_collection):
    c = helpdesk_collection
    run = BM25().index(c).rank(c.query_ids, c.query_texts, 100)
    path = write_trec_run(run, tmp_path / "bm25.run")
    served = RunFile(path=path).index(c).rank(c.query_ids, c.query_texts, 100)
    a = evaluate(run, c.qrels, "ndcg@5,mrr").per_question
    b = evaluate(served, c.qrels, "ndcg@5,mrr").per_question
    assert a.equals(b)


def test_questions_absent_from_the_file_get_empty_rankings(tmp_path, helpdesk_collection):
    path = tmp_path / "one.run"
    path.write_text("q01 Q0 pricing1 1 2.0 sys\nq01 Q0 sso1 2 2.0 sys\n")
    run = RunFile(path=path).index(helpdesk_collection).rank(["q01", "q02"], ["", ""], 10)
    assert [d for d, _ in run.ranking("q01")] == ["sso1", "pricing1"]  # tie: docno descending
    assert run.ranking("q02") == []


def test_documents_unknown_to_the_corpus_are_counted(tmp_path, helpdesk_collection):
    path = tmp_path / "x.run"
    path.write_text("q01 Q0 nosuchdoc 1 1.0 sys\n")
    assert RunFile(path=path).index(helpdesk_collection).unknown_docs == ["nosuchdoc"]


def test_the_run_file_of_a_run_that_retrieved_nothing_is_served_as_nothing(tmp_path, helpdesk_collection):
    """Its one line names a question no corpus holds (metrics.trec.NO_RESULTS_LINE): no question gets a result, and
    its document is no unknown document."""
    c = helpdesk_collection
    empty = BM25().index(c).rank(c.query_ids, ["zzzz"] * len(c.query_ids), 10)  # no question term in any document
    assert not empty.lengths.any()
    served = RunFile(path=write_trec_run(empty, tmp_path / "none.run")).index(c)
    assert served.unknown_docs == [] and not served.rank(c.query_ids, c.query_texts, 10).lengths.any()
