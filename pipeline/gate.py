"""``python -m pipeline.gate CANDIDATE``: has the candidate run regressed against the baseline? One line, and the
exit status says it: 0 pass, 1 regression, 2 the gate could not decide.

Settings come from ``conf/gate/NAME.yaml`` (``--gate``), each overridable here. A sweep gates its best system at its
end with ``python -m pipeline -m ... gate=default``; see ``pipeline.decisions.gate`` for the rule.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipeline.common import collector, commands
from pipeline.common.names import SAYS_GATE
from pipeline.compare import SELECTOR, add_store_options

STOPPED = "no verdict; run the gate again (a comparison recorded in full is not recorded twice)"  # ending.run


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline.gate", description=__doc__.split("\n\n")[0])
    p.add_argument("candidate", help=SELECTOR)
    p.add_argument("--gate", default="default", help="settings: conf/gate/NAME.yaml or a YAML file")
    p.add_argument("--baseline", help="baseline selector (default: the settings', tag:baseline=true)")
    p.add_argument("--metrics", help="comma-separated metrics to gate on")
    p.add_argument("--tolerance", type=float, help="the largest acceptable drop")
    p.add_argument("--confidence", type=float)
    p.add_argument("--slice-tolerance", type=float,
                   help="also fail when a slice of the questions (the runs' metrics.slices) drops by more than this")
    p.add_argument("--allow-different-corpus", action="store_true", default=None)
    add_store_options(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from pathlib import Path  # the work's imports come after the arguments are read: --help stays instant

    from metrics.errors import InputError
    from pipeline.decisions.comparison import parse_list
    from pipeline.decisions.gate import EXIT_ERROR, GateOutcome, run_gate, say
    from pipeline.decisions.gate_settings import load_settings
    from pipeline.tracking.selectors import resolve
    from pipeline.tracking.store import STORE_ERRORS, Store, store_error, tracking_uri

    collector.resume()  # the imports' objects, frozen (pipeline.common.collector)

    try:
        settings = load_settings(args.gate, {"baseline": args.baseline, "metrics": parse_list(args.metrics),
                                             "tolerance": args.tolerance, "confidence": args.confidence,
                                             "slice_tolerance": args.slice_tolerance,
                                             "allow_different_corpus": args.allow_different_corpus})
        client, experiment_id = Store.existing(tracking_uri(args.tracking_uri, Path.cwd()), args.experiment)
        candidate = resolve(client, experiment_id, args.candidate, args.corpus)
    except InputError as exc:
        outcome = GateOutcome(EXIT_ERROR, f"ERROR: {exc}")
    except STORE_ERRORS as exc:
        outcome = GateOutcome(EXIT_ERROR, f"ERROR: the tracking store did not answer: {store_error(exc)}")
    else:
        typed = list(argv) if argv is not None else sys.argv[1:]
        outcome = run_gate(client, experiment_id, candidate, settings,
                           source=commands.line(commands.module("pipeline.gate", *typed)))
    say(outcome)
    return outcome.status


if __name__ == "__main__":
    from pipeline.common import ending, interrupts

    interrupts.install()  # SIGTERM (cron, CI) stops it as Ctrl-C does
    collector.pause()  # while MLflow is imported
    ending.run(main, SAYS_GATE, STOPPED)
