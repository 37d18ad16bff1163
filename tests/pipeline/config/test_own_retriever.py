"""``retriever=custom retriever._target_=MODULE.CLASS [+retriever.KEY=VALUE ...]``: your class, built from the config
like a built-in, checked against its own signature, and part of everything a config decides (the digest a resumed
sweep compares, the params a run records, a fusion's components, a tuning sweep's search space)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import pipeline.app  # registers the schema and the rankscope.stamp resolver
from metrics.errors import InputError
from pipeline.config.build import build_context, check_config, make_retriever
from pipeline.config.plan import config_digest, run_params
from pipeline.sweep.tuning import check_tuning
from retrievers import BM25, RRF
from retrievers.external import ExternalSearch
from tests.pipeline.config.engines import ListSearch

CONF = Path(pipeline.app.CONF_DIR)
REPO = CONF.parent
LIST_SEARCH = "tests.pipeline.config.engines.ListSearch"


def composed(*overrides: str, hydra: bool = False):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


def custom(*overrides: str):
    return composed("retriever=custom", f"retriever._target_={LIST_SEARCH}", *overrides)


def built(cfg):
    check_config(cfg)
    return make_retriever(cfg.retriever, build_context(cfg, REPO))


def test_the_class_is_built_with_the_other_keys_as_its_arguments():
    retriever = built(custom("+retriever.min_length=4", "+retriever.limit=2"))
    assert isinstance(retriever, ExternalSearch) and retriever.name == "custom"
    assert isinstance(retriever.engine, ListSearch)
    assert (retriever.engine.min_length, retriever.engine.limit) == (4, 2)


def test_every_argument_the_class_takes_is_recorded_defaults_included():
    cfg = custom("+retriever.min_length=4")
    check_config(cfg)
    params = run_params(cfg, {"retriever": "custom"})
    assert params["retriever._target_"] == LIST_SEARCH
    assert (params["retriever.min_length"], params["retriever.limit"]) == (4, None)


@pytest.mark.parametrize("overrides, message", [
    (["+retriever.min_lenght=4"], r"unknown key\(s\) retriever.min_lenght: ListSearch takes limit, min_length, name"),
    (["+retriever.min_length=four"], "retriever.min_length: Value 'four' of type 'str' could not be converted to "
                                     "Integer"),
])
def test_keys_are_checked_against_the_classs_own_signature_before_any_work(overrides, message):
    with pytest.raises(InputError, match=message):
        check_config(custom(*overrides))


def test_a_missing_target_says_what_to_give():
    with pytest.raises(InputError, match=r"missing required value\(s\): retriever._target_ \(your retriever's "
                                         r"class: retriever._target_=MODULE.CLASS\)"):
        check_config(composed("retriever=custom"))


@pytest.mark.parametrize("target, message", [
    ("tests.pipeline.config.nowhere.Search", "cannot import 'tests.pipeline.config.nowhere'"),
    ("tests.pipeline.config.engines.Nothing", "module 'tests.pipeline.config.engines' has no 'Nothing'"),
    ("collections.OrderedDict", "builds a OrderedDict, which has neither search"),
])
def test_a_target_that_cannot_serve_is_one_line(target, message):
    with pytest.raises(InputError, match=message):
        built(composed("retriever=custom", f"retriever._target_={target}"))


def test_a_retriever_subclass_is_the_richer_protocol_and_is_used_as_it_is():
    retriever = built(composed("retriever=custom", "retriever._target_=retrievers.BM25", "+retriever.k1=0.9"))
    assert type(retriever) is BM25 and retriever.k1 == 0.9


def test_the_target_and_its_arguments_are_part_of_the_config_digest():
    def digest(*overrides):
        cfg = custom(*overrides)
        check_config(cfg)
        return config_digest(cfg)

    same = digest("+retriever.min_length=4")
    assert digest("+retriever.min_length=4") == same  # a resumed sweep finds it
    assert digest("+retriever.min_length=5") != same  # another argument
    assert digest("+retriever.min_length=3") == digest()  # the class's default, given or not
    other = composed("retriever=custom", "retriever._target_=tests.pipeline.config.engines.SameListSearch",
                     "+retriever.min_length=4")
    check_config(other)
    assert config_digest(other) != same  # another class, same arguments
    assert digest("+retriever.min_length=4", "quiet=true") == same  # progress bars change no result


def test_your_engine_can_be_a_fusion_component():
    cfg = composed("retriever=rrf", "retriever@retriever.components.second=custom",
                   f"retriever.components.second._target_={LIST_SEARCH}", "+retriever.components.second.limit=5")
    retriever = built(cfg)
    assert isinstance(retriever, RRF)
    first, second = retriever.components
    assert isinstance(first, BM25) and isinstance(second, ExternalSearch) and second.engine.limit == 5


def test_an_http_service_and_an_elasticsearch_index_are_fusion_components_too():
    cfg = composed("retriever=rrf", "retriever@retriever.components.first=http",
                   "retriever.components.first.url=http://127.0.0.1:9/search",
                   "retriever@retriever.components.second=elasticsearch",
                   "retriever.components.second.url=http://127.0.0.1:9/docs/_search")
    first, second = built(cfg).components
    assert first.engine.describe() == "http://127.0.0.1:9/search" and second.engine.hits == "hits.hits"


def test_a_tuning_sweep_may_search_over_your_classs_arguments(tmp_path):
    corpus = tmp_path / "hd2"
    from tests.pipeline.sweep.test_tuning import two_split_corpus

    two_split_corpus(corpus)
    cfg = composed("retriever=custom", f"retriever._target_={LIST_SEARCH}", "hydra/sweeper=optuna",
                   "hydra.sweeper.direction=maximize", "corpus=beir", f"corpus.path={corpus}", "corpus.split=train",
                   "tune.holdout=test", hydra=True)
    check_tuning(cfg, tmp_path, ["retriever.min_length"])
