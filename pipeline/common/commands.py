"""Commands rankscope prints for the user to type next, written so they work in the user's shell as it is.

``python`` may be another interpreter than the one running rankscope (a virtual environment that is not
activated: ``make run`` never activates one), so a printed command names this interpreter by its path unless
``python`` on PATH is the same one.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def python() -> str:
    """``python`` when it is this interpreter, else this interpreter's path (relative to the folder the command
    runs in when it lies below it, e.g. ``.venv/bin/python``)."""
    found = shutil.which("python")
    if found and os.path.realpath(found) == os.path.realpath(sys.executable):
        return "python"
    here = os.getcwd()
    path = os.path.abspath(sys.executable)
    return os.path.relpath(path, here) if path.startswith(here + os.sep) else path


def module(name: str, *args: str) -> list[str]:
    """``python -m NAME ARGS`` with this interpreter (see :func:`python`)."""
    return [python(), "-m", name, *args]


def line(command: list[str]) -> str:
    """A command as one line the shell reads back."""
    return shlex.join(command)
