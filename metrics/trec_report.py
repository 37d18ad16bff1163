"""What ``python -m metrics`` prints: the measures asked for (``-m``), each question's values and their means, in
trec_eval's layout and order.

Output is ``measure<TAB>query<TAB>value`` (name left-justified to 22 characters, values to 4 decimals, counts as
integers, relstring quoted), measures in trec_eval's order (its ``measures.c``) whatever the order of ``-m``, so it
can be diffed line for line against trec_eval 10.0's. A mean is summed as trec_eval sums it, one float added at a
time in query order (:func:`running_mean`), so that it rounds to the same 4th decimal where the mean sits on an exact
half (a job sums its means exactly, ``metrics.bootstrap.exact_mean``: the two differ by a unit in the last place at
most); gm_map and gm_bpref are the exponential of the mean of their per-question logs, as trec_eval's
(``meas_avg.c``). One difference is deliberate: a judged query without any relevant judgment at the level is left
out of the means and named on stderr (trec_eval would score it 0).

A large run is scored a block of questions at a time (:mod:`metrics.trec_blocks`), a small one read whole
(:func:`metrics.trec.read_trec_run`): the same figures either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from metrics.errors import InputError
from metrics.spec import GEOMETRIC, MEASURES, MetricSpec, parse_trec_measure, trec_form

if TYPE_CHECKING:  # numpy loads only once there is something to score: --help and usage errors are instant
    import numpy as np

    from metrics.chunks import ChunkRun, Chunks
    from metrics.judged import Judged
    from metrics.qrels import Qrels
    from metrics.spans import Spans

COUNTS = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")
SUMMARY_ONLY = ("runid", "num_q", "gm_map", "gm_bpref")  # trec_eval prints these for "all" only
# trec_eval prints its measures in this order (measures.c's te_trec_measures), whatever the order they were asked in
ORDER = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
         "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg",
         "binG", "G", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success", "set_P",
         "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "rbp", "rbp_resid", "unj",
         "judged")  # judged@k is not trec_eval's: printed last
OFFICIAL = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
            "iprec_at_recall", "P")
NICKNAMES = {  # measures.c's nicknames
    "official": OFFICIAL,
    "all_trec": (*OFFICIAL, "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility",
                 "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg",
                 "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall", "set_relative_P",
            "set_map", "set_F"),
}
# trec_eval 10.0's measures and nicknames rankscope does not compute: refused by name
NOT_COMPUTED = ("dcg", "ideal_dcg", "ndcg_p", "yaap", "num_nonjudged_ret", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg",
                "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair",
                "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret",
                "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp", "all_prefs", "prefs",
                "qrels_jg")
RELSTRING = "relstring"


@dataclass(frozen=True)
class Column:
    """One printed measure: its printed name, its trec_eval family and, for a metric (not a count), its spec."""

    name: str
    family: str
    spec: MetricSpec | None = None
    depth: int = 10  # relstring's

    @property
    def order(self) -> tuple[int, str, int]:
        """trec_eval's order; a measure trec_eval lacks after its measures (judged@k, then any other, by name)."""
        place = ORDER.index(self.family) if self.family in ORDER else len(ORDER)
        return place, self.family if place == len(ORDER) else "", (self.spec.k or 0) if self.spec else self.depth


def family(spec: MetricSpec) -> str:
    """The trec_eval family a spec prints among: ``P`` for precision@5, ``ndcg`` or ``ndcg_cut`` for nDCG."""
    pattern = MEASURES[spec.measure][1]
    if spec.needs_chunks:  # span and budget measures: after trec_eval's, each family by name
        return f"{spec.measure}{spec.unit}"
    if pattern is None:
        return spec.measure
    if spec.measure == "ndcg":
        return "ndcg" if spec.k is None else "ndcg_cut"
    return pattern.split("_{")[0]


def columns(texts: Sequence[str]) -> list[Column]:
    """Parse ``-m`` values (trec_eval names, rankscope names, nicknames) into printed columns, trec_eval's order.

    A trec_eval form prints under its trec_eval name (``P_5``), a rankscope form under its own (``precision@5``). A
    family named with values (``P.5``, ``relstring.20``, ``rbp.p=0.8``) is printed at those only, as trec_eval does
    (``-m all_trec -m P.5`` prints P_5 and no other P). A trec_eval measure rankscope does not compute is refused by
    name.
    """
    found: list[tuple[str, bool, list[Column]]] = []  # (family, named with values, its columns)
    for text in [t for raw in texts for t in NICKNAMES.get(raw.strip(), (raw,))]:
        text = text.strip()
        found.append(_columns_of(text))
    explicit = {fam for fam, valued, _ in found if valued}
    out: dict[str, Column] = {}
    for fam, valued, cols in found:
        if valued or fam not in explicit:
            for col in cols:
                out.setdefault(col.name, col)
    return sorted(out.values(), key=lambda c: c.order)


