"""The sweep's driver side, as a Hydra callback: parent MLflow run before the jobs, summary after them.

``on_multirun_start`` runs once in the driver before any job: it creates the tracking store (once, so parallel
jobs never race to create SQLite), opens the parent run and writes the hand-off file the jobs read.
``on_multirun_end`` builds the summary from what MLflow holds (joblib workers report nothing back to the
driver), prints it, logs it to the parent and closes the parent FINISHED or FAILED, then runs the regression
gate when ``gate=...`` is set (the command's exit status is the gate's); a tuning sweep
(``hydra/sweeper=optuna``) is checked first and ends with the held-out evaluation instead (pipeline/tuning.py).
If the sweep dies before that, an exit handler closes the parent FAILED: it is never left RUNNING.

A sweep started again in the same folder (``hydra.sweep.dir``) resumes: same parent run, finished jobs skipped
(``pipeline.sweep.resume``). If the store stops answering, the jobs' results wait in their folders for
``python -m pipeline.sync`` (``pipeline.tracking.records``).
"""

from __future__ import annotations

import atexit
import sys
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig, open_dict
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.analysis.summary import SweepSummary, SystemRun, child_runs, summarize
from pipeline.common import progress
from pipeline.common.redact import one_line, redact_text
from pipeline.config.build import check_config, metric_plan
from pipeline.config.hydra_internals import ComposedConfigs, compose_normally, compose_once
from pipeline.job.context import SweepHandle
from pipeline.job.diagnose import check_diagnosis
from pipeline.job.runner import PROG, config_tags
from pipeline.reports.text import sweep_report
from pipeline.sweep.report import plots_and_report
from pipeline.sweep.resume import lock_sweep, reopen_parent
from pipeline.sweep.tuning import check_tuning, finish_tuning, is_tuning
from pipeline.tracking.records import pending_records, store_error
from pipeline.tracking.runs import (
    TAG_KIND,
    TAG_OVERRIDES,
    TAG_SWEEP_DIR,
    Tracker,
    open_experiment,
    run_location,
    tracking_uri,
)

SUMMARY_TEXT = "summary.txt"
SYSTEMS_FILE = "systems.csv"
RANKS_FILE = "first_relevant_rank.csv"
DIFFERENCES_FILE = "differences.csv"
SUMMARY_TABLE = "sweep_summary.json"


def job_override_lists(config: DictConfig, overrides: list[str]) -> list[list[str]] | None:
    """Each job's overrides, as Hydra's basic sweeper will launch them (None for other sweepers)."""
    if not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    loader = GlobalHydra.instance().config_loader()
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(overrides)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def validate_jobs(config: DictConfig, jobs: list[list[str]]) -> None:
    """Compose and check every job's config before anything starts: a bad key or value in the 7th sweep point
    stops the command now, not after six jobs ran. Data problems (a missing folder) are found by the job."""
    loader = GlobalHydra.instance().config_loader()
    for number, job in enumerate(jobs):
        where = f"job {number} ({' '.join(job)})"
        try:
            job_cfg = loader.load_sweep_config(config, list(job))
            with open_dict(job_cfg):
                del job_cfg["hydra"]
            check_config(job_cfg)
            check_diagnosis(job_cfg, metric_plan(job_cfg.metrics))
        except InputError as exc:
            _exit(f"{where}: {exc}")
        except (HydraException, OmegaConfBaseException) as exc:
            _exit(f"{where}: {one_line(exc)}")


