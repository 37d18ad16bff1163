"""Python's cyclic garbage collector, kept off the objects a command creates while it starts.

Importing Hydra, pandas, numpy and matplotlib creates some 250,000 objects that live as long as the process. The
collector scans each of them again at every full collection: four in one SciFact run (about 0.55 s with the
younger generations), seven in a 12-point sweep's driver (1.0-1.3 s, the later ones 0.15-0.45 s each, as its
objects grow). So ``python -m pipeline`` pauses the collector first thing (:func:`pause`) and, once the job is
about to work (or a sweep's driver has opened its parent run: its jobs may run in other processes), moves every
object alive into the generation it never scans and starts it again (:func:`resume`, ``gc.freeze()``): what a job
creates afterwards is collected as usual. The start-up's own unreachable cycles (tens of
thousands of small objects, a few megabytes at most: peak memory is unchanged) are kept, once per process.

A process forked afterwards (the store process, a plot drawer) inherits both states; the store process resumes
once it has imported MLflow. ``pipeline.compare``, ``pipeline.gate`` and ``pipeline.sync`` pause while they import
MLflow and resume before their work (their collections took 0.7-0.9 s of a 4 s compare or gate on a store of 200
runs; 0.1 s now). May import: the standard library only.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop collecting while the command imports and composes its configuration."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Freeze what is alive now and collect again (once; a no-op unless :func:`pause` stopped the collector)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def paused() -> bool:
    """Whether :func:`pause` holds the collector off."""
    return _paused
