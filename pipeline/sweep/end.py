"""The end of a sweep as its driver meets it: the parent closed by the summary (or, for a tuning sweep, by the
held-out evaluation), then the gate; or, for a sweep that never reached its end, closed FAILED at exit."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from pipeline.common import interrupts
from pipeline.common.names import PROG
from pipeline.job.context import SweepHandle
from pipeline.job.run import finish_waiting
from pipeline.sweep.children import children_closed
from pipeline.sweep.close import close_sweep
from pipeline.sweep.gating import run_sweep_gate
from pipeline.sweep.holdout import close_tuning
from pipeline.sweep.resume import sync_command
from pipeline.tracking.runs import Tracker
from pipeline.tracking.store import STORE_ERRORS, store_error

if TYPE_CHECKING:
    import pandas as pd

    from pipeline.analysis.summary import SweepSummary

class StoreStopped(Exception):
    """The tracking store stopped answering at the sweep's end; the line says how to log what waits."""


def close_parent(config: DictConfig, parent: Tracker, handle: SweepHandle, sweep_args: list[str], sweep_dir: Path,
                 title: str, uri: str, overrides: str, known: Mapping[str, pd.DataFrame],
                 tuning: bool) -> tuple[SweepSummary | None, str | None]:
    """Close the parent: a tuning sweep's by the held-out evaluation (no summary), any other's by its summary.
    Returns the summary and why the sweep failed (or None). Raises :class:`StoreStopped` when the store stopped
    answering: the jobs' records are safe in the sweep folder."""
    try:
        if tuning:
            return None, close_tuning(config, parent, handle, sweep_args, sweep_dir, title, uri)
        return close_sweep(parent, handle.experiment_id, sweep_dir, uri, config.metrics, title, config.diagnosis,
                           overrides, known)
    except STORE_ERRORS as exc:
        raise StoreStopped(f"the tracking store {uri} did not answer at the end of the sweep ({store_error(exc)}); "
                           f"every computed result is saved under {sweep_dir}: once the store answers, run: "
                           f"{sync_command(sweep_dir)}") from None


def gate_status(config: DictConfig, summary: SweepSummary | None, parent: Tracker, handle: SweepHandle,
                sweep_dir: Path) -> int:
    """``gate=...`` on a summarised sweep: its exit status (0 without a gate, and for a tuning sweep)."""
    return 0 if summary is None else run_sweep_gate(config, summary, parent, handle.experiment_id, sweep_dir)


def abandon(parent: Tracker, experiment_id: str) -> None:
    """A sweep that stopped before its end, at exit (Ctrl-C and SIGTERM no longer interrupt this): a job whose
    results were all computed is logged, not run again by the resume; its children still RUNNING and the parent
    are closed FAILED. It reports rather than raises."""
    interrupts.shielded()
    finish_waiting()
    try:
        children_closed(parent, experiment_id, "the sweep stopped before this job ended", tables=False)
        parent.finish(error="the sweep stopped before all jobs ended")
    except Exception as exc:
        print(f"{PROG}: could not close the sweep's MLflow runs ({store_error(exc)}): the resume closes them",
              file=sys.stderr, flush=True)
