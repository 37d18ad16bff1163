"""The regression gate at the end of a sweep (``gate=...``), run only on a complete sweep whose every result is
logged: the best system might be among the missing ones."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pipeline.analysis.summary import SweepSummary
from pipeline.common.names import PROG
from pipeline.job.context import config_tags
from pipeline.sweep.resume import sweep_state, sync_command
from pipeline.tracking.runs import Tracker


def run_sweep_gate(config: Any, summary: SweepSummary, parent: Tracker, experiment_id: str, sweep_dir: Path) -> int:
    """``gate=...``: the gate on the sweep's best (or named) system; its exit status (0 when there is no gate).

    Not run while some job's results are not logged: the best system might be among them."""
    if config.get("gate") is None:
        return 0
    from pipeline.decisions.gate import EXIT_ERROR, gate_sweep

    state = sweep_state(sweep_dir)
    if state.pending:
        print(f"{PROG}: gate not run: {len(state.pending)} job(s) are not logged yet; {sync_command(sweep_dir)} "
              f"logs them and runs the gate", file=sys.stderr, flush=True)
        return EXIT_ERROR
    if state.missing:
        print(f"{PROG}: gate not run: the sweep is not complete ({state.counts()}): a gate never judges a partial "
              f"sweep", file=sys.stderr, flush=True)
        return EXIT_ERROR
    return gate_sweep(parent.client, experiment_id, parent.run_id, summary.finished, config.gate, sweep_dir,
                      config_tags(config)).status
