"""Whether work can be handed to a forked copy of the process: ``os.fork`` exists and a second core is there to run
it (on one core a copy only adds its work to the process's). Used by the plots drawn beside a job and by the store
process of a single run; how much such a copy yields to the command's own process; and numpy's BLAS kept to one
thread while a copy works beside."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

# How much the forked helpers (the store process, the drawing copy) yield to the command's own process, once their
# start-up is done: the main process sets a sweep's pace, and each helper's work is needed only later (a job's files and
# record when the next job has computed). At equal priority the drawing copy took the driver's core whenever it and the
# store process were both runnable (a 12-point SciFact sweep: 0.17-0.24 s longer, median of 16 turn-about pairs).
HELPER_NICENESS = 5


def yield_to_the_command() -> None:
    """Lower this (helper) process's priority by :data:`HELPER_NICENESS`; where that is refused, nothing changes."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(HELPER_NICENESS)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def second_core() -> bool:
    return hasattr(os, "fork") and cores() >= 2


@contextlib.contextmanager
def one_blas_thread(when: bool = True) -> Iterator[None]:
    """numpy's BLAS on one thread for the block, ``when`` a forked copy is busy on the other core: a second BLAS
    thread would wait for that core at every product (the end of a sweep's comparisons: 0.11 s alone, 0.53 s with
    the copy drawing beside, 0.17 s on one thread). Without threadpoolctl (scikit-learn's dependency), unchanged."""
    if not when:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - installed with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
