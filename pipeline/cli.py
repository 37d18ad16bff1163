"""``python -m pipeline``: Hydra composes ``conf/``, then each job runs through :mod:`pipeline.runner`.

The task function lives here (an importable module, not ``__main__``) so joblib workers unpickle it by
reference and re-run this module's registrations (schemas, the ``rankscope.stamp`` resolver).
"""

from __future__ import annotations

import secrets
import sys
from datetime import datetime
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from pipeline import schema
from pipeline.context import JobContext
from pipeline.runner import JobFailed, run_job

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def stamp() -> str:
    """``YYYY-MM-DD/HH-MM-SS-xxxxxx``: output folders of two commands started in the same second never collide.

    Registered with ``use_cache``: resolved once in the driver, the value travels with the config to joblib
    workers (Hydra copies the resolver cache into each job's config).
    """
    return f"{datetime.now():%Y-%m-%d/%H-%M-%S}-{secrets.token_hex(3)}"


schema.register()
if not OmegaConf.has_resolver("rankscope.stamp"):
    OmegaConf.register_new_resolver("rankscope.stamp", stamp, use_cache=True)


def task(cfg: DictConfig) -> str | None:
    """One Hydra job. A single run that fails on bad input exits with status 1 after its one-line reason."""
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    launch_dir = Path(hydra_cfg.runtime.cwd)
    ctx = JobContext(
        launch_dir=launch_dir,
        output_dir=Path(hydra_cfg.runtime.output_dir),
        sweep_dir=(launch_dir / hydra_cfg.sweep.dir).resolve() if multirun else None,
        job_num=int(hydra_cfg.job.num) if multirun else 0,
        overrides=list(hydra_cfg.overrides.task),
        choices={str(k): str(v) for k, v in hydra_cfg.runtime.choices.items() if v is not None},
    )
    try:
        return run_job(cfg, ctx)
    except JobFailed:
        sys.exit(1)


main = hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)
