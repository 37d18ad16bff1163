"""What re-scoring changed: means, ordering (Kendall's tau), flipped verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from pipeline.judging_maths.changes import changes

QUESTIONS = pd.Index([f"q{i}" for i in range(40)], name="query_id")
RNG = np.random.default_rng(3)


def table(values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"ndcg@10": values}, index=QUESTIONS)


def test_a_reordering_and_a_flipped_verdict_are_reported():
    base = RNG.random(40) * 0.5
    before = {"A": table(base + 0.3), "B": table(base), "C": table(base + 0.01)}
    after = {"A": table(base), "B": table(base + 0.3), "C": table(base + 0.01)}
    found = changes(before, after, "ndcg@10", resamples=500, permutations=500)
    assert found.table.loc["A", "rank_before"] == 1 and found.table.loc["B", "rank_after"] == 1
    expected = kendalltau([before[s]["ndcg@10"].mean() for s in "ABC"], [after[s]["ndcg@10"].mean() for s in "ABC"])
    assert found.tau == pytest.approx(expected.statistic)
    flipped = found.flipped
    assert ("A", "B") in flipped.index
    assert flipped.loc[("A", "B"), "before"] == "a better" and flipped.loc[("A", "B"), "after"] == "b better"
    assert found.table.loc["A", "moved"] == pytest.approx(-0.3)
