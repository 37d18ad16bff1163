"""Agreement between assessors, checked against independent implementations (scikit-learn, krippendorff)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.judging_maths.agreement import agreement, cohen_kappa, krippendorff_alpha, merge, tied_pairs

GRADES = [0, 1, 2, 3]
RNG = np.random.default_rng(7)


def graded(n: int, raters: int, noise: float = 0.8, missing: float = 0.0) -> np.ndarray:
    truth = RNG.integers(0, 4, n)
    values = np.clip(truth[:, None] + np.rint(RNG.normal(0, noise, (n, raters))), 0, 3)
    values[RNG.random((n, raters)) < missing] = np.nan
    return values


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohens_kappa_is_scikit_learns(weights):
    from sklearn.metrics import cohen_kappa_score

    values = graded(200, 2)
    ours = cohen_kappa(values[:, 0], values[:, 1], GRADES, weights)
    assert ours == pytest.approx(cohen_kappa_score(values[:, 0], values[:, 1], weights=weights, labels=GRADES))


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorffs_alpha_is_the_krippendorff_packages(level):
    krippendorff = pytest.importorskip("krippendorff", reason="pip install krippendorff (the [judge] extra)")
    values = graded(150, 4, missing=0.3)
    expected = krippendorff.alpha(reliability_data=values.T, level_of_measurement=level, value_domain=GRADES)
    assert krippendorff_alpha(values, GRADES, level) == pytest.approx(expected)


def test_alpha_on_krippendorffs_own_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 coders, 12 units, values 1-5
    data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
                     [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
                     [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
                     [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan]]).T
    assert krippendorff_alpha(data, [1, 2, 3, 4, 5], "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, [1, 2, 3, 4, 5], "interval") == pytest.approx(0.849, abs=5e-4)


def annotations(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "assessor", "grade"])


def test_two_assessors_get_cohens_kappa_and_their_disagreements_listed():
    found = agreement(annotations([("q1", "d1", "ann", 3), ("q1", "d1", "bob", 3), ("q1", "d2", "ann", 0),
                                   ("q1", "d2", "bob", 2), ("q2", "d3", "ann", 1), ("q2", "d3", "bob", 1),
                                   ("q2", "d4", "ann", 2)]), GRADES)
    assert found.shared == 3 and found.exact == pytest.approx(2 / 3)
    assert found.kappa is not None and found.weighted_kappa is not None
    assert found.disagreements.to_dict("records") == [{"query_id": "q1", "doc_id": "d2", "grades": "ann=0, bob=2"}]


def test_merge_by_majority_and_by_median_lean_low_on_ties():
    rows = annotations([("q1", "d1", "a", 3), ("q1", "d1", "b", 3), ("q1", "d1", "c", 0),
                        ("q1", "d2", "a", 1), ("q1", "d2", "b", 2)])
    majority = merge(rows, "majority").set_index("doc_id")["grade"].to_dict()
    median = merge(rows, "median").set_index("doc_id")["grade"].to_dict()
    assert majority == {"d1": 3, "d2": 1} and median == {"d1": 3, "d2": 1}
    skewed = annotations([("q1", "d1", "a", 0), ("q1", "d1", "b", 2), ("q1", "d1", "c", 3), ("q1", "d1", "d", 3)])
    assert merge(skewed, "majority")["grade"].tolist() == [3]
    assert merge(skewed, "median")["grade"].tolist() == [2]


def test_three_assessors_get_lights_kappa_the_mean_of_scikit_learns_over_every_two():
    from sklearn.metrics import cohen_kappa_score

    values = graded(120, 3)
    rows = [(f"q{i}", "d", who, int(values[i, j])) for i in range(len(values)) for j, who in enumerate("abc")]
    found = agreement(annotations(rows), GRADES)
    pairs = [(0, 1), (0, 2), (1, 2)]
    plain = np.mean([cohen_kappa_score(values[:, i], values[:, j], labels=GRADES) for i, j in pairs])
    weighted = np.mean([cohen_kappa_score(values[:, i], values[:, j], labels=GRADES, weights="quadratic")
                        for i, j in pairs])
    assert found.kappa == pytest.approx(plain) and found.weighted_kappa == pytest.approx(weighted)
    assert found.name("kappa") == "Light's kappa" and "Light's kappa (the mean" in found.lines()[0]


def opposed(n: int = 40) -> pd.DataFrame:
    """Two assessors who disagree on every pair: ann says 0 where bob says 3, and 3 where bob says 0."""
    return annotations([row for i in range(n) for row in ((f"q{i}", "d", "ann", 3 * (i % 2)),
                                                          (f"q{i}", "d", "bob", 3 * (1 - i % 2)))])


def test_assessors_who_disagree_on_every_pair_are_below_any_sensible_threshold():
    from sklearn.metrics import cohen_kappa_score

    found = agreement(opposed(), GRADES)
    table = opposed().pivot(index="query_id", columns="assessor", values="grade")
    assert found.figure("kappa") == pytest.approx(cohen_kappa_score(table["ann"], table["bob"], labels=GRADES))
    assert found.figure("kappa") == pytest.approx(-1.0) and len(found.disagreements) == 40
    assert found.below("kappa", 0.4) and found.below("weighted_kappa", 0.4) and found.below("alpha", 0.4)
    alike = agreement(annotations([("q1", "d", "ann", 2), ("q1", "d", "bob", 2)]), GRADES)
    assert np.isnan(alike.figure("kappa")) and not alike.below("kappa", 0.4)  # no variation: nothing to refuse


def test_a_tie_goes_where_the_ties_setting_says_and_an_adjudicated_grade_settles_it():
    rows = annotations([("q1", "d1", "a", 0), ("q1", "d1", "b", 3), ("q1", "d2", "a", 2), ("q1", "d2", "b", 2),
                        ("q2", "d3", "a", 1), ("q2", "d3", "b", 2)])
    grades = {t: merge(rows, "majority", t).set_index("doc_id")["grade"].to_dict() for t in ("lower", "higher")}
    assert grades == {"lower": {"d1": 0, "d2": 2, "d3": 1}, "higher": {"d1": 3, "d2": 2, "d3": 2}}
    third = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "grade": [2, 0]})
    settled = merge(rows, "majority", "lower", third).set_index("doc_id")
    assert settled["grade"].to_dict() == {"d1": 2, "d2": 2, "d3": 1}  # d2 was not tied: its graders agreed
    assert settled["adjudicated"].to_dict() == {"d1": True, "d2": False, "d3": False}
    waiting = merge(rows, "majority", "adjudicated", third).set_index("doc_id")
    assert waiting["open"].to_dict() == {"d1": False, "d2": False, "d3": True}
    median = merge(rows, "median", "higher").set_index("doc_id")["grade"].to_dict()
    assert median == {"d1": 3, "d2": 2, "d3": 2}  # two grades: the two middle ones are the two grades
    with pytest.raises(Exception, match="ties 'coin'"):
        merge(rows, "majority", "coin")


def test_the_tied_pairs_are_those_the_rule_cannot_settle():
    rows = annotations([("q1", "d1", "a", 0), ("q1", "d1", "b", 3), ("q1", "d2", "a", 1), ("q1", "d2", "b", 1),
                        ("q1", "d3", "a", 0), ("q1", "d3", "b", 2), ("q1", "d3", "c", 2),
                        ("q1", "d4", "a", 0), ("q1", "d4", "b", 1), ("q1", "d4", "c", 3)])
    assert tied_pairs(rows, "majority").to_dict("records") == [
        {"query_id": "q1", "doc_id": "d1", "grades": "a=0, b=3"},
        {"query_id": "q1", "doc_id": "d4", "grades": "a=0, b=1, c=3"}]
    assert tied_pairs(rows, "median")["doc_id"].tolist() == ["d1"]  # d4's median is 1: three grades settle it
