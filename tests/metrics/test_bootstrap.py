"""docs/helpdesk-reference.md's paired bootstrap, reproduced exactly; the recipe itself, literally; BCa against an
independent one."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from metrics import bootstrap, evaluate
from metrics.bootstrap import (
    bootstrap_ci,
    paired_difference,
    percentile_bounds,
    resample_means,
    resample_means_by_counts,
)
from pipeline.data import helpdesk
from retrievers import BM25, LSA


def spec_recipe(d: np.ndarray, resamples: int = 5000, seed: int = 0) -> tuple[float, float]:
    """docs/helpdesk-reference.md, word for word: default_rng(0), one rng.choice(d, size=len(d)) per resample in turn,
    sorted means, the 126th and 4,875th values."""
    rng = np.random.default_rng(seed)
    means = sorted(rng.choice(d, size=len(d)).mean() for _ in range(resamples))
    return means[125], means[4874]


def test_spec_paired_bootstrap_bm25_minus_lsa_on_the_helpdesk():
    collection = helpdesk()
    per_question = {}
    for retriever in (BM25(), LSA()):
        run = retriever.index(collection).rank(collection.query_ids, collection.query_texts, depth=100)
        ev = evaluate(run, collection.qrels, ["ndcg@5"], query_ids=collection.query_ids)
        per_question[retriever.name] = ev.per_question["ndcg@5"]
    bm25, lsa = per_question["bm25"], per_question["lsa"].loc[per_question["bm25"].index]
    assert len(bm25) == 14
    [interval] = paired_difference(bm25.to_numpy(), lsa.to_numpy())
    assert (round(interval.mean, 3), round(interval.low, 3), round(interval.high, 3)) == (0.012, -0.081, 0.107)
    assert not interval.excludes_zero()
    low, high = spec_recipe(bm25.to_numpy() - lsa.to_numpy())
    assert interval.low == pytest.approx(low, abs=1e-12)
    assert interval.high == pytest.approx(high, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 14, 101, 999, 3001])
def test_the_chunked_one_call_draw_is_the_spec_stream(n):
    """Odd sizes included: one rng.integers call per chunk must continue the same stream as one rng.choice per
    resample (3001 questions spans several chunks)."""
    d = np.random.default_rng(n).normal(size=n)
    [interval] = bootstrap_ci(d)
    low, high = spec_recipe(d)
    assert interval.low == pytest.approx(low, abs=1e-12)
    assert interval.high == pytest.approx(high, abs=1e-12)
    assert interval.mean == pytest.approx(d.mean(), abs=1e-12)


@pytest.mark.parametrize("n", [1, 14, 3001])
def test_resample_means_by_counts_draws_the_same_resamples(n):
    values = np.random.default_rng(n).normal(size=(n, 5))
    assert np.allclose(resample_means_by_counts(values, 700, seed=4), resample_means(values, 700, seed=4),
                       rtol=0, atol=1e-12)
    if n > 1:  # one question has one resample; more: another seed draws others
        assert not np.allclose(resample_means_by_counts(values, 700, seed=5), resample_means(values, 700, seed=4))


def test_columns_are_resampled_together_as_pairs():
    rng = np.random.default_rng(3)
    values = rng.random((40, 3))
    together = bootstrap_ci(values)
    for j in range(3):
        [alone] = bootstrap_ci(values[:, j])
        assert (together[j].low, together[j].high) == (alone.low, alone.high)
        assert together[j].mean == pytest.approx(alone.mean, abs=1e-15)
    means = resample_means(values)
    assert means.shape == (5000, 3)
    assert np.allclose(means[:, 0] - means[:, 1], resample_means(values[:, 0] - values[:, 1])[:, 0])


@pytest.fixture
def nothing_remembered():
    """No column's resample means remembered from an earlier test (and none left for the next)."""
    bootstrap._REMEMBERED.clear()
    yield
    bootstrap._REMEMBERED.clear()


def counting_gathers(monkeypatch) -> list[int]:
    gathered: list[int] = []
    real_take = np.take
    monkeypatch.setattr(np, "take", lambda column, block: gathered.append(1) or real_take(column, block))
    return gathered


def test_columns_equal_question_by_question_have_the_resample_means_each_would_have_alone(monkeypatch,
                                                                                          nothing_remembered):
    """Equal columns (hit_rate@1 and precision@1 ...) are resampled once: every column's means are, to the bit,
    those it has resampled on its own, and only distinct columns are gathered."""
    rng = np.random.default_rng(8)
    a, b = rng.random(50), (rng.random(50) < 0.3).astype(float)
    values = np.column_stack([a, b, a, b.copy(), -0.0 * a, 0.0 * a])  # -0.0 and 0.0: equal, not the same bits
    real_take = np.take
    gathered = counting_gathers(monkeypatch)
    together = resample_means(values, 300)
    assert len(gathered) == 4  # one chunk, four distinct columns
    monkeypatch.setattr(np, "take", real_take)
    for j in range(values.shape[1]):
        assert np.array_equal(together[:, j], resample_means(values[:, j], 300)[:, 0])


