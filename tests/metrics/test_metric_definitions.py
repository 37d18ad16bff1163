"""The metrics as docs/helpdesk-reference.md defines them: its worked example, scikit-learn's nDCG, and slow
obviously-correct per-question references on random rankings; then what evaluate() scores and leaves out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from metrics import EvalSettings, Qrels, Run, evaluate

JUDGMENTS = {"a": 2, "b": 1, "c": 1}


def scores_of(ranking: list[str], judgments: dict[str, int], metrics: list[str], **settings) -> dict[str, float]:
    run = Run.from_rankings({"q": [(d, float(len(ranking) - i)) for i, d in enumerate(ranking)]})
    ev = evaluate(run, Qrels.from_dict({"q": judgments}), metrics, EvalSettings(**settings))
    return ev.per_question.loc["q"].to_dict()


SPEC_METRICS = ["hit_rate@3", "recall@5", "mrr", "ndcg@5"]


def test_spec_worked_example_relevant_first():
    got = scores_of(["a", "x", "y", "b", "z"], JUDGMENTS, SPEC_METRICS)
    assert got["hit_rate@3"] == 1
    assert round(got["recall@5"], 2) == 0.67
    assert got["mrr"] == 1.0
    assert round(got["ndcg@5"], 3) == 0.776


def test_spec_worked_example_relevant_third():
    got = scores_of(["x", "y", "a", "b", "z"], JUDGMENTS, SPEC_METRICS)
    assert got["hit_rate@3"] == 1
    assert round(got["recall@5"], 2) == 0.67
    assert round(got["mrr"], 2) == 0.33
    assert round(got["ndcg@5"], 3) == 0.457
    assert round(got["ndcg@5"], 6) == 0.456949


def test_spec_worked_example_nothing_relevant():
    got = scores_of(["x", "y", "z", "w", "v"], JUDGMENTS, SPEC_METRICS)
    assert got == {name: 0.0 for name in SPEC_METRICS}


def test_sklearn_given_only_the_retrieved_documents_inflates_ndcg():
    """helpdesk-reference.md: 0.5438 instead of 0.4569: the ideal ordering must include relevant documents never
    retrieved."""
    retrieved_grades = [[JUDGMENTS.get(d, 0) for d in ["x", "y", "a", "b", "z"]]]
    inflated = ndcg_score(retrieved_grades, [[5, 4, 3, 2, 1]], k=5)
    assert round(inflated, 4) == 0.5438
    assert round(scores_of(["x", "y", "a", "b", "z"], JUDGMENTS, ["ndcg@5"])["ndcg@5"], 4) == 0.4569


def random_case(rng: np.random.Generator, min_length: int = 0, grades=(-1, 4)):
    """Judgments over a small universe and a ranking that mixes judged and unjudged documents."""
    universe = [f"d{i:02d}" for i in range(int(rng.integers(2, 30)))]
    judged = rng.choice(len(universe), size=int(rng.integers(1, len(universe) + 1)), replace=False)
    judgments = {universe[i]: int(rng.integers(*grades)) for i in judged}
    length = int(rng.integers(min(min_length, len(universe)), len(universe) + 1))
    ranking = [universe[i] for i in rng.permutation(len(universe))[:length]]
    return universe, judgments, ranking


def test_ndcg_agrees_with_sklearn_given_the_whole_document_universe():
    """Unretrieved documents score 0 for scikit-learn; rankings are at least k long so its tie averaging over
    those zeros never reaches the top k."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        k = int(rng.integers(1, 12))
        universe, judgments, ranking = random_case(rng, min_length=k, grades=(0, 4))
        if len(ranking) < k or not any(g > 0 for g in judgments.values()):
            continue
        y_true = [[judgments.get(d, 0) for d in universe]]
        position = {d: i for i, d in enumerate(ranking)}
        y_score = [[len(ranking) - position[d] if d in position else 0 for d in universe]]
        want = ndcg_score(y_true, y_score, k=k)
        assert scores_of(ranking, judgments, [f"ndcg@{k}"])[f"ndcg@{k}"] == pytest.approx(want, abs=1e-12)
        checked += 1
    assert checked > 200


# Slow, obviously-correct references: one question, plain Python, straight from the definitions.
def ref_relevant(judgments, level):
    return {d for d, g in judgments.items() if g >= level and g >= 0}


def ref_hit_rate(ranking, judgments, level, k):
    return float(any(d in ref_relevant(judgments, level) for d in ranking[:k]))


def ref_recall(ranking, judgments, level, k):
    rel = ref_relevant(judgments, level)
    return sum(d in rel for d in ranking[:k]) / len(rel)


def ref_precision(ranking, judgments, level, k):
    return sum(d in ref_relevant(judgments, level) for d in ranking[:k]) / k


def ref_mrr(ranking, judgments, level):
    for rank, d in enumerate(ranking, 1):
        if d in ref_relevant(judgments, level):
            return 1 / rank
    return 0.0


