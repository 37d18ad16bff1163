"""``python -m metrics QRELS RUN``: trec_eval's command line over rankscope's metrics.

Output is ``measure<TAB>query<TAB>value`` in trec_eval's layout (name left-justified to 22 characters, values
to 4 decimals, counts as integers, measures in trec_eval's order whatever the order of ``-m``), so it can be
diffed line for line against trec_eval. A mean is summed as trec_eval sums it, one float added at a time in query
order (:func:`running_mean`), so that it rounds to the same 4th decimal where the mean sits on an exact half (a job
sums its means exactly, ``metrics.bootstrap.exact_mean``: the two differ by a unit in the last place at most). A run
file with no result line is refused, as trec_eval refuses it. One difference is deliberate: a judged query without
any relevant judgment at the level is left out of the means and named on stderr (trec_eval would score it 0).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from metrics.errors import InputError
from metrics.spec import MetricSpec, parse_trec_measure, trec_form

if TYPE_CHECKING:  # numpy loads only once there is something to score: --help and usage errors are instant
    from metrics.qrels import Qrels
    from metrics.run import Run

PROG = "python -m metrics"
COUNTS = ("num_ret", "num_rel", "num_rel_ret")
SUMMARY_ONLY = ("runid", "num_q")
# trec_eval prints its measures in this order, whatever the order they were asked for in
ORDER = ("runid", "num_q", *COUNTS, "map", "Rprec", "bpref", "recip_rank", "P", "recall", "ndcg", "ndcg_cut",
         "success", "judged")  # judged@k is not trec_eval's: printed last
FAMILY = {"map": "map", "r_precision": "Rprec", "bpref": "bpref", "mrr": "recip_rank", "precision": "P",
          "recall": "recall", "hit_rate": "success", "judged": "judged"}
OFFICIAL = ("runid", "num_q", *COUNTS, "map", "Rprec", "bpref", "recip_rank", "P")
NICKNAMES = {
    # trec_eval's default set, less the measures rankscope does not compute (gm_map, iprec_at_recall)
    "official": OFFICIAL,
    # every trec_eval measure rankscope computes, at trec_eval's default cutoffs
    "all_trec": (*OFFICIAL, "recall", "ndcg", "ndcg_cut", "success"),
}


@dataclass(frozen=True)
class Column:
    """One printed measure: its printed name and, for a metric (not a count), its spec."""

    name: str
    family: str
    spec: MetricSpec | None = None

    @property
    def order(self) -> tuple[int, int]:
        return ORDER.index(self.family), (self.spec.k or 0) if self.spec else 0


def columns(texts: Sequence[str]) -> list[Column]:
    """Parse ``-m`` values (trec_eval names, rankscope names, nicknames) into printed columns, trec_eval's order.

    A trec_eval form prints under its trec_eval name (``P_5``), a rankscope form under its own (``precision@5``).
    """
    out: dict[str, Column] = {}
    for text in [t for raw in texts for t in NICKNAMES.get(raw.strip(), (raw,))]:
        text = text.strip()
        if text in ORDER[:5]:
            out.setdefault(text, Column(text, text))
            continue
        try:
            specs = parse_trec_measure(text)
        except InputError as err:
            hint = ""
            if err.reason.startswith(("unknown", "cannot read metric")):
                known = [name for name in ORDER if name != "judged"]  # judged@k is rankscope's name, not trec_eval's
                hint = f"; trec_eval names known: {', '.join(known)}, {', '.join(NICKNAMES)}"
            raise InputError(f"-m {text}: {err.reason}{hint}") from None
        trec = trec_form(text) is not None
        for spec in specs:
            family = FAMILY.get(spec.measure) or ("ndcg" if spec.k is None else "ndcg_cut")
            name = spec.trec_name if trec else spec.name
            out.setdefault(name, Column(name, family, spec))
    return sorted(out.values(), key=lambda c: c.order)


def _line(name: str, query: str, value: object) -> str:
    shown = f"{value:.4f}" if isinstance(value, float) else str(value)
    return f"{name:<22}\t{query}\t{shown}"


def report(
    qrels: Qrels, run: Run, cols: Sequence[Column], per_question: bool = False, complete: bool = False, level: int = 1
) -> tuple[list[str], list[str]]:
    """The output lines and the notes for stderr.

    Queries counted: those with a relevant judgment (grade >= ``level``) that are in the run, or all of them
    with ``complete`` (trec_eval's -c: a judged query missing from the run scores 0).
    """
    from metrics.scoring import EvalSettings, score

    if level < 0:
        raise InputError(f"the relevance level must be 0 or more, not {level}")
    specs = list(dict.fromkeys(c.spec for c in cols if c.spec is not None))
    settings = EvalSettings(level=level, missing="zero" if complete else "skip")
    scores = score(run, qrels, specs, settings, query_ids=qrels.judged_queries())
    if not scores.query_ids:
        raise InputError("no query has both results and a relevant judgment" if not complete
                         else f"no query has a relevant judgment at level {level}")
    row = {q: i for i, q in enumerate(scores.query_ids)}
    queries = sorted(row, key=lambda q: str(q).encode())  # trec_eval's order: its query ids compared by strcmp
    order = [row[q] for q in queries]
    in_run = set(run.query_ids.tolist())
    left_out = [q for q in scores.without_judgments if complete or q in in_run]
    notes = []
    if left_out:
        notes.append(f"note: {len(left_out)} judged quer{'y has' if len(left_out) == 1 else 'ies have'} no relevant "
                     f"judgment at level {level}, left out of the means (trec_eval would score them 0): "
                     + " ".join(sorted(left_out)))

    def value(col: Column, query: str | None) -> object:
        """The column's value for one query, or over every query (``None``): a count's sum, a metric's mean."""
        if col.family == "runid":
            return run.name
        if col.family == "num_q":
            return len(row) if query is None else 1
        values = scores.counts[col.family] if col.spec is None else scores.values[col.spec.name]
        if query is not None:
            values = values[row[query] : row[query] + 1]
        if col.spec is None:
            return int(values.sum())
        return values[0] if query is not None else running_mean(values[order])

    lines = []
    if per_question:
        for q in queries:
            lines.extend(_line(c.name, q, value(c, q)) for c in cols if c.family not in SUMMARY_ONLY)
    lines.extend(_line(c.name, "all", value(c, None)) for c in cols)
    return lines, notes


def running_mean(values: Sequence[float]) -> float:
    """The mean as trec_eval computes it: a double added to a running sum one value at a time, in the order given
    (its query order), then divided by the count. Where the exact mean sits on a half at the 4th decimal (255/60000)
    the running sum's last bit decides which way it rounds, and trec_eval prints what this gives."""
    total = 0.0
    for value in values:
        total += float(value)
    return total / len(values) if len(values) else float("nan")


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
                        "Rprec, bpref, num_q, num_ret, num_rel, num_rel_ret, runid, 'official', 'all_trec') or "
                        "rankscope name (ndcg@5, hit_rate@3, mrr, judged@10); repeatable. Default: official")
    p.add_argument("-q", dest="per_question", action="store_true", help="also print each query's values")
    p.add_argument("-c", dest="complete", action="store_true",
                   help="average over every judged query: one missing from the run scores 0")
    p.add_argument("-l", dest="level", type=int, default=1, metavar="LEVEL",
                   help="minimum grade that counts as relevant (default 1); nDCG keeps graded gains")
    p.add_argument("-J", dest="judged_only", action="store_true",
                   help="drop unjudged documents from each ranking before scoring (trec_eval's -J)")
    p.add_argument("-M", dest="max_docs", type=int, metavar="N", help="score only the top N documents per query")
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
        from metrics.judged import judged_only
        from metrics.trec import NO_RESULTS_QUERY, read_qrels, read_trec_run

        qrels = read_qrels(args.qrels)
        if not len(qrels):
            raise InputError("holds no judgment: nothing to evaluate against", args.qrels)
        run = read_trec_run(args.run)
        if not len(run.query_ids) or not run.lengths.any():
            raise InputError("the run holds no result line: nothing to evaluate (trec_eval refuses it too)", args.run)
        if args.max_docs is not None:
            if args.max_docs < 1:
                raise InputError(f"-M must be at least 1, not {args.max_docs}")
            run = run.truncated(args.max_docs)
        if args.judged_only:
            run = judged_only(run, qrels)
        nothing = run.query_ids.tolist() == [NO_RESULTS_QUERY]  # rankscope's line for a run that retrieved nothing
        said = (f"the run retrieved nothing for any question (its one line, for question {NO_RESULTS_QUERY}, is there "
                f"for trec_eval, which refuses an empty file)")
        try:
            lines, notes = report(qrels, run, cols, args.per_question, args.complete, args.level)
        except InputError as err:
            raise InputError(f"{err}: {said}; -c scores every judged question 0") if nothing else err from None
        if nothing:
            notes.insert(0, f"note: {said}: every judged question scores 0")
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