def test_a_column_resampled_before_is_remembered_not_drawn_again(monkeypatch, nothing_remembered):
    """A sweep's points often agree on every question of a metric: such a column's means are the ones remembered,
    to the bit, and only the new columns are gathered (with the resamples they would have alone)."""
    rng = np.random.default_rng(9)
    a, b, c = rng.random(40), rng.random(40), rng.random(40)
    first = resample_means(np.column_stack([a, b]), 400, seed=2)
    gathered = counting_gathers(monkeypatch)
    later = resample_means(np.column_stack([c, b, a]), 400, seed=2)
    assert len(gathered) == 1  # c only (one chunk)
    assert np.array_equal(later[:, 1:], first[:, ::-1])
    bootstrap._REMEMBERED.clear()
    assert np.array_equal(later, resample_means(np.column_stack([c, b, a]), 400, seed=2))  # drawn afresh
    assert len(gathered) == 4
    resample_means(a, 400, seed=3)  # another seed (or count of resamples) is another column
    assert len(gathered) == 5
    bootstrap._REMEMBERED[(a.tobytes(), 400, 2)] = np.full(400, 7.0)  # what is remembered is what is given
    assert np.all(resample_means(a, 400, seed=2) == 7.0) and len(gathered) == 5


def test_a_different_seed_or_confidence_changes_the_interval():
    d = np.random.default_rng(5).normal(size=30)
    [base] = bootstrap_ci(d)
    [other_seed] = bootstrap_ci(d, seed=1)
    [wider] = bootstrap_ci(d, confidence=0.99)
    assert other_seed != base
    assert wider.low < base.low and wider.high > base.high


def textbook_bca(x: np.ndarray, resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    """Efron's BCa from its definition: bias-correction z0 from the resamples, acceleration from the jackknife."""
    rng = np.random.default_rng(seed)
    theta = x.mean()
    boot = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    z0 = scipy.stats.norm.ppf((boot < theta).mean())
    jack = (x.sum() - x) / (len(x) - 1)
    dev = jack.mean() - jack
    a = (dev**3).sum() / (6 * (dev**2).sum() ** 1.5)
    alpha = (1 - confidence) / 2
    quantiles = [scipy.stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
                 for z in scipy.stats.norm.ppf([alpha, 1 - alpha])]
    return tuple(np.quantile(boot, quantiles))


def test_bca_is_close_to_an_independent_textbook_bca_and_to_scipy():
    x = np.random.default_rng(11).exponential(size=60)  # skewed: BCa and percentile differ
    [ours] = bootstrap_ci(x, method="bca")
    low, high = textbook_bca(x, 200_000, 1, 0.95)
    assert ours.low == pytest.approx(low, abs=0.02)
    assert ours.high == pytest.approx(high, abs=0.02)
    ref = scipy.stats.bootstrap((x,), np.mean, n_resamples=20_000, method="BCa",
                                rng=np.random.default_rng(2)).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.02)
    assert ours.high == pytest.approx(ref.high, abs=0.02)
    [percentile] = bootstrap_ci(x)
    assert ours.high > percentile.high  # right skew: BCa shifts the interval up


def test_bca_of_a_constant_column_is_that_constant():
    [interval] = bootstrap_ci(np.full(10, 0.25), method="bca")
    assert (interval.low, interval.high) == (0.25, 0.25)


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci(np.array([]))
    with pytest.raises(ValueError, match="method"):
        bootstrap_ci(np.ones(3), method="studentized")
    with pytest.raises(ValueError, match="align"):
        paired_difference(np.ones(3), np.ones(4))


def test_a_mean_is_its_correctly_rounded_sum_whatever_the_order_of_the_questions():
    """A logged mean must equal the mean of the same per-question values computed elsewhere, in another order."""
    from metrics.bootstrap import exact_mean

    values = np.random.default_rng(3).random((301, 4)) / 7
    means = exact_mean(values)
    for seed in range(5):
        shuffled = values[np.random.default_rng(seed).permutation(len(values))]
        assert exact_mean(shuffled).tolist() == means.tolist()
    assert exact_mean(np.array([1e16, 1.0, -1e16])).tolist() == [1 / 3]  # naive summation gives 0
    assert [iv.mean for iv in bootstrap_ci(values, 50)] == means.tolist()


