"""The one module that reaches into Hydra's internals; ``tests/pipeline/config/test_hydra_internals.py`` fails
loudly if a Hydra release changes what it relies on.

1. Each job's config composed once per sweep in the driver, however many times Hydra asks for it.

In a basic sweep the driver composes every job's config three times: :func:`pipeline.sweep.jobs.validate_jobs`
checks them all before anything starts, Hydra's sweeper composes them again to check the batch
(``validate_batch_is_legal``), and the launcher composes each once more to run it. Composing is ~70 ms of CPU
per job (the defaults tree, every YAML file, the structured schemas); a copy of a composed config is ~4 ms.
:class:`ComposedConfigs` stands in for the config loader's ``load_sweep_config`` for the length of a sweep:
the first request for a job's overrides composes, the later ones get a copy (the launcher writes the job
number into its config, so nobody may share one). A copy is unpickled from the config pickled once (:class:`_Kept`):
0.6 ms against 3.5 ms for ``copy.deepcopy`` of a composed config, which walks every node; the joblib launcher
ships configs to its workers the same way.

The result of ``load_sweep_config`` depends only on the master config's name and Hydra overrides and on the
job's overrides (the config search path is fixed for the process), so those are the key. Pickled (a joblib
worker receives the loader), it carries no cache: the worker composes its job itself, as before.

A job whose overrides differ from a composed job's only in the values of plain ``key=value`` overrides (a sweep
over ``retriever.k1``) is not composed either: its config is a copy of that job's with the new values set as
Hydra sets them (``OmegaConf.update`` of the parsed value, then ``hydra.overrides.task`` and
``hydra.job.override_dirname``): the 36 requests of a 12-point ``k1``/``b`` sweep take ~0.9 s of CPU instead of
~3 s. Hydra composes the defaults tree before it applies such overrides, so the two compositions differ only
there. Anything else (a config group, ``+``/``~``, a ``hydra.`` key, a list or dict value, a key not in the
config, overlapping keys, an error) is composed normally, so a bad value gets Hydra's own error. Counters:
``composed``, ``derived``, ``reused``.

2. Each job's overrides, as the basic sweeper will split a sweep into jobs (:func:`job_override_lists`), so the
driver can check every job's config before any starts.

3. Each job of a basic sweep run with less copying (:func:`run_jobs_leanly`). Hydra's ``run_job`` sets Hydra's
config twice (a masked deep copy of the ``hydra`` node each time) and deep-copies the whole config, then that
copy again, before the task starts: 10-15 ms of a SciFact sweep's ~130 ms a point, in the process that sets the
pace. The basic launcher's ``run_job`` is replaced for the sweep's length by one that does the same things in the
same order with one setting of Hydra's config, which holds the job's own ``hydra`` node instead of a copy of it
(:func:`set_hydra_config`; the output folder written into it), the task's config copied
without the ``hydra`` node (:func:`without_hydra`), its ``.hydra/*.yaml`` emitted by libyaml (:func:`save_yaml`)
and the job return holding Hydra's config itself (nothing
changes it afterwards): the same task config, Hydra config, files, callbacks and job return (tested against
Hydra's own, byte for byte).
"""

from __future__ import annotations

import copy
import functools
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict, read_write
from omegaconf.basecontainer import BaseContainer

from pipeline.common.redact import masked_yaml_tree, remember_clean

_ATTRIBUTE = "load_sweep_config"
_SCALARS = (bool, int, float, str, type(None))
_ABSENT = object()


