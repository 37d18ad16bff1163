"""Pooling: the unjudged pairs of the systems' top k, their order, and judged@k after any budget."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.errors import InputError
from metrics.evaluation import evaluate
from metrics.qrels import Qrels
from metrics.run import Run
from pipeline.judging_maths.pool import DEPTH, RBP, pool

A = Run.from_rankings({"q1": [("d1", 3), ("d2", 2), ("d3", 1)], "q2": [("d4", 2), ("d5", 1)]}, "A")
B = Run.from_rankings({"q1": [("d2", 3), ("d6", 2), ("d1", 1)], "q2": [("d5", 2), ("d4", 1)]}, "B")
QRELS = Qrels.from_dict({"q1": {"d1": 1}})


def test_the_pool_holds_each_unjudged_pair_of_the_top_k_once():
    found = pool({"A": A, "B": B}, QRELS, depth=2)
    assert sorted(found.keys()) == [("q1", "d2"), ("q1", "d6"), ("q2", "d4"), ("q2", "d5")]
    row = found.pairs.set_index(["query_id", "doc_id"]).loc[("q1", "d2")]
    assert row.best_rank == 1 and row.systems == 2


def test_depth_order_judges_every_systems_rank_one_before_any_rank_two():
    found = pool({"A": A, "B": B}, QRELS, depth=3, order=DEPTH)
    assert found.pairs["best_rank"].is_monotonic_increasing
    assert found.keys()[:3] == [("q1", "d2"), ("q2", "d4"), ("q2", "d5")]


def test_rbp_order_puts_a_pair_two_systems_rank_high_first():
    found = pool({"A": A, "B": B}, QRELS, depth=3, order=RBP, persistence=0.5)
    weights = found.pairs.set_index(["query_id", "doc_id"])["weight"]
    # d2 for q1: rank 2 in A (0.5 * 0.5) plus rank 1 in B (0.5)
    assert weights[("q1", "d2")] == pytest.approx(0.75)
    assert found.keys()[0] == ("q1", "d2") and found.pairs["weight"].is_monotonic_decreasing


def test_the_judged_curve_starts_at_what_metrics_computes_and_ends_at_one():
    runs = {"A": A, "B": B}
    found = pool(runs, QRELS, depth=2)
    curve = found.judged_curve(2)
    for name, run in runs.items():
        start = evaluate(run, Qrels.from_dict({"q1": {"d1": 1}, "q2": {"dx": 1}}), ["judged@2"])
        assert curve.loc[0, name] == pytest.approx(start.per_question["judged@2"].mean())
    assert np.allclose(curve.iloc[-1], 1.0)
    assert (np.diff(curve.to_numpy(), axis=0) >= 0).all()


def test_judged_after_a_budget_matches_judging_those_pairs():
    runs = {"A": A, "B": B}
    found = pool(runs, QRELS, depth=2, order=RBP)
    first = found.keys()[:2]
    judged = Qrels.from_dict({"q1": {"d1": 1, **{d: 0 for q, d in first if q == "q1"}},
                              "q2": {"dx": 1, **{d: 0 for q, d in first if q == "q2"}}})
    after = found.judged_after(2, k=2)
    for name, run in runs.items():
        assert after[name] == pytest.approx(evaluate(run, judged, ["judged@2"]).per_question["judged@2"].mean())


def test_the_pairs_needed_for_every_system_to_reach_the_target():
    found = pool({"A": A, "B": B}, QRELS, depth=2)
    needed = found.needed(0.8, k=2)
    curve = found.judged_curve(2)
    assert (curve.loc[needed] >= 0.8).all() and not (curve.loc[needed - 1] >= 0.8).all()


def test_questions_without_any_judgment_are_pooled_like_the_others():
    found = pool({"A": A}, Qrels.from_dict({}), depth=1)
    assert found.keys() == [("q1", "d1"), ("q2", "d4")]


def test_bad_settings_are_one_line_each():
    with pytest.raises(InputError, match="pooling order"):
        pool({"A": A}, QRELS, order="bandit")
    with pytest.raises(InputError, match="depth"):
        pool({"A": A}, QRELS, depth=0)
    with pytest.raises(InputError, match="at least 10 deep"):
        pool({"A": A}, QRELS, depth=5).judged_curve(10)


def chunked(name: str, ranked: dict[str, list[tuple[str, int, int]]]):
    """A ranking of chunks from {question: [(document, start, end), ...] best first}."""
    from metrics.chunks import ChunkRun, Chunks, chunk_id

    table = list(dict.fromkeys(c for chunks in ranked.values() for c in chunks))
    run = Run.from_rankings({q: [(chunk_id(*c), -i) for i, c in enumerate(chunks)] for q, chunks in ranked.items()},
                            name)
    rows = {chunk_id(*c): c for c in table}
    axis = [rows[i] for i in run.doc_ids]
    return ChunkRun(run, Chunks([a[0] for a in axis], [a[1] for a in axis], [a[2] for a in axis], [-1] * len(axis)))


def test_chunked_runs_pool_the_pairs_their_top_chunks_point_to_each_chunk_weighing():
    from pipeline.judging_maths.pool import documents_at_chunks, pooled_chunks

    small = chunked("small", {"q1": [("d1", 0, 10), ("d2", 0, 10), ("d2", 10, 20), ("d3", 0, 10)]})
    large = chunked("large", {"q1": [("d2", 0, 40), ("d3", 0, 40)]})
    runs = {"small": documents_at_chunks(small), "large": documents_at_chunks(large)}
    assert runs["small"].doc_ids[runs["small"].docs[0]].tolist() == ["d1", "d2", "d2", "d3"]
    found = pool(runs, QRELS, depth=3, order=RBP, persistence=0.5)
    rows = found.pairs.set_index("doc_id")
    assert rows.loc["d2", "best_rank"] == 1 and rows.loc["d2", "weight"] == pytest.approx(0.25 + 0.125 + 0.5)
    assert rows.loc["d3", "weight"] == pytest.approx(0.25) and "d1" not in rows.index  # d3: large's rank 2 only
    assert found.judged_after(0, 2) == {"small": pytest.approx(0.5), "large": 0.0}  # of the top 2 chunks
    marked = pooled_chunks({"small": small, "large": large}, 3, found.pairs)
    assert marked.values.tolist() == [["q1", "d2", 0, 10, 2, "small"], ["q1", "d2", 0, 40, 1, "large"],
                                      ["q1", "d2", 10, 20, 3, "small"], ["q1", "d3", 0, 40, 2, "large"]]
