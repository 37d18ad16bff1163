"""The metrics API gives the rest of trec_eval's measures as it gives the others: specs with one name everywhere,
per-question columns, means and labelled intervals; gm_map's and gm_bpref's figures are geometric means."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics import Qrels, Run, evaluate
from metrics.bootstrap import Interval, bootstrap_ci
from metrics.errors import InputError
from metrics.spec import metrics_at, parse_metric, parse_trec_measure

NEW = ["infap", "gm_map", "gm_bpref", "iprec_at_recall@0.10", "11pt_avg", "rprec_mult@1.20", "map_cut@5",
       "relative_p@5", "set_p", "set_relative_p", "set_recall", "set_map", "set_f", "utility", "bing", "g", "ndcg_rel",
       "rndcg", "rbp", "rbp@0.80", "rbp_resid", "unj@5", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"]


def collection(seed: int = 0) -> tuple[Run, Qrels]:
    rng = np.random.default_rng(seed)
    judgments = {f"q{q}": {f"d{d}": int(rng.integers(-1, 4)) for d in rng.choice(40, 12, replace=False)}
                 for q in range(30)}
    for q in judgments.values():
        q[next(iter(q))] = 2  # every question has a relevant document
    rankings = {f"q{q}": [(f"d{d}", float(20 - i)) for i, d in enumerate(rng.choice(40, 20, replace=False))]
                for q in range(30)}
    return Run.from_rankings(rankings), Qrels.from_dict(judgments)


@pytest.mark.parametrize("text", NEW)
def test_each_new_measure_has_one_name_an_mlflow_key_and_a_trec_eval_name(text):
    spec = parse_metric(text)
    assert spec.name == text
    assert "@" not in spec.mlflow_key
    assert parse_trec_measure(spec.trec_name) == [spec]  # trec_eval's name reads back as the same spec


def test_trec_evals_default_values_come_with_a_bare_name():
    assert [s.name for s in metrics_at([5], ["iprec_at_recall"])] == [f"iprec_at_recall@{v / 10:.2f}"
                                                                       for v in range(11)]
    assert [s.name for s in metrics_at([5, 10], ["rprec_mult", "rbp", "unj"])] == [
        *[f"rprec_mult@{m / 10:.2f}" for m in range(2, 21, 2)], "rbp", "unj@5", "unj@10"]
    assert parse_metric("rbp@0.9") == parse_metric("rbp")  # trec_eval's default persistence


@pytest.mark.parametrize(("text", "says"), [("iprec_at_recall", "needs a value"), ("rbp@1.5", "between 0 and 1"),
                                            ("rbp@0.875", "two decimals"), ("map_cut", "needs a cutoff"),
                                            ("infap@5", "takes no cutoff")])
def test_a_bad_new_name_is_a_plain_input_error(text, says):
    with pytest.raises(InputError, match=says):
        parse_metric(text)


def test_the_api_labels_each_new_measure_with_its_mean_and_interval():
    run, qrels = collection()
    ev = evaluate(run, qrels, NEW)
    assert list(ev.per_question.columns) == NEW and len(ev.per_question) == 30
    intervals = ev.intervals(resamples=200)
    means = ev.means()
    for name in NEW:
        found = intervals[name]
        assert isinstance(found, Interval) and found.metric == name
        assert found.low <= found.mean <= found.high
        assert found.mean == pytest.approx(means[name], rel=1e-12)


def test_a_geometric_measure_is_the_exponential_of_its_logs_mean_and_interval():
    run, qrels = collection(1)
    ev = evaluate(run, qrels, ["gm_map", "map"])
    logs, ap = ev.per_question["gm_map"], ev.per_question["map"]
    assert np.allclose(logs, np.log(np.maximum(ap, 1e-5)))
    assert ev.means()["gm_map"] == pytest.approx(math.exp(logs.mean()), rel=1e-12)
    on_logs = bootstrap_ci(ev.per_question[["gm_map"]], resamples=200)["gm_map"]
    got = ev.intervals(resamples=200)["gm_map"]
    assert (got.low, got.high) == pytest.approx((math.exp(on_logs.low), math.exp(on_logs.high)), rel=1e-12)
    assert got.mean < ev.means()["map"]  # a geometric mean is at most the arithmetic one