class _Kept:
    """A config kept unchanged, handing out independent copies: unpickled from its pickle (every node, flag and
    type as they were), or deep-copied when it does not pickle."""

    def __init__(self, config: DictConfig) -> None:
        self.config = config
        try:
            self.pickled: bytes | None = pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a value that does not pickle (never in rankscope's own configs)
            self.pickled = None

    def copy(self) -> DictConfig:
        return pickle.loads(self.pickled) if self.pickled is not None else copy.deepcopy(self.config)


@dataclass
class _Composed:
    """A job's config as Hydra composed it, with its overrides parsed: a base for jobs that change values."""

    lines: tuple[str, ...]
    kept: _Kept
    parsed: list[Any] = field(default_factory=list)  # hydra.core.override_parser.types.Override, when needed
    plain: dict[int, bool] = field(default_factory=dict)  # position -> may its value change (see _plain)


class ComposedConfigs:
    """``load_sweep_config`` of one config loader, composing each distinct request once."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.composed = 0  # configs Hydra composed
        self.derived = 0  # configs built from a composed one by setting other override values (see module)
        self.reused = 0  # requests answered with a copy of one composed or derived earlier
        self._cache: dict[tuple, _Kept] = {}
        self._bases: dict[tuple, list[_Composed]] = {}  # master key -> configs Hydra composed

    def __call__(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        master = (str(master_config.hydra.job.config_name),
                  tuple(OmegaConf.to_container(master_config.hydra.overrides.hydra)))
        key = (*master, tuple(sweep_overrides))
        found = self._cache.get(key)
        if found is not None:
            self.reused += 1
        else:
            found = self._derive(self._bases.get(master, []), list(sweep_overrides))
            if found is not None:
                self.derived += 1
            else:
                found = _Kept(type(self.loader).load_sweep_config(self.loader, master_config, list(sweep_overrides)))
                self.composed += 1
                self._bases.setdefault(master, []).append(_Composed(tuple(sweep_overrides), found))
            self._cache[key] = found
        config = found.copy()
        OmegaConf.copy_cache(from_config=master_config, to_config=config)  # as Hydra does: same resolved values
        return config

    def _derive(self, bases: list[_Composed], overrides: list[str]) -> _Kept | None:
        """The job's config from a composed one whose overrides differ only in plain values; None if none fits
        or anything goes wrong (the caller composes)."""
        parsed = None
        for base in bases:
            if len(base.lines) != len(overrides):
                continue
            changed = [i for i, (was, now) in enumerate(zip(base.lines, overrides, strict=True)) if was != now]
            try:
                base.parsed = base.parsed or _parse(base.lines)
                if all(self._plain(base, i) for i in changed):
                    parsed = _parse(overrides) if parsed is None else parsed
                    derived = self._with_values(base, parsed, changed)
                    if derived is not None:
                        return derived
            except Exception:  # unusual (a value Hydra rejects): Hydra composes it and reports any error itself
                return None
        return None

    def _plain(self, base: _Composed, position: int) -> bool:
        """May the value of the base's override at ``position`` change without composing again?"""
        if position not in base.plain:
            base.plain[position] = _plain_override(self.loader, base, position)
        return base.plain[position]

    def _with_values(self, base: _Composed, parsed: list[Any], changed: list[int]) -> _Kept | None:
        """A copy of the base's config with the changed overrides applied as Hydra applies them."""
        from hydra._internal.config_loader_impl import get_overrides_dirname
        from hydra.core.override_parser.types import OverrideType

        for i in changed:
            was, now = base.parsed[i], parsed[i]
            if (now.type != OverrideType.CHANGE or now.package is not None or now.key_or_group != was.key_or_group
                    or now.is_sweep_override() or not isinstance(now.value(), _SCALARS)):
                return None
        config = base.kept.copy()
        for i in changed:  # ConfigLoaderImpl._apply_overrides_to_config, for a plain override
            OmegaConf.update(config, parsed[i].key_or_group, parsed[i].value(), merge=True)
        application = [o for o in parsed if not o.is_hydra_override()]
        task = config.hydra.overrides.task
        if list(task) != [o.input_line for o in base.parsed if not o.is_hydra_override()]:
            return None  # not laid out as Hydra lays it out
        for number, override in enumerate(application):
            if task[number] != override.input_line:
                task[number] = override.input_line
        naming = config.hydra.job.config.override_dirname
        config.hydra.job.override_dirname = get_overrides_dirname(
            overrides=application, kv_sep=naming.kv_sep, item_sep=naming.item_sep,
            exclude_keys=naming.exclude_keys)
        return _Kept(config)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}, "_bases": {}}


def _parse(overrides: list[str] | tuple[str, ...]) -> list[Any]:
    """Overrides parsed as the config loader parses them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(list(overrides))


def _plain_override(loader: Any, base: _Composed, position: int) -> bool:
    """Is the base's override at ``position`` a plain ``key=scalar`` that Hydra applies to the composed config
    after the defaults tree, touching no other override's key?"""
    from hydra.core.override_parser.types import OverrideType

    override = base.parsed[position]
    key = override.key_or_group
    if (override.type != OverrideType.CHANGE or override.package is not None or override.is_hydra_override()
            or key.startswith("hydra") or override.is_sweep_override() or "/" in key
            or not isinstance(override.value(), _SCALARS) or _is_group(loader, base.kept.config, key)):
        return False
    found = OmegaConf.select(base.kept.config, key, default=_ABSENT, throw_on_resolution_failure=False)
    if found is _ABSENT or isinstance(found, (DictConfig, ListConfig)):
        return False
    for number, other in enumerate(base.parsed):  # overlapping keys: their order of application matters
        if number == position:
            continue
        if (isinstance(other.value(), dict) or not _is_group(loader, base.kept.config, other.key_or_group)) and (
                other.key_or_group == key or key.startswith(other.key_or_group + ".")
                or other.key_or_group.startswith(key + ".")):
            return False
    return True


