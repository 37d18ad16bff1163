"""``python -m pipeline.judge``: judgments where there are none. pool -> judge -> new qrels version -> re-score.

- ``pool SELECTOR...``: the unjudged pairs in the top k of a sweep (its parent run), runs or selectors, ordered so the
  first judgments do the most good; judged@k of every system after each budget; ``--to label-studio`` pushes the
  pool to a Label Studio project, ``--to FILE.csv`` writes a sheet to fill in a spreadsheet; ``--budget N`` saves
  and hands over only the first N pairs.
- ``pull``: the grades back (from Label Studio, or sheets), agreement between assessors, one grade per pair, and the
  next qrels version written as TREC and BEIR qrels and logged to MLflow as a dataset. Refused when the assessors
  agree less than ``agreement.minimum`` (kappa 0.4) and some of their ties are left to a rule, unless ``--force``.
  A span pool's highlights are checked against the documents (one line for each that cannot be used), their
  agreement measured character by character (F1, IoU), and merged into a span judgment version.
- ``adjudicate``: the pairs the merge rule leaves tied (two assessors who differ) pushed to a Label Studio project of
  their own for a third assessor; ``pull`` then reads the round's grades, each settling its tie.
- ``rescore SELECTOR... --qrels VERSION``: every selected run's stored ranking scored against the version, logged as
  new runs (one MLflow experiment per version), and what changed; a run that ranked chunks from its ``chunks.tsv``.

Exit status: 0 done; 2 bad input (one line on stderr: a project that does not exist, a wrong token, a grade outside
the scale, an annotation for a pair not in the pool, an unreachable server, assessors who agree too little), nothing
half-written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pipeline.common import collector
from pipeline.common.names import DEFAULT_EXPERIMENT, PROG

SAYS = f"{PROG} judge"
EXIT_OK, EXIT_ERROR = 0, 2
LABEL_STUDIO = "label-studio"
JUDGING_DIR = "judging"  # pools and their versions, under the folder the command starts in
STOPPED = "nothing half-written is kept; run the command again"


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--experiment", default=DEFAULT_EXPERIMENT, help="the runs' experiment (default: rankscope)")
    p.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI, else sqlite:///$PWD/mlflow.db")
    p.add_argument("--judge", default="default", help="settings: conf/judge/NAME.yaml or a YAML file")


def _label_studio_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="Label Studio's address (default: the settings', http://localhost:8080)")
    p.add_argument("--project", help="the Label Studio project's title (default: the pool's name)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline.judge", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pool = sub.add_parser("pool", help="pool the top k of runs for judging")
    pool.add_argument("selectors", nargs="+", help="a sweep's parent run id, run ids, names, tag:KEY=VALUE, best:M")
    pool.add_argument("--to", help=f"{LABEL_STUDIO}, or a sheet to write (FILE.csv, FILE.tsv)")
    pool.add_argument("--name", help="the pool's name (default: the project's title, the sheet's name, or the corpus)")
    pool.add_argument("--out", help=f"the pool's folder (default: {JUDGING_DIR}/NAME)")
    pool.add_argument("--qrels", help="pool against this qrels version (digest or file) instead of the runs' own")
    pool.add_argument("--depth", type=int, help="each system's top DEPTH is pooled (default 10)")
    pool.add_argument("--order", help="depth (plain depth-k) or rbp (rank-biased priority, the default)")
    pool.add_argument("--budget", type=int, help="judge at most N pairs: only the first N of the order are saved and "
                                                  "pushed (or written to the sheet); judged@k after N is reported")
    pool.add_argument("--corpus", help="only runs on this corpus (a selector matching several corpora needs it)")
    _label_studio_options(pool)
    _store_options(pool)
    pull = sub.add_parser("pull", help="read the grades back into a new qrels version")
    pull.add_argument("--from", dest="sources", action="append", metavar="SOURCE",
                      help=f"{LABEL_STUDIO} (the default) or a filled sheet; repeat for several sheets")
    pull.add_argument("--pool", help=f"the pool's folder (default: {JUDGING_DIR}/PROJECT, or the sheet's pool)")
    pull.add_argument("--rule", help="several assessors per pair: majority (default) or median")
    pull.add_argument("--ties", help="a pair the rule leaves tied: lower (the default), higher, or adjudicated "
                                     "(only a third assessor's grade settles it: see adjudicate)")
    pull.add_argument("--min-agreement", type=float, metavar="KAPPA",
                      help="refuse a version whose assessors agree less (default: the settings', kappa 0.4)")
    pull.add_argument("--force", action="store_true", help="take the version although its assessors agree less "
                                                           "than the minimum")
    pull.add_argument("--override", action="store_true", help="a new grade replaces a contradicting old one")
    pull.add_argument("--no-log", action="store_true", help="write the version's files, log nothing to MLflow")
    _label_studio_options(pull)
    _store_options(pull)
    adjudicate = sub.add_parser("adjudicate", help="push the pairs the assessors left tied to a third assessor")
    adjudicate.add_argument("--from", dest="sources", action="append", metavar="SOURCE",
                            help=f"where the grades are: {LABEL_STUDIO} (the default) or filled sheets")
    adjudicate.add_argument("--pool", help=f"the pool's folder (default: {JUDGING_DIR}/PROJECT, or the sheet's pool)")
    adjudicate.add_argument("--rule", help="the merge rule whose ties are pushed: majority (default) or median")
    _label_studio_options(adjudicate)
    adjudicate.add_argument("--judge", default="default", help="settings: conf/judge/NAME.yaml or a YAML file")
    rescore = sub.add_parser("rescore", help="score runs' stored rankings against a qrels version")
    rescore.add_argument("selectors", nargs="+", help="a sweep's parent run id, run ids, names, tag:KEY=VALUE")
    rescore.add_argument("--qrels", required=True, help="the version: its digest (or a unique prefix) or a qrels file")
    rescore.add_argument("--gate", default="default", help="gate settings for gates decided again (conf/gate/NAME)")
    rescore.add_argument("--corpus", help="only runs on this corpus")
    _store_options(rescore)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from metrics.errors import InputError  # the work's imports come after the arguments are read
    from pipeline.tracking.store import STORE_ERRORS, refusal

    collector.resume()
    try:
        from pipeline.judge_steps import commands, grading

        run = {"pool": commands.pool, "pull": grading.pull, "adjudicate": grading.adjudicate,
               "rescore": commands.rescore}[args.command]
        return run(args, Path.cwd())
    except (InputError, *STORE_ERRORS) as exc:
        print(refusal(SAYS, exc), file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    from pipeline.common import ending, interrupts

    interrupts.install()
    collector.pause()
    ending.run(main, SAYS, STOPPED)