def ref_map(ranking, judgments, level):
    rel, found, total = ref_relevant(judgments, level), 0, 0.0
    for rank, d in enumerate(ranking, 1):
        if d in rel:
            found += 1
            total += found / rank
    return total / len(rel)


def ref_r_precision(ranking, judgments, level):
    rel = ref_relevant(judgments, level)
    return sum(d in rel for d in ranking[: len(rel)]) / len(rel)


def ref_ndcg(ranking, judgments, k, gain="linear"):
    def g(grade):
        grade = max(grade, 0)
        return grade if gain == "linear" else 2**grade - 1

    # no cutoff: the whole ranking against the ideal ordering of every judgment (trec_eval's ndcg)
    dcg = sum(g(judgments.get(d, 0)) / math.log2(rank + 1) for rank, d in enumerate(ranking[:k], 1))
    ideal = sorted(judgments.values(), reverse=True)[:k]
    idcg = sum(g(grade) / math.log2(rank + 1) for rank, grade in enumerate(ideal, 1))
    return dcg / idcg if idcg > 0 else 0.0


def ref_judged(ranking, judgments, k):
    """ir_measures' Judged@k: judged documents (grade >= 0) in the top k, over the top k's length."""
    top = ranking[:k]
    return sum(judgments.get(d, -1) >= 0 for d in top) / len(top) if top else 0.0


def ref_bpref(ranking, judgments, level):
    """trec_eval's bpref, read from its definition: each relevant document retrieved scores one minus the share
    of the (at most R) judged non-relevant documents above it, over min(R, N); the sum is divided by R."""
    rel = ref_relevant(judgments, level)
    nonrel = {d for d, g in judgments.items() if 0 <= g < level}
    r, n, above, total = len(rel), len(nonrel), 0, 0.0
    for d in ranking:
        if d in nonrel:
            above += 1
        elif d in rel:
            total += 1.0 - min(above, r) / min(n, r) if above else 1.0
    return total / r


def reference(name: str, ranking, judgments, level, gain):
    measure, _, k = name.partition("@")
    k = int(k) if k else None
    return {
        "hit_rate": lambda: ref_hit_rate(ranking, judgments, level, k),
        "recall": lambda: ref_recall(ranking, judgments, level, k),
        "precision": lambda: ref_precision(ranking, judgments, level, k),
        "mrr": lambda: ref_mrr(ranking, judgments, level),
        "map": lambda: ref_map(ranking, judgments, level),
        "r_precision": lambda: ref_r_precision(ranking, judgments, level),
        "ndcg": lambda: ref_ndcg(ranking, judgments, k, gain),
        "judged": lambda: ref_judged(ranking, judgments, k),
        "bpref": lambda: ref_bpref(ranking, judgments, level),
    }[measure]()


ALL_METRICS = ["hit_rate@1", "hit_rate@3", "recall@5", "recall@20", "precision@1", "precision@10", "mrr", "map",
               "r_precision", "ndcg@1", "ndcg@5", "ndcg@10", "ndcg", "judged@1", "judged@10", "bpref"]


@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_every_metric_matches_its_reference_on_random_rankings(level, gain):
    """Many questions in one Run (so the vectorised join is exercised across rows of different lengths, grades
    -1..3, unjudged documents, empty rankings)."""
    rng = np.random.default_rng(100 + level)
    rankings, judgments = {}, {}
    for i in range(300):
        _, judgments[f"q{i}"], rankings[f"q{i}"] = random_case(rng)
    run = Run.from_rankings({q: [(d, float(-j)) for j, d in enumerate(r)] for q, r in rankings.items()})
    ev = evaluate(run, Qrels.from_dict(judgments), ALL_METRICS, EvalSettings(level=level, gain=gain))
    scored = [q for q in judgments if ref_relevant(judgments[q], level)]
    assert list(ev.per_question.index) == scored
    assert len(scored) > 100
    for q in scored:
        for name in ALL_METRICS:
            want = reference(name, rankings[q], judgments[q], level, gain)
            assert ev.per_question.loc[q, name] == pytest.approx(want, abs=1e-12), (q, name)


def test_judged_at_k_is_the_judged_share_of_the_top_k_of_what_was_retrieved():
    """Any grade counts as judged, 0 included; a short ranking is divided by its length (ir_measures' Judged@k);
    an empty one scores 0; a negative grade (trec_eval's "pooled, not judged") is not judged."""
    judgments = {"a": 2, "b": 0, "c": -1}
    assert scores_of(["a", "x", "b", "y"], judgments, ["judged@2", "judged@4", "judged@10"]) == {
        "judged@2": 0.5, "judged@4": 0.5, "judged@10": 0.5}
    assert scores_of(["c", "a"], judgments, ["judged@2"])["judged@2"] == 0.5
    assert scores_of([], judgments, ["judged@10"])["judged@10"] == 0.0