def _is_group(loader: Any, config: DictConfig, key: str) -> bool:
    """Would Hydra read an override of ``key`` as a config group's? (True when unsure.)"""
    if key in config.hydra.runtime.choices:
        return True
    sources = [(s.provider, s.path, s.scheme()) for s in loader.repository.get_sources()]
    if sources != [(s.provider, s.path, s.schema) for s in config.hydra.runtime.config_sources]:
        return True  # the primary config's hydra.searchpath added some: the loader's repository is not Hydra's
    return bool(loader.repository.group_exists(key))


def compose_once(loader: Any) -> ComposedConfigs:
    """Make ``loader.load_sweep_config`` compose each job's config once (idempotent); returns the memo."""
    current = loader.__dict__.get(_ATTRIBUTE)
    if isinstance(current, ComposedConfigs):
        return current
    memo = ComposedConfigs(loader)
    setattr(loader, _ATTRIBUTE, memo)
    return memo


def compose_normally(loader: Any) -> None:
    """Undo :func:`compose_once` (the sweep is over: its configs are not kept)."""
    if isinstance(loader.__dict__.get(_ATTRIBUTE), ComposedConfigs):
        delattr(loader, _ATTRIBUTE)


def job_override_lists(config: DictConfig, overrides: list[str]) -> list[list[str]] | None:
    """Each job's overrides, as Hydra's basic sweeper will launch them (None for other sweepers).

    Uses ``BasicSweeper.split_arguments``, a static method of Hydra's internal basic sweeper plugin."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    loader = GlobalHydra.instance().config_loader()
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(overrides)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def compose_job(config: DictConfig, overrides: list[str]) -> DictConfig:
    """A job's config (its ``hydra`` node included) as the launcher composes it, from the sweep's config."""
    from hydra.core.global_hydra import GlobalHydra

    return GlobalHydra.instance().config_loader().load_sweep_config(config, list(overrides))


def loader_memo() -> ComposedConfigs:
    """Make the running Hydra's config loader compose each job once for the rest of the sweep (see module)."""
    from hydra.core.global_hydra import GlobalHydra

    return compose_once(GlobalHydra.instance().config_loader())


def without_hydra(config: DictConfig) -> DictConfig:
    """A deep copy of ``config`` without its ``hydra`` node, as Hydra makes the task's config (a deep copy, then
    the node deleted), without copying the node first: it is most of the config's nodes."""
    content = config.__dict__.get("_content") if isinstance(config, BaseContainer) else None
    if not isinstance(content, dict) or "hydra" not in content:
        task = copy.deepcopy(config)
        with read_write(task), open_dict(task):
            del task["hydra"]
        return task
    config.__dict__["_content"] = {key: node for key, node in content.items() if key != "hydra"}
    try:
        return copy.deepcopy(config)
    finally:
        config.__dict__["_content"] = content


def save_yaml(node: Any, filename: str, folder: Path) -> None:
    """``folder/filename`` as Hydra saves a config (``OmegaConf.to_yaml``), the text emitted by libyaml where PyYAML
    has it: the same bytes (tested against Hydra's own files) in 40% of the time."""
    folder.mkdir(parents=True, exist_ok=True)
    tree = None
    if _libyaml_dumper() is None:
        text = OmegaConf.to_yaml(node)
    else:
        tree = OmegaConf.to_container(node, resolve=False, enum_to_str=True)
        text = yaml_text(tree)
    path = folder / filename
    path.write_text(text, encoding="utf-8")
    if tree is not None and masked_yaml_tree(tree) == tree:  # the file's tree, as reading it back gives it: the job
        remember_clean(path)  # does not read it again to mask it (pipeline.app.mask_hydra_files)


def yaml_text(tree: Any) -> str:
    """A plain tree (dicts, lists, scalars) as ``OmegaConf.to_yaml`` writes the config made of it, the same bytes,
    emitted by libyaml where PyYAML has it (a job's ``config.yaml``: 8 ms through OmegaConf, 3 ms here)."""
    dumper = _libyaml_dumper()
    if dumper is None:
        return OmegaConf.to_yaml(OmegaConf.create(tree))
    return yaml.dump(tree, Dumper=dumper, default_flow_style=False, allow_unicode=True, sort_keys=False)


@functools.cache
def _libyaml_dumper() -> Any:
    """OmegaConf's YAML dumper on libyaml's emitter (None where PyYAML was built without libyaml)."""
    from omegaconf._utils import OmegaConfDumper

    if not getattr(yaml, "__with_libyaml__", False):
        return None
    dumper = type("_LibyamlOmegaConfDumper", (yaml.CDumper,), {})
    dumper.add_representer(str, OmegaConfDumper.str_representer)
    return dumper


