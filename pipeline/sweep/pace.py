"""A sweep whose jobs run in this process, one after another, uses the time they leave: the drawing copy forked
and warmed up while the first job computes, the end's imports on a thread once that job has run, and a word on
how long the others may take."""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading

from pipeline.common.names import PROG
from pipeline.reports.html import start_drawer

END_MODULES = ("scipy.special", "threadpoolctl")  # imported by the sweep's end alone
LONG_SWEEP_S = 60.0  # a sweep whose other jobs may take longer than this says so after its first


def start_beside() -> threading.Thread:
    """The drawing copy started (on the second core, idle while the first job computes); and the thread, not
    started yet, that imports the end's modules (see :func:`_import_the_ends_modules`)."""
    start_drawer([_warm_up_plots])
    return threading.Thread(target=_import_the_ends_modules, name="rankscope-end-imports", daemon=True)


def _import_the_ends_modules() -> None:
    """Import what only the sweep's end uses (scipy.special for the question set's sensitivity: 0.13 s; the BLAS
    thread limit; PIL's image plugins, loaded by the first PNG this process saves) on a thread started once the
    first job has run: it runs while the driver waits for its drawing copy between jobs, not at the end, where it
    was on the driver's path. A failure here changes nothing: the end imports them itself."""
    for name in END_MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):
        from PIL import Image

        Image.preinit()


def _warm_up_plots() -> None:
    from pipeline.reports.html import DPI
    from pipeline.reports.run_plots import warm_up

    warm_up(DPI)


def say_how_long(jobs: int, first: float) -> None:
    """After a sweep's first job, when the others, at its pace, would take more than a minute: how long, at most
    (later jobs reuse the first's corpus, term counts and embeddings, so they are usually quicker)."""
    rest = first * (jobs - 1)
    if rest > LONG_SWEEP_S:
        minutes = f"{rest / 60:.0f} min" if rest < 5400 else f"{rest / 3600:.1f} h"
        print(f"{PROG}: {jobs} jobs; the first took {first:.0f} s, so the other {jobs - 1} may take up to about "
              f"{minutes} (they reuse its corpus, term counts and embeddings, so usually less)", file=sys.stderr,
              flush=True)
