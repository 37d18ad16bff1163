"""Tuning without fooling yourself: search on one split, then report the best configuration once on another.

Under ``hydra/sweeper=optuna`` every trial is an ordinary job, scored on ``corpus.split`` (say SciFact ``train``);
it returns ``metrics.primary``'s mean to the optimiser. When the search is over, the sweep's driver
(:class:`pipeline.sweep.callback.MlflowSweep`) takes the optimiser's best parameters, evaluates that configuration
on the tuning split and then once on ``tune.holdout`` (say ``test``) and prints and logs both figures side by side
(:mod:`pipeline.sweep.holdout`); with ``tune.baseline`` the untuned configuration is evaluated on both splits
too, so the gain of tuning is shown where it was bought and where it is real. The held-out judgments are read by
those last evaluations only: every run records the judgments file it read (tag ``rankscope.judgments``).

Tuning and reporting on the same split is refused unless ``tune.allow_same_split=true``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, open_dict

from metrics.errors import InputError
from pipeline.config.plan import JobPlan

if TYPE_CHECKING:
    from pipeline.data.sources import CorpusSource
    from pipeline.job.run import JobOutcome

# Keys a search may not vary: every trial must be scored on the same questions, by the same metric.
FROZEN_KEYS = ("corpus", "metrics", "tune", "depth")


def is_tuning(hydra_cfg: DictConfig) -> bool:
    """A sweep is a tuning sweep when an optimiser (hydra-optuna-sweeper) drives it."""
    return "optuna" in str(hydra_cfg.sweeper.get("_target_", "")).lower()


def tuning_split(corpus: DictConfig) -> str:
    """The split trials are scored on."""
    return str(corpus.split)


def objective(outcome: JobOutcome) -> float | None:
    """What a trial returns to the optimiser: ``metrics.primary`` on the tuning split.

    None when the job failed on bad input: the optuna sweeper records a trial whose value is not a number as
    failed and goes on (NaN would crash hydra-optuna-sweeper 1.3.0 with optuna 2.10).
    """
    if outcome.result is None:
        return None
    return float(outcome.result.intervals[outcome.result.plan.primary.name].mean)


def trial_line(outcome: JobOutcome, job: int) -> str:
    """The one line a trial prints (a full table per trial would bury the search)."""
    result = outcome.result
    if result is None:
        return f"trial {job}: failed"
    spec = result.plan.primary
    iv = result.intervals[spec.name]
    return (f"trial {job}: {result.system} on {result.collection.name}/{result.collection.split}: {spec.name} "
            f"{iv.mean:.4f} [{iv.low:.3f}, {iv.high:.3f}]")


def check_tuning(config: DictConfig, launch_dir: Path, varying: list[str]) -> None:
    """Before any trial runs: refuse a search whose held-out figure would mean nothing, or that cannot finish."""
    direction = config.hydra.sweeper.get("direction")
    directions = list(direction) if isinstance(direction, ListConfig | list) else [direction]
    if [getattr(d, "name", str(d)) for d in directions] != ["maximize"]:
        raise InputError("hydra.sweeper.direction must be maximize: rankscope's metrics are better when higher "
                         "(the optuna sweeper minimises unless told)")
    frozen = [k for k in varying if k.lstrip("+~").split(".")[0].split("@")[0] in FROZEN_KEYS]
    if frozen:
        raise InputError(f"a tuning sweep cannot search over {', '.join(frozen)}: every trial must be scored on the "
                         f"same questions by the same metric")
    base = config.copy()
    with open_dict(base):
        del base["hydra"]
    plan = JobPlan.check(base, launch_dir)
    split, holdout = tuning_split(config.corpus), str(config.tune.holdout)
    if split == holdout and not config.tune.allow_same_split:
        raise InputError(f"refusing to tune and report on the same split {split!r}: tune on another one "
                         f"(corpus.split=train) or accept an optimistic figure with tune.allow_same_split=true")
    for name, key in ((split, "corpus.split"), (holdout, "tune.holdout")):
        _check_split_exists(plan.corpus, name, key)


def _check_split_exists(corpus: CorpusSource, split: str, key: str) -> None:
    """Only that the split has judgments: their contents are read by the jobs that need them, not here."""
    available = corpus.splits()
    if split not in available:
        raise InputError(f"{key}: no judgments for split {split!r} (available: {', '.join(available) or 'none'})")


def fixed_overrides(everything: list[str]) -> list[str]:
    """The overrides every trial shares (command line and non-sweep ``hydra.sweeper.params``): the untuned config."""
    parsed = OverridesParser.create().parse_overrides(everything)
    return [text for text, o in zip(everything, parsed) if not o.is_sweep_override()]
