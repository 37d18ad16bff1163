"""Ending a command without the interpreter's teardown.

Once a command has written everything, Python would still spend seconds freeing the modules it loaded (MLflow,
SQLAlchemy, pandas, matplotlib: about 2 s after a help-desk sweep on the 2-core machine), and during that time a
SIGTERM finds its default action again. :func:`run` does what the teardown must do (non-daemon threads such as
MLflow's artifact uploads finish, atexit handlers run, the streams are flushed), then ends the process at once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from pipeline.common import interrupts


def status_of(exit_request: SystemExit) -> int:
    """The process status ``sys.exit(value)`` asks for: None is 0, a number itself, any other value (a message,
    printed on stderr as Python would) 1."""
    code = exit_request.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def finish(status: int, says: str | None = None, stopped: str | Callable[[], str] = "") -> NoReturn:
    """Finish what the interpreter's exit must (threads, atexit handlers, buffered output), then exit ``status``.

    With ``says``, a Ctrl-C or SIGTERM that comes meanwhile (or that an exit handler swallowed) is obeyed as one
    during the command: its one line (:func:`run`) and status 130 or 143. Left to Python, it killed the process with
    the signal itself (status -2), after the command's work was done."""
    try:
        shutdown = getattr(threading, "_shutdown", None)  # joins non-daemon threads, as the interpreter's exit does
        if shutdown is not None:
            shutdown()
        forget_half_built_handlers()
        atexit._run_exitfuncs()  # a stop inside a handler is swallowed there, and taken below
        stop = interrupts.swallowed()
        if stop is not None:
            raise stop
    except KeyboardInterrupt as stop:
        if says is None:
            raise
        if not interrupts.stopping():  # (a stop a finaliser swallowed while the command said its line: said)
            status = _stopped(stop, says, stopped)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (piped into head): nothing left to write
            stream.flush()
    os._exit(status)


def _stopped(stop: KeyboardInterrupt, says: str, stopped: str | Callable[[], str]) -> int:
    """The command's one line for a stop (``{says}: stopped by Ctrl-C: {stopped}``), and its status."""
    interrupts.shielded()  # the line is said and the command ends: a second Ctrl-C changes nothing now
    code, word = interrupts.status(stop)
    print(f"{says}: stopped by {word}: {stopped() if callable(stopped) else stopped}", file=sys.stderr, flush=True)
    return code


def forget_half_built_handlers() -> None:
    """Take out of ``logging``'s exit list each handler whose construction a Ctrl-C or SIGTERM cut short.

    Hydra builds a job's log handlers as each job of a sweep starts; a stop landing inside ``logging.Handler``'s
    ``__init__`` leaves a handler registered for ``logging.shutdown`` without its lock (or, a stream handler, without
    its stream), and the exit then printed an AttributeError traceback after the command's one line. Such a handler
    was never attached to a logger nor wrote anything: there is nothing of it to flush or close."""
    import logging

    registered = getattr(logging, "_handlerList", None)
    for ref in list(registered or ()):
        handler = ref()
        if handler is not None and (not hasattr(handler, "lock") or
                                    (isinstance(handler, logging.StreamHandler) and not hasattr(handler, "stream"))):
            with contextlib.suppress(ValueError):
                registered.remove(ref)


def run(main: Callable[[], object], says: str | None = None, stopped: str | Callable[[], str] = "") -> NoReturn:
    """Run a command's ``main`` (its return value, or what it passes to ``sys.exit``, is the status), then
    :func:`finish`. An unexpected exception is left to Python: its traceback and the usual exit.

    With ``says`` (how the command's lines start), a Ctrl-C or SIGTERM ends the command with one line instead of a
    traceback, ``{says}: stopped by Ctrl-C: {stopped}`` (``stopped`` may be a function, called then), then status
    130 or 143 (:mod:`pipeline.common.interrupts`; also when the stop made a clean-up fail on its way out, came
    while the command ended, or was turned by a library into an error of its own: ``interrupts.received``)."""
    try:
        result = main()
    except SystemExit as request:
        status = status_of(request)
    except (KeyboardInterrupt, Exception) as exc:
        stop = (interrupts.behind(exc) or interrupts.received()) if says is not None else None
        if stop is None:
            raise
        status = _stopped(stop, says, stopped)  # type: ignore[arg-type]  # says is set here
    else:
        status = result if isinstance(result, int) else 0
    # outside the handlers: an error an exit handler meets is its own, not one raised while the stop unwound (a
    # sweep's runs are closed FAILED at exit; an error there, taken for the stop again, left its parent RUNNING)
    finish(status, says, stopped)
