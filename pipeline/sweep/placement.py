"""Where a sweep's jobs run, settled by the driver before the parent run opens.

- **Their folders.** A relative ``hydra.sweep.dir`` is resolved against the folder the command starts in, and every
  job is given that absolute folder: a launcher that runs jobs in other processes or on other machines composes each
  job's config again from the master config's Hydra overrides, and Hydra makes a job's folder absolute in the
  process that runs it. A Ray worker's folder is the one its node was started in, so without this the jobs' folders
  landed under the head's launch folder and the driver, finding none of them, closed the sweep FAILED.
- **A Ray cluster.** ``hydra/launcher=ray`` with ``hydra.launcher.ray.init.address`` joins a running cluster here,
  as the plugin would once the sweep starts, so that a refusal is one line before any MLflow run exists. The plugin
  always adds an object-store size to ``ray.init``, which Ray refuses when joining: said in one line, with the
  override that fixes it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from metrics.errors import InputError
from pipeline.common.redact import one_line

SWEEP_DIR_KEY = "hydra.sweep.dir"
RAY_LAUNCHER = "ray"
RAY_JOIN_FIX = "+hydra.launcher.ray.init.object_store_memory=null"


def quoted_value(value: str) -> str:
    """``value`` as a quoted string in Hydra's override grammar (a path may hold ``=``, ``,``, spaces ...): a quote
    escaped, the backslashes before a quote or the end doubled (the grammar reads others as they are), and ``${``
    escaped (not an interpolation)."""
    value = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value)
    return "'" + value.replace("'", "\\'").replace("${", "\\${") + "'"


def anchor_sweep_dir(config: DictConfig, sweep_dir: Path) -> None:
    """Give every job the sweep folder the driver resolved (``sweep_dir``, absolute), wherever it runs: the master
    config's ``hydra.sweep.dir`` and, for the jobs a launcher composes again, its Hydra overrides."""
    if Path(str(config.hydra.sweep.dir)).is_absolute():
        return
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.sweep.dir = str(sweep_dir)
        config.hydra.overrides.hydra.append(f"{SWEEP_DIR_KEY}={quoted_value(str(sweep_dir))}")


def join_cluster(config: DictConfig, launcher: str) -> None:
    """With the Ray launcher and an address: the cluster joined now (the plugin then finds Ray running). An
    InputError, one line, when the settings cannot join it or Ray refuses."""
    if launcher != RAY_LAUNCHER:
        return
    settings: dict[str, Any] = OmegaConf.to_container(config.hydra.launcher.ray.init, resolve=True) or {}
    address = settings.get("address")
    if not address:
        return  # the plugin starts a private Ray instance for the sweep
    if settings.get("object_store_memory") is not None or "object_store_memory" not in settings:
        raise InputError(f"hydra.launcher.ray.init.address={address}: Ray refuses an object-store size when joining "
                         f"a running cluster, and hydra-ray-launcher passes one unless told not to: add "
                         f"{RAY_JOIN_FIX}")
    import ray  # only a sweep on Ray pays for it

    if ray.is_initialized():
        return
    try:
        ray.init(**settings)
    except Exception as exc:  # Ray's own errors have no common base: any refusal is the user's settings or cluster
        raise InputError(f"hydra.launcher.ray.init.address={address}: could not join the Ray cluster: "
                         f"{one_line(exc)}") from None
