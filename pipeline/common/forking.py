"""Whether work can be handed to a forked copy of the process: ``os.fork`` exists and a second core is there to run
it (on one core a copy only adds its work to the process's). Used by the plots drawn beside a job and by the store
process of a single run."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def second_core() -> bool:
    return hasattr(os, "fork") and cores() >= 2
