"""Ranking a job's questions batch by batch gives the Run that ranking them at once gives."""

from __future__ import annotations

import io

import numpy as np
import pytest

from pipeline.common import progress
from pipeline.job import batches
from retrievers import BM25, LSA, RRF, WeightedSum
from retrievers.base import BLOCK_CELLS


def rankings(run) -> dict[str, list[tuple[str, float]]]:
    return {q: run.ranking(q) for q in run.query_ids}


@pytest.mark.parametrize("make", [BM25, LSA, lambda: WeightedSum([BM25(), LSA()]), lambda: RRF([BM25(), LSA()])],
                         ids=["bm25", "lsa", "weighted", "rrf"])
def test_batches_of_questions_join_into_the_same_run(helpdesk_collection, monkeypatch, make):
    c = helpdesk_collection
    retriever = make().index(c)
    whole = retriever.rank(c.query_ids, c.query_texts, 100)
    monkeypatch.setattr(batches, "batch_length", lambda n_docs: 4)  # 14 questions: batches of 4, 4, 4, 2
    parts = batches.rank_in_batches(retriever, c.query_ids, c.query_texts, 100, len(c.doc_ids))
    assert list(parts.query_ids) == list(c.query_ids)
    assert rankings(parts) == rankings(whole)
    assert parts.depth == whole.depth


@pytest.mark.parametrize("n_docs", [28, 5_183, 1_000_000, 3_000_000, 2**25])
def test_batches_are_whole_score_blocks_and_bounded_in_cells(n_docs):
    block = max(1, BLOCK_CELLS // n_docs)  # questions per dense score block
    length = batches.batch_length(n_docs)
    assert length % block == 0
    assert length * n_docs <= max(batches.BATCH_CELLS, block * n_docs)
    assert length * n_docs > batches.BATCH_CELLS // 2 or length == block


def test_bars_draw_only_on_a_terminal_and_never_when_quiet_or_in_worker_processes(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(progress, "DELAY", 0.0)
    drawn = {}
    cases = [("terminal", False, "basic", Terminal()), ("pipe", False, "basic", io.StringIO()),
             ("quiet", True, "basic", Terminal()), ("joblib", False, "joblib", Terminal())]
    for name, quiet, launcher, stream in cases:
        monkeypatch.setattr("sys.stderr", stream)
        progress.configure(quiet, launcher)
        with progress.ticker(10, "ranking", "question") as tick:
            tick(10)
        drawn[name] = "ranking" in stream.getvalue()
    progress.configure(False)
    assert drawn == {"terminal": True, "pipe": False, "quiet": False, "joblib": False}


def test_the_bootstrap_reports_every_resample_and_its_intervals_do_not_change():
    from metrics.bootstrap import bootstrap_ci

    values = np.random.default_rng(3).random((500, 4))
    done = []
    with_progress = bootstrap_ci(values, 5000, 0, progress=done.append)
    assert sum(done) == 5000 and len(done) > 1
    assert with_progress == bootstrap_ci(values, 5000, 0)