def _columns_of(text: str) -> tuple[str, bool, list[Column]]:
    """One ``-m`` value's columns, with its trec_eval family and whether it names values (``P.5``, ``P_5``)."""
    head = text.partition(".")[0]
    if text in ORDER[:5] or text == "num_nonrel_judged_ret":
        return text, False, [Column(text, text)]
    if head == RELSTRING:
        depth = _relstring_depth(text)
        name = RELSTRING if text == RELSTRING else f"{RELSTRING}_{depth}"
        return RELSTRING, text != RELSTRING, [Column(name, RELSTRING, depth=depth)]
    if head in NOT_COMPUTED or text in NOT_COMPUTED:
        raise InputError(f"-m {text}: trec_eval's {head} is not computed by rankscope (see python -m metrics "
                         f"--help for the measures it computes)")
    try:
        specs = parse_trec_measure(text)
    except InputError as err:
        hint = ""
        if err.reason.startswith(("unknown", "cannot read metric")):
            known = [name for name in ORDER if name != "judged"]  # judged@k is rankscope's name, not trec_eval's
            hint = f"; trec_eval names known: {', '.join(known)}, {', '.join(NICKNAMES)}"
        raise InputError(f"-m {text}: {err.reason}{hint}") from None
    form = trec_form(text)
    cols = []
    for spec in specs:
        if spec.measure in COUNTS:
            cols.append(Column(spec.measure, spec.measure))
        else:
            cols.append(Column(spec.trec_name if form else spec.name, family(spec), spec))
    if form is None:  # a rankscope name: a family of its own
        return text, False, cols
    return (cols[0].family if cols else form[0]), form[1] is not None, cols


def _relstring_depth(text: str) -> int:
    _, dot, depth = text.partition(".")
    if not dot:
        return 10
    if not (depth.isascii() and depth.isdigit() and int(depth) >= 1):
        raise InputError(f"-m {text}: relstring's depth is a positive integer, e.g. 'relstring.20'")
    return int(depth)


@dataclass
class Scored:
    """Every scored question's values, in the order they were scored (the run's, block by block)."""

    query_ids: list[str] = field(default_factory=list)
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)  # metric name -> per-question arrays, per block
    counts: dict[str, list[np.ndarray]] = field(default_factory=dict)
    relstrings: dict[int, list[str]] = field(default_factory=dict)
    in_run: set[str] = field(default_factory=set)
    lines: int = 0  # result lines the run held (after -M, before -J)
    tag: str | None = None

    def add(self, judged: Judged, wanted: list[str] | None, cols: Sequence[Column], specs: list[MetricSpec],
            level: int) -> None:
        """Score one join, keeping the questions of ``wanted`` (all of them when None)."""
        import numpy as np

        from metrics.scoring import EvalSettings, compute
        from metrics.trec_measures import TrecMeasures

        keep = [i for i, q in enumerate(judged.query_ids) if wanted is None or q in wanted]
        rows = np.array(keep, dtype=np.int64)
        measures = TrecMeasures(judged, level)
        values = compute(judged, specs, EvalSettings(level=level), trec=measures)  # one TrecMeasures a join
        for name, array in values.items():
            self.values.setdefault(name, []).append(array[rows])
        for name, array in measures.counts().items():
            self.counts.setdefault(name, []).append(array[rows])
        for depth in {c.depth for c in cols if c.family == RELSTRING}:
            strings = measures.relstring(depth)
            self.relstrings.setdefault(depth, []).extend(strings[i] for i in keep)
        self.query_ids.extend(judged.query_ids[i] for i in keep)

    def value(self, name: str) -> np.ndarray:
        import numpy as np

        parts = self.values.get(name) or self.counts.get(name) or []
        return np.concatenate(parts) if parts else np.zeros(0)


