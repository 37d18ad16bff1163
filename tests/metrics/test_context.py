"""Span metrics (Smith and Troynikov 2024, on characters) and token-budget metrics, checked against a reference that
computes them the slow, obvious way: sets of (document, character) pairs and a prompt filled chunk by chunk."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.chunks import ChunkRun, Chunks, chunk_id
from metrics.errors import InputError
from metrics.evaluation import evaluate
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.spans import Spans
from metrics.spec import parse_metric

DOCS = {f"d{i}": 60 + 7 * i for i in range(8)}  # document -> length in characters


def random_case(seed: int):
    """Questions with graded spans (overlapping ones too), chunkings with overlap, rankings with ties."""
    rng = np.random.default_rng(seed)
    chunking = []
    for doc, length in DOCS.items():
        size = int(rng.integers(8, 30))
        step = max(1, size - int(rng.integers(0, 6)))
        chunking.extend((doc, s, min(s + size, length)) for s in range(0, length, step))
    tokens = {c: int(rng.integers(1, 12)) for c in chunking}
    spans, rankings = [], {}
    for q in range(10):
        qid = f"q{q}"
        for doc in rng.choice(list(DOCS), size=int(rng.integers(1, 4)), replace=False):
            for _ in range(int(rng.integers(1, 3))):
                s = int(rng.integers(0, DOCS[doc] - 5))
                spans.append((qid, doc, s, int(rng.integers(s + 1, DOCS[doc] + 1)), int(rng.integers(0, 3))))
        picked = rng.choice(len(chunking), size=int(rng.integers(5, 25)), replace=False)
        rankings[qid] = [(chunking[i], float(np.round(rng.random(), 1))) for i in picked]
        rankings[qid].sort(key=lambda p: (-p[1], chunk_id(*p[0])))
    return chunking, tokens, spans, rankings


def build(chunking, tokens, spans, rankings):
    run = Run.from_rankings({q: [(chunk_id(*c), s) for c, s in found] for q, found in rankings.items()})
    ranked = ChunkRun(run, Chunks.from_ids(run.doc_ids, [tokens[tuple_of(i)] for i in run.doc_ids]))
    table = Chunks([c[0] for c in chunking], [c[1] for c in chunking], [c[2] for c in chunking],
                   [tokens[c] for c in chunking])
    q, d, s, e, g = zip(*spans)
    found = Spans(np.array(q, dtype=object), np.array(d, dtype=object), s, e, g)
    return ranked, table, found


def tuple_of(ident):
    from metrics.chunks import parse_chunk_id

    return parse_chunk_id(ident)


def evidence(spans, q, level):
    return {(d, c) for qq, d, s, e, g in spans if qq == q and g >= level for c in range(s, e)}


def chars(chunks):
    return {(d, c) for d, s, e in chunks for c in range(s, e)}


def fed_by_budget(found, tokens, budget):
    fed, used = [], 0
    for chunk, _ in found:
        if used + tokens[chunk] > budget:
            break
        fed.append(chunk)
        used += tokens[chunk]
    return fed


def reference(name, q, spans, rankings, chunking, tokens, qrels, level=1):
    """The measure by its definition, on Python sets."""
    spec = parse_metric(name)
    found = rankings.get(q, [])
    fed = fed_by_budget(found, tokens, spec.k) if spec.unit else [c for c, _ in found][: spec.k]
    e = evidence(spans, q, level)
    if spec.measure == "span_precision_omega":
        holding = [c for c in chunking if chars([c]) & e]
        h = chars(holding)
        return len(e & h) / len(h | e) if h | e else 0.0
    if spec.measure.startswith("span_"):
        inside = len(e & chars(fed))
        total = sum(ch[2] - ch[1] for ch in fed)
        return {"span_recall": inside / len(e) if e else 0.0,
                "span_precision": inside / total if total else 0.0,
                "span_iou": inside / (total + len(e) - inside) if total + len(e) else 0.0}[spec.measure]
    grades = qrels.get(q, {})
    seen, gains = set(), []
    for d, _, _ in fed:
        gains.append(grades.get(d, 0) if d not in seen else 0)
        seen.add(d)
    relevant = {d for d, g in grades.items() if g >= level}
    if spec.measure == "recall":
        return len(relevant & seen) / len(relevant)
    if spec.measure == "hit_rate":
        return float(bool(relevant & seen))
    ideal = sorted((max(g, 0) for g in grades.values()), reverse=True)[: len(fed)]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains)) / idcg if idcg else 0.0


MEASURES = ["span_recall@1", "span_recall@3", "span_recall@10", "span_precision@3", "span_precision@5",
            "span_iou@2", "span_iou@8", "span_precision_omega", "recall@10tok", "recall@25tok", "hit_rate@10tok",
            "ndcg@15tok", "ndcg@40tok", "span_recall@20tok", "span_iou@30tok"]


@pytest.mark.parametrize("seed", range(6))
def test_every_chunk_measure_equals_its_definition_on_sets_of_characters(seed):
    chunking, tokens, spans, rankings = random_case(seed)
    ranked, table, found = build(chunking, tokens, spans, rankings)
    qrels = found.qrels()
    result = evaluate(ranked.run, qrels, MEASURES, chunks=ranked, spans=found, chunking=table)
    as_dict = qrels.to_dict()
    assert len(result.per_question) > 0
    for q, row in result.per_question.iterrows():
        for name in MEASURES:
            expected = reference(name, q, spans, rankings, chunking, tokens, as_dict)
            assert row[name] == pytest.approx(expected, abs=1e-12), (q, name)


def test_the_chunk_that_overflows_a_budget_ends_the_context():
    """Chunks of 40, 30 and 10 tokens at a budget of 60: only the first is fed; the 10 after the 30 is not."""
    run = Run.from_rankings({"q": [(chunk_id("a", 0, 10), 3.0), (chunk_id("b", 0, 10), 2.0),
                                   (chunk_id("c", 0, 10), 1.0)]})
    ranked = ChunkRun(run, Chunks.from_ids(run.doc_ids, [40, 30, 10]))
    qrels = Qrels.from_dict({"q": {"a": 1, "b": 1, "c": 1}})
    result = evaluate(run, qrels, ["recall@60tok", "recall@39tok", "recall@80tok"], chunks=ranked)
    assert result.per_question.loc["q"].tolist() == [pytest.approx(1 / 3), 0.0, 1.0]


def test_a_document_fed_twice_counts_once_and_its_second_chunk_gains_nothing():
    run = Run.from_rankings({"q": [(chunk_id("a", 0, 10), 3.0), (chunk_id("a", 10, 20), 2.0),
                                   (chunk_id("b", 0, 10), 1.0)]})
    ranked = ChunkRun(run, Chunks.from_ids(run.doc_ids, [5, 5, 5]))
    qrels = Qrels.from_dict({"q": {"a": 2, "b": 1}})
    result = evaluate(run, qrels, ["recall@15tok", "ndcg@15tok"], chunks=ranked)
    dcg = 2 + 0 / math.log2(3) + 1 / math.log2(4)
    idcg = 2 + 1 / math.log2(3)
    assert result.per_question.loc["q", "recall@15tok"] == 1.0
    assert result.per_question.loc["q", "ndcg@15tok"] == pytest.approx(dcg / idcg)


def test_span_measures_without_span_judgments_or_chunks_say_what_to_give():
    run = Run.from_rankings({"q": [("a", 1.0)]})
    qrels = Qrels.from_dict({"q": {"a": 1}})
    with pytest.raises(InputError, match="span_recall@5, recall@512tok: these read a ranking of chunks"):
        evaluate(run, qrels, ["span_recall@5", "recall@512tok"])
    ranked = ChunkRun.of_documents(run, {"a": 10}, {"a": 3})
    with pytest.raises(InputError, match="span_recall@5: span metrics need span judgments"):
        evaluate(run, qrels, ["span_recall@5"], chunks=ranked)


@pytest.mark.parametrize(("text", "reason"), [("mrr@5tok", "mrr takes no token budget"),
                                              ("recall@0tok", "the token budget must be positive")])
def test_a_budget_where_none_can_be_is_refused(text, reason):
    with pytest.raises(InputError, match=reason):
        parse_metric(text)


def test_budget_metrics_are_named_as_users_read_them_and_mlflow_takes_them():
    spec = parse_metric("recall@512tok")
    assert (spec.name, spec.mlflow_key, spec.needs_chunks) == ("recall@512tok", "recall_at_512tok", True)
    assert parse_metric("span_recall@5").mlflow_key == "span_recall_at_5"
