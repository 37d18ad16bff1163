"""The real conf/ through Hydra's compose API: every group entry composes, builds, and defaults match
docs/helpdesk-reference.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

import pipeline.app  # registers the schema and the rankscope.stamp resolver
from metrics.errors import InputError
from pipeline.config.build import build_context, check_config, make_chunker, make_corpus, make_retriever, metric_plan
from retrievers import BM25, LSA

CONF = Path(pipeline.app.CONF_DIR)
REPO = CONF.parent


def entries(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def composed(*overrides: str, hydra: bool = False):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


def built(cfg, base=REPO):
    """The retriever a composed config describes, checked and built as a job builds it."""
    check_config(cfg)
    return make_retriever(cfg.retriever, build_context(cfg, base))


def test_every_group_has_its_entries():
    assert set(entries("retriever")) >= {"bm25", "lsa", "weighted", "rrf", "run_file", "custom", "http",
                                         "elasticsearch", "traces"}
    assert set(entries("corpus")) >= {"helpdesk", "beir", "scifact", "cranfield"}
    assert set(entries("tracking")) == {"local", "server"}
    assert "default" in entries("metrics") and "helpdesk_study" in entries("experiment")


@pytest.mark.parametrize("name", entries("retriever"))
def test_every_retriever_entry_composes_and_builds_the_class_it_names(name, tmp_path):
    if "dense" in name or name == "rerank":
        pytest.importorskip("onnxruntime")
    run = tmp_path / "run.trec"
    run.write_text("q01 Q0 pricing1 1 2.0 prod\n", encoding="utf-8")
    extra = {"run_file": [f"retriever.path={run}"],
             "custom": ["retriever._target_=tests.pipeline.config.engines.ListSearch"],
             "http": ["retriever.url=http://127.0.0.1:9/search"],
             "elasticsearch": ["retriever.url=http://127.0.0.1:9/index/_search"],
             "traces": ["retriever.experiment=rag-app", f"retriever.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"],
             }.get(name, [])
    cfg = composed(f"retriever={name}", *extra)
    retriever = built(cfg)
    cls = cfg.retriever._target_.rpartition(".")[2]
    own = name in ("custom", "http", "elasticsearch")  # a search(questions, k) engine, behind the checking adapter
    assert type(retriever).__name__ == ("ExternalSearch" if own else cls)
    if own:
        assert type(retriever.engine).__name__ == cls


OWN_FILES = REPO / "tests" / "pipeline" / "data" / "own_files"
READY = {  # what each corpus entry needs besides its name, and the class it builds
    "helpdesk": ([], "Helpdesk"),
    "helpdesk_pages": ([], "HelpdeskPages"),
    "beir": ([f"corpus.path={REPO / 'pipeline' / 'data' / 'helpdesk'}"], "BeirFolder"),
    "irds": (["corpus.id=beir/scifact/test"], "IrDatasets"),
    "scifact": ([], "Benchmark"),
    "cranfield": ([], "Benchmark"),
    "files": ([f"corpus.documents.path={OWN_FILES / 'chunks.parquet'}",
               f"corpus.questions.path={OWN_FILES / 'questions.csv'}"], "OwnFiles"),
}


@pytest.mark.parametrize("name", entries("corpus"))
def test_every_corpus_entry_composes_and_builds_the_class_it_names(name):
    overrides, cls = READY[name]
    cfg = composed(f"corpus={name}", *overrides)
    check_config(cfg)
    source = make_corpus(cfg.corpus, REPO)
    assert type(source).__name__ == cls
    if name in ("helpdesk", "beir"):
        assert source.load().summary()["documents"] == 28
    if name == "helpdesk_pages":
        assert source.load().summary()["documents"] == 4


CHUNKERS = {  # what each chunker entry needs besides its name, and the class it builds
    "none": ([], "Whole"),
    "fixed": ([], "Fixed"),
    "recursive": ([], "Recursive"),
    "sentence": ([], "Sentences"),
    "markdown": ([], "Markdown"),
    "custom": (["chunker._target_=tests.pipeline.chunking.own.Paragraphs"], "OwnChunker"),
}


@pytest.mark.parametrize("name", entries("chunker"))
def test_every_chunker_entry_composes_and_builds_the_class_it_names(name):
    overrides, cls = CHUNKERS[name]
    cfg = composed(f"chunker={name}", *overrides)
    check_config(cfg)
    chunker = make_chunker(cfg.chunker, build_context(cfg, REPO))
    assert type(chunker).__name__ == cls
    assert chunker.tokens().count(["The Pro plan costs 49 euros a month."])[0] > 5


def test_no_corpus_entry_points_at_a_folder_users_do_not_have():
    for path in (REPO / "conf").rglob("*.yaml"):
        assert "../shared" not in path.read_text(), path


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
    assert cfg.retriever._target_ == "retrievers.BM25"
    assert (cfg.retriever.k1, cfg.retriever.b, cfg.depth) == (1.2, 0.75, 100)
    lsa = composed("retriever=lsa").retriever
    assert (lsa._target_, lsa.dims, lsa.algorithm, lsa.seed) == ("retrievers.LSA", None, "arpack", 0)  # dims follow
    weighted = composed("retriever=weighted").retriever
    assert weighted._target_ == "retrievers.WeightedSum" and (weighted.alpha, weighted.depth) == (0.5, 10)
    rrf = composed("retriever=rrf").retriever
    assert rrf._target_ == "retrievers.RRF" and (rrf.k, rrf.depth) == (60, 10)
    for fusion in (weighted, rrf):
        assert [c._target_ for c in fusion.components.values()] == ["retrievers.BM25", "retrievers.LSA"]
    plan = metric_plan(cfg.metrics)
    assert [s.name for s in plan.show] == ["hit_rate@3", "recall@5", "mrr", "ndcg@5"]
    assert (plan.settings.gain, plan.settings.level, plan.resamples, plan.seed) == ("linear", 1, 5000, 0)


def test_fusion_components_are_configured_not_hard_wired():
    cfg = composed("retriever=rrf", "retriever@retriever.components.second=bm25",
                   "retriever.components.second.k1=0.5")
    retriever = built(cfg)
    assert [type(c) for c in retriever.components] == [BM25, BM25]
    assert [c.k1 for c in retriever.components] == [1.2, 0.5]


@pytest.mark.parametrize("override, message", [
    ("retriever.dims=3", "Key 'dims' is not in struct"),
    ("metrics.gain=square", "expected one of [linear, exponential]"),
    ("depth=ten", "could not be converted to Integer"),
    ("nonsense=1", "Key 'nonsense' not in 'Config'"),
])
def test_a_wrong_key_or_type_fails_at_composition(override, message):
    with pytest.raises(ConfigCompositionException) as caught:
        composed(override)
    assert message in f"{caught.value} {caught.value.__cause__}"


@pytest.mark.parametrize("override, message", [
    ("retriever.k1=abc", r"retriever\.k1: Value 'abc' of type 'str' could not be converted to Float"),
    ("retriever.b=[1,2]", r"retriever\.b: .*"),
    ("retriever=lsa retriever.dims=six", r"retriever\.dims: Value 'six' .* could not be converted to Integer"),
])
def test_a_value_of_the_wrong_type_for_the_retriever_class_is_refused_before_any_work(override, message):
    with pytest.raises(InputError, match=message):
        check_config(composed(*override.split()))


def test_keys_appended_with_plus_are_refused_before_any_work():
    with pytest.raises(InputError, match=r"unknown key\(s\) retriever.dims: BM25 takes b, k1, name"):
        check_config(composed("+retriever.dims=3"))


def test_a_checked_entry_carries_every_setting_of_its_class_typed():
    cfg = check_config(composed("retriever.k1=1"))
    assert cfg.retriever.k1 == 1.0 and isinstance(cfg.retriever.k1, float)
    assert set(cfg.retriever) == {"_target_", "name", "k1", "b"}


def test_a_beir_corpus_needs_a_path():
    with pytest.raises(InputError, match=r"corpus\.path"):
        check_config(composed("corpus=beir"))


def test_hybrids_and_two_stage_retrievers_are_composed_from_retriever_entries():
    pytest.importorskip("onnxruntime")
    hybrid = built(composed("retriever=rrf_dense"))
    assert [c.name for c in hybrid.components] == ["BM25", "dense"] and hybrid.depth == 100
    two_stage = composed("retriever=rerank", "retriever@retriever.first=lsa", "retriever.candidates=20")
    rerank = built(two_stage)
    assert (type(rerank.first), rerank.second.name, rerank.candidates, rerank.name) == (LSA, "dense", 20, "LSA->dense")


def test_dense_keeps_its_embeddings_where_the_cache_config_says(tmp_path):
    pytest.importorskip("onnxruntime")
    dense = built(composed("retriever=dense", f"cache.dir={tmp_path}", "retriever.batch_size=8"))
    assert (dense.cache, dense.cache_dir, dense.batch_size) == (True, tmp_path / "embeddings", 8)
    assert built(composed("retriever=dense", "cache.enabled=false")).cache is False


def test_out_of_range_values_are_reported_with_their_key():
    cfg = composed("retriever=weighted", "retriever.alpha=1.5")
    with pytest.raises(InputError, match="retriever: alpha must be within"):
        built(cfg)


def test_the_shown_columns_and_the_primary_metric_follow_the_cutoffs():
    plan = metric_plan(composed("metrics.k=[10]").metrics)
    assert [s.name for s in plan.show] == ["hit_rate@10", "recall@10", "mrr", "ndcg@10"]
    assert plan.primary.name == "ndcg@10" and {s.k for s in plan.specs} == {10, None}
    assert [s.name for s in metric_plan(composed("metrics.k=[4,6]").metrics).show] == [
        "hit_rate@4", "recall@6", "mrr", "ndcg@6"]


def test_an_entry_checked_again_is_completed_alike_without_building_its_schema(monkeypatch):
    """A sweep's jobs share their corpus entry: the second check gives the same complete entry from memory, a
    changed value is checked afresh, and a bad value still fails after a good one was checked."""
    import dataclasses

    from pipeline.config import targets

    cfg = composed("retriever.k1=0.77")
    first = targets.checked(cfg.retriever, "retriever")
    schemas = []
    make = dataclasses.make_dataclass
    monkeypatch.setattr(dataclasses, "make_dataclass", lambda *a, **k: schemas.append(a[0]) or make(*a, **k))
    again = targets.checked(composed("retriever.k1=0.77").retriever, "retriever")
    assert again == first and again is not first and schemas == []
    other = targets.checked(composed("retriever.k1=0.78").retriever, "retriever")
    assert other.k1 == 0.78 and schemas
    with pytest.raises(InputError, match=r"retriever\.k1"):
        targets.checked(composed("retriever.k1=fast").retriever, "retriever")
