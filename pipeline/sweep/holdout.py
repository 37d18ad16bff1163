"""The end of a tuning sweep (:mod:`pipeline.sweep.tuning`): its trials closed, the optimiser's best configuration
evaluated on the tuning split and once on the held-out one (with ``tune.baseline``, the untuned one too), the
figures printed and logged side by side (:mod:`pipeline.sweep.tuning_report`), the parent closed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.analysis.summary import SystemRun
from pipeline.common.names import JOBS_PREFIX, OPTIMISATION_RESULTS, TAG_KIND, TAG_TUNE_ROLE
from pipeline.config.build import metric_plan
from pipeline.config.hydra_internals import compose_job
from pipeline.data.collection import corpus_label
from pipeline.job.context import JobContext, SweepHandle, run_name
from pipeline.job.run import JobOutcome, execute_job
from pipeline.sweep.children import children_closed
from pipeline.sweep.tuning import fixed_overrides, tuning_split
from pipeline.sweep.tuning_report import parent_metrics, tuning_report, write_tuning
from pipeline.tracking.links import run_location
from pipeline.tracking.runs import Tracker


@dataclass(frozen=True)
class Best:
    """The optimiser's verdict, as hydra-optuna-sweeper saved it."""

    params: dict[str, Any]
    value: float


def read_best(sweep_dir: Path) -> Best | None:
    path = sweep_dir / OPTIMISATION_RESULTS
    if not path.is_file():
        return None
    saved = OmegaConf.to_container(OmegaConf.load(path))
    return Best(dict(saved.get("best_params") or {}), float(saved["best_value"]))


def job_config(config: DictConfig, overrides: list[str]) -> tuple[DictConfig, dict[str, str]]:
    """A job's config as the launcher would compose it, and its config-group choices."""
    cfg = compose_job(config, overrides)
    choices = {str(k): str(v) for k, v in cfg.hydra.runtime.choices.items() if v is not None}
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, choices


@dataclass
class Evaluated:
    """One evaluation of the tuned (or untuned) configuration, on the tuning split or the held-out one."""

    label: str  # 'tuned' or 'untuned'
    role: str  # 'tuning' (the split searched on) or 'holdout'
    split: str
    outcome: JobOutcome


def close_tuning(config: DictConfig, parent: Tracker, handle: SweepHandle, everything: list[str], sweep_dir: Path,
                 title: str, uri: str) -> str | None:
    """The end of a tuning sweep: its trials closed, the best configuration evaluated on both splits, the parent
    closed. Returns why it failed, or None."""
    trials = children_closed(parent, handle.experiment_id)
    error = finish_tuning(config, parent, handle, trials, everything, sweep_dir, title)
    print(f"\nMLflow: parent {run_location(uri, handle.experiment_id, parent.run_id)}", flush=True)
    parent.finish(error=error)
    return error


def finish_tuning(config: DictConfig, parent: Tracker, handle: SweepHandle, trials: list[SystemRun],
                  everything: list[str], sweep_dir: Path, title: str) -> str | None:
    """Evaluate the best configuration on both splits, print and log the side-by-side table.

    Returns why the sweep failed, or None. Trials that failed are listed but do not fail the sweep: a search
    space may hold invalid corners; what matters is that the chosen configuration was evaluated.
    """
    plan = metric_plan(config.metrics)
    best = read_best(sweep_dir)
    failed = [t for t in trials if not t.finished]
    parent.log_metrics({JOBS_PREFIX + "finished": len(trials) - len(failed), JOBS_PREFIX + "failed": len(failed)})
    if best is None:
        return "no trial finished: nothing to evaluate on the held-out split"
    split, holdout = tuning_split(config.corpus), str(config.tune.holdout)
    fixed = [o for o in fixed_overrides(everything) if o.partition("=")[0].lstrip("+~") != "corpus.split"]
    tuned = fixed + [f"{key}={value}" for key, value in best.params.items()]
    steps = [("tuned", tuned, "tuning", split), ("tuned", tuned, "holdout", holdout)]
    if config.tune.baseline:
        steps = [steps[0], ("untuned", fixed, "tuning", split), steps[1], ("untuned", fixed, "holdout", holdout)]
    done: list[Evaluated] = []
    launch_dir = Path(config.hydra.runtime.cwd)
    for job_num, (label, overrides, role, on) in enumerate(steps, start=len(trials)):
        cfg, choices = job_config(config, [*overrides, f"corpus.split={on}"])
        ctx = JobContext(launch_dir, sweep_dir / f"{label}-{on}", sweep_dir, job_num, overrides, choices)
        outcome = execute_job(cfg, ctx, tags={TAG_KIND: label, TAG_TUNE_ROLE: f"{label}/{role}"}, report=False)
        if outcome.result is None:
            return f"the {label} configuration could not be evaluated on split {on!r} (see its run)"
        result = outcome.result
        parent.rename(outcome.run_id, run_name(f"{result.system} [{label}]", corpus_label(result.collection.name, on)))
        done.append(Evaluated(label, role, on, outcome))
    text = tuning_report(title, plan, trials, best, done, same_split=split == holdout)
    print(f"\n{text}", flush=True)
    files = write_tuning(text, done, plan, sweep_dir)
    parent.log_params({"tune.objective": plan.primary.name, "tune.split": split, "tune.holdout": holdout,
                       **{f"tune.best.{k.lstrip('+~')}": v for k, v in best.params.items()}})  # +key: added
    parent.log_metrics(parent_metrics(plan, best, done))
    parent.log_files(files)
    return None
