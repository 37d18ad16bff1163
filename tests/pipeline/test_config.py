"""The real conf/ through Hydra's compose API: every group entry composes, builds, and defaults match SPEC.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import pipeline.app  # registers the schemas and the rankscope.stamp resolver
from metrics.errors import InputError
from pipeline.config.build import check_config, load_collection, make_retriever, make_tokenizer, metric_plan
from pipeline.config.schema import BM25Config, LSAConfig, RRFConfig, WeightedConfig
from retrievers import BM25, LSA, RRF, Rerank, RunFile, WeightedSum

CONF = Path(pipeline.app.CONF_DIR)
REPO = CONF.parent


def entries(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def composed(*overrides: str, hydra: bool = False):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


def test_every_group_has_its_entries():
    assert set(entries("retriever")) >= {"bm25", "lsa", "weighted", "rrf", "run_file"}
    assert set(entries("corpus")) >= {"helpdesk", "beir", "scifact", "cranfield"}
    assert set(entries("tracking")) == {"local", "server"}
    assert "default" in entries("metrics") and "helpdesk_study" in entries("experiment")


@pytest.mark.parametrize("name", entries("retriever"))
def test_every_retriever_entry_composes_and_builds(name, tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q01 Q0 pricing1 1 2.0 prod\n", encoding="utf-8")
    cfg = composed(f"retriever={name}", *([f"retriever.path={run}"] if name == "run_file" else []))
    check_config(cfg)
    retriever = make_retriever(cfg.retriever, make_tokenizer(cfg.text, REPO), REPO)
    expected = {"bm25": BM25, "lsa": LSA, "weighted": WeightedSum, "rrf": RRF, "run_file": RunFile, "rerank": Rerank,
                "weighted_dense": WeightedSum, "rrf_dense": RRF}.get(name)
    if name == "dense":
        from retrievers.dense import Dense

        expected = Dense
    assert isinstance(retriever, expected)


@pytest.mark.parametrize("name", entries("corpus"))
def test_every_corpus_entry_composes(name, shared_datasets):
    overrides = [f"corpus={name}"] + (["corpus.path=../shared/datasets/helpdesk"] if name == "beir" else [])
    cfg = composed(*overrides)
    check_config(cfg)
    if name == "helpdesk":
        assert load_collection(cfg.corpus, REPO).summary()["documents"] == 28
    else:  # the ready entries point at ../shared/datasets, read from the repository root
        assert (REPO / cfg.corpus.path / "qrels" / f"{cfg.corpus.split}.tsv").is_file()


@pytest.mark.parametrize("name", entries("metrics"))
def test_every_metrics_entry_gives_a_plan(name):
    plan = metric_plan(composed(f"metrics={name}").metrics)
    assert set(plan.show) <= set(plan.specs) and plan.primary in plan.specs


@pytest.mark.parametrize("name", entries("tracking"))
def test_every_tracking_entry_composes(name):
    cfg = composed(f"tracking={name}")
    assert cfg.tracking.experiment == "rankscope"
    assert (cfg.tracking.uri is None) == (name == "local")


@pytest.mark.parametrize("name", entries("experiment"))
def test_every_experiment_entry_composes_with_a_sweep(name):
    if name.startswith("tune_"):
        pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="pip install 'rankscope[tune]'")
    cfg = composed(f"experiment={name}", hydra=True)
    assert cfg.study == name
    assert cfg.hydra.sweeper.params, "an experiment file describes a sweep"


def test_helpdesk_study_sweeps_specs_four_systems_on_the_helpdesk_corpus():
    cfg = composed("experiment=helpdesk_study", hydra=True)
    assert cfg.hydra.sweeper.params["retriever"] == "bm25,lsa,weighted,rrf"
    assert cfg.hydra.runtime.choices["corpus"] == "helpdesk"


def test_defaults_reproduce_spec():
    cfg = composed()
    assert OmegaConf.get_type(cfg.retriever) is BM25Config
    assert (cfg.retriever.k1, cfg.retriever.b, cfg.depth) == (1.2, 0.75, 100)
    lsa = composed("retriever=lsa").retriever
    assert (OmegaConf.get_type(lsa), lsa.dims, lsa.algorithm.value, lsa.seed) == (LSAConfig, 6, "arpack", 0)
    weighted = composed("retriever=weighted").retriever
    assert OmegaConf.get_type(weighted) is WeightedConfig and (weighted.alpha, weighted.depth) == (0.5, 10)
    rrf = composed("retriever=rrf").retriever
    assert OmegaConf.get_type(rrf) is RRFConfig and (rrf.k, rrf.depth) == (60, 10)
    for fusion in (weighted, rrf):
        kinds = [OmegaConf.get_type(c) for c in fusion.components.values()]
        assert kinds == [BM25Config, LSAConfig]
    plan = metric_plan(cfg.metrics)
    assert [s.name for s in plan.show] == ["hit_rate@3", "recall@5", "mrr", "ndcg@5"]
    assert (plan.settings.gain, plan.settings.level, plan.resamples, plan.seed) == ("linear", 1, 5000, 0)


def test_fusion_components_are_configured_not_hard_wired():
    cfg = composed("retriever=rrf", "retriever@retriever.components.second=bm25",
                   "retriever.components.second.k1=0.5")
    retriever = make_retriever(cfg.retriever, make_tokenizer(cfg.text, REPO), REPO)
    assert [type(c) for c in retriever.components] == [BM25, BM25]
    assert [c.k1 for c in retriever.components] == [1.2, 0.5]


@pytest.mark.parametrize("override, message", [
    ("retriever.k1=abc", "could not be converted to Float"),
    ("retriever.dims=3", "Key 'dims' not in 'BM25Config'"),
    ("metrics.gain=square", "expected one of [linear, exponential]"),
    ("depth=ten", "could not be converted to Integer"),
    ("nonsense=1", "Key 'nonsense' not in 'Config'"),
])
def test_a_wrong_key_or_type_fails_at_composition(override, message):
    with pytest.raises(ConfigCompositionException) as caught:
        composed(override)
    assert message in f"{caught.value} {caught.value.__cause__}"


def test_keys_appended_with_plus_are_refused_before_any_work():
    with pytest.raises(InputError, match=r"unknown key\(s\) retriever.dims: BM25Config has b, k1, name"):
        check_config(composed("+retriever.dims=3"))


def test_a_beir_corpus_needs_a_path():
    with pytest.raises(InputError, match=r"corpus\.path"):
        check_config(composed("corpus=beir"))


def test_hybrids_and_two_stage_retrievers_are_composed_from_retriever_entries():
    pytest.importorskip("onnxruntime")
    tokenizer = make_tokenizer(composed().text, REPO)
    hybrid = make_retriever(composed("retriever=rrf_dense").retriever, tokenizer, REPO)
    assert [c.name for c in hybrid.components] == ["BM25", "dense"] and hybrid.depth == 100
    two_stage = composed("retriever=rerank", "retriever@retriever.first=lsa", "retriever.candidates=20")
    rerank = make_retriever(two_stage.retriever, tokenizer, REPO)
    assert (type(rerank.first), rerank.second.name, rerank.candidates, rerank.name) == (LSA, "dense", 20, "LSA->dense")


def test_dense_keeps_its_embeddings_where_the_cache_config_says(tmp_path):
    pytest.importorskip("onnxruntime")
    cfg = composed("retriever=dense", f"cache.dir={tmp_path}", "retriever.batch_size=8")
    dense = make_retriever(cfg.retriever, make_tokenizer(cfg.text, REPO), REPO, cache=cfg.cache)
    assert (dense.cache, dense.cache_dir, dense.batch_size) == (True, tmp_path / "embeddings", 8)
    off = composed("retriever=dense", "cache.enabled=false")
    assert make_retriever(off.retriever, make_tokenizer(off.text, REPO), REPO, cache=off.cache).cache is False


def test_out_of_range_values_are_reported_with_their_key():
    cfg = composed("retriever=weighted", "retriever.alpha=1.5")
    with pytest.raises(InputError, match="retriever: alpha must be within"):
        make_retriever(cfg.retriever, make_tokenizer(cfg.text, REPO), REPO)
