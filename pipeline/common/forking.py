"""Whether work can be handed to a forked copy of the process: ``os.fork`` exists and a second core is there to run
it (on one core a copy only adds its work to the process's). Used by the plots drawn beside a job and by the store
process of a single run; and numpy's BLAS kept to one thread while a copy works beside."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


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
