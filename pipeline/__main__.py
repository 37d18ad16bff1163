"""``python -m pipeline [-m] [overrides]``: see docs/configuration.md.

``--help`` is answered here, from the config folder's listing, without importing Hydra, MLflow or the retrievers
(Hydra's own help, with the composed config, is ``--hydra-help`` and ``--cfg job``). SIGTERM is handled before the
heavy imports start, so a command stopped while it starts says so in one line, like one stopped later (see
:mod:`pipeline.common.interrupts`). A run or a sweep (overrides and ``-m`` only, no other Hydra flag) imports
MLflow, then forks the process that opens the tracking store and logs the runs while this one imports Hydra and
computes (:mod:`pipeline.tracking.background`). The garbage collector waits until the job starts
(:mod:`pipeline.common.collector`).
"""

import sys

from pipeline.common import collector, ending, interrupts
from pipeline.config.paths import CONF_DIR

SWEEP_FLAGS = ("-m", "--multirun")
GROUPS = ("corpus", "retriever", "metrics", "experiment", "tracking", "gate", "diagnosis")


def help_text() -> str:
    """The command's usage, its config groups and their options (as the files under ``conf/`` name them)."""
    options = [f"  {group:<11} {', '.join(sorted(p.stem for p in (CONF_DIR / group).glob('*.yaml')))}"
               for group in GROUPS if (CONF_DIR / group).is_dir()]
    return "\n".join([
        "usage: python -m pipeline [-m] [KEY=VALUE ...] [GROUP=OPTION ...]",
        "",
        "Measure a retriever on its own: rank every question of a corpus, score the rankings (hit rate, recall,",
        "precision, MRR, nDCG, AP) with bootstrap intervals, diagnose the failures and log it all to MLflow.",
        "With -m, comma-separated values sweep (retriever=bm25,lsa,weighted,rrf retriever.k1=0.6,0.9).",
        "",
        f"config groups (GROUP=OPTION; files in {CONF_DIR}):",
        *options,
        "",
        "examples:",
        "  python -m pipeline                                     BM25 on the embedded help-desk corpus",
        "  python -m pipeline -m experiment=helpdesk_study        the four reference retrievers in one sweep",
        "  python -m pipeline corpus=scifact metrics=beir retriever.k1=0.9 retriever.b=0.4",
        "  python -m pipeline retriever=custom retriever._target_=MODULE.CLASS   your own retriever",
        "",
        "more: python -m pipeline --cfg job (the composed config), --hydra-help (Hydra's options); docs/ in the",
        "repository (configuration.md, mlflow.md, own-retriever.md ...).",
    ])


if __name__ == "__main__":
    if any(arg in ("--help", "-h") for arg in sys.argv[1:]):
        print(help_text())
        sys.exit(0)
    try:  # a stop from here on is one line and 130 or 143: left to Python, it killed the process (status -2)
        collector.pause()  # until the job starts: the imports' objects are then frozen (pipeline.common.collector)
        interrupts.install()
        if all(arg in SWEEP_FLAGS or not arg.startswith("-") for arg in sys.argv[1:]):  # a run or sweep, no --cfg
            # MLflow first, which the job imports anyway: the copy forked next shares it instead of importing it again
            # (1.2-1.3 s of CPU that a busy machine's cores paid twice)
            import pipeline.tracking.client  # noqa: F401
            from pipeline.tracking import background

            background.start()
        from pipeline.app import main
        from pipeline.sweep.stopped import saved
    except KeyboardInterrupt as exc:
        code, word = interrupts.status(exc)
        print(interrupts.STOPPED_STARTING.format(word=word), file=sys.stderr, flush=True)
        sys.exit(code)
    ending.run(main, "rankscope", saved)  # also a stop after Hydra's end (the sweep's own line is said earlier)
