"""Every figure by slice: one system's means and intervals per slice; several systems' paired differences against
a reference per slice, Holm-adjusted over the tested slices and systems of a metric, each slice's detectable
difference, reversals, and the slices too small to test. Checked against pandas group-bys, a hand-written Holm and
the metrics package's own bootstrap and power functions on each slice's questions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.bootstrap import bootstrap_ci
from metrics.comparison import BETTER, SAME, WORSE, compare
from metrics.errors import InputError
from metrics.power import minimum_detectable_effect
from pipeline.analysis.slices import ALL, assign, fewest_tested, slice_means, slice_report
from pipeline.analysis.slicing import MISSING
from pipeline.reports.slice_text import slices_table

RESAMPLES, PERMUTATIONS = 2000, 4000


def systems(n: int = 90, seed: int = 3) -> dict[str, pd.DataFrame]:
    """Three systems on ``n`` questions of three teams (and a few without a team): B is better than A overall but
    far worse on billing (a reversal); C is A plus noise."""
    rng = np.random.default_rng(seed)
    ids = [f"q{i:03d}" for i in range(n)]
    team = np.array(["billing", "data", "account"])[np.arange(n) % 3].astype(object)
    team[:2] = None  # two questions without a team
    a = rng.uniform(0.2, 0.8, n)
    b = np.clip(a + np.where(team == "billing", -0.35, 0.25) + rng.normal(0, 0.05, n), 0, 1)
    c = np.clip(a + rng.normal(0, 0.1, n), 0, 1)
    labels = pd.Series(team, index=ids).where(pd.notna(team), MISSING)
    length = np.where(np.arange(n) < 4, "1-3", "4-9")  # a slice of four questions: too small to test
    return {name: pd.DataFrame({"ndcg@5": v, "mrr": np.clip(v + 0.1, 0, 1), "slice:team": labels.to_numpy(),
                                "slice:question_length": length}, index=pd.Index(ids, name="query_id"))
            for name, v in (("A", a), ("B", b), ("C", c))}


def holm_by_hand(p: list[float]) -> list[float]:
    """Holm's step-down adjustment as textbooks write it: sorted ascending, times (m - rank), running maximum."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    adjusted, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_one_system_s_figures_by_slice_are_the_bootstrap_of_that_slice_s_questions():
    table = systems()["A"]
    found = slice_means(table, ["ndcg@5", "mrr"], ["team"], RESAMPLES, 7, 0.9)
    for (label, metric), row in found.set_index(["slice", "metric"]).iterrows():
        part = table.loc[table["slice:team"] == label, metric]
        [expected] = bootstrap_ci(part.to_numpy(), RESAMPLES, 7, 0.9)
        assert row.questions == len(part) and row["mean"] == pytest.approx(part.mean(), abs=1e-12)
        assert (row.ci_low, row.ci_high) == (expected.low, expected.high)
    assert list(found["slice"].unique()) == ["account", "billing", "data", MISSING]


def test_differences_per_slice_are_paired_and_holm_adjusted_over_the_tested_slices_and_systems():
    tables = systems()
    report = slice_report(tables, "A", ["ndcg@5", "mrr"], "ndcg@5", None, 0.95, RESAMPLES, PERMUTATIONS, 0)
    d = report.differences
    for metric in ("ndcg@5", "mrr"):
        tested = d[d["tested"] & (d["metric"] == metric)]
        assert len(tested) == 2 * (3 + 1)  # B and C, on 3 teams (the 2 questions without one: too few) and 4-9
        assert tested["p_holm"].tolist() == pytest.approx(holm_by_hand(tested["p_value"].tolist()))
    for r in d[d["slicing"] == "team"].itertuples():
        questions = tables["A"].index[tables["A"]["slice:team"] == r.slice]
        alone = compare(tables["A"].loc[questions], tables[r.system].loc[questions], [r.metric], 0.95, RESAMPLES,
                        PERMUTATIONS, 0).table.loc[r.metric]
        diff = tables[r.system].loc[questions, r.metric] - tables["A"].loc[questions, r.metric]
        assert r.questions == len(questions) and r.difference == pytest.approx(diff.mean())
        assert (r.ci_low, r.ci_high, r.p_value) == pytest.approx((alone.ci_low, alone.ci_high, alone.p_value))
        assert r.sd == pytest.approx(diff.std(ddof=1))
        assert r.mde == pytest.approx(minimum_detectable_effect(diff.std(ddof=1), len(questions)))
        assert r.detects_overall == (r.mde <= abs(r.overall))
    billing = d[(d["slice"] == "billing") & (d["system"] == "B") & (d["metric"] == "ndcg@5")].iloc[0]
    assert billing.verdict == WORSE and billing.overall > 0  # better overall, worse on billing