def sweep_overrides(overrides: list[str], sweeper_params: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """All overrides of the sweep (command line and ``hydra.sweeper.params``) and the keys swept over."""
    everything = [f"{k}={v}" for k, v in (sweeper_params or {}).items()] + list(overrides)
    parsed = OverridesParser.create().parse_overrides(everything)
    varying = list(dict.fromkeys(o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()))
    return everything, varying


class MlflowSweep(Callback):
    """Registered in ``conf/config.yaml`` under ``hydra.callbacks``."""

    def __init__(self) -> None:
        self.parent: Tracker | None = None
        self.handle: SweepHandle | None = None
        self.tuning = False
        self.composed: ComposedConfigs | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        progress.configure(bool(config.get("quiet", False)))  # the driver's own bars (reading runs back)
        launch_dir = Path(config.hydra.runtime.cwd)
        sweep_dir = (launch_dir / str(config.hydra.sweep.dir)).resolve()
        overrides, varying = sweep_overrides(list(config.hydra.overrides.task), config.hydra.sweeper.get("params"))
        jobs = job_override_lists(config, overrides)
        if jobs is not None:
            self.composed = compose_once(GlobalHydra.instance().config_loader())  # validated, then launched
            validate_jobs(config, jobs)
        self.tuning = is_tuning(config.hydra)
        if self.tuning:
            try:
                check_tuning(config, launch_dir, varying)
            except InputError as exc:
                _exit(str(exc))
            except (HydraException, OmegaConfBaseException) as exc:
                _exit(one_line(exc))
        try:
            uri = tracking_uri(config.tracking.uri, launch_dir)
            client, experiment_id = open_experiment(uri, config.tracking.experiment)
            lock_sweep(sweep_dir)
            self.parent = reopen_parent(client, experiment_id, sweep_dir)
        except InputError as exc:  # a refused URI, an unreachable server, a busy folder: say so, start nothing
            _exit(str(exc))
        swept = [o for o in overrides if o.partition("=")[0].lstrip("+~") in varying]
        name = config.get("study") or " ".join(swept) or sweep_dir.name
        if self.parent is not None:
            print(f"{PROG}: resuming the sweep in {sweep_dir} (parent run {self.parent.run_id}): jobs already "
                  f"logged are skipped", flush=True)
        else:
            tags = {**config_tags(config), TAG_KIND: "sweep", TAG_SWEEP_DIR: str(sweep_dir),
                    TAG_OVERRIDES: " ".join(overrides),
                    "rankscope.launcher": str(config.hydra.runtime.choices.get("hydra/launcher", "basic"))}
            self.parent = Tracker.start(client, experiment_id, name, tags)
        self.handle = SweepHandle(experiment_id, self.parent.run_id, varying)
        self.handle.write(sweep_dir)
        self.sweep_dir = sweep_dir
        self.uri = uri
        self.title = f"{'Tuning' if self.tuning else 'Sweep'} {name}"
        self.overrides = " ".join(overrides) or "(none)"
        self.sweep_args = overrides  # as parsed: the tuning driver rebuilds the untuned and tuned configs from them
        atexit.register(self._abandoned)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.composed is not None:
            compose_normally(self.composed.loader)
        if self.parent is None or self.handle is None:
            return
        try:
            if self.tuning:
                systems = child_runs(self.parent.client, self.handle.experiment_id, self.parent.run_id)
                _close_children(self.parent.client, systems)
                error = finish_tuning(config, self.parent, self.handle, systems, self.sweep_args, self.sweep_dir,
                                      self.title)
                where = run_location(self.uri, self.handle.experiment_id, self.parent.run_id)
                print(f"\nMLflow: parent {where}", flush=True)
                self.parent.finish(error=error)
                summary = None
            else:
                summary, error = close_sweep(self.parent, self.handle.experiment_id, self.sweep_dir, self.uri,
                                             config.metrics, self.title, config.diagnosis, self.overrides)
        except (MlflowException, OSError) as exc:  # the store stopped answering: the jobs' records are safe
            self.parent = None
            atexit.unregister(self._abandoned)
            _exit(f"the tracking store {self.uri} did not answer at the end of the sweep ({store_error(exc)}); "
                  f"every computed result is saved under {self.sweep_dir}: once the store answers, run: "
                  f"python -m pipeline.sync {self.sweep_dir}")
        parent, self.parent = self.parent, None
        atexit.unregister(self._abandoned)
        status = 0 if summary is None else run_sweep_gate(config, summary, parent, self.handle.experiment_id,
                                                           self.sweep_dir)
        if error:
            _exit(error)
        if status:
            sys.exit(status)

    def _abandoned(self) -> None:
        if self.parent is None:
            return
        try:
            systems = child_runs(self.parent.client, self.handle.experiment_id, self.parent.run_id)
            for system in systems:
                if system.status == "RUNNING":
                    Tracker(self.parent.client, system.run_id).finish(error="the sweep stopped before this job ended")
            self.parent.finish(error="the sweep stopped before all jobs ended")
        except Exception as exc:  # at exit, report rather than raise
            print(f"{PROG}: could not close the parent MLflow run: {exc}", file=sys.stderr)


def close_sweep(parent: Tracker, experiment_id: str, sweep_dir: Path, uri: str, metrics: Any, title: str,
                diagnosis: Any, overrides: str) -> tuple[SweepSummary, str | None]:
    """Summarise the children MLflow holds, print and save the summary, log it to the parent and close the parent
    (FAILED when a job failed or computed results it could not log). Used at the end of a sweep and by sync.

    Closed again (a resumed or synced sweep), the parent's ``jobs/*`` metrics get the next step."""
    plan = metric_plan(metrics)
    systems = child_runs(parent.client, experiment_id, parent.run_id)
    _close_children(parent.client, systems)
    summary = summarize(systems, parent.run_id, plan.show, plan.primary, plan.confidence, plan.resamples, plan.seed)
    unlogged = pending_records(sweep_dir)
    text = sweep_report(summary, title)
    if unlogged:
        folders = ", ".join(str(folder.relative_to(sweep_dir)) for folder, _ in unlogged)
        text += (f"\n\nNOT LOGGED: {len(unlogged)} job(s) computed their results but could not log them (folders "
                 f"{folders}); once the tracking store answers: python -m pipeline.sync {sweep_dir}")
    where = run_location(uri, experiment_id, parent.run_id)
    print(f"\n{text}\n\nMLflow: parent {where}", flush=True)
    # Plug-in point: later views of the sweep build from `summary` (read back from MLflow) and add files here.
    files = write_summary(summary, text, sweep_dir)
    files += plots_and_report(summary, plan, diagnosis, title, sweep_dir, parent,
                              {"MLflow": f"parent {where}", "overrides": overrides})
    failed = len(summary.failed)
    step = len(parent.client.get_metric_history(parent.run_id, "jobs/finished"))
    parent.log_metrics({"jobs/finished": len(summary.finished), "jobs/failed": failed,
                        "jobs/not_logged": len(unlogged)}, step=step)
    if not summary.means.empty:
        parent.log_table(summary.means.reset_index(), SUMMARY_TABLE)
    parent.log_files(files)
    problems = []
    if failed or not (summary.systems or unlogged):
        problems.append(f"{failed} of {len(summary.systems)} jobs failed" if summary.systems else "no job ran")
    if unlogged:
        problems.append(f"{len(unlogged)} job(s) computed but not logged: run python -m pipeline.sync {sweep_dir}")
    error = "; ".join(problems) or None
    parent.finish(error=error)
    return summary, error


def run_sweep_gate(config: Any, summary: SweepSummary, parent: Tracker, experiment_id: str, sweep_dir: Path) -> int:
    """``gate=...``: the gate on the sweep's best (or named) system; its exit status (0 when there is no gate).

    Not run while some job's results are not logged: the best system might be among them."""
    if config.get("gate") is None:
        return 0
    from pipeline.gate import EXIT_ERROR, gate_sweep

    unlogged = pending_records(sweep_dir)
    if unlogged:
        print(f"{PROG}: gate not run: {len(unlogged)} job(s) are not logged yet; python -m pipeline.sync "
              f"{sweep_dir} logs them and runs the gate", file=sys.stderr, flush=True)
        return EXIT_ERROR
    return gate_sweep(parent.client, experiment_id, parent.run_id, summary.finished, config.gate, sweep_dir,
                      config_tags(config)).status


def _close_children(client: MlflowClient, systems: list[SystemRun]) -> None:
    """A child still RUNNING now lost its process: record that it failed."""
    for system in systems:
        if system.status == "RUNNING":
            Tracker(client, system.run_id).finish(error="the job's process ended without closing it")
            system.status = "FAILED"


def write_summary(summary: SweepSummary, text: str, sweep_dir: Path) -> list[Path]:
    """The sweep's result files, in the sweep directory (and logged to the parent run)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    files = [sweep_dir / SUMMARY_TEXT]
    files[0].write_text(redact_text(text) + "\n", encoding="utf-8")
    for frame, name in ((summary.means, SYSTEMS_FILE), (summary.first_rank, RANKS_FILE),
                        (summary.differences, DIFFERENCES_FILE)):
        if not frame.empty:
            frame.to_csv(sweep_dir / name)
            files.append(sweep_dir / name)
    return files


def _exit(reason: str) -> None:
    print(f"{PROG}: {redact_text(reason)}".replace("\n", " "), file=sys.stderr, flush=True)
    sys.exit(1)
