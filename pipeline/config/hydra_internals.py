"""Each job's config composed once per sweep in the driver, however many times Hydra asks for it.

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
