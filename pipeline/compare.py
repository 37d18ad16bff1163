"""``python -m pipeline.compare BASELINE CANDIDATE``: is one run better, worse, or indistinguishable from another?

Each side is a run selector (run id, run name, ``tag:baseline=true``, ``best:ndcg@10``, ``latest``). Both runs'
per-question tables are read back from MLflow and aligned by question id; the runs must have been measured on the
same corpus and judgments with the same evaluation settings, unless ``--allow-different-corpus``. For every
metric: both means, the paired difference with its bootstrap interval, the randomisation-test p-value
Holm-adjusted across the metrics, and the verdict; then what difference these questions can detect on the primary
metric (80% power) and how many questions the observed difference (or each ``--detect`` one) would need. With
``--slice team=billing`` only the questions of that slice are compared; with ``--slice team``, every slice of
``team`` is compared too (docs/slices.md): both need runs made with ``metrics.slices``.

The comparison is recorded as an MLflow run of its own. ``--promote`` then makes the candidate the baseline: it
moves the ``baseline=true`` tag (or the tag the BASELINE selector named); the previous baseline keeps
``baseline/previous``, ``baseline/replaced_by`` and ``baseline/until`` tags.

Exit status: 0 compared (and promoted if asked); 1 promotion refused because the candidate is worse on some
metric (``--force`` promotes anyway); 2 a usage or data error (no such run, different corpora, no table).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipeline.common import collector, commands
from pipeline.common.names import DEFAULT_EXPERIMENT, SAYS_COMPARE

SAYS = SAYS_COMPARE
EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 1, 2
CONFIDENCE, RESAMPLES, PERMUTATIONS, SEED = 0.95, 5000, 10000, 0  # metrics.bootstrap's defaults
SELECTOR = "run id, run name, tag:KEY=VALUE, best:METRIC or latest"
STOPPED = ("a comparison cut short is closed FAILED; run the command again (a comparison recorded in full is not "
           "recorded twice)")  # the rest of the line a Ctrl-C or SIGTERM ends it with (ending.run)


def add_store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--experiment", default=DEFAULT_EXPERIMENT, help="where selectors look (default: rankscope)")
    p.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI, else sqlite:///$PWD/mlflow.db")
    p.add_argument("--corpus", help="only runs measured on this corpus (its name: helpdesk, scifact ...); needed when "
                                    "a name or best: matches runs on several corpora")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("baseline", help=SELECTOR)
    p.add_argument("candidate", help=SELECTOR)
    add_store_options(p)
    p.add_argument("--metrics", help="comma-separated metrics to compare (default: all both runs have)")
    p.add_argument("--confidence", type=float, default=CONFIDENCE)
    p.add_argument("--resamples", type=int, default=RESAMPLES)
    p.add_argument("--permutations", type=int, default=PERMUTATIONS)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--detect", type=float, action="append", default=[], metavar="DIFFERENCE",
                   help="also say how many questions this difference on the primary metric would need (repeatable)")
    p.add_argument("--slice", action="append", default=[], metavar="FIELD[=VALUE]",
                   help="FIELD=VALUE: compare only the questions of that slice (team=billing); FIELD: also compare "
                        "every slice of FIELD, Holm-adjusted over them (repeatable; the runs' metrics.slices)")
    p.add_argument("--allow-different-corpus", action="store_true",
                   help="compare runs on different corpora/judgments (on the questions they share)")
    p.add_argument("--promote", action="store_true", help="make the candidate the new baseline (moves the tag)")
    p.add_argument("--force", action="store_true", help="with --promote: promote even a candidate that is worse")
    p.add_argument("--no-record", action="store_true", help="do not record the comparison in MLflow")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from pathlib import Path  # the work's imports come after the arguments are read: --help stays instant

    from metrics.comparison import WORSE
    from metrics.errors import InputError
    from pipeline.common.names import TAG_COMPARE_PROMOTED, TAG_COMPARE_SLICE
    from pipeline.common.redact import redact_text
    from pipeline.decisions.comparison import (
        check_comparable,
        compare_sides,
        load_side,
        parse_list,
        primary_metric,
        record,
        report,
        shared_metrics,
    )
    from pipeline.decisions.slices import breakdown, parse_slices, restrict
    from pipeline.tracking.comparisons import baseline_tag, promote
    from pipeline.tracking.links import experiment_url, run_location
    from pipeline.tracking.selectors import describe, resolve
    from pipeline.tracking.store import STORE_ERRORS, Store, refusal, tracking_uri
    from pipeline.tracking.views import COMPARISONS_VIEW

    collector.resume()  # the imports' objects, frozen (pipeline.common.collector)

    try:
        if not 0 < args.confidence < 1 or args.resamples < 1 or args.permutations < 1:
            raise InputError("--confidence must be within (0, 1); --resamples and --permutations at least 1")
        uri = tracking_uri(args.tracking_uri, Path.cwd())
        client, experiment_id = Store.existing(uri, args.experiment)
        baseline = load_side(client, resolve(client, experiment_id, args.baseline, args.corpus))
        candidate = load_side(client, resolve(client, experiment_id, args.candidate, args.corpus))
        if baseline.run_id == candidate.run_id:
            raise InputError(f"warning: {args.baseline!r} and {args.candidate!r} name the same run "
                             f"({describe(candidate.run)}): nothing compared, nothing recorded")
        warnings = check_comparable(baseline, candidate, args.allow_different_corpus)
        metrics = shared_metrics(baseline, candidate, parse_list(args.metrics))
        only, by = parse_slices(args.slice)
        if only and args.promote:
            raise InputError("--promote with --slice FIELD=VALUE: a slice's comparison never makes a baseline "
                             "(compare the whole runs to promote)")
        if only:
            baseline, candidate, sliced = restrict(baseline, candidate, only)
            print(sliced, flush=True)
        comparison = compare_sides(baseline, candidate, metrics, args.confidence, args.resamples, args.permutations,
                                   args.seed)
        print(report(baseline, candidate, comparison, args.resamples, args.permutations, warnings, args.detect),
              flush=True)
        if by:
            primary = primary_metric(baseline, candidate, metrics)
            print("\n" + breakdown(baseline, candidate, by, metrics, primary, args.confidence, args.resamples,
                                   args.permutations, args.seed), flush=True)
        status = EXIT_OK
        promote_now = args.promote
        if args.promote and (comparison.table["verdict"] == WORSE).any() and not args.force:
            worse = ", ".join(comparison.table.index[comparison.table["verdict"] == WORSE])
            print(f"{SAYS}: not promoted: the candidate is worse on {worse} (--force promotes it anyway)",
                  file=sys.stderr)
            status, promote_now = EXIT_REFUSED, False
        tags = {TAG_COMPARE_PROMOTED: "true"} if promote_now else {}
        if only:  # a comparison of one slice's questions: said on its run, and never taken for the whole one
            tags[TAG_COMPARE_SLICE] = " and ".join(f"{k}={v}" for k, v in only.items())
        if not args.no_record:
            typed = list(argv) if argv is not None else sys.argv[1:]
            run_id = record(client, baseline, candidate, comparison, args.resamples, args.permutations, args.seed,
                            tags, source=commands.line(commands.module("pipeline.compare", *typed)))
            recorded_in = client.get_run(run_id).info.experiment_id  # the comparisons experiment
            print("Recorded: " + run_location(uri, recorded_in, run_id))
            print("MLflow view of the comparisons (verdicts as columns): "
                  + redact_text(experiment_url(uri, recorded_in, COMPARISONS_VIEW)))
        if promote_now:
            key, value = baseline_tag(args.baseline)
            previous = promote(client, candidate.run, (key, value))
            was = ", ".join(previous) or "no run"
            print(f"Promoted {describe(candidate.run)} to baseline ({key}={value}); previous baseline: {was}")
        return status
    except (InputError, *STORE_ERRORS) as exc:
        print(refusal(SAYS, exc), file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    from pipeline.common import ending, interrupts

    interrupts.install()  # SIGTERM (cron, CI) stops it as Ctrl-C does
    collector.pause()  # while MLflow is imported
    ending.run(main, SAYS_COMPARE, STOPPED)
