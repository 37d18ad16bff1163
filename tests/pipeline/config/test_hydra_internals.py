"""A sweep composes each job's config once in the driver, though validation, Hydra's sweeper and its launcher
all ask for it: the later requests get independent copies equal to a fresh composition. A job that changes only
values of plain overrides is not composed at all: its config, built from another job's, equals Hydra's."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.callbacks import Callbacks
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobStatus, run_job
from hydra.experimental.callback import Callback
from hydra.types import HydraContext
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

import pipeline.app
from pipeline.config.hydra_internals import (
    ComposedConfigs,
    _Kept,
    _lean_run_job,
    compose_normally,
    compose_once,
    job_override_lists,
    run_jobs_leanly,
    run_jobs_normally,
    save_yaml,
    yaml_text,
)
from pipeline.sweep.jobs import validate_jobs

SWEEP = ["retriever.k1=0.9,1.2", "retriever.b=0.4,0.75"]


def test_validation_sweeper_and_launcher_share_one_composition_per_job():
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        master = compose("config", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        jobs = job_override_lists(master, SWEEP)
        fresh = [loader.load_sweep_config(master, job) for job in jobs]  # before: Hydra's own composition
        memo = compose_once(loader)
        assert compose_once(loader) is memo
        validate_jobs(master, jobs)  # the driver's check
        for job in jobs:  # Hydra's validate_batch_is_legal
            loader.load_sweep_config(master, list(job))
        launched = []
        for number, job in enumerate(jobs):  # the basic launcher, which writes the job number in
            config = loader.load_sweep_config(master, list(job))
            with open_dict(config):
                config.hydra.job.num = number
            launched.append(config)
        assert len(jobs) == 4 and (memo.composed, memo.derived, memo.reused) == (1, 3, 8)  # 3: values only
        for number, (config, expected) in enumerate(zip(launched, fresh, strict=True)):
            with open_dict(expected):
                expected.hydra.job.num = number
            assert OmegaConf.to_container(config) == OmegaConf.to_container(expected)
        assert [c.retriever.k1 for c in launched] == [0.9, 0.9, 1.2, 1.2] and launched[0].hydra.job.num == 0
        unpickled = pickle.loads(pickle.dumps(loader)).load_sweep_config  # a joblib worker composes its own
        assert isinstance(unpickled, ComposedConfigs) and not unpickled._cache and not unpickled._bases
        compose_normally(loader)
        assert not isinstance(loader.load_sweep_config, ComposedConfigs)


def described(node: Any) -> Any:
    """A config node's values, their node and Python types, and its struct and readonly flags, all the way down."""
    flags = (type(node).__name__, OmegaConf.is_struct(node), OmegaConf.is_readonly(node))
    if isinstance(node, DictConfig) and not (node._is_none() or node._is_missing() or node._is_interpolation()):
        return flags, node._metadata.object_type, {key: described(node._get_node(key)) for key in node}
    if isinstance(node, ListConfig) and not (node._is_none() or node._is_missing() or node._is_interpolation()):
        return flags, [described(node._get_node(index)) for index in range(len(node))]
    return flags, type(node._value()).__name__, node._value()


