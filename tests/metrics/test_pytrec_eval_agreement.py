"""rankscope against pytrec_eval (trec_eval's C code) on many random collections: graded and negative judgments,
tied scores, unjudged and missing documents, questions missing from the run or from the judgments, relevance levels
1-3, trec_eval's -J; every measure pytrec_eval computes.

The one intended difference: trec_eval also scores (0) a judged question without any relevant judgment;
rankscope leaves it out of the means. Everything else must agree, to the last bit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from metrics import EvalSettings, Qrels, evaluate
from metrics.judged import judge, judged_only
from metrics.spec import parse_trec_measure
from metrics.trec import run_from_frame
from metrics.trec_measures import TREC9_IPREC_ROUNDING, TrecMeasures

pytrec_eval = pytest.importorskip("pytrec_eval")

TREC_MEASURES = {"map", "recip_rank", "Rprec", "bpref", "ndcg", "P.1,5,10", "recall.5,20", "ndcg_cut.1,5,10",
                 "success.1,5", "num_ret", "num_rel", "num_rel_ret"}
NAMES = {name: parse_trec_measure(name)[0] for name in
         ["map", "recip_rank", "Rprec", "bpref", "ndcg", "P_1", "P_5", "P_10", "recall_5", "recall_20", "ndcg_cut_1",
          "ndcg_cut_5", "ndcg_cut_10", "success_1", "success_5"]}
COUNTS = ["num_ret", "num_rel", "num_rel_ret"]


def random_collection(seed: int):
    rng = np.random.default_rng(seed)
    n_queries, n_docs = int(rng.integers(1, 12)), int(rng.integers(1, 60))
    docs = [f"D{i:03d}" for i in range(n_docs)]
    qrels, rows = {}, []
    for q in range(n_queries):
        judged = rng.choice(n_docs, size=int(rng.integers(1, n_docs + 1)), replace=False)
        grades = rng.integers(-1, 4, size=len(judged))
        grades[0] = max(grades[0], 0)  # trec_eval misbehaves on a query judged only -1 (stale cached levels)
        qrels[f"q{q}"] = {docs[i]: int(g) for i, g in zip(judged, grades)}
    for q in range(n_queries + 1):  # one extra query nobody judged; some judged queries get no ranking
        if rng.random() < 0.15:
            continue
        retrieved = rng.choice(n_docs, size=int(rng.integers(1, n_docs + 1)), replace=False)
        scores = rng.integers(0, 6, size=len(retrieved)) / 2.0  # many ties: docno descending breaks them
        rows += [(f"q{q}", docs[i], float(s)) for i, s in zip(retrieved, scores)]
    return qrels, pd.DataFrame(rows, columns=["q", "d", "s"]), int(rng.integers(1, 4))


def both_sides(seed: int, measures: set[str], judged_docs_only: bool):
    """One random collection: its judgments as a dict, pytrec_eval's values of ``measures``, the level, and the
    collection as rankscope reads it (-J applied)."""
    qrels_dict, frame, level = random_collection(seed)
    run_dict: dict[str, dict[str, float]] = {}
    for q, d, s in frame.itertuples(index=False):
        run_dict.setdefault(q, {})[d] = s
    theirs = pytrec_eval.RelevanceEvaluator(qrels_dict, measures, relevance_level=level,
                                            judged_docs_only_flag=judged_docs_only).evaluate(run_dict)
    qrels = Qrels.from_dict(qrels_dict)
    run = run_from_frame(frame, "random")
    return qrels_dict, theirs, level, qrels, judged_only(run, qrels) if judged_docs_only else run


def compare(seed: int, judged_docs_only: bool) -> int:
    qrels_dict, theirs, level, qrels, run = both_sides(seed, TREC_MEASURES, judged_docs_only)
    ev = evaluate(run, qrels, list(NAMES.values()), EvalSettings(level=level, missing="skip"),
                  query_ids=qrels.judged_queries())
    ours = set(ev.per_question.index)
    without_relevant = {q for q, j in qrels_dict.items() if not any(g >= level for g in j.values())}
    assert set(theirs) - ours == without_relevant & set(theirs), seed
    assert ours <= set(theirs), seed
    for q in ours:
        for trec_name, spec in NAMES.items():
            # to the last bit: same rank-by-rank sums and C's log2 as trec_eval
            assert ev.per_question.loc[q, spec.name] == theirs[q][trec_name], (seed, q, trec_name)
        for name in COUNTS:
            assert ev.counts.loc[q, name] == theirs[q][name], (seed, q, name)
    return len(ours)


@pytest.mark.parametrize("judged_docs_only", [False, True], ids=["all-docs", "-J"])
def test_every_metric_agrees_with_trec_eval_on_random_collections(judged_docs_only):
    scored = sum(compare(seed, judged_docs_only) for seed in range(200))
    assert scored > 500


SUPPORTED = set(pytrec_eval.supported_measures) - {"relstring", "runid", "num_q"}
INTERPOLATED = ("iprec_at_recall_", "11pt_avg")  # trec_eval 9 (pytrec_eval's) and 10 round level * R differently


def compare_all(seed: int, judged_docs_only: bool) -> int:
    """Every measure pytrec_eval computes, at its default parameters, per question and to the last bit."""
    _, theirs, level, qrels, run = both_sides(seed, SUPPORTED, judged_docs_only)
    if not theirs:
        return 0
    names = sorted(next(iter(theirs.values())))
    specs = {name: parse_trec_measure(name)[0] for name in names}
    ev = evaluate(run, qrels, list(specs.values()), EvalSettings(level=level, missing="skip"),
                  query_ids=qrels.judged_queries())
    rows = [q for q in ev.per_question.index]
    joined = judge(run, qrels, rows)
    nine = TrecMeasures(joined, level)
    for i, q in enumerate(rows):
        for name, spec in specs.items():
            want = theirs[q][name]
            if name.startswith(INTERPOLATED):  # checked at trec_eval 9's rounding, which pytrec_eval bundles
                got = (nine.eleven_point_average(TREC9_IPREC_ROUNDING) if name == "11pt_avg" else
                       nine.iprec_at_recall(spec.k / 100, TREC9_IPREC_ROUNDING))[i]
                if math.isnan(want):  # trec_eval divides 0 by 0 where -J left nothing retrieved; rankscope gives 0
                    assert joined.lengths[i] == 0 and got == 0, (seed, q, name)
                    continue
            else:
                got = ev.per_question.loc[q, spec.name]
            assert got == want, (seed, q, name, got, want)
    return len(rows)


@pytest.mark.parametrize("judged_docs_only", [False, True], ids=["all-docs", "-J"])
def test_every_measure_pytrec_eval_supports_agrees_on_random_collections(judged_docs_only):
    scored = sum(compare_all(seed, judged_docs_only) for seed in range(200))
    assert scored > 500
