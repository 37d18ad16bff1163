"""A ``python -m pipeline`` command stopped by Ctrl-C or SIGTERM: one line saying what it saved and the command that
goes on from there (a sweep's resume, a single run's sync), then exit 130 or 143."""

from __future__ import annotations

import contextlib
import sys

from pipeline.common import commands, interrupts
from pipeline.common.names import PROG
from pipeline.job.run import finish_waiting
from pipeline.tracking import background


def interrupted(exc: KeyboardInterrupt) -> None:
    """One line: what was saved and how to go on; then exit 130 (Ctrl-C) or 143 (SIGTERM). The sweep's exit
    handler closes its runs FAILED after this; a second Ctrl-C no longer interrupts that."""
    interrupts.shielded()
    with contextlib.suppress(Exception):  # a job of the sweep that had computed everything is logged first
        finish_waiting()
        background.settle()
    code, word = interrupts.status(exc)
    print(f"{PROG}: stopped by {word}: {saved()}", file=sys.stderr, flush=True)
    sys.exit(code)


def saved() -> str:
    """What an interrupted command leaves behind, and the command that goes on from there."""
    watched = interrupts.WATCHED
    if watched.sweep_dir is not None:
        from pipeline.sweep.resume import sweep_state
        from pipeline.tracking.store import any_not_answering

        state = sweep_state(watched.sweep_dir)
        down = any_not_answering()
        runs = (f"the tracking store does not answer ({down}): the resume closes the runs still open" if down else
                "the runs still open are closed FAILED")
        return f"{state.counts()} (in {watched.sweep_dir}); {runs}. Resume with: {commands.line(watched.resume)}"
    if watched.output_dir is not None:
        from pipeline.tracking.records import JobRecord

        record = JobRecord.load(watched.output_dir)
        if record is not None and record.pending:
            return (f"the results were saved in {watched.output_dir} but not logged; log them with: "
                    f"{commands.line(commands.module('pipeline.sync', str(watched.output_dir)))}")
        if record is not None:
            return f"the run was logged ({record.run_id}) before the stop"
    return "the job had not finished: nothing was saved or logged; run the command again"
