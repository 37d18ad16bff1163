"""A Hydra callback that stops the sweep it runs in at a chosen point: SIGTERM sent to its own process when job
``job`` ends. Added on the command line (``+hydra.callbacks.stop._target_=tests.pipeline.sweep.stopper.StopAfterJob
+hydra.callbacks.stop.job=1``), it stops a real sweep as ``kill`` would, but at an event of the sweep, not after a time
or once a file has been seen: what was done when the stop came is the same on a quiet or a loaded machine."""

from __future__ import annotations

import os
import signal
from typing import Any

from hydra.experimental.callback import Callback

ARGS = "+hydra.callbacks.stop._target_=tests.pipeline.sweep.stopper.StopAfterJob"


def stop_after(job: int) -> list[str]:
    """The overrides that stop a sweep with SIGTERM once its job ``job`` has ended."""
    return [ARGS, f"+hydra.callbacks.stop.job={job}"]


class StopAfterJob(Callback):
    def __init__(self, job: int) -> None:
        self.job = job

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        if int(job_return.hydra_cfg.hydra.job.num) == self.job:
            os.kill(os.getpid(), signal.SIGTERM)  # handled at once, here, in the main thread
