"""The one module that reaches into Hydra's internals; ``tests/pipeline/config/test_hydra_internals.py`` fails
loudly if a Hydra release changes what it relies on.

1. Each job's config composed once per sweep in the driver, however many times Hydra asks for it.

In a basic sweep the driver composes every job's config three times: :func:`pipeline.sweep.callback.validate_jobs`
checks them all before anything starts, Hydra's sweeper composes them again to check the batch
(``validate_batch_is_legal``), and the launcher composes each once more to run it. Composing is ~70 ms of CPU
per job (the defaults tree, every YAML file, the structured schemas); a copy of a composed config is ~4 ms.
:class:`ComposedConfigs` stands in for the config loader's ``load_sweep_config`` for the length of a sweep:
the first request for a job's overrides composes, the later ones get a deep copy (the launcher writes the job
number into its config, so nobody may share one).

The result of ``load_sweep_config`` depends only on the master config's name and Hydra overrides and on the
job's overrides (the config search path is fixed for the process), so those are the key. Pickled (a joblib
worker receives the loader), it carries no cache: the worker composes its job itself, as before.

2. Each job's overrides, as the basic sweeper will split a sweep into jobs (:func:`job_override_lists`), so the
driver can check every job's config before any starts.
"""

from __future__ import annotations

import copy
from typing import Any

from omegaconf import DictConfig, OmegaConf

_ATTRIBUTE = "load_sweep_config"


class ComposedConfigs:
    """``load_sweep_config`` of one config loader, composing each distinct request once."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.composed = 0  # configs Hydra composed
        self.reused = 0  # requests answered with a copy of one composed earlier
        self._cache: dict[tuple, DictConfig] = {}

    def __call__(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        key = (str(master_config.hydra.job.config_name),
               tuple(OmegaConf.to_container(master_config.hydra.overrides.hydra)), tuple(sweep_overrides))
        found = self._cache.get(key)
        if found is None:
            found = type(self.loader).load_sweep_config(self.loader, master_config, list(sweep_overrides))
            self._cache[key] = found
            self.composed += 1
        else:
            self.reused += 1
        config = copy.deepcopy(found)
        OmegaConf.copy_cache(from_config=master_config, to_config=config)  # as Hydra does: same resolved values
        return config

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}


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