def test_a_reversal_is_a_significant_verdict_against_the_overall_difference_and_its_line_says_both():
    report = slice_report(systems(), "A", ["ndcg@5"], "ndcg@5", ["team"], 0.95, RESAMPLES, PERMUTATIONS, 0)
    reversals = report.reversals()
    assert list(zip(reversals["system"], reversals["slice"])) == [("B", "billing")]
    text = slices_table(report)
    account = next(x for x in text.splitlines() if x.startswith("team=account")).split()
    assert account[4].endswith("*") and account[6].endswith("?")  # B significant; C's +0.005 overall: too small
    line = next(x for x in text.splitlines() if x.startswith("REVERSAL"))
    assert line.startswith("REVERSAL: B is better than A overall on ndcg@5 (+0.")
    assert "but worse on team=billing: -0." in line and "29 questions" in line
    overall = report.differences[(report.differences["slicing"] == ALL) & (report.differences["system"] == "B")]
    assert overall["verdict"].iloc[0] == BETTER


def test_slices_too_small_to_test_are_shown_named_and_never_tested():
    assert fewest_tested(0.95) == 6 and fewest_tested(0.9) == 5 and fewest_tested(0.99) == 8
    report = slice_report(systems(), "A", ["ndcg@5"], "ndcg@5", None, 0.95, RESAMPLES, PERMUTATIONS, 0)
    assert report.small() == [("team", MISSING, 2), ("question_length", "1-3", 4)]
    small = report.differences[report.differences["slice"].isin(["1-3", MISSING])]
    assert not small["tested"].any() and small["p_holm"].isna().all() and (small["verdict"] == SAME).all()
    text = slices_table(report)
    row = next(line for line in text.splitlines() if line.startswith("question_length=1-3"))
    assert row.split()[1] == "4" and row.endswith("too small to test") and "*" not in row
    assert "Too small to test (fewer than 6 questions: a sign-flip test cannot reach p < 0.05): " \
           f"team={MISSING} (2), question_length=1-3 (4)" in text


def test_the_slices_follow_the_reference_and_a_disagreement_is_counted():
    tables = systems(12)
    other = tables["B"].copy()
    other.loc[other.index[:3], "slice:team"] = "data"  # read from other traces, say
    labels, notes = assign({"A": tables["A"], "B": other}, "A", ["team"], tables["A"].index)
    # A's slices; where A has none (its first two questions), B's
    assert labels["team"].tolist() == ["data", "data", *tables["A"]["slice:team"].iloc[2:]]
    assert len(notes) == 1 and "1 question(s) are in another slice" in notes[0]  # the third: account in A
    missing_in_a = tables["A"].drop(columns="slice:team")
    labels, _ = assign({"A": missing_in_a, "B": tables["B"]}, "A", ["team"], tables["A"].index)
    assert labels["team"].tolist() == tables["B"]["slice:team"].tolist()  # a field the reference lacks


def test_a_slicing_no_table_carries_is_refused_naming_those_they_do():
    with pytest.raises(InputError, match=r"no slice column teem .*sliced by: team, question_length"):
        slice_report(systems(), "A", ["ndcg@5"], "ndcg@5", ["teem"])
    plain = {k: v.drop(columns=["slice:team", "slice:question_length"]) for k, v in systems().items()}
    assert slice_report(plain, "A", ["ndcg@5"], "ndcg@5") is None
