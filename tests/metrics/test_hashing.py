"""The id lookups give the same answers with pandas' hash tables (when pandas is loaded) as with plain dicts and
numpy (when it is not, as in ``python -m metrics``), down to the metric values."""

from __future__ import annotations

import numpy as np
import pytest

from metrics import hashing
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.scoring import EvalSettings, score
from metrics.trec import run_from_columns

MEASURES = ["map", "mrr", "r_precision", "bpref", "ndcg", "ndcg@10", "precision@5", "recall@20", "hit_rate@3",
            "judged@10"]


@pytest.fixture(params=["pandas", "plain"])
def backend(request, monkeypatch) -> str:
    """Runs the test once with pandas' tables and once with dicts and numpy."""
    if request.param == "plain":
        monkeypatch.setattr(hashing, "loaded_pandas", lambda: None)
    else:
        import pandas  # noqa: F401  (loaded: the lookups use it)
    return request.param


def ids(rng: np.random.Generator, n: int, universe: int) -> np.ndarray:
    return np.array([f"d{i}" for i in rng.integers(0, universe, n)], dtype=object)


def test_factorize_numbers_ids_in_first_seen_order(backend):
    codes, uniques = hashing.factorize(np.array(["b", "a", "b", "c", "a"], dtype=object))
    assert codes.tolist() == [0, 1, 0, 2, 1] and uniques.tolist() == ["b", "a", "c"]
    assert codes.dtype == np.int64 and uniques.dtype == object


def test_sorted_codes_follow_the_ids_order(backend):
    codes, uniques = hashing.sorted_codes(np.array(["b", "a", "b", "c", "a"], dtype=object))
    assert codes.tolist() == [1, 0, 1, 2, 0] and uniques.tolist() == ["a", "b", "c"]


@pytest.mark.parametrize("kind", ["ids", "integers"])
def test_positions_agree_with_a_dict(backend, kind):
    rng = np.random.default_rng(3)
    keys = np.unique(ids(rng, 500, 2000)) if kind == "ids" else np.unique(rng.integers(-5, 10**9, 500))
    rng.shuffle(keys)
    values = np.concatenate([keys[rng.integers(0, len(keys), 300)],
                             ids(rng, 300, 10**6) if kind == "ids" else rng.integers(-5, 10**9, 300)])
    where = {k: i for i, k in enumerate(keys.tolist())}
    assert hashing.positions(keys, values).tolist() == [where.get(v, -1) for v in values.tolist()]
    assert hashing.positions(keys[:0], values).tolist() == [-1] * len(values)
    assert hashing.positions(keys, values[:0]).tolist() == []


def test_first_repeat_names_the_earliest_repeat_and_where_it_first_appeared():
    assert hashing.first_repeat(np.array([5, 3, 9, 3, 5, 3])) == (3, 1)
    assert hashing.first_repeat(np.array([1, 2, 3])) is None
    assert hashing.first_repeat(np.array([], dtype=np.int64)) is None


def test_scores_are_the_same_either_way(monkeypatch):
    rng = np.random.default_rng(7)
    n_q, depth = 40, 30
    q = np.repeat([f"q{i}" for i in range(n_q)], depth)
    d = np.concatenate([rng.choice(200, depth, replace=False) for _ in range(n_q)])
    s = rng.integers(0, 8, n_q * depth).astype(float)  # many ties: the docno order decides
    jq = [f"q{i}" for i in rng.integers(0, n_q + 5, 400)]
    jd = [f"{i}" for i in rng.integers(0, 200, 400)]
    pairs = dict.fromkeys(zip(jq, jd))
    grades = rng.integers(-1, 4, len(pairs))
    settings = EvalSettings(level=1, missing="zero")

    def scores() -> dict[str, list[float]]:
        run = run_from_columns(q, d.astype(str), s, "r")
        qrels = Qrels([p[0] for p in pairs], [p[1] for p in pairs], grades)
        out = score(run, qrels, MEASURES, settings)
        assert isinstance(run, Run)
        return {"ids": out.query_ids, **{k: v.tolist() for k, v in (out.values | out.counts).items()},
                "first": out.first_relevant_rank.tolist(), "docs": run.doc_ids.tolist(), "rank": run.docs.tolist()}

    import pandas  # noqa: F401

    with_pandas = scores()
    monkeypatch.setattr(hashing, "loaded_pandas", lambda: None)
    assert scores() == with_pandas
