"""Resuming a sweep in its own folder: one process at a time, and the same parent MLflow run as before.

Run a sweep again with the same ``hydra.sweep.dir`` (a scheduled sweep always does: one folder per schedule and
date) and it goes on where it stopped: the parent run recorded in the folder's ``mlflow_sweep.json`` is reopened,
jobs whose result it already holds are skipped (``pipeline.job.run``), failed, missing or interrupted ones run.
"""

from __future__ import annotations

import fcntl
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from metrics.errors import InputError
from pipeline.common import commands
from pipeline.common.names import LOCK_FILE
from pipeline.job.context import SweepHandle
from pipeline.tracking.records import JobRecord
from pipeline.tracking.runs import Tracker
from pipeline.tracking.store import Store

_HELD: dict[Path, IO[str]] = {}  # here, not on the Hydra callback: joblib pickles the callback to its workers


def lock_sweep(sweep_dir: Path) -> None:
    """Hold the sweep folder for this process (until it exits or releases it): a second sweep or sync on the same
    folder stops at once instead of logging the same jobs alongside."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if sweep_dir in _HELD:
        return
    handle = (sweep_dir / LOCK_FILE).open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise InputError(f"another rankscope process is running the sweep in {sweep_dir}; wait for it to end") from None
    _HELD[sweep_dir] = handle


def release_sweep(sweep_dir: Path) -> None:
    handle = _HELD.pop(sweep_dir, None)
    if handle is not None:
        handle.close()


def reopen_parent(client: Any, experiment_id: str, sweep_dir: Path) -> Tracker | None:
    """The parent run an earlier attempt of this sweep left in ``sweep_dir``, RUNNING again; None if there is none
    (a new folder, another store or experiment, a deleted run)."""
    previous = SweepHandle.read(sweep_dir)
    if previous is None or previous.experiment_id != experiment_id:
        return None
    return Tracker.reopen(client, previous.parent_run_id, experiment_id)


def open_parent(uri: str, experiment: str, sweep_dir: Path, name: str,
                tags: dict[str, str]) -> tuple[Tracker, str, bool]:
    """The sweep's parent run: the store opened (created once), the folder held, and the parent an earlier attempt
    left in the folder reopened, else a new one started. Returns it, the experiment's id, and whether it resumed.
    An InputError (a refused URI, an unreachable server, a busy folder) before anything starts."""
    store = Store.open(uri, experiment)
    lock_sweep(sweep_dir)
    parent = reopen_parent(store.client, store.experiment_id, sweep_dir)
    if parent is not None:
        return parent, store.experiment_id, True
    return Tracker.start(store.client, store.experiment_id, name, tags), store.experiment_id, False


@dataclass(frozen=True)
class SweepState:
    """Which of a sweep's points are done, read from its job folders' records (``<sweep>/<job>/record.json``)."""

    points: int | None  # how many points the sweep has (None: an optimiser decides as it goes)
    logged: frozenset[int]  # finished, and their run logged
    pending: frozenset[int]  # finished, saved, not logged yet (``python -m pipeline.sync`` logs them)
    failed: frozenset[int]  # ended on bad input (a FAILED run)

    @property
    def missing(self) -> list[int]:
        """Points that never finished: not started, or interrupted before their results were saved."""
        done = self.logged | self.pending | self.failed
        return [] if self.points is None else [i for i in range(self.points) if i not in done]

    @property
    def complete(self) -> bool:
        return self.points is not None and not self.missing and not self.pending

    def counts(self) -> str:
        """``3 of 8 points finished and logged`` (and what else is where)."""
        total = "?" if self.points is None else str(self.points)
        parts = [f"{len(self.logged)} of {total} points finished and logged"]
        if self.pending:
            parts.append(f"{len(self.pending)} finished but not logged")
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        if self.missing:
            parts.append(f"{len(self.missing)} not finished")
        return ", ".join(parts)


def sweep_state(sweep_dir: Path, handle: SweepHandle | None = None) -> SweepState:
    handle = handle or SweepHandle.read(sweep_dir)
    logged, pending, failed = set(), set(), set()
    for folder in sweep_dir.iterdir() if sweep_dir.is_dir() else ():
        if not folder.name.isdigit():
            continue
        record = JobRecord.load(folder)
        if record is None:
            continue
        job = int(folder.name)
        if record.error is not None:
            failed.add(job)
        elif record.pending:
            pending.add(job)
        else:
            logged.add(job)
    points = len(handle.points) if handle is not None and handle.points is not None else None
    return SweepState(points, frozenset(logged), frozenset(pending - logged), frozenset(failed - logged - pending))


def sync_command(sweep_dir: Path) -> str:
    """The command that logs what the sweep's jobs computed but could not log (and closes the sweep again)."""
    return commands.line(commands.module("pipeline.sync", str(sweep_dir)))
