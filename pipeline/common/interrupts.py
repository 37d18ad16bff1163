"""Ctrl-C and SIGTERM: the process stops as it would on Ctrl-C, and the command says in one line what was saved.

SIGTERM (cron, systemd, CI stopping a job) raises :class:`Terminated`, a ``KeyboardInterrupt``, so both unwind the
same way: every ``finally`` runs, a sweep's exit handler closes its runs FAILED. What the command was doing is
registered here as it goes (:func:`watch`), so its entry point can say where the results are and how to resume.
Exit statuses are the shell's usual ones: 130 after Ctrl-C, 143 after SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM received: stop as on Ctrl-C."""


@dataclass
class Watched:
    """What the running command is doing: a sweep (its folder and the command that resumes it) or one run."""

    sweep_dir: Path | None = None
    output_dir: Path | None = None
    resume: list[str] = field(default_factory=list)


WATCHED = Watched()


_RECEIVED: list[type[KeyboardInterrupt]] = []  # the stops this command received (see received)


def _terminate(signum: int, frame: object) -> None:
    _RECEIVED.append(Terminated)
    raise Terminated()


def _interrupt(signum: int, frame: object) -> None:
    _RECEIVED.append(KeyboardInterrupt)
    raise KeyboardInterrupt()


STOPPED_STARTING = "rankscope: stopped by {word} while starting: nothing was done"


def _starting(signum: int, frame: object) -> None:
    word = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    os.write(2, (STOPPED_STARTING.format(word=word) + "\n").encode())
    os._exit(128 + signum)  # nothing was done: no file, no run, no child process to wait for


def starting() -> None:
    """Until the command's own handling is in place (:func:`install`, or :func:`started`), a stop ends the process at
    once in one line, with 130 or 143: ``python -m pipeline.<command>`` imports its modules before its code can set
    anything, and a Ctrl-C there printed a traceback from the middle of an import, a SIGTERM killed it silently."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _starting)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where Ctrl-C is ignored (nohup, &)
        signal.signal(signal.SIGINT, _starting)


def started() -> None:
    """Python's own handling of stops again, for a command that handles them its own way (the server, the
    scheduler): the end of :func:`starting`."""
    if signal.getsignal(signal.SIGTERM) is _starting:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) is _starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def install() -> None:
    """SIGTERM raises :class:`Terminated` in the main thread from now on, each stop received is recorded
    (:func:`received`), and an interruption a finaliser swallowed is delivered again (:func:`_swallowed`)."""
    started()
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where Ctrl-C is ignored (nohup, &)
        signal.signal(signal.SIGINT, _interrupt)
    if sys.unraisablehook is not _swallowed:
        global _PREVIOUS_HOOK
        _PREVIOUS_HOOK = sys.unraisablehook
        sys.unraisablehook = _swallowed


_PREVIOUS_HOOK = sys.unraisablehook
_AGAIN: list[type[KeyboardInterrupt]] = []  # the interruption a finaliser swallowed, to raise again


def _again(signum: int, frame: object) -> None:
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    raise (_AGAIN.pop() if _AGAIN else KeyboardInterrupt)()


def _swallowed(unraisable: Any) -> None:
    """A Ctrl-C or SIGTERM that landed in a finaliser (``__del__``, a weakref callback) is printed by Python as
    "Exception ignored" and the command would go on to the end as if nothing had been asked: raise it again
    once the finaliser is over, so it stops the command as it should."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        # raised here it would be swallowed again: a timer raises it 10 ms later, in whatever runs then (were that
        # another finaliser, this hook would just arm the timer once more)
        _AGAIN[:] = [type(unraisable.exc_value)]
        signal.signal(signal.SIGALRM, _again)
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    _PREVIOUS_HOOK(unraisable)


def watch(**what: object) -> None:
    """Record what the command is doing (``sweep_dir=``, ``output_dir=``, ``resume=``)."""
    for key, value in what.items():
        setattr(WATCHED, key, value)


def status(exc: BaseException) -> tuple[int, str]:
    """The exit status and the word for an interruption: 143 and ``SIGTERM``, or 130 and ``Ctrl-C``."""
    return (143, "SIGTERM") if isinstance(exc, Terminated) else (130, "Ctrl-C")


def behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM ``exc`` was raised while unwinding, if any (``exc`` itself when it is one).

    A clean-up that fails as an interruption unwinds it replaces the interruption with its own error: OmegaConf,
    stopped half-way through building a config, then fails to restore its flags (``'NoneType' object has no
    attribute '_invalidate_flags_cache'``). Reported as that error, the stop became a config error, or a failed job
    after which a sweep ran on. Follows each error's cause and context, once each."""
    todo, seen = [exc], set()
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        todo += [current.__cause__, current.__context__]
    return None


def received() -> KeyboardInterrupt | None:
    """The first Ctrl-C or SIGTERM this command received since :func:`install`, if any, as the exception it raised.

    A library can turn a stop into an error of its own that does not carry it (a C extension's import stopped
    half-way reports an ``ImportError``): a command that received a stop and then failed was stopped."""
    return _RECEIVED[0]() if _RECEIVED else None


def stop_if_interrupted(exc: BaseException) -> None:
    """Raise the interruption behind ``exc`` (:func:`behind`), if there is one, so it stops the command as itself."""
    stop = behind(exc)
    if stop is not None and stop is not exc:
        raise stop from None


_WHEN_STOPPED: list[Callable[[], None]] = []  # what bounds a stopped command's waits (see when_stopped)
_SHIELDED = False


def when_stopped(action: Callable[[], None]) -> None:
    """Have ``action`` called once the command is stopped (:func:`shielded`): what keeps the clean-up short, such as
    a tracking store tried once per request instead of MLflow's retries on a server that does not answer."""
    if action not in _WHEN_STOPPED:
        _WHEN_STOPPED.append(action)


def shielded() -> None:
    """From now on Ctrl-C and SIGTERM are ignored: the process is closing its runs and must finish doing so, quickly
    (:func:`when_stopped`)."""
    global _SHIELDED
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    _SHIELDED = True
    for action in _WHEN_STOPPED:
        action()


def stopping() -> bool:
    """Whether the command is already ending after a stop (:func:`shielded`)."""
    return _SHIELDED


def swallowed() -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM a finaliser or an exit handler swallowed and that is still to be raised again
    (:func:`_swallowed`), taken: the command's end acts on it now instead."""
    if not _AGAIN:
        return None
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    return _AGAIN.pop()()


@contextmanager
def deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is over, then act as they would have: a store write stopped half-way
    (inside SQLite's transaction) can leave the store locked by this very process, so nothing could close its runs
    afterwards. Only the main thread receives signals; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:  # an ignored signal (the runs are being closed) stays ignored
            signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:  # also when the block failed (a store that stayed locked): the stop asked for still comes first
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])
