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
import contextlib
import functools
import importlib
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.common import collector, commands, interrupts, progress
from pipeline.common.names import KIND_SWEEP, PROG, TAG_KIND, TAG_LAUNCHER, TAG_OVERRIDES, TAG_SWEEP_DIR
from pipeline.common.progress import IN_PROCESS_LAUNCHERS
from pipeline.common.redact import one_line, redact_text
from pipeline.config.hydra_internals import (
    ComposedConfigs,
    compose_job,
    compose_normally,
    job_override_lists,
    loader_memo,
    run_jobs_leanly,
    run_jobs_normally,
)
from pipeline.config.plan import JobPlan, forget_plans_ahead, plan_ahead
from pipeline.job.context import SweepHandle, config_tags, configured_corpus, run_name
from pipeline.job.reuse import load_ahead
from pipeline.job.run import finish_waiting
from pipeline.reports.html import start_drawer
from pipeline.sweep.close import abandon, close_sweep
from pipeline.sweep.gating import run_sweep_gate
from pipeline.sweep.resume import open_parent
from pipeline.sweep.tuning import check_tuning, close_tuning, is_tuning
from pipeline.tracking import background
from pipeline.tracking.readback import logged_tables
from pipeline.tracking.runs import Tracker
from pipeline.tracking.store import STORE_ERRORS, check_reachable, open_ahead, store_error, tracking_uri


def validate_jobs(config: DictConfig, jobs: list[list[str]]) -> list[tuple[JobPlan, DictConfig]]:
    """Compose and check every job's config before anything starts: a bad key or value in the 7th sweep point
    stops the command now, not after six jobs ran. Data problems (a missing folder) are found by the job. Returns
    each job's plan and config (without its ``hydra`` node)."""
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
            _exit(f"{where}: {exc}")
        except (HydraException, OmegaConfBaseException) as exc:
            _exit(f"{where}: {one_line(exc)}")
    return checked