def read_judgments(qrels_path: str | Path, run_path: str | Path) -> Qrels:
    """The judgments, read with pyarrow when they are large or the run is (its import is then paid anyway), else (and
    for what pyarrow's reader leaves to it) line by line: the same Qrels either way. A BEIR qrels TSV with ``start
    end`` columns (span judgments) gives each pair at its best span's grade (the spans: ``--spans``)."""
    from metrics import trec, trec_blocks
    from metrics.spans import has_span_header, read_beir_spans

    qrels_path, run_path = Path(qrels_path), Path(run_path)
    if qrels_path.is_file() and has_span_header(qrels_path):
        return read_beir_spans(qrels_path)[0]
    size = qrels_path.stat().st_size if qrels_path.is_file() else 0
    big_run = run_path.is_file() and run_path.stat().st_size >= trec_blocks.FAST_BYTES
    if size >= trec_blocks.FAST_BYTES or (big_run and size >= trec_blocks.FAST_QRELS_BYTES):
        try:
            return trec_blocks.read_qrels(qrels_path)
        except trec_blocks.Unsure:
            pass
    return trec.read_qrels(qrels_path)


def score_files(qrels: Qrels, run_path: str | Path, cols: Sequence[Column], complete: bool = False, level: int = 1,
                max_docs: int | None = None, judged_only: bool = False) -> Scored:
    """Score the run file against ``qrels``: a large file a block of questions at a time, a small one whole.

    Queries scored: those with a relevant judgment (grade >= ``level``) that are in the run, or all of them with
    ``complete`` (trec_eval's -c: a judged query missing from the run scores 0).
    """
    from metrics.trec_blocks import BLOCK_BYTES, FAST_BYTES

    if level < 0:
        raise InputError(f"the relevance level must be 0 or more, not {level}")
    if max_docs is not None and max_docs < 1:
        raise InputError(f"-M must be at least 1, not {max_docs}")
    specs = list(dict.fromkeys(c.spec for c in cols if c.spec is not None))
    relevant = set(qrels.relevant_queries(level))
    path = Path(run_path)
    scored = None
    if path.is_file() and path.stat().st_size >= FAST_BYTES:
        scored = _score_blocks(qrels, path, cols, specs, relevant, level, max_docs, judged_only, BLOCK_BYTES)
    if scored is None:
        scored = _score_whole(qrels, path, cols, specs, relevant, level, max_docs, judged_only)
    if not scored.lines:
        raise InputError("the run holds no result line: nothing to evaluate (trec_eval refuses it too)", run_path)
    if complete:
        missing = [q for q in qrels.relevant_queries(level) if q not in scored.in_run]
        if missing:
            scored.add(_empty_join(qrels, missing), None, cols, specs, level)
    return scored


def add_chunk_values(scored: Scored, qrels: Qrels, cols: Sequence[Column], level: int, chunks: ChunkRun | None,
                     spans: Spans | None, chunking: Chunks | None) -> None:
    """The span and budget measures of ``cols``, for every question scored, from a job's ``chunks.tsv``, ``spans.tsv``
    and ``chunking.tsv`` (:mod:`metrics.context`)."""
    specs = [c.spec for c in cols if c.spec is not None and c.spec.needs_chunks]
    if not specs:
        return
    if chunks is None:
        raise InputError(f"{', '.join(s.name for s in specs)}: these read a ranking of chunks (--chunks chunks.tsv)")
    from metrics.context import chunk_values

    for name, values in chunk_values(chunks, qrels, spans, specs, scored.query_ids, level, "linear", chunking).items():
        scored.values[name] = [values]


def _score_blocks(qrels: Qrels, path: Path, cols: Sequence[Column], specs: list[MetricSpec], relevant: set[str],
                  level: int, max_docs: int | None, judged_only: bool, block_bytes: int | None) -> Scored | None:
    """The run scored block by block (None: the line reader must read it); read as one block when it is not grouped
    by question."""
    from metrics.trec_blocks import NotGrouped, Unsure, blocks

    scored = Scored()
    try:
        for block in blocks(path, qrels, max_docs, judged_only, block_bytes):
            scored.in_run.update(block.query_ids)
            scored.lines += block.lines
            scored.tag = block.tag
            scored.add(block.judged, relevant, cols, specs, level)
    except NotGrouped:
        return _score_blocks(qrels, path, cols, specs, relevant, level, max_docs, judged_only, None)
    except Unsure:
        return None
    return scored