def _lean_run_job(task_function: Any, config: DictConfig, job_dir_key: str, job_subdir_key: str | None,
                  hydra_context: Any, configure_logging: bool = True) -> Any:
    """Hydra's ``run_job`` for the jobs of a basic sweep, doing what it does with less copying (see module, 3)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.utils import JobReturn, JobRuntime, JobStatus, _flush_loggers, configure_log, env_override

    callbacks = hydra_context.callbacks
    old_cwd = os.getcwd()
    holder = HydraConfig.instance()
    orig_hydra_cfg = holder.cfg
    set_hydra_config(holder, config)
    output_dir = str(OmegaConf.select(config, job_dir_key))
    if job_subdir_key is not None:
        output_dir = os.path.join(output_dir, str(OmegaConf.select(config, job_subdir_key)))
    runtimes = [config.hydra.runtime]
    if holder.cfg.hydra is not config.hydra:  # Hydra's set_config copied the node: the folder goes into both
        runtimes.append(holder.cfg.hydra.runtime)
    for runtime in runtimes:
        with read_write(runtime), open_dict(runtime):
            runtime.output_dir = os.path.abspath(output_dir)
    chdir = False
    try:
        ret = JobReturn()
        ret.cfg = task_cfg = without_hydra(config)
        hydra_cfg = ret.hydra_cfg = holder.cfg  # Hydra deep-copies it; nothing changes it afterwards
        ret.overrides = OmegaConf.to_container(config.hydra.overrides.task)
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        chdir = bool(hydra_cfg.hydra.job.chdir)  # None is False from version_base 1.2 on
        if chdir:
            os.chdir(output_dir)
            ret.working_dir = output_dir
        else:
            ret.working_dir = os.getcwd()
        if configure_logging:
            configure_log(config.hydra.job_logging, config.hydra.verbose)
        if config.hydra.output_subdir is not None:
            hydra_output = Path(config.hydra.runtime.output_dir) / str(config.hydra.output_subdir)
            save_yaml(task_cfg, "config.yaml", hydra_output)
            save_yaml(hydra_cfg, "hydra.yaml", hydra_output)
            save_yaml(config.hydra.overrides.task, "overrides.yaml", hydra_output)
        with env_override(hydra_cfg.hydra.job.env_set):
            callbacks.on_job_start(config=config, task_function=task_function)
            try:
                ret.return_value = task_function(task_cfg)
                ret.status = JobStatus.COMPLETED
            except Exception as e:
                ret.return_value = e
                ret.status = JobStatus.FAILED
        ret.task_name = JobRuntime.instance().get("name")
        _flush_loggers()
        callbacks.on_job_end(config=config, job_return=ret)
        return ret
    finally:
        holder.cfg = orig_hydra_cfg
        if chdir:
            os.chdir(old_cwd)


def set_hydra_config(holder: Any, config: DictConfig) -> None:
    """``HydraConfig.set_config`` without its deep copy of the ``hydra`` node (9 ms a job on a 2-core machine, the
    node being most of the config): Hydra's config holds the job's own node, read-only, its parent the job's config,
    which is what Hydra's copy is once ``set_config`` has re-parented it. The job's config is the job's alone (a copy
    the launcher made), and nothing changes its ``hydra`` node but the output folder, written into it once."""
    from hydra.conf import HydraConf

    OmegaConf.set_readonly(config.hydra, True)
    node = config._get_node("hydra")
    if not isinstance(node, DictConfig) or not issubclass(OmegaConf.get_type(config, "hydra") or object, HydraConf):
        holder.set_config(config)  # not as Hydra builds it: Hydra's own way, with its checks
        return
    view = DictConfig({})
    view.__dict__["_content"]["hydra"] = node  # the node itself, not a copy; its parent stays the job's config
    holder.cfg = view


def run_jobs_leanly() -> Any:
    """Make Hydra's basic launcher run each job with :func:`_lean_run_job` (see module, 3); returns
    what to hand :func:`run_jobs_normally` afterwards.

    The launcher's module global is replaced, not ``hydra.core.utils.run_job``: Hydra's plugin scan runs the
    launcher module again at start-up, binding its own name then; a single run never reaches it."""
    from hydra._internal.core_plugins import basic_launcher

    original = basic_launcher.run_job
    basic_launcher.run_job = _lean_run_job
    return original


def run_jobs_normally(original: Any) -> None:
    """Undo :func:`run_jobs_leanly`."""
    from hydra._internal.core_plugins import basic_launcher

    basic_launcher.run_job = original
