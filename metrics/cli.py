"""``python -m metrics QRELS RUN``: trec_eval's command line over rankscope's metrics.

Output is trec_eval's layout, measures in trec_eval's order whatever the order of ``-m``, so it can be diffed line for
line against trec_eval 10.0 (:mod:`metrics.trec_report` says how each value and mean is made). A run file with no
result line is refused, as trec_eval refuses it. One difference is deliberate: a judged query without any relevant
judgment at the level is left out of the means and named on stderr (trec_eval would score it 0).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from metrics.errors import InputError
from metrics.trec_report import COUNTS, NICKNAMES, ORDER, Column, columns, report, running_mean  # noqa: F401

PROG = "python -m metrics"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line on stderr, status 2 (argparse adds the usage)
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Evaluate a TREC run against TREC or BEIR qrels, printing trec_eval's layout.")
    p.add_argument("qrels", help="judgments: TREC 'qid iter docno relevance' lines, or BEIR's qrels TSV "
                                 "'query-id<TAB>corpus-id<TAB>score' (header line optional)")
    p.add_argument("run", help="results: 'qid Q0 docno rank score tag' lines (ordered by score desc, docno desc)")
    p.add_argument("-m", dest="measures", action="append", metavar="MEASURE",
                   help="trec_eval name (map, recip_rank, P_5, P.5,10, recall.5,100, ndcg_cut, ndcg, success.1,5,10, "
                        "Rprec, bpref, gm_map, infAP, iprec_at_recall, 11pt_avg, Rprec_mult, map_cut, relative_P, "
                        "ndcg_rel, Rndcg, G, binG, utility, set_P, set_recall, set_F, set_map, set_relative_P, rbp, "
                        "rbp.p=0.8, rbp_resid, unj, relstring, num_q, num_ret, num_rel, num_rel_ret, "
                        "num_nonrel_judged_ret, runid, 'official', 'set', 'all_trec') or rankscope name (ndcg@5, "
                        "hit_rate@3, mrr, judged@10, infap, rbp@0.8); repeatable. Default: official")
    p.add_argument("-q", dest="per_question", action="store_true", help="also print each query's values")
    p.add_argument("-c", dest="complete", action="store_true",
                   help="average over every judged query: one missing from the run scores 0")
    p.add_argument("-l", dest="level", type=int, default=1, metavar="LEVEL",
                   help="minimum grade that counts as relevant (default 1); nDCG keeps graded gains")
    p.add_argument("-J", dest="judged_only", action="store_true",
                   help="drop unjudged documents from each ranking before scoring (trec_eval's -J)")
    p.add_argument("-M", dest="max_docs", type=int, metavar="N", help="score only the top N documents per query")
    p.add_argument("--chunks", metavar="FILE", help="a job's chunks.tsv: the ranking of chunks the run came from, "
                                                    "for span and token-budget measures (span_recall@5, recall@512tok)")
    p.add_argument("--spans", metavar="FILE", help="a job's spans.tsv: the span judgments span measures read")
    p.add_argument("--chunking", metavar="FILE", help="a job's chunking.tsv: every chunk of the documents holding "
                                                      "evidence, for span_precision_omega")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The command; Ctrl-C (most often while a large run is read) ends it with one line and status 130, not a
    traceback."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(f"{PROG}: stopped by Ctrl-C", file=sys.stderr, flush=True)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        cols = columns(args.measures or ["official"])
        lines, notes = _evaluate(args, cols)
    except InputError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{PROG}: {err.filename or Path(args.run)}: {err.strerror}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    try:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
    return 0


def _evaluate(args: argparse.Namespace, cols: list[Column]) -> tuple[list[str], list[str]]:
    """Read the judgments, score the run against them, and make the lines to print."""
    from metrics.trec_report import add_chunk_values, read_judgments, score_files

    if args.level < 0:
        raise InputError(f"the relevance level must be 0 or more, not {args.level}")
    if args.max_docs is not None and args.max_docs < 1:
        raise InputError(f"-M must be at least 1, not {args.max_docs}")
    from metrics.trec import NO_RESULTS_QUERY

    qrels = read_judgments(args.qrels, args.run)
    if not len(qrels):
        raise InputError("holds no judgment: nothing to evaluate against", args.qrels)
    scored = score_files(qrels, args.run, cols, args.complete, args.level, args.max_docs, args.judged_only)
    add_chunk_values(scored, qrels, cols, args.level, *chunk_inputs(args))
    if scored.in_run != {NO_RESULTS_QUERY}:
        return report(qrels, scored, cols, args.per_question, args.complete, args.level)
    said = (f"the run retrieved nothing for any question (its one line, for question {NO_RESULTS_QUERY}, is there for "
            f"trec_eval, which refuses an empty file)")  # the run file of a job whose retriever returned nothing
    try:
        lines, notes = report(qrels, scored, cols, args.per_question, args.complete, args.level)
    except InputError as err:
        raise InputError(f"{err}: {said}; -c scores every judged question 0") from None
    return lines, [f"note: {said}: every judged question scores 0", *notes]


def chunk_inputs(args: argparse.Namespace) -> tuple:
    """What ``--chunks``, ``--spans`` and ``--chunking`` name, read (None for a flag not given)."""
    from metrics.chunks import read_chunk_table, read_chunks
    from metrics.spans import read_spans

    return (read_chunks(args.chunks) if args.chunks else None, read_spans(args.spans) if args.spans else None,
            read_chunk_table(args.chunking) if args.chunking else None)