def _score_whole(qrels: Qrels, path: Path, cols: Sequence[Column], specs: list[MetricSpec], relevant: set[str],
                 level: int, max_docs: int | None, judged_only: bool) -> Scored:
    """The run read line by line (:func:`metrics.trec.read_trec_run`), then scored at once."""
    from metrics import trec
    from metrics.judged import judge
    from metrics.judged import judged_only as condensed

    run = trec.read_trec_run(path)
    scored = Scored(in_run=set(run.query_ids.tolist()), lines=int(run.lengths.sum()), tag=run.name)
    if not scored.lines:
        return scored
    if max_docs is not None:
        run = run.truncated(max_docs)
    if judged_only:
        run = condensed(run, qrels)
    scored.add(judge(run, qrels, list(run.query_ids)), relevant, cols, specs, level)
    return scored


def _empty_join(qrels: Qrels, query_ids: list[str]) -> Judged:
    """The join of questions that retrieved nothing (trec_eval -c's missing queries)."""
    import numpy as np

    from metrics.judged import judge
    from metrics.run import Run

    empty = Run(np.array([], dtype=object), np.array([], dtype=object), np.zeros((0, 0)), np.zeros((0, 0)))
    return judge(empty, qrels, query_ids)


def report(qrels: Qrels, scored: Scored, cols: Sequence[Column], per_question: bool = False, complete: bool = False,
           level: int = 1, run_name: str | None = None) -> tuple[list[str], list[str]]:
    """The output lines and the notes for stderr."""
    if not scored.query_ids:
        raise InputError("no query has both results and a relevant judgment" if not complete
                         else f"no query has a relevant judgment at level {level}")
    row = {q: i for i, q in enumerate(scored.query_ids)}
    queries = sorted(row, key=lambda q: str(q).encode())  # trec_eval's order: its query ids compared by strcmp
    order = [row[q] for q in queries]
    relevant = set(qrels.relevant_queries(level))
    left_out = [q for q in qrels.judged_queries() if q not in relevant and (complete or q in scored.in_run)]
    notes = []
    if left_out:
        notes.append(f"note: {len(left_out)} judged quer{'y has' if len(left_out) == 1 else 'ies have'} no relevant "
                     f"judgment at level {level}, left out of the means (trec_eval would score them 0): "
                     + " ".join(sorted(left_out)))
    arrays = {c.name: scored.value(c.spec.name if c.spec is not None else c.name) for c in cols
              if c.family not in ("runid", "num_q", RELSTRING)}

    def value(col: Column, query: str | None) -> object:
        """The column's value for one query, or over every query (``None``): a count's sum, a metric's mean."""
        if col.family == "runid":
            return run_name or scored.tag or "run"
        if col.family == "num_q":
            return len(row) if query is None else 1
        if col.family == RELSTRING:
            return f"'{scored.relstrings[col.depth][row[query]]}'"
        values = arrays[col.name]
        if query is not None:
            return int(values[row[query]]) if col.spec is None else float(values[row[query]])
        if col.spec is None:
            return int(values.sum())
        if col.spec.measure in GEOMETRIC:
            return geometric_mean([values[i] for i in order if scored.query_ids[i] in scored.in_run], len(order))
        return running_mean(values[order])

    lines = []
    if per_question:
        for q in queries:
            lines.extend(_line(c.name, q, value(c, q)) for c in cols if c.family not in SUMMARY_ONLY
                         and not (c.spec is not None and c.spec.measure in GEOMETRIC))
    lines.extend(_line(c.name, "all", value(c, None)) for c in cols if c.family != RELSTRING)
    return lines, notes


def _line(name: str, query: str, value: object) -> str:
    shown = f"{value:.4f}" if isinstance(value, float) else str(value)
    return f"{name:<22}\t{query}\t{shown}"


def running_mean(values: Iterable[float]) -> float:
    """The mean as trec_eval computes it: a double added to a running sum one value at a time, in the order given
    (its query order), then divided by the count. Where the exact mean sits on a half at the 4th decimal (255/60000)
    the running sum's last bit decides which way it rounds, and trec_eval prints what this gives."""
    total, count = 0.0, 0
    for value in values:
        total += float(value)
        count += 1
    return total / count if count else float("nan")


def geometric_mean(logs: Sequence[float], count: int) -> float:
    """gm_map's and gm_bpref's mean as trec_eval's meas_avg.c takes it: the logs of the queries in the run added in
    query order, ``log(1e-5)`` for each of the ``count`` queries missing from it (``-c``), exp of their mean."""
    from metrics.trec_measures import MIN_GEO_MEAN

    total = 0.0
    for value in logs:
        total += float(value)
    if count > len(logs):
        total += (count - len(logs)) * math.log(MIN_GEO_MEAN)
    return math.exp(total / count) if count else float("nan")
