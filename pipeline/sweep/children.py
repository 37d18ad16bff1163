"""A sweep's child runs as MLflow holds them, any its jobs left RUNNING closed FAILED first (their process is
gone)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipeline.analysis.summary import SystemRun
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.readback import child_runs
from pipeline.tracking.runs import Tracker

if TYPE_CHECKING:
    import pandas as pd


def close_children(client: MlflowClient, systems: list[SystemRun],
                   reason: str = "the job's process ended without closing it") -> None:
    """A child still RUNNING now lost its process: record that it failed, and why."""
    for system in systems:
        if system.status == "RUNNING":
            Tracker(client, system.run_id).finish(error=reason)
            system.status = "FAILED"


def children_closed(parent: Tracker, experiment_id: str, reason: str | None = None,
                    known: Mapping[str, pd.DataFrame] | None = None, tables: bool = True) -> list[SystemRun]:
    """The parent's children as MLflow holds them (with their per-question tables, unless not ``tables``), any left
    RUNNING closed FAILED first."""
    systems = child_runs(parent.client, experiment_id, parent.run_id, known, tables)
    close_children(parent.client, systems, *([reason] if reason else []))
    return systems
