"""Tuning without fooling yourself: search on one split, then report the best configuration once on another.

Under ``hydra/sweeper=optuna`` every trial is an ordinary job, scored on ``corpus.split`` (say SciFact ``train``);
it returns ``metrics.primary``'s mean to the optimiser. When the search is over, the sweep's driver
(:class:`pipeline.sweep.callback.MlflowSweep`) takes the optimiser's best parameters, evaluates that configuration
on the tuning split and then once on ``tune.holdout`` (say ``test``) and prints and logs both figures side by side; with
``tune.baseline`` the untuned configuration is evaluated on both splits too, so the gain of tuning is shown where
it was bought and where it is real. The held-out judgments are read by those last evaluations only: every run
records the judgments file it read (tag ``rankscope.judgments``).

Tuning and reporting on the same split is refused unless ``tune.allow_same_split=true``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from metrics.comparison import compare
from metrics.errors import InputError
from pipeline.common.names import (
    JOBS_PREFIX,
    LOWER,
    OPTIMISATION_RESULTS,
    TAG_KIND,
    TAG_TUNE_ROLE,
    TUNING_TABLE,
    TUNING_TEXT,
    UPPER,
)
from pipeline.common.redact import redact_text
from pipeline.config.build import metric_plan
from pipeline.config.hydra_internals import compose_job
from pipeline.config.plan import JobPlan
from pipeline.data.collection import corpus_label
from pipeline.job.context import JobContext, SweepHandle, run_name, short_value
from pipeline.job.run import JobOutcome, execute_job
from pipeline.reports.text import format_table, number
from pipeline.sweep.close import children_closed
from pipeline.tracking.links import run_location

if TYPE_CHECKING:
    from pipeline.analysis.summary import SystemRun
    from pipeline.config.build import MetricPlan
    from pipeline.data.sources import CorpusSource
    from pipeline.tracking.runs import Tracker

TOP_TRIALS = 5
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


def fixed_overrides(everything: list[str]) -> list[str]:
    """The overrides every trial shares (command line and non-sweep ``hydra.sweeper.params``): the untuned config."""
    parsed = OverridesParser.create().parse_overrides(everything)
    return [text for text, o in zip(everything, parsed) if not o.is_sweep_override()]


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
    files = _write(text, done, plan, sweep_dir)
    parent.log_params({"tune.objective": plan.primary.name, "tune.split": split, "tune.holdout": holdout,
                       **{f"tune.best.{k.lstrip('+~')}": v for k, v in best.params.items()}})  # +key: added
    parent.log_metrics(_parent_metrics(plan, best, done))
    parent.log_files(files)
    return None


def _get(done: list[Evaluated], label: str, role: str) -> Evaluated | None:
    return next((e for e in done if e.label == label and e.role == role), None)


def _gains(done: list[Evaluated], plan: MetricPlan) -> dict[str, pd.DataFrame]:
    """Tuned minus untuned, paired over the questions of each split."""
    names = [s.name for s in plan.show]
    out = {}
    for role in ("tuning", "holdout"):
        tuned, untuned = _get(done, "tuned", role), _get(done, "untuned", role)
        if tuned is None or untuned is None:
            continue
        a, b = untuned.outcome.result.evaluation.per_question, tuned.outcome.result.evaluation.per_question
        out[role] = compare(a, b, names, plan.confidence, plan.resamples, seed=plan.seed).table
    return out


def tuning_report(title: str, plan: MetricPlan, trials: list[SystemRun], best: Best, done: list[Evaluated],
                  same_split: bool) -> str:
    """Best trials, the chosen configuration, and the tuned (and untuned) figures on both splits side by side."""
    primary = plan.primary
    tuned_here, tuned_there = _get(done, "tuned", "tuning"), _get(done, "tuned", "holdout")
    c = tuned_here.outcome.result.collection
    finished = [t for t in trials if t.finished]
    parts = [f"== {title}: {len(finished)} of {len(trials)} trials finished; objective {primary.name} on "
             f"{c.name}/{c.split} ({len(tuned_here.outcome.result.evaluation.per_question)} questions)"]
    level = f"{plan.confidence:.0%}"
    ranked = sorted(finished, key=lambda t: (-t.metrics.get(primary.mlflow_key, float("-inf")), t.job))
    rows = [("trial", "system", primary.name, f"{level} interval")]
    for t in ranked[:TOP_TRIALS]:
        m = t.metrics
        rows.append((str(t.job), t.name, number(m.get(primary.mlflow_key, float("nan"))),
                     f"[{number(m.get(primary.mlflow_key + LOWER, float('nan')))}, "
                     f"{number(m.get(primary.mlflow_key + UPPER, float('nan')))}]"))
    parts.append(f"Best trials by {primary.name} on {tuned_here.split}\n" + format_table(rows, align="rlrl"))
    chosen = " ".join(f"{k}={short_value(str(v))}" for k, v in best.params.items())
    again = tuned_here.outcome.result.intervals[primary.name].mean
    note = "" if abs(again - best.value) < 1e-9 else (
        f"\n(note: re-evaluated, it scores {again:.4f}; the optimiser saw {best.value:.4f}: the system is not "
        f"deterministic)")
    parts.append(f"Best configuration (the optimiser's choice): {chosen}{note}")
    columns = [e for e in (tuned_here, tuned_there, _get(done, "untuned", "tuning"), _get(done, "untuned", "holdout"))
               if e is not None]
    head = ("metric", *(f"{e.split}: {e.label}" + (" (held out)" if e.role == "holdout" else "") for e in columns))
    rows = [head]
    for spec in plan.show:
        cells = []
        for e in columns:
            iv = e.outcome.result.intervals[spec.name]
            cells.append(f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]")
        rows.append((spec.name, *cells))
    parts.append(f"Tuned on {tuned_here.split}, evaluated once on {tuned_there.split}: mean [{level} interval]\n"
                 + format_table(rows, align="l" + "l" * len(columns)))
    gains = _gains(done, plan)
    if gains:
        rows = [("metric", *(f"{_get(done, 'tuned', role).split}" for role in gains))]
        for spec in plan.show:
            cells = []
            for table in gains.values():
                r = table.loc[spec.name]
                mark = " *" if r.ci_low > 0 or r.ci_high < 0 else ""
                cells.append(f"{r.difference:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]{mark}")
            rows.append((spec.name, *cells))
        parts.append("Tuned minus untuned, paired over questions (* = the interval excludes zero)\n"
                     + format_table(rows, align="l" + "l" * len(gains)))
    if same_split:
        parts.append(f"WARNING: tuned and reported on the same split ({tuned_there.split}, tune.allow_same_split): "
                     f"the 'held out' figure is optimistic.")
    else:
        parts.append(f"Report the {tuned_there.split} column: the {tuned_here.split} figure is optimistic, the "
                     f"configuration was chosen on it.")
    for t in trials:
        if not t.finished:
            parts.append(f"FAILED trial {t.job} ({t.name}): {t.error or t.status}")
    return "\n\n".join(parts)


def _parent_metrics(plan: MetricPlan, best: Best, done: list[Evaluated]) -> dict[str, float]:
    """``tuned/holdout/ndcg_at_10`` (with its ``_ci_lower``, ``_ci_upper``), ``untuned/tuning/...``, ``gain/...``."""
    out = {f"tune/best_trial/{plan.primary.mlflow_key}": best.value}
    for e in done:
        for spec in plan.specs:
            iv = e.outcome.result.intervals[spec.name]
            key = f"{e.label}/{e.role}/{spec.mlflow_key}"
            out.update({key: iv.mean, key + LOWER: iv.low, key + UPPER: iv.high})
    for role, table in _gains(done, plan).items():
        for spec in plan.show:
            r = table.loc[spec.name]
            key = f"gain/{role}/{spec.mlflow_key}"
            out.update({key: r.difference, key + LOWER: r.ci_low, key + UPPER: r.ci_high})
    return out


def _write(text: str, done: list[Evaluated], plan: MetricPlan, sweep_dir: Path) -> list[Path]:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    report = sweep_dir / TUNING_TEXT
    report.write_text(redact_text(text) + "\n", encoding="utf-8")
    rows = [(e.label, e.role, e.split, spec.name, iv.mean, iv.low, iv.high)
            for e in done for spec in plan.specs for iv in [e.outcome.result.intervals[spec.name]]]
    table = sweep_dir / TUNING_TABLE
    pd.DataFrame(rows, columns=["config", "role", "split", "metric", "mean", "ci_low", "ci_high"]).to_csv(
        table, index=False)
    return [report, table]
