"""A sweep's jobs before any runs: the overrides and the keys swept, each job's config composed once and checked
(a bad value in the 7th point stops the command before the first job), and launched without composing it again
(:mod:`pipeline.config.hydra_internals`) until the sweep ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, open_dict
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.common.progress import IN_PROCESS_LAUNCHERS
from pipeline.common.redact import one_line
from pipeline.config.hydra_internals import (
    ComposedConfigs,
    compose_job,
    compose_normally,
    job_override_lists,
    loader_memo,
    run_jobs_leanly,
    run_jobs_normally,
)
from pipeline.config.plan import JobPlan
from pipeline.sweep.placement import anchor_sweep_dir, join_cluster


def validate_jobs(config: DictConfig, jobs: list[list[str]]) -> list[tuple[JobPlan, DictConfig]]:
    """Compose and check every job's config before anything starts: a bad key or value in the 7th sweep point
    stops the command now, not after six jobs ran. Data problems (a missing folder) are found by the job. Returns
    each job's plan and config (without its ``hydra`` node); an InputError names the first bad job."""
    launch_dir = Path(config.hydra.runtime.cwd)
    checked = []
    for number, job in enumerate(jobs):
        where = f"job {number} ({' '.join(job)})"
        try:
            job_cfg = compose_job(config, job)
            with open_dict(job_cfg):
                del job_cfg["hydra"]
            checked.append((JobPlan.check(job_cfg, launch_dir), job_cfg))
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        except (HydraException, OmegaConfBaseException) as exc:
            raise InputError(f"{where}: {one_line(exc)}") from None
    return checked


def sweep_overrides(overrides: list[str], sweeper_params: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """All overrides of the sweep (command line and ``hydra.sweeper.params``) and the keys swept over."""
    everything = [f"{k}={v}" for k, v in (sweeper_params or {}).items()] + list(overrides)
    parsed = OverridesParser.create().parse_overrides(everything)
    varying = list(dict.fromkeys(o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()))
    return everything, varying


@dataclass
class LeanLaunch:
    """Hydra's config loader composing each job once (checked, then launched as composed) and its launcher running
    them leanly, until :meth:`end` (see :mod:`pipeline.config.hydra_internals`)."""

    composed: ComposedConfigs
    runner: Any  # Hydra's run_job, while the launcher runs the jobs leanly

    @classmethod
    def start(cls) -> LeanLaunch:
        return cls(loader_memo(), run_jobs_leanly())

    def end(self) -> None:
        """Hydra composes and runs jobs as it did before the sweep."""
        compose_normally(self.composed.loader)
        run_jobs_normally(self.runner)


@dataclass
class SweepJobs:
    """What the driver knows of its jobs before launching them."""

    overrides: list[str]  # every override of the sweep, as given
    varying: list[str]  # the keys swept over
    points: list[list[str]] | None  # each job's overrides (None: an optimiser decides them as it goes)
    launcher: str  # hydra/launcher's choice
    checked: list[tuple[JobPlan, DictConfig]] = field(default_factory=list)  # each job's plan and config
    lean: LeanLaunch | None = None  # each job composed once, until the sweep ends

    @classmethod
    def read(cls, config: DictConfig, sweep_dir: Path) -> SweepJobs:
        """The sweep's jobs, each composed once (then launched as composed) and checked, every one given the absolute
        ``sweep_dir`` whichever process or node runs it; an InputError names the first bad one."""
        anchor_sweep_dir(config, sweep_dir)
        overrides, varying = sweep_overrides(list(config.hydra.overrides.task), config.hydra.sweeper.get("params"))
        jobs = cls(overrides, varying, job_override_lists(config, overrides),
                   str(config.hydra.runtime.choices.get("hydra/launcher", "basic")))
        if jobs.points is not None:
            jobs.lean = LeanLaunch.start()  # each job's config composed once: validated, then launched
            jobs.checked = validate_jobs(config, jobs.points)
        return jobs

    def join_cluster(self, config: DictConfig) -> None:
        """A cluster the launcher names, joined now: a refusal is one line before the parent run opens."""
        join_cluster(config, self.launcher)

    @property
    def in_process(self) -> bool:
        """Whether the jobs run in this process, one after another."""
        return self.points is not None and self.launcher in IN_PROCESS_LAUNCHERS

    @property
    def swept(self) -> list[str]:
        """The overrides that vary between jobs."""
        return [o for o in self.overrides if o.partition("=")[0].lstrip("+~") in self.varying]