def sweep_overrides(overrides: list[str], sweeper_params: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """All overrides of the sweep (command line and ``hydra.sweeper.params``) and the keys swept over."""
    everything = [f"{k}={v}" for k, v in (sweeper_params or {}).items()] + list(overrides)
    parsed = OverridesParser.create().parse_overrides(everything)
    varying = list(dict.fromkeys(o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()))
    return everything, varying


def hook(method: Callable[..., None]) -> Callable[..., None]:
    """Hydra turns an exception in a callback into a warning and exits 0: here it ends the command with status 1."""

    @functools.wraps(method)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception as exc:
            interrupts.stop_if_interrupted(exc)  # a clean-up that failed as a Ctrl-C unwound: that Ctrl-C
            traceback.print_exc()
            print(f"{PROG}: the sweep's {method.__name__} failed (above): a bug, please report it", file=sys.stderr,
                  flush=True)
            sys.exit(1)

    return wrapped


class MlflowSweep(Callback):
    """Registered in ``conf/config.yaml`` under ``hydra.callbacks``."""

    def __init__(self) -> None:
        self.parent: Tracker | None = None
        self.handle: SweepHandle | None = None
        self.tuning = False
        self.composed: ComposedConfigs | None = None
        self.runner: Any = None  # Hydra's run_job, while the launcher runs the jobs leanly
        self.importer: threading.Thread | None = None  # the end's imports, while the jobs run in this process
        self.jobs_here = 0  # jobs this process runs one after another (said how long after the first)
        self.first_started = 0.0

    @hook
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        progress.configure(bool(config.get("quiet", False)))  # the driver's own bars (reading runs back)
        launch_dir = Path(config.hydra.runtime.cwd)
        sweep_dir = (launch_dir / str(config.hydra.sweep.dir)).resolve()
        overrides, varying = sweep_overrides(list(config.hydra.overrides.task), config.hydra.sweeper.get("params"))
        jobs = job_override_lists(config, overrides)
        launcher = config.hydra.runtime.choices.get("hydra/launcher", "basic")
        in_process = jobs is not None and launcher in IN_PROCESS_LAUNCHERS  # the jobs run here, one after another
        checked: list[tuple[JobPlan, DictConfig]] = []
        if jobs is not None:
            self.composed = loader_memo()  # each job's config composed once: validated, then launched
            self.runner = run_jobs_leanly()
            checked = validate_jobs(config, jobs)
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
            check_reachable(uri)  # a closed port: one line now, before the first corpus is read
        except InputError as exc:
            _exit(str(exc))
        if in_process and checked:  # every job checked: the store may be created now
            open_ahead(uri, config.tracking.experiment)  # opened by the store process while the corpus is read:
            plan, job_cfg = checked[0]
            load_ahead(plan.corpus, job_cfg.corpus)  # the first job finds its corpus loaded
            for plan, _ in checked:  # each job takes its plan instead of checking its config again
                plan_ahead(plan, launch_dir)
        swept = [o for o in overrides if o.partition("=")[0].lstrip("+~") in varying]
        several = any(key.startswith("corpus") for key in varying)
        name = run_name(config.get("study") or " ".join(swept) or sweep_dir.name,
                        "several corpora" if several else configured_corpus(config.corpus))
        tags = {**config_tags(config), TAG_KIND: KIND_SWEEP, TAG_SWEEP_DIR: str(sweep_dir),
                TAG_OVERRIDES: " ".join(overrides),
                TAG_LAUNCHER: str(launcher)}
        try:
            self.parent, experiment_id, resumed = open_parent(uri, config.tracking.experiment, sweep_dir, name, tags)
        except InputError as exc:  # a refused URI, an unreachable server, a busy folder: say so, start nothing
            _exit(str(exc))
        if resumed:
            print(f"{PROG}: resuming the sweep in {sweep_dir} (parent run {self.parent.run_id}): jobs already "
                  f"logged are skipped", flush=True)
        hydra_args = [o for o in config.hydra.overrides.hydra if not str(o).startswith(("hydra.sweep.dir=",
                                                                                             "hydra.mode="))]
        resume = commands.module("pipeline", "-m", *map(str, hydra_args), *map(str, config.hydra.overrides.task),
                                 f"hydra.sweep.dir={sweep_dir}")
        resume = [redact_text(arg) for arg in resume]  # a secret given on the command line is typed again
        points = None if jobs is None else [[redact_text(o) for o in job] for job in jobs]
        self.handle = SweepHandle(experiment_id, self.parent.run_id, varying, points, resume, resumed)
        self.handle.write(sweep_dir)
        interrupts.watch(sweep_dir=sweep_dir, resume=resume)
        self.sweep_dir = sweep_dir
        self.uri = uri
        self.title = f"{'Tuning' if self.tuning else 'Sweep'} {name}"
        self.overrides = " ".join(overrides) or "(none)"
        if in_process:
            start_drawer([_warm_up_plots])  # on the second core, idle while the first job computes
            self.importer = threading.Thread(target=_import_the_ends_modules, name="rankscope-end-imports",
                                             daemon=True)
        collector.resume()  # the driver's start-up, frozen; its jobs may run in other processes (joblib)
        self.jobs_here = len(jobs) if in_process and jobs is not None else 0  # jobs this process runs, in turn
        self.first_started = time.perf_counter()
        self.sweep_args = overrides  # as parsed: the tuning driver rebuilds the untuned and tuned configs from them
        atexit.register(self._abandoned)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """After the first job of a sweep run in this process: the end's imports start on a thread (see
        :func:`_import_the_ends_modules`)."""
        if self.importer is not None and self.importer.ident is None:
            self.importer.start()
        if self.jobs_here > 1:
            say_how_long(self.jobs_here, time.perf_counter() - self.first_started)
            self.jobs_here = 0  # said once

    @hook
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finish_waiting()  # the last job's record, once its plots are drawn
        known = logged_tables(self.sweep_dir) if self.parent is not None and self.handle is not None else {}
        background.settle()  # every job's run logged (or said not to be) before the sweep's end reads them
        forget_plans_ahead()
        if self.composed is not None:
            compose_normally(self.composed.loader)
            run_jobs_normally(self.runner)
        if self.parent is None or self.handle is None:
            return
        try:
            if self.tuning:
                error = close_tuning(config, self.parent, self.handle, self.sweep_args, self.sweep_dir, self.title,
                                     self.uri)
                summary = None
            else:
                summary, error = close_sweep(self.parent, self.handle.experiment_id, self.sweep_dir, self.uri,
                                             config.metrics, self.title, config.diagnosis, self.overrides, known)
        except STORE_ERRORS as exc:  # the store stopped answering: the jobs' records are safe
            self.parent = None
            atexit.unregister(self._abandoned)
            _exit(f"the tracking store {self.uri} did not answer at the end of the sweep ({store_error(exc)}); "
                  f"every computed result is saved under {self.sweep_dir}: once the store answers, run: "
                  f"{commands.line(commands.module('pipeline.sync', str(self.sweep_dir)))}")
        parent, self.parent = self.parent, None
        atexit.unregister(self._abandoned)
        status = 0 if summary is None else run_sweep_gate(config, summary, parent, self.handle.experiment_id,
                                                           self.sweep_dir)
        if error:
            _exit(error)
        if status:
            sys.exit(status)

    def _abandoned(self) -> None:
        """At exit, a sweep that never reached its end: its parent and any child left RUNNING are closed FAILED
        (Ctrl-C and SIGTERM no longer interrupt this)."""
        if self.parent is not None and self.handle is not None:
            interrupts.shielded()
            finish_waiting()  # a job whose results were all computed is logged, not run again by the resume
            abandon(self.parent, self.handle.experiment_id)


END_MODULES = ("scipy.special", "threadpoolctl")  # imported by the sweep's end alone


def _import_the_ends_modules() -> None:
    """Import what only the sweep's end uses (scipy.special for the question set's sensitivity: 0.13 s; the BLAS
    thread limit; PIL's image plugins, loaded by the first PNG this process saves) on a thread started once the
    first job has run: it runs while the driver waits for its drawing copy between jobs, not at the end, where it
    was on the driver's path. A failure here changes nothing: the end imports them itself."""
    for name in END_MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):
        from PIL import Image

        Image.preinit()


def _warm_up_plots() -> None:
    from pipeline.reports.html import DPI
    from pipeline.reports.run_plots import warm_up

    warm_up(DPI)


LONG_SWEEP_S = 60.0  # a sweep whose other jobs may take longer than this says so after its first


def say_how_long(jobs: int, first: float) -> None:
    """After a sweep's first job, when the others, at its pace, would take more than a minute: how long, at most
    (later jobs reuse the first's corpus, term counts and embeddings, so they are usually quicker)."""
    rest = first * (jobs - 1)
    if rest > LONG_SWEEP_S:
        minutes = f"{rest / 60:.0f} min" if rest < 5400 else f"{rest / 3600:.1f} h"
        print(f"{PROG}: {jobs} jobs; the first took {first:.0f} s, so the other {jobs - 1} may take up to about "
              f"{minutes} (they reuse its corpus, term counts and embeddings, so usually less)", file=sys.stderr,
              flush=True)


def _exit(reason: str) -> None:
    print(f"{PROG}: {redact_text(reason)}".replace("\n", " "), file=sys.stderr, flush=True)
    sys.exit(1)
