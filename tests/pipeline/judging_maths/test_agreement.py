"""Agreement between assessors, checked against independent implementations (scikit-learn, krippendorff)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.judging_maths.agreement import agreement, cohen_kappa, krippendorff_alpha, merge

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
