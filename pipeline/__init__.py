"""rankscope's edges: everything that reads configs, writes files, talks to MLflow, prints and draws.

The commands are the modules at this level, one per command users type: ``python -m pipeline`` (:mod:`pipeline.app`),
``pipeline.compare``, ``pipeline.gate``, ``pipeline.sync``, ``pipeline.scheduled``, ``pipeline.server``,
``pipeline.ui``. Below them, one package per responsibility, each importing only the packages listed after it
(``pyproject.toml``'s import contracts, checked by ``tests/test_architecture.py``):

- ``sweep``: a sweep's driver (a Hydra callback), its end (summary, report, gate), resume, sync and tuning;
- ``decisions``: is one run better than another; the regression gate. ``team``: the team's tracking server;
- ``job``: one job, stage by stage (load, index, rank, evaluate, diagnose, write, publish);
- ``config``: composed config to checked plan and objects; ``tracking``: MLflow; ``reports``: text, HTML, plots;
- ``analysis``: pure analysis (failure diagnosis, sweep summaries); ``data``: corpora; ``common``: names, secret
  masking, files, progress bars.

Importing this package needs neither Hydra nor MLflow. Imported by ``python -m`` on its way to one of the
commands, it makes a stop during the command's imports one line (:func:`pipeline.common.interrupts.starting`).
"""

import sys

COMMANDS = ("pipeline", "pipeline.compare", "pipeline.gate", "pipeline.sync", "pipeline.scheduled", "pipeline.server",
            "pipeline.ui", "pipeline.judge", "pipeline.questions")  # what ``python -m`` runs (``pipeline``: __main__)


def _running_as() -> str | None:
    """The module ``python -m`` is about to run, while it imports this package on the way (else None)."""
    if sys.argv[:1] != ["-m"]:
        return None
    args = sys.orig_argv
    named = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "-m"]
    return named[0] if named else None


if _running_as() in COMMANDS:
    from pipeline.common import interrupts

    interrupts.starting()
