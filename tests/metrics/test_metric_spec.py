"""Metric names: one string form everywhere, MLflow keys without '@', trec_eval's names, plain errors."""

from __future__ import annotations

import pytest

from metrics.errors import InputError
from metrics.spec import MetricSpec, metrics_at, parse_metric, parse_metrics, parse_trec_measure


@pytest.mark.parametrize(
    ("text", "name", "key"),
    [
        ("ndcg@5", "ndcg@5", "ndcg_at_5"),
        ("hit_rate@3", "hit_rate@3", "hit_rate_at_3"),
        ("recall@10", "recall@10", "recall_at_10"),
        ("precision@1", "precision@1", "precision_at_1"),
        ("mrr", "mrr", "mrr"),
        ("map", "map", "map"),
        ("ndcg", "ndcg", "ndcg"),
        (" NDCG@5 ", "ndcg@5", "ndcg_at_5"),
        ("success@5", "hit_rate@5", "hit_rate_at_5"),
        ("p@10", "precision@10", "precision_at_10"),
        ("rr", "mrr", "mrr"),
        ("bpref", "bpref", "bpref"),
        ("judged@10", "judged@10", "judged_at_10"),
    ],
)
def test_a_metric_has_one_name_and_an_mlflow_key(text, name, key):
    spec = parse_metric(text)
    assert spec.name == str(spec) == name
    assert spec.mlflow_key == key
    assert "@" not in spec.mlflow_key


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("bleu@5", "unknown metric"),
        ("recall", "needs a cutoff"),
        ("mrr@5", "takes no cutoff"),
        ("ndcg@0", "at least 1"),
        ("ndcg@x", "cannot read metric"),
        ("", "cannot read metric"),
    ],
)
def test_a_bad_metric_name_is_a_plain_input_error(text, reason):
    with pytest.raises(InputError, match=reason):
        parse_metric(text)


def test_several_metrics_keep_their_order_and_drop_repeats():
    assert [s.name for s in parse_metrics("ndcg@5, mrr,ndcg@5,recall@3")] == ["ndcg@5", "mrr", "recall@3"]
    assert parse_metrics(["mrr", "rr"]) == [MetricSpec("mrr")]


def test_metrics_at_crosses_measures_and_cutoffs_once():
    names = [s.name for s in metrics_at([3, 5], ["hit_rate", "mrr", "ndcg"])]
    assert names == ["hit_rate@3", "hit_rate@5", "mrr", "ndcg@3", "ndcg@5"]
    with pytest.raises(InputError, match="unknown metric"):
        metrics_at([3], ["bleu"])


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("map", ["map"]),
        ("recip_rank", ["mrr"]),
        ("Rprec", ["r_precision"]),
        ("ndcg", ["ndcg"]),
        ("P_5", ["precision@5"]),
        ("P.5,10", ["precision@5", "precision@10"]),
        ("P.10,5,10", ["precision@5", "precision@10"]),
        ("recall_5", ["recall@5"]),
        ("recall.5,100", ["recall@5", "recall@100"]),
        ("success_1", ["hit_rate@1"]),
        ("success.1,5,10", ["hit_rate@1", "hit_rate@5", "hit_rate@10"]),
        ("ndcg_cut_10", ["ndcg@10"]),
        ("ndcg_cut", [f"ndcg@{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]),
        ("success", ["hit_rate@1", "hit_rate@5", "hit_rate@10"]),
        ("ndcg@5", ["ndcg@5"]),
        ("hit_rate@3", ["hit_rate@3"]),
        ("mrr", ["mrr"]),
        ("bpref", ["bpref"]),
        ("judged@10", ["judged@10"]),
    ],
)
def test_trec_eval_measure_names(text, names):
    assert [s.name for s in parse_trec_measure(text)] == names


@pytest.mark.parametrize("text", ["P.5,x", "P.0", "P_0", "P.", "map.5", "recip_rank.10", "bpref.5", "P.-5",
                                  "judged.10"])
def test_a_bad_trec_eval_measure_is_a_plain_input_error(text):
    with pytest.raises(InputError):
        parse_trec_measure(text)


@pytest.mark.parametrize("text", ["ndcg@5", "ndcg", "hit_rate@3", "recall@100", "precision@7", "mrr", "map",
                                  "r_precision", "bpref", "judged@10"])
def test_every_metric_round_trips_through_its_trec_eval_name(text):
    spec = parse_metric(text)
    assert parse_trec_measure(spec.trec_name) == [spec]
