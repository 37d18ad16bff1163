"""The sweep's driver side, as a Hydra callback: parent MLflow run before the jobs, summary after them.

``on_multirun_start`` runs once in the driver before any job: it creates the tracking store (once, so parallel
jobs never race to create SQLite), opens the parent run and writes the hand-off file the jobs read.
``on_multirun_end`` builds the summary from what MLflow holds (joblib workers report nothing back to the
driver), prints it, logs it to the parent and closes the parent FINISHED or FAILED; a tuning sweep
(``hydra/sweeper=optuna``) is checked first and ends with the held-out evaluation instead (pipeline/tuning.py).
If the sweep dies before that, an exit handler closes the parent FAILED: it is never left RUNNING.
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
from omegaconf import DictConfig, open_dict
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.build import check_config, metric_plan
from pipeline.context import SweepHandle
from pipeline.diagnose_job import check_diagnosis
from pipeline.redact import one_line, redact_text
from pipeline.report import sweep_report
from pipeline.runner import PROG
from pipeline.summary import SweepSummary, SystemRun, child_runs, summarize
from pipeline.sweep_html import plots_and_report
from pipeline.tracking import (
    TAG_KIND,
    TAG_OVERRIDES,
    TAG_SWEEP_DIR,
    Tracker,
    open_experiment,
    run_location,
    tracking_uri,
)
from pipeline.tuning import check_tuning, finish_tuning, is_tuning

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

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launch_dir = Path(config.hydra.runtime.cwd)
        sweep_dir = (launch_dir / str(config.hydra.sweep.dir)).resolve()
        overrides, varying = sweep_overrides(list(config.hydra.overrides.task), config.hydra.sweeper.get("params"))
        jobs = job_override_lists(config, overrides)
        if jobs is not None:
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
        except InputError as exc:  # a refused URI, an unreachable server: say so plainly, start nothing
            _exit(str(exc))
        swept = [o for o in overrides if o.partition("=")[0].lstrip("+~") in varying]
        name = config.get("study") or " ".join(swept) or sweep_dir.name
        tags = {TAG_KIND: "sweep", TAG_SWEEP_DIR: str(sweep_dir), TAG_OVERRIDES: " ".join(overrides),
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
        if self.parent is None or self.handle is None:
            return
        systems = child_runs(self.parent.client, self.handle.experiment_id, self.parent.run_id)
        self._close_children(systems)
        if self.tuning:
            error = finish_tuning(config, self.parent, self.handle, systems, self.sweep_args, self.sweep_dir,
                                  self.title)
            where = run_location(self.uri, self.handle.experiment_id, self.parent.run_id)
            print(f"\nMLflow: parent {where}", flush=True)
        else:
            error = self._summarize(config, systems)
        self.parent.finish(error=error)
        self.parent = None
        atexit.unregister(self._abandoned)
        if error:
            _exit(error)

    def _summarize(self, config: DictConfig, systems: list[SystemRun]) -> str | None:
        """Print and log the systems side by side; returns why the sweep failed, or None."""
        plan = metric_plan(config.metrics)
        summary = summarize(systems, self.parent.run_id, plan.show, plan.primary, plan.confidence, plan.resamples,
                            plan.seed)
        text = sweep_report(summary, self.title)
        where = run_location(self.uri, self.handle.experiment_id, self.parent.run_id)
        print(f"\n{text}\n\nMLflow: parent {where}", flush=True)
        # Plug-in point: later views of the sweep build from `summary` (read back from MLflow) and add files here.
        files = write_summary(summary, text, self.sweep_dir)
        files += plots_and_report(summary, plan, config.diagnosis, self.title, self.sweep_dir, self.parent,
                                  {"MLflow": f"parent {where}", "overrides": self.overrides})
        failed = len(summary.failed)
        self.parent.log_metrics({"jobs/finished": len(summary.finished), "jobs/failed": failed})
        if not summary.means.empty:
            self.parent.log_table(summary.means.reset_index(), SUMMARY_TABLE)
        self.parent.log_files(files)
        if failed or not summary.systems:
            return f"{failed} of {len(summary.systems)} jobs failed" if summary.systems else "no job ran"
        return None

    def _close_children(self, systems: list[SystemRun]) -> None:
        """A child still RUNNING now lost its process: record that it failed."""
        for system in systems:
            if system.status == "RUNNING":
                Tracker(self.parent.client, system.run_id).finish(error="the job's process ended without closing it")
                system.status = "FAILED"

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
