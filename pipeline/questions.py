"""``python -m pipeline.questions``: question sets from a traced application's MLflow traces.

``from-traces FOLDER``: the questions production asked (masked, deduplicated, sampled) and the judgments the traces
carry, written to FOLDER for ``corpus=files`` and recorded as an MLflow dataset. ``judgments FOLDER``: read the
judgments on the set's traces again. ``to-assessments FOLDER --judgments FILE``: write judgments back onto the
traces, as MLflow expectations on their retriever spans. See docs/traces.md; the rules are in
``pipeline.traces.sampling``.

Exit status: 0 done, 2 bad input or a store that does not answer (one line).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipeline.common import collector
from pipeline.common.names import PROG

SAYS = f"{PROG} questions"
EXIT_OK, EXIT_ERROR = 0, 2
STOPPED = "nothing half-written is kept as a set: run the command again"


def _traces_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tracking-uri", help="the store of the traces (default: $MLFLOW_TRACKING_URI, else "
                                          "sqlite:///$PWD/mlflow.db)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline.questions", description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    make = commands.add_parser("from-traces", help="a question set from production traces")
    make.add_argument("folder", help="where the set is written")
    make.add_argument("--experiment", required=True, help="the traced application's experiment (name or id)")
    _traces_options(make)
    make.add_argument("--since", help="request times from: 2026-12-04, 2026-12-04T09:30 (UTC), or 24h, 7d back")
    make.add_argument("--until", help="... to (excluded)")
    make.add_argument("--trace-name", help="only traces of this name")
    make.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="only traces with this tag")
    make.add_argument("--filter", help="any MLflow trace filter, ANDed")
    make.add_argument("--question", help="the question's path in the root span's inputs (default: the input, or "
                                         "its only string)")
    make.add_argument("--span", help="the span whose documents judgments may name by place (default: RETRIEVER)")
    make.add_argument("--doc-id", default="id,doc_uri", help="where a document's id is (default: id,doc_uri)")
    make.add_argument("--near", type=float, default=0.8,
                      help="near duplicates: trigram similarity at least this (default 0.8; 1: exact only)")
    make.add_argument("--sample", type=int, help="how many questions to keep (default: all)")
    make.add_argument("--sampling", choices=("uniform", "stratified"), default="uniform")
    make.add_argument("--stratify", metavar="TAG", help="with --sampling stratified: the trace tag of the strata")
    make.add_argument("--allocation", choices=("proportional", "equal"), default="proportional")
    make.add_argument("--seed", type=int, default=0)
    _judgment_options(make)
    make.add_argument("--name", help="the set's name as an MLflow dataset (default: EXPERIMENT-questions)")
    make.add_argument("--record-experiment", default="rankscope",
                      help="recorded in the experiment '<this> questions' (default: rankscope)")
    make.add_argument("--no-record", action="store_true", help="write the files only")
    again = commands.add_parser("judgments", help="read the judgments on a set's traces again")
    again.add_argument("folder")
    _traces_options(again)
    _judgment_options(again)
    back = commands.add_parser("to-assessments", help="write judgments onto the set's traces (MLflow expectations)")
    back.add_argument("folder")
    back.add_argument("--judgments", required=True, help="a judgments file: CSV with query_id, doc_id, grade")
    _traces_options(back)
    back.add_argument("--name", default="relevance", help="the expectations' name (default: relevance)")
    back.add_argument("--assessor", default=PROG, help="the source id the expectations carry")
    return p


def _judgment_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judgment-names", help="assessment names read as judgments (default: relevance, "
                                            "retrieval_relevance, expected_retrieved_context)")
    p.add_argument("--judgment-sources", help="only assessments from these sources: HUMAN, LLM_JUDGE, CODE "
                                              "(default: all)")


def _listed(text: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in (text or "").split(",") if t.strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import time  # the work's imports come after the arguments are read: --help stays instant
    from pathlib import Path

    from metrics.errors import InputError
    from pipeline.traces import set_folder
    from pipeline.traces.sampling import JUDGMENT_NAMES
    from pipeline.tracking.store import STORE_ERRORS, refusal, tracking_uri

    collector.resume()
    try:
        uri = tracking_uri(args.tracking_uri, Path.cwd())
        folder = Path(args.folder)
        if args.command == "from-traces":
            tags = []
            for given in args.tag:
                key, sep, value = given.partition("=")
                if not sep or not key:
                    raise InputError(f"--tag {given!r}: expected KEY=VALUE")
                tags.append((key, value))
            settings = set_folder.Settings(
                args.experiment, uri, args.since, args.until, args.trace_name, tuple(tags), args.filter,
                args.question, args.span, _listed(args.doc_id) or ("id", "doc_uri"), args.near, args.sample,
                args.sampling, args.stratify, args.allocation, args.seed,
                _listed(args.judgment_names) or JUDGMENT_NAMES, _listed(args.judgment_sources), args.name,
                args.record_experiment)
            text = set_folder.from_traces(settings, folder, int(time.time() * 1000), record=not args.no_record)
        elif args.command == "judgments":
            text = set_folder.refresh_judgments(folder, args.tracking_uri and uri, _listed(args.judgment_names),
                                                  _listed(args.judgment_sources))
        else:
            text = set_folder.write_back(folder, Path(args.judgments), args.tracking_uri and uri, args.name,
                                           args.assessor)
    except (InputError, *STORE_ERRORS) as exc:
        print(refusal(SAYS, exc), file=sys.stderr)
        return EXIT_ERROR
    print(text, flush=True)
    return EXIT_OK


if __name__ == "__main__":
    from pipeline.common import ending, interrupts

    interrupts.install()
    collector.pause()
    ending.run(main, SAYS, STOPPED)
