"""Comparing two systems question by question, and the regression gate's decision rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.comparison import BETTER, SAME, WORSE, all_pairs, compare, gate
from metrics.significance import holm


def table(values: dict[str, np.ndarray], ids=None) -> pd.DataFrame:
    n = len(next(iter(values.values())))
    return pd.DataFrame(values, index=pd.Index(ids or [f"q{i}" for i in range(n)], name="query_id"))


@pytest.fixture
def scores():
    rng = np.random.default_rng(7)
    return rng.random(200), rng.random(200)


def test_a_system_against_itself_is_indistinguishable_around_zero(scores):
    a, b = scores
    t = table({"ndcg@5": a, "mrr": b})
    c = compare(t, t.copy())
    assert (c.table.verdict == SAME).all()
    assert (c.table.ci_low == 0).all() and (c.table.ci_high == 0).all() and (c.table.p_value == 1).all()


def test_a_clear_drop_is_worse_and_a_clear_gain_better(scores):
    a, _ = scores
    base = table({"ndcg@5": a})
    assert compare(base, table({"ndcg@5": a - 0.2})).verdict("ndcg@5") == WORSE
    assert compare(base, table({"ndcg@5": a + 0.2})).verdict("ndcg@5") == BETTER


def test_noise_is_not_a_verdict(scores):
    a, b = scores
    c = compare(table({"m": a}), table({"m": a + (b - 0.5) * 0.01}))
    assert c.verdict("m") == SAME and c.table.loc["m", "ci_low"] < 0 < c.table.loc["m", "ci_high"]


def test_holm_adjusts_across_metrics(scores):
    a, b = scores
    base = table({"x": a, "y": b, "z": a})
    cand = table({"x": a + 0.05 * (b > 0.3), "y": b, "z": a - 0.01 * (b > 0.5)})
    c = compare(base, cand)
    assert (c.table.p_holm >= c.table.p_value).all()


def test_questions_on_one_side_only_are_listed():
    base = table({"m": np.array([1.0, 0.0, 1.0])}, ["q1", "q2", "q3"])
    cand = table({"m": np.array([1.0, 0.0, 0.5])}, ["q1", "q2", "q4"])
    c = compare(base, cand)
    assert c.only_in_baseline == ["q3"] and c.only_in_candidate == ["q4"]
    assert c.table.loc["m", "baseline"] == pytest.approx(0.5)


def test_gate_fails_only_beyond_the_tolerance(scores):
    a, _ = scores
    base = table({"m": a})
    drop = compare(base, table({"m": a - 0.05}))
    assert not gate(drop, ["m"], tolerance=0.0).passed
    assert gate(drop, ["m"], tolerance=0.1).passed  # a 0.05 drop is within a 0.1 tolerance
    same = compare(base, base.copy())
    result = gate(same, ["m"], tolerance=0.0)
    assert result.passed and "indistinguishable" in result.reason


def test_gate_names_the_metric_and_the_interval_when_it_fails(scores):
    a, _ = scores
    result = gate(compare(table({"ndcg@10": a}), table({"ndcg@10": a - 0.3})), ["ndcg@10"], 0.01)
    assert result.reason.startswith("REGRESSION: ndcg@10 dropped by 0.3000")


def test_bad_requests_are_refused(scores):
    a, _ = scores
    t = table({"m": a})
    with pytest.raises(ValueError, match="not in both"):
        compare(t, table({"other": a}), ["m"])
    with pytest.raises(ValueError, match="no question in common"):
        compare(t, table({"m": a}, [f"x{i}" for i in range(200)]))
    with pytest.raises(ValueError, match="tolerance"):
        gate(compare(t, t), ["m"], -1)


def test_gate_says_why_it_passes(scores):
    a, b = scores
    base = table({"m": a})
    within = gate(compare(base, table({"m": a - 0.005})), ["m"], tolerance=0.01)
    assert within.passed and "worse but within the tolerance 0.0100" in within.reason
    noisy = compare(base, table({"m": a - 0.01 + (b - 0.5) * 0.2}))
    low, high = noisy.table.loc["m", ["ci_low", "ci_high"]]
    assert low < -0.01 < high < 0
    boundary = gate(noisy, ["m"], tolerance=0.01)
    assert boundary.passed and "indistinguishable from the tolerance boundary -0.0100" in boundary.reason
    better = gate(compare(base, table({"m": a + 0.05})), ["m"], tolerance=0.01)
    assert better.passed and better.reason.startswith("PASS: m better")


def test_gate_needs_the_drop_to_be_significant_not_only_its_interval(scores):
    a, _ = scores
    base = table({"m": a[:4]})
    drop = compare(base, table({"m": a[:4] - 0.2}), permutations=2000)
    assert drop.table.loc["m", "ci_high"] < -0.01 and drop.table.loc["m", "p_holm"] > 0.05  # 4 questions: p >= 2/16
    result = gate(drop, ["m"], tolerance=0.01)
    assert result.passed and "not significant after Holm's adjustment" in result.reason


def test_all_pairs_gives_each_pair_what_compare_gives_it_alone_and_holm_over_the_pairs(scores):
    a, b = scores
    systems = {"A": table({"ndcg@5": a, "mrr": b}), "B": table({"ndcg@5": a + 0.1 * (b > 0.4), "mrr": b}),
               "C": table({"ndcg@5": a - 0.02 * (b > 0.5), "mrr": b * 0.9})}
    pairs = all_pairs(systems, ["ndcg@5", "mrr"], resamples=1000, permutations=2000)
    assert list(dict.fromkeys((x, y) for x, y, _ in pairs.index)) == [("A", "B"), ("A", "C"), ("B", "C")]
    for (x, y, metric), row in pairs.iterrows():
        alone = compare(systems[y], systems[x], [metric], resamples=1000, permutations=2000).table.loc[metric]
        assert row.difference == pytest.approx(alone.difference)  # compare says candidate - baseline: x - y
        assert (row.ci_low, row.ci_high) == (pytest.approx(alone.ci_low, abs=1e-12),
                                             pytest.approx(alone.ci_high, abs=1e-12))
        assert row.p_value == alone.p_value
    ndcg = pairs.xs("ndcg@5", level="metric")
    assert list(ndcg.p_holm) == pytest.approx(list(holm(ndcg.p_value)))  # the family: every pair on one metric
    assert ndcg.loc[("A", "B"), "significant"] and pairs.loc[("A", "C", "mrr"), "significant"]
    assert not pairs.loc[("A", "B", "mrr"), "significant"] and pairs.loc[("A", "B", "mrr"), "p_value"] == 1.0
    assert ndcg.loc[("A", "B"), "difference"] < 0  # a listed before b: the difference is a - b


def test_all_pairs_of_one_system_is_empty(scores):
    assert all_pairs({"A": table({"m": scores[0]})}, ["m"]).empty
