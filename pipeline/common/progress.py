"""Progress bars for the slow steps of a job (loading, indexing, ranking, bootstrap), and only for those.

A bar appears once its step has run for :data:`DELAY` seconds, on a terminal (stderr a TTY), in a process that
owns that terminal: never in joblib, submitit or Ray workers (several processes drawing bars at once garble
each other), and never after ``quiet=true`` (:func:`configure`). Everything else about the job is the same
with or without bars.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from tqdm import tqdm

DELAY = 2.0  # seconds a step runs before its bar is drawn
IN_PROCESS_LAUNCHERS = {"basic"}  # launchers that run jobs in the process that owns the terminal

T = TypeVar("T")
_enabled = True


def configure(quiet: bool, launcher: str | None = None) -> None:
    """Bars on or off for this process: off when ``quiet`` or when jobs run in a launcher's worker processes."""
    global _enabled
    _enabled = not quiet and (launcher is None or launcher in IN_PROCESS_LAUNCHERS)


def bar(total: float | None, desc: str, unit: str = "it", unit_scale: bool = False) -> tqdm:
    """A delayed bar; ``disable=None`` lets tqdm stay silent when stderr is not a terminal."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, delay=DELAY, leave=False,
                disable=None if _enabled else True, file=sys.stderr, dynamic_ncols=True)


@contextmanager
def ticker(total: float | None, desc: str, unit: str = "it",
           unit_scale: bool = False) -> Iterator[Callable[[int], object]]:
    """``with ticker(n, 'ranking', 'question') as tick: ... tick(done_now)``; the bar closes on exit."""
    progress = bar(total, desc, unit, unit_scale)
    try:
        yield progress.update
    finally:
        progress.close()


def iterate(items: Iterable[T], total: float | None, desc: str, unit: str) -> Iterator[T]:
    with ticker(total, desc, unit, unit_scale=True) as tick:
        for item in items:
            yield item
            tick(1)
