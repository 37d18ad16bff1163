"""Metric evaluation of one library in a fresh process: cold (first call, JIT and set-up included) and warm.

``python -m bench.metric_child LIBRARY OUT --questions N --depth K`` builds a seeded synthetic run and
judgments, converts them to the library's own input form (not timed: each library is given what it expects),
times the first evaluation and the median of the next ones, and writes per-question values to OUT.npz.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

METRICS = ["ndcg@10", "recall@100", "precision@10", "mrr", "map"]
TREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "precision@10": "P_10", "mrr": "recip_rank",
        "map": "map"}
WARM_REPEATS = 5


def synthetic_run(n_questions: int, depth: int, n_docs: int = 100_000, seed: int = 0):
    """Scores falling with rank (every library orders alike) and 1-12 graded judgments per question."""
    rng = np.random.default_rng(seed)
    docs = np.stack([rng.choice(n_docs, depth, replace=False) for _ in range(n_questions)])
    # integer scores 100, 99, ...: distinct even in float32 (pytrec_eval's precision), so no tie rule applies
    scores = np.tile(np.arange(depth, 0, -1, dtype=np.float64), (n_questions, 1))
    judged_q, judged_d, grades = [], [], []
    for q in range(n_questions):
        n = int(rng.integers(1, 13))
        from_run = rng.choice(docs[q], min(n, depth) // 2 + 1, replace=False)
        elsewhere = rng.choice(n_docs, n - len(from_run) + 1, replace=False)
        chosen = list(dict.fromkeys([*from_run.tolist(), *elsewhere.tolist()]))[:n]
        g = rng.integers(0, 4, len(chosen))
        g[0] = max(g[0], 1)  # every question has a relevant document
        judged_q += [q] * len(chosen)
        judged_d += chosen
        grades += g.tolist()
    return docs, scores, np.array(judged_q), np.array(judged_d), np.array(grades)


def prepare(library: str, docs, scores, jq, jd, grades):
    """The library's input objects and a function evaluating them into {metric: per-question array}."""
    n = docs.shape[0]
    qids = [f"q{i}" for i in range(n)]
    if library == "rankscope":
        from metrics.evaluation import evaluate
        from metrics.qrels import Qrels
        from metrics.run import Run

        doc_ids = np.array([f"d{i}" for i in range(int(max(docs.max(), jd.max())) + 1)], dtype=object)
        run = Run(np.array(qids, dtype=object), doc_ids, docs, scores)
        qrels = Qrels(np.array(qids, dtype=object)[jq], doc_ids[jd], grades)

        def go():
            table = evaluate(run, qrels, METRICS).per_question
            return {m: table[m].reindex(qids).to_numpy() for m in METRICS}

        return go
    run_dict = {qids[i]: {f"d{d}": float(s) for d, s in zip(docs[i], scores[i])} for i in range(n)}
    qrel_dict: dict[str, dict[str, int]] = {}
    for q, d, g in zip(jq.tolist(), jd.tolist(), grades.tolist()):
        qrel_dict.setdefault(qids[q], {})[f"d{d}"] = int(g)
    if library == "pytrec_eval":
        import pytrec_eval

        measures = {"ndcg_cut.10", "recall.100", "P.10", "recip_rank", "map"}

        def go():  # judgments are read on every call, as rankscope reads them on every call
            out = pytrec_eval.RelevanceEvaluator(qrel_dict, measures).evaluate(run_dict)
            return {m: np.array([out[q][TREC[m]] for q in qids]) for m in METRICS}

        return go
    if library == "ranx":
        from ranx import Qrels, Run, evaluate

        qrels, run = Qrels(qrel_dict), Run(run_dict)

        def go():
            evaluate(qrels, run, METRICS, return_mean=False)  # per-question values land in run.scores
            return {m: np.array([run.scores[m][q] for q in qids]) for m in METRICS}

        return go
    raise ValueError(f"unknown library {library!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metric_child")
    parser.add_argument("library")
    parser.add_argument("out", type=Path)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args(argv)
    go = prepare(args.library, *synthetic_run(args.questions, args.depth))
    start = time.perf_counter()
    values = go()
    cold = time.perf_counter() - start
    warm = []
    for _ in range(WARM_REPEATS):
        start = time.perf_counter()
        go()
        warm.append(time.perf_counter() - start)
    np.savez(args.out.with_suffix(".npz"), **{m: v for m, v in values.items()})
    args.out.write_text(json.dumps({"library": args.library, "cold_s": cold, "warm_s": statistics.median(warm)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