def test_bpref_ignores_unjudged_documents_and_counts_judged_non_relevant_ones_above_each_relevant_one():
    """R = 2 relevant (a, b), N = 3 judged non-relevant: a below one non-relevant scores 1 - 1/2, b below all three
    scores 1 - min(3, 2)/2 = 0; unjudged x and y change nothing."""
    judgments = {"a": 1, "b": 2, "n1": 0, "n2": 0, "n3": 0}
    assert scores_of(["x", "n1", "a", "y", "n2", "n3", "b"], judgments, ["bpref"])["bpref"] == 0.25
    assert scores_of(["a", "b", "n1"], judgments, ["bpref"])["bpref"] == 1.0
    assert scores_of(["x", "y"], judgments, ["bpref"])["bpref"] == 0.0


def test_first_relevant_rank_and_counts():
    run = Run.from_rankings({"q": [("x", 3.0), ("b", 2.0), ("a", 1.0)], "r": [("x", 1.0)]})
    ev = evaluate(run, Qrels.from_dict({"q": JUDGMENTS, "r": {"y": 1}}), ["mrr"])
    assert ev.first_relevant_rank.to_dict() == {"q": 2, "r": 0}
    assert ev.counts.loc["q"].to_dict() == {"num_ret": 3, "num_rel": 3, "num_rel_ret": 2}
    assert ev.counts.loc["r"].to_dict() == {"num_ret": 1, "num_rel": 1, "num_rel_ret": 0}


# What is scored, and what is left out.
QRELS = Qrels.from_dict({
    "has_rel": {"a": 1},
    "only_nonrel": {"a": 0, "b": 0},
    "missing": {"a": 2},
    "graded": {"a": 1, "b": 2},
})
RUN = Run.from_rankings({
    "has_rel": [("a", 1.0)],
    "only_nonrel": [("a", 1.0)],
    "graded": [("a", 2.0), ("b", 1.0)],
    "unjudged": [("a", 1.0)],
})


def test_a_question_without_relevant_judgment_is_left_out_of_the_means_and_listed():
    ev = evaluate(RUN, QRELS, ["mrr"])
    assert "only_nonrel" not in ev.per_question.index
    assert "only_nonrel" in ev.without_judgments
    assert "unjudged" in ev.without_judgments  # in the run, never judged


def test_a_judged_question_missing_from_the_run_scores_zero():
    ev = evaluate(RUN, QRELS, ["mrr", "ndcg@5", "recall@5"])
    assert ev.per_question.loc["missing"].tolist() == [0.0, 0.0, 0.0]
    assert ev.missing_from_run == ["missing"]
    assert ev.means()["mrr"] == pytest.approx((1 + 0 + 1) / 3)


def test_missing_skip_leaves_a_judged_question_missing_from_the_run_out():
    ev = evaluate(RUN, QRELS, ["mrr"], EvalSettings(missing="skip"))
    assert list(ev.per_question.index) == ["has_rel", "graded"]
    assert ev.missing_from_run == ["missing"]


def test_the_relevance_level_decides_relevance_but_ndcg_keeps_graded_gains():
    level1 = evaluate(RUN, QRELS, ["mrr", "ndcg@5"], EvalSettings(level=1)).per_question
    level2 = evaluate(RUN, QRELS, ["mrr", "ndcg@5"], EvalSettings(level=2)).per_question
    assert list(level2.index) == ["missing", "graded"]  # has_rel's only judgment is a 1
    assert level1.loc["graded", "mrr"] == 1.0
    assert level2.loc["graded", "mrr"] == 0.5  # a (grade 1) no longer counts as relevant
    # nDCG is unchanged: a still gains 1 and b 2, whatever the level (as trec_eval's ndcg_cut)
    want = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert level1.loc["graded", "ndcg@5"] == level2.loc["graded", "ndcg@5"] == pytest.approx(want)


def test_exponential_gain_is_two_to_the_grade_minus_one():
    got = scores_of(["x", "y", "a", "b", "z"], JUDGMENTS, ["ndcg@5"], gain="exponential")["ndcg@5"]
    want = (3 / math.log2(4) + 1 / math.log2(5)) / (3 + 1 / math.log2(3) + 1 / math.log2(4))
    assert got == pytest.approx(want, abs=1e-12)
    linear = scores_of(["x", "y", "a", "b", "z"], JUDGMENTS, ["ndcg@5"])["ndcg@5"]
    assert got != pytest.approx(linear)


def test_a_negative_grade_is_never_relevant_and_gains_nothing():
    judgments = {"a": -1, "b": 1}
    got = scores_of(["a", "b"], judgments, ["mrr", "ndcg@2", "recall@2"], level=0)
    assert got == {"mrr": 0.5, "ndcg@2": pytest.approx(1 / math.log2(3)), "recall@2": 1.0}


def test_an_unknown_gain_is_refused():
    with pytest.raises(ValueError, match="gain"):
        scores_of(["a"], JUDGMENTS, ["ndcg@5"], gain="quadratic")


def test_judgments_naming_a_pair_twice_are_refused_plainly():
    with pytest.raises(ValueError, match="pair twice: question q, document a"):
        Qrels(np.array(["q", "p", "q"], dtype=object), np.array(["a", "a", "a"], dtype=object), np.array([1, 2, 0]))
