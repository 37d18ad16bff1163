"""Hydra callbacks that tie a real sweep's stop to an event of the sweep, not to a time or to a file seen from outside:
what was done when the stop came is then the same on a quiet or a loaded machine.

- :class:`StopAfterJob` stops the sweep it runs in with SIGTERM when job ``job`` ends, as ``kill`` would
  (``+hydra.callbacks.stop._target_=tests.pipeline.sweep.stopper.StopAfterJob +hydra.callbacks.stop.job=1``).
- :class:`HoldAtJob` holds the sweep as job ``job`` starts, while a file says so: a test's own Ctrl-C or SIGTERM then
  finds the sweep still running, however fast the jobs before it went (on a quiet machine a 12-point help-desk sweep
  logs its first job about a second before it ends).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

ARGS = "+hydra.callbacks.stop._target_=tests.pipeline.sweep.stopper.StopAfterJob"
HOLD_ARGS = "+hydra.callbacks.hold._target_=tests.pipeline.sweep.stopper.HoldAtJob"
HOLD = "hold"  # while this file is in the folder held, the held job does not start
HOLDING = "holding"  # the held job's signal that it waits
HOLD_LIMIT_S = 600  # a test that never releases its sweep does not leave it waiting forever


def stop_after(job: int) -> list[str]:
    """The overrides that stop a sweep with SIGTERM once its job ``job`` has ended."""
    return [ARGS, f"+hydra.callbacks.stop.job={job}"]


class StopAfterJob(Callback):
    def __init__(self, job: int) -> None:
        self.job = job

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        if int(job_return.hydra_cfg.hydra.job.num) == self.job:
            os.kill(os.getpid(), signal.SIGTERM)  # handled at once, here, in the main thread


def hold_at(job: int, folder: Path) -> list[str]:
    """The overrides that hold a sweep as its job ``job`` starts, while ``folder/hold`` exists (made here): the job
    then touches ``folder/holding`` and waits. Remove ``hold`` to let it go on; a resume is not held."""
    (folder / HOLD).touch()
    return [HOLD_ARGS, f"+hydra.callbacks.hold.job={job}", f"+hydra.callbacks.hold.folder={folder}"]


def released(folder: Path) -> None:
    """Let a held sweep (or its resume) go on."""
    (folder / HOLD).unlink(missing_ok=True)


class HoldAtJob(Callback):
    def __init__(self, job: int, folder: str) -> None:
        self.job = job
        self.folder = Path(folder)

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        if int(config.hydra.job.num) != self.job or not (self.folder / HOLD).exists():
            return
        (self.folder / HOLDING).touch()
        deadline = time.monotonic() + HOLD_LIMIT_S
        while (self.folder / HOLD).exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # a stop lands here, in the main thread
