"""The sweep's driver side, as a Hydra callback: a short sequence, each step in the module that owns it.

``on_multirun_start`` runs once in the driver before any job: the sweep folder resolved for every job and a Ray
cluster joined (:mod:`~pipeline.sweep.placement`), every job composed and checked
(:mod:`~pipeline.sweep.jobs`), a tuning sweep's search checked (:mod:`~pipeline.sweep.tuning`), the store reached,
then opened while the first corpus is read ahead (:mod:`~pipeline.sweep.ahead`; once, so parallel jobs never race to
create SQLite), the parent run opened (or reopened: :mod:`~pipeline.sweep.resume`) and the hand-off file the jobs
read written (:mod:`~pipeline.sweep.parent`), the drawing copy started (:mod:`~pipeline.sweep.pace`).
``on_multirun_end`` settles the jobs, then closes the parent (:mod:`~pipeline.sweep.end`): by the summary built from
what MLflow holds (joblib workers report nothing back to the driver: :mod:`~pipeline.sweep.close`), or for a tuning
sweep (``hydra/sweeper=optuna``) by the held-out evaluation (:mod:`~pipeline.sweep.holdout`); then the regression
gate when ``gate=...`` is set (the command's exit status is the gate's). If the sweep dies before that, an exit
handler closes the parent FAILED: it is never left RUNNING.

A sweep started again in the same folder (``hydra.sweep.dir``) resumes: same parent run, finished jobs skipped
(``pipeline.sweep.resume``). If the store stops answering, the jobs' results wait in their folders for
``python -m pipeline.sync`` (``pipeline.tracking.records``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.common import collector, interrupts, progress
from pipeline.common.names import PROG
from pipeline.common.redact import one_line, redact_text

if TYPE_CHECKING:
    from pipeline.job.context import SweepHandle
    from pipeline.sweep.jobs import LeanLaunch
    from pipeline.tracking.runs import Tracker

# Hydra makes this callback for a single run too (``hydra.callbacks``), where none of its sweep hooks is called: the
# sweep's modules are imported by the hooks that use them, so that a run does not load them (the sweep's end alone
# drew in matplotlib: half a second of a help-desk run).


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
        self.lean: LeanLaunch | None = None  # each job composed once, while the jobs run
        self.importer: threading.Thread | None = None  # the end's imports, while the jobs run in this process
        self.jobs_here = 0  # jobs this process runs one after another (said how long after the first)
        self.first_started = 0.0

    @hook
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from pipeline.sweep.ahead import prepare_ahead, reachable_store
        from pipeline.sweep.jobs import SweepJobs
        from pipeline.sweep.pace import start_beside
        from pipeline.sweep.parent import open_sweep, parent_name
        from pipeline.sweep.tuning import check_tuning, is_tuning

        progress.configure(bool(config.get("quiet", False)))  # the driver's own bars (reading runs back)
        launch_dir = Path(config.hydra.runtime.cwd)
        self.sweep_dir = (launch_dir / str(config.hydra.sweep.dir)).resolve()
        with refused():  # each job's config composed once, its folder under the sweep's: checked now, then launched
            jobs = SweepJobs.read(config, self.sweep_dir)
        self.lean = jobs.lean
        self.tuning = is_tuning(config.hydra)
        with refused(HydraException, OmegaConfBaseException):
            if self.tuning:
                check_tuning(config, launch_dir, jobs.varying)
        with refused():
            self.uri = reachable_store(config, launch_dir)  # a closed port: one line now, before any corpus is read
            jobs.join_cluster(config)  # a cluster that refuses: one line now, before the parent run opens
        if jobs.in_process:  # every job checked: the store may be created now, while the first corpus is read
            prepare_ahead(self.uri, config.tracking.experiment, jobs.checked, launch_dir)
        name = parent_name(config, jobs, self.sweep_dir)
        with refused():  # a refused URI, an unreachable server, a busy folder: say so, start nothing
            self.parent, self.handle = open_sweep(config, jobs, self.uri, self.sweep_dir, name)
        self.title = f"{'Tuning' if self.tuning else 'Sweep'} {name}"
        self.overrides = " ".join(jobs.overrides) or "(none)"
        if jobs.in_process:
            self.importer = start_beside()  # the drawing copy, on the second core, idle while the first job computes
        collector.resume()  # the driver's start-up, frozen; its jobs may run in other processes (joblib)
        self.jobs_here = len(jobs.points or []) if jobs.in_process else 0  # jobs this process runs, in turn
        self.first_started = time.perf_counter()
        self.sweep_args = jobs.overrides  # as parsed: the tuning driver rebuilds the untuned and tuned configs
        atexit.register(self._abandoned)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """After the first job of a sweep run in this process: the end's imports start on a thread (see
        :func:`pipeline.sweep.pace.start_beside`)."""
        if self.importer is not None and self.importer.ident is None:
            self.importer.start()
        if self.jobs_here > 1:
            from pipeline.sweep.pace import say_how_long

            say_how_long(self.jobs_here, time.perf_counter() - self.first_started)
            self.jobs_here = 0  # said once

    @hook
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from pipeline.sweep.ahead import jobs_settled
        from pipeline.sweep.end import StoreStopped, close_parent, gate_status

        started = self.parent is not None and self.handle is not None
        known = jobs_settled(self.sweep_dir if started else None)
        if self.lean is not None:
            self.lean.end()
        if self.parent is None or self.handle is None:
            return
        try:
            summary, error = close_parent(config, self.parent, self.handle, self.sweep_args, self.sweep_dir,
                                          self.title, self.uri, self.overrides, known, self.tuning)
        except StoreStopped as exc:  # the jobs' records are safe
            self._closed()
            _exit(str(exc))
        status = gate_status(config, summary, self._closed(), self.handle, self.sweep_dir)
        if error:
            _exit(error)
        if status:
            sys.exit(status)

    def _closed(self) -> Tracker:
        """The parent, closed: no longer the exit handler's to close."""
        parent, self.parent = self.parent, None
        atexit.unregister(self._abandoned)
        return parent

    def _abandoned(self) -> None:
        """At exit, a sweep that never reached its end: its parent and any child left RUNNING are closed FAILED."""
        if self.parent is not None and self.handle is not None:
            from pipeline.sweep.end import abandon

            abandon(self.parent, self.handle.experiment_id)


@contextlib.contextmanager
def refused(*also: type[Exception]) -> Iterator[None]:
    """Bad input (an InputError, or one of ``also``, told in one line) ends the command with status 1, before any
    job starts."""
    try:
        yield
    except InputError as exc:
        _exit(str(exc))
    except also as exc:
        _exit(one_line(exc))


def _exit(reason: str) -> None:
    print(f"{PROG}: {redact_text(reason)}".replace("\n", " "), file=sys.stderr, flush=True)
    sys.exit(1)