def test_resample_indices_are_kept_for_the_next_resampling_of_as_many_questions(monkeypatch, nothing_remembered):
    """A sweep's jobs resample the same questions: the indices are drawn once (the stream a fresh draw gives, and
    resampling leaves them as drawn), later resamplings of as many questions reuse them; a large set is never kept,
    and drawn a block at a time."""
    monkeypatch.setattr(bootstrap, "_INDICES", type(bootstrap._INDICES)())
    draws: list[tuple] = []
    real = np.random.default_rng

    def counted(seed):
        draws.append(seed)
        return real(seed)

    monkeypatch.setattr(np.random, "default_rng", counted)
    rng = real(11)
    first = resample_means(rng.random((60, 2)), 500, seed=3)
    values = rng.random((60, 3))
    again = resample_means(values, 500, seed=3)
    assert len(draws) == 1 and first.shape == (500, 2)
    [(_, _, block)] = bootstrap._index_blocks(60, 500, 3)
    assert np.array_equal(block, real(3).integers(0, 60, size=(500, 60)))
    bootstrap._INDICES.clear()
    bootstrap._REMEMBERED.clear()
    assert np.array_equal(again, resample_means(values, 500, seed=3))  # indices drawn afresh: the same means
    assert len(draws) == 2
    monkeypatch.setattr(bootstrap, "KEPT_INDEX_BYTES", 500 * 60 * 8 - 1)
    bootstrap._INDICES.clear()
    resample_means(rng.random((60, 1)), 500, seed=3)
    resample_means(rng.random((60, 1)), 500, seed=3)
    assert len(draws) == 4 and not bootstrap._INDICES
    assert not isinstance(bootstrap._index_blocks(60, 500, 3), list)  # drawn as they are used


@pytest.mark.parametrize("resamples", [1, 2, 7, 40, 5000])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_the_bounds_are_the_sorted_means_at_their_ranks_bit_for_bit(resamples, confidence):
    """docs/helpdesk-reference.md's rule read off a full sort, against the partition percentile_bounds makes: ties,
    repeated values, NaN (sorted last) and several columns at once."""
    rng = np.random.default_rng(resamples)
    means = np.round(rng.random((resamples, 6)), 2)  # many ties
    means[:, 1] = 0.25
    means[rng.random(resamples) < 0.1, 2] = np.nan
    alpha = 1.0 - confidence
    lo = min(int(np.floor(resamples * alpha / 2 + 1e-9)), resamples - 1)
    hi = max(min(int(np.ceil(resamples * (1 - alpha / 2) - 1e-9)) - 1, resamples - 1), 0)
    ordered = np.sort(means, axis=0)
    low, high = percentile_bounds(means, confidence)
    assert low.tobytes() == ordered[lo].tobytes() and high.tobytes() == ordered[hi].tobytes()


# labelled results: what a reader of the Python API gets back


def test_a_frame_gives_intervals_keyed_by_metric_with_level_and_method():
    import pandas as pd

    values = np.random.default_rng(3).random((40, 2))
    frame = pd.DataFrame(values, columns=["ndcg@5", "mrr"])
    found = bootstrap_ci(frame, confidence=0.9)
    assert list(found) == ["ndcg@5", "mrr"]
    for column, (name, interval) in enumerate(found.items()):
        alone = bootstrap_ci(values[:, column], confidence=0.9)[0]
        assert (interval.mean, interval.low, interval.high) == (alone.mean, alone.low, alone.high)
        assert (interval.metric, interval.level, interval.method) == (name, 0.9, "percentile")
    table = str(found)
    assert table.splitlines()[0].split()[:4] == ["metric", "mean", "low", "high"]
    assert f"ndcg@5  {found['ndcg@5'].mean:5.3f}  {found['ndcg@5'].low:5.3f}" in table
    assert found.to_frame().loc["mrr", "high"] == found["mrr"].high


def test_an_array_still_gives_a_list_in_column_order():
    values = np.random.default_rng(4).random((30, 3))
    found = bootstrap_ci(values)
    assert isinstance(found, list) and len(found) == 3
    assert all(i.metric is None and i.level == 0.95 for i in found)


def test_a_paired_difference_names_both_sides_and_reads_as_the_old_list():
    import pandas as pd

    rng = np.random.default_rng(5)
    index = [f"q{i}" for i in range(25)]
    a = pd.Series(rng.random(25), index=index, name="ndcg@5")
    b = pd.Series(rng.random(25), index=index, name="ndcg@5")
    shuffled = b.sample(frac=1.0, random_state=1)  # aligned by question id, not by position
    difference = paired_difference(a, shuffled, names=("BM25", "LSA"))
    [interval] = paired_difference(a.to_numpy(), b.to_numpy())
    assert (difference.mean, difference.low, difference.high) == (interval.mean, interval.low, interval.high)
    assert difference[0].metric == "ndcg@5"
    assert (difference.a, difference.b, difference.questions) == ("BM25", "LSA", 25)
    assert str(difference).startswith(f"ndcg@5: BM25 - LSA = {interval.mean:+.3f} [")


def test_an_evaluation_gives_its_intervals(helpdesk_collection):
    from metrics import evaluate
    from retrievers import BM25

    c = helpdesk_collection
    ev = evaluate(BM25().index(c).rank(c.query_ids, c.query_texts, 100), c.qrels, "mrr,ndcg@5")
    found = ev.intervals()
    assert list(found) == ["mrr", "ndcg@5"]
    assert found["ndcg@5"].mean == ev.means()["ndcg@5"]
    assert found["ndcg@5"] == bootstrap_ci(ev.per_question[["mrr", "ndcg@5"]])["ndcg@5"]
