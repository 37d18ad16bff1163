"""``python -m pipeline.sync FOLDER``: log what jobs computed while the tracking store was not answering.

FOLDER is a sweep folder (``multirun/<date>/<time>-<id>/``) or one job's or single run's folder. Every result not yet
logged becomes its MLflow run, never twice; a sweep's parent run is then summarised and closed again, and the
sweep's gate runs if it had one. Running it again, or on a folder whose results are all logged, changes nothing.

The store is the one the jobs used (``--tracking-uri`` overrides it; a URI whose credentials were masked in the
record is taken from ``--tracking-uri`` or $MLFLOW_TRACKING_URI). Exit status: 0 all logged (and the gate passed),
1 something is still not logged (or a job failed, or the gate found a regression), 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pipeline.common import collector
from pipeline.common.names import SAYS_SYNC

STOPPED = "what was logged stays logged; run the same command again to log the rest"  # ending.run


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipeline.sync", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="a sweep folder (multirun/...) or a job's or single run's folder")
    p.add_argument("--tracking-uri", help="the store to log to (default: the one the jobs used)")
    args = p.parse_args(argv)
    from metrics.errors import InputError  # the work's imports come after the arguments are read
    from pipeline.sweep.sync import SAYS, sync
    from pipeline.tracking.store import STORE_ERRORS, refusal

    collector.resume()  # the imports' objects, frozen (pipeline.common.collector)

    try:
        return sync(args.folder, args.tracking_uri)
    except (InputError, *STORE_ERRORS) as exc:
        print(refusal(SAYS, exc), file=sys.stderr)
        return 2 if isinstance(exc, InputError) else 1


if __name__ == "__main__":
    from pipeline.common import ending, interrupts

    interrupts.install()  # SIGTERM (cron, CI) stops it as Ctrl-C does
    collector.pause()  # while MLflow is imported
    ending.run(main, SAYS_SYNC, STOPPED)