def through_memo(sweep: list[str], master_overrides: tuple[str, ...] = ()) -> tuple[ComposedConfigs, int]:
    """Each job of ``sweep`` through the memo, checked against Hydra's own composition; the memo and job count."""
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        master = compose("config", overrides=list(master_overrides), return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        jobs = job_override_lists(master, sweep)
        fresh = [loader.load_sweep_config(master, list(job)) for job in jobs]
        memo = compose_once(loader)
        try:
            for _ in range(2):  # composed or derived, then reused
                for job, expected in zip(jobs, fresh, strict=True):
                    config = loader.load_sweep_config(master, list(job))
                    assert OmegaConf.to_container(config, resolve=False) == OmegaConf.to_container(
                        expected, resolve=False)
                    assert described(config) == described(expected)
                    assert OmegaConf.get_cache(config) == OmegaConf.get_cache(expected)
                    assert config is not expected and config.hydra.overrides.task == job
        finally:
            compose_normally(loader)
        assert memo.reused == len(jobs) and memo.composed + memo.derived == len(jobs)
        return memo, len(jobs)


@pytest.mark.parametrize("sweep", [
    ["corpus=scifact", "metrics=beir", "retriever.k1=0.6,0.9,1.2,1.5", "retriever.b=0.3,0.6,0.75"],
    ["retriever.k1=1,0.9,null,abc,true", "corpus=cranfield"],  # int, float, None, str, bool into an untyped node
    ["metrics.bootstrap.confidence=0.9,1", "metrics.level=1,2", "metrics.gain=linear,exponential"],  # typed
    ["study=null,first", "quiet=false,true", "depth=100,5", "diagnosis.late_limit=20,30"],
    ["retriever=lsa", "retriever.dims=null,3", "retriever.name='a b',x"],
    ["+tags.owner=me", "retriever.k1=0.9,1.2"],  # a + override that stays the same
])
def test_a_value_sweep_is_composed_once_and_derived_configs_equal_hydras(sweep):
    memo, jobs = through_memo(sweep)
    assert (memo.composed, memo.derived) == (1, jobs - 1) and jobs > 1


def test_derived_configs_name_their_folder_as_hydra_does():
    memo, _ = through_memo(["corpus=scifact", "retriever.k1=0.6,0.9", "retriever.b=0.3,0.75"],
                              ("hydra.job.config.override_dirname.kv_sep=:",
                               "hydra.job.config.override_dirname.item_sep=_",
                               "hydra.job.config.override_dirname.exclude_keys=[retriever.b]"))
    assert (memo.composed, memo.derived) == (1, 3)


def test_a_group_sweep_is_composed_for_each_group_and_derived_for_each_value():
    memo, jobs = through_memo(["retriever=bm25,lsa", "retriever.name=A,B,C"])
    assert jobs == 6 and (memo.composed, memo.derived) == (2, 4)
    memo, jobs = through_memo(["corpus=helpdesk,cranfield", "retriever=bm25,weighted"])
    assert jobs == 4 and (memo.composed, memo.derived) == (4, 0)


@pytest.mark.parametrize("sweep", [
    ["retriever.k1=0.6,0.9", "retriever={k1:2.0}"],  # a later override of the same key wins
    ["+tags.owner=me,you"],  # +: adds a key
    ["metrics.k=[10],[5]"],  # a list value
    ["retriever.k1=0.6,0.9", "retriever.k1=1.0"],  # twice the same key
    ["retriever.k1=0.6,0.9", "++retriever.k1.x=1"],  # nested under a swept key (the scalar becomes a dict)
])
def test_overrides_other_than_plain_values_are_composed(sweep):
    memo, jobs = through_memo(sweep)
    assert (memo.composed, memo.derived) == (jobs, 0)


def test_a_change_of_a_hydra_key_is_composed():
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        master = compose("config", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        jobs = [["retriever.k1=1", f"hydra.job.name={name}"] for name in ("a", "b")]
        fresh = [loader.load_sweep_config(master, job) for job in jobs]
        memo = compose_once(loader)
        configs = [loader.load_sweep_config(master, job) for job in jobs]
        compose_normally(loader)
        assert (memo.composed, memo.derived) == (2, 0)
        assert [OmegaConf.to_container(c) for c in configs] == [OmegaConf.to_container(c) for c in fresh]
        assert configs[1].hydra.job.name == "b" and list(configs[1].hydra.overrides.hydra) == ["hydra.job.name=b"]


@pytest.mark.parametrize("bad", [
    "diagnosis.late_limit=three",  # an int field
    "metrics.bootstrap.confidence=high",  # a float field
    "metrics.gain=cubic",  # not a member of the enum
    "quiet=maybe",  # a bool field
    "depth=null",  # not optional
    "metrics.level=1.5",
])
def test_a_value_hydra_rejects_gets_hydras_error(bad):
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        master = compose("config", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        key = bad.partition("=")[0]
        good = f"{key}={OmegaConf.select(master, key).name if key == 'metrics.gain' else OmegaConf.select(master, key)}"
        with pytest.raises(Exception) as hydras:
            loader.load_sweep_config(master, ["corpus=scifact", bad])
        memo = compose_once(loader)
        loader.load_sweep_config(master, ["corpus=scifact", good])
        with pytest.raises(type(hydras.value)) as ours:
            loader.load_sweep_config(master, ["corpus=scifact", bad])
        compose_normally(loader)
        assert str(ours.value) == str(hydras.value) and type(ours.value.__cause__) is type(hydras.value.__cause__)
        assert (memo.composed, memo.derived) == (1, 0)


def test_copies_of_a_kept_config_are_unpickled_whole_and_independent():
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        master = compose("config", overrides=["corpus=scifact"], return_hydra_config=True)
    kept = _Kept(master)
    first = kept.copy()
    assert kept.pickled is not None and described(first) == described(master) and first is not master
    with open_dict(first):
        first.hydra.job.num = 7
        first.retriever.k1 = 2.5
    second = kept.copy()
    assert second.retriever.k1 == master.retriever.k1 and OmegaConf.is_missing(second.hydra.job, "num")


def test_a_config_that_does_not_pickle_is_deep_copied():
    config = OmegaConf.create({"a": {"b": 1}}, flags={"allow_objects": True})
    config.a.f = lambda: 1  # a value pickle refuses
    kept = _Kept(config)
    copied = kept.copy()
    copied.a.b = 2
    assert kept.pickled is None and kept.copy().a.b == 1 and copied.a.f() == 1


class Recorder(Callback):
    """What a sweep's callbacks are told of each job."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.calls.append(("start", OmegaConf.to_container(config)))

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        self.calls.append(("end", job_return.status, str(job_return._return_value)))


@pytest.mark.parametrize("chdir", ["false", "true"])
def test_the_lean_job_runner_does_what_hydras_run_job_does(tmp_path, monkeypatch, chdir):
    """Same task config (values, node types, flags, resolved values), same HydraConfig while the task runs, same
    job return, same callbacks, and the same ``.hydra/*.yaml`` files, byte for byte; Hydra's config as it was
    afterwards. A task that raises is a FAILED job in both."""
    monkeypatch.chdir(tmp_path)
    outcomes: dict[str, list[Any]] = {}
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        master = compose("config", return_hydra_config=True,
                         overrides=["hydra.sweep.dir=sweep", f"hydra.job.chdir={chdir}"])
        loader = GlobalHydra.instance().config_loader()
        texts = ["+tags.api_key=s3cret", "+tags.note='héllo: wörld # ünïcode'", "+tags.number='1.0'", "+tags.yes='yes'",
                 "+tags.long='" + "a long text " * 12 + "'", "+tags.empty=''"]  # YAML's corners
        jobs = job_override_lists(master, [*SWEEP, "depth=100,-1", *texts])
        compose_once(loader)  # as in a sweep: each job's config is a copy the memo hands out
        try:
            for name, runner in (("hydra", run_job), ("lean", _lean_run_job)):
                recorder = Recorder()
                context = HydraContext(config_loader=loader, callbacks=Callbacks())
                context.callbacks.callbacks.append(recorder)
                seen: list[Any] = []

                def task(cfg: DictConfig, seen: list[Any] = seen) -> Any:
                    seen.append((described(cfg), OmegaConf.to_container(HydraConfig.get()), os.getcwd(),
                                 cfg.output))
                    if cfg.depth < 0:
                        raise ValueError("depth")
                    return cfg.retriever.k1

                before = HydraConfig.instance().cfg
                returns = []
                for number, job in enumerate(jobs):
                    config = loader.load_sweep_config(master, list(job))
                    with open_dict(config):
                        config.hydra.job.id = config.hydra.job.num = number
                        config.output = "${hydra:runtime.output_dir}"  # the task reads Hydra's config through it
                    ret = runner(task_function=task, config=config, job_dir_key="hydra.sweep.dir",
                                 job_subdir_key="hydra.sweep.subdir", hydra_context=context, configure_logging=False)
                    returns.append((ret.status, str(ret._return_value), ret.overrides, ret.working_dir,
                                    described(ret.cfg), OmegaConf.to_container(ret.hydra_cfg), ret.task_name))
                assert HydraConfig.instance().cfg is before and os.getcwd() == str(tmp_path)
                files = {str(p.relative_to(tmp_path / "sweep")): p.read_bytes()
                         for p in sorted((tmp_path / "sweep").rglob("*")) if p.is_file()}
                (tmp_path / "sweep").rename(tmp_path / name)
                outcomes[name] = [seen, returns, recorder.calls, files]
        finally:
            compose_normally(loader)
    hydras, leans = outcomes["hydra"], outcomes["lean"]
    assert len(hydras[0]) == len(jobs) == 8 and len(hydras[3]) == 3 * len(jobs)
    assert "héllo: wörld # ünïcode" in hydras[3]["0/.hydra/config.yaml"].decode()
    assert [r[0] for r in hydras[1]] == [JobStatus.FAILED if "depth=-1" in job else JobStatus.COMPLETED
                                         for job in jobs]
    for part in range(4):
        assert leans[part] == hydras[part]


def test_a_sweep_runs_its_jobs_leanly_and_then_as_hydra_does():
    from hydra._internal.core_plugins import basic_launcher

    hydras = basic_launcher.run_job
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        memo = compose_once(GlobalHydra.instance().config_loader())
        original = run_jobs_leanly()
        try:
            assert original is hydras and basic_launcher.run_job is not hydras
        finally:
            run_jobs_normally(original)
            compose_normally(memo.loader)
    assert basic_launcher.run_job is hydras is run_job


def test_the_job_files_written_clean_are_not_read_again_and_a_secret_is_still_masked(tmp_path, monkeypatch):
    """The lean runner writes a job's .hydra files from trees it checks: the job's masking (mask_hydra_files) then
    reads only the one holding a secret, and masks it."""
    save_yaml(OmegaConf.create({"retriever": {"k1": 0.9}, "tags": {"note": "plain"}}), "config.yaml", tmp_path)
    save_yaml(OmegaConf.create(["retriever.k1=0.9"]), "overrides.yaml", tmp_path)
    save_yaml(OmegaConf.create({"tags": {"api_key": "AbC123xyz"}}), "hydra.yaml", tmp_path)
    reads = []
    original_read = Path.read_text
    monkeypatch.setattr(Path, "read_text",
                        lambda self, *a, **k: reads.append(self.name) or original_read(self, *a, **k))
    pipeline.app.mask_hydra_files(tmp_path, None)
    assert reads == ["hydra.yaml"]
    assert "AbC123xyz" not in original_read(tmp_path / "hydra.yaml", encoding="utf-8")


def test_a_config_file_is_the_text_omegaconf_writes():
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["+tags.note='héllo: wörld # ünïcode'", "+tags.number='1.0'",
                                           "+tags.yes='yes'", "+tags.empty=''",
                                           "+tags.long='" + "a long text " * 12 + "'"])
    tree = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert yaml_text(tree) == OmegaConf.to_yaml(OmegaConf.create(tree))
