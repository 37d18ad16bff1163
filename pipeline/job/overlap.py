"""A sweep job's tail (diagnosis, files, plots, ``record.json``) written by a forked copy while the next job computes.

In a sweep on the basic launcher, a job's ranking and scores are done in a fraction of its time: the rest is its
diagnosis and the files and plots it writes. The driver forks a copy of itself for that tail and goes on with the
next job; the copy writes the job's folder exactly as the job would have (same code, same memory) and ends. The
driver logs the job's saved record when the next job starts, or at the end of the sweep (:func:`settle`): at most
one tail runs at a time, on the second core.

The first tail of a process is written in-process: it fills the per-corpus statistics the diagnosis keeps across
jobs (forked copies inherit them; what a copy adds is lost with it). A copy that fails leaves the tail to the job,
in-process, with its usual error handling. The copy ignores Ctrl-C (the terminal sends it to the whole group): an
interrupted driver waits for its copy (:func:`wait`), so the job's folder is whole and a resume logs it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.common.forking import second_core

_PENDING: list[Tail] = []
_WARM: list[bool] = []  # a tail was written in this process: the diagnosis's per-corpus statistics are filled


@dataclass
class Tail:
    pid: int
    read_end: int
    finish: Callable[[bytes | None], None]  # called with what the copy sent, or None if it failed


def ready() -> bool:
    """A tail may be handed off now: ``os.fork`` exists, a second core is free, ``RANKSCOPE_OVERLAP`` is not ``0``,
    and a tail was written in this process already (:func:`warmed`)."""
    return bool(_WARM) and second_core() and os.environ.get("RANKSCOPE_OVERLAP", "1") != "0"


def warmed() -> None:
    """A tail was written in this process: the diagnosis's per-corpus statistics are there for copies to inherit."""
    _WARM[:] = [True]


def hand_off(write: Callable[[], bytes], finish: Callable[[bytes | None], None]) -> None:
    """Run ``write()`` in a forked copy and, later in this process, ``finish`` with what it returned (None if the
    copy failed)."""
    settle()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: write the tail, send its text, end without any of the driver's exit work
        status = 1
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):  # the folder is written whole whatever stops the driver
                signal.signal(sig, signal.SIG_IGN)
            os.close(read_end)
            data = write()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    _PENDING.append(Tail(pid, read_end, finish))


def _collect(tail: Tail) -> bytes | None:
    """What the copy sent, once it ended; None if it failed."""
    chunks = []
    with os.fdopen(tail.read_end, "rb") as pipe:
        while chunk := pipe.read(1 << 16):
            chunks.append(chunk)
    _, status = os.waitpid(tail.pid, 0)
    return b"".join(chunks) if os.waitstatus_to_exitcode(status) == 0 else None


def settle() -> None:
    """Finish the tail in progress, if any: wait for its copy, then log (``finish``) in this process."""
    while _PENDING:
        tail = _PENDING.pop(0)
        tail.finish(_collect(tail))


def wait() -> None:
    """Wait for a copy still writing (an interrupted driver: the job's folder is then whole); log nothing."""
    while _PENDING:
        tail = _PENDING.pop(0)
        with contextlib.suppress(OSError):
            _collect(tail)
