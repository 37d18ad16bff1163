"""Failure diagnosis: say *why* a question misses, with the evidence, so a low mean points at what to repair.

Pure functions over a Collection, a Run and its Evaluation: no MLflow, no Hydra, no printing.

A question is **missed** when its first relevant document is not within the top ``cutoff`` (default 3).
Every missed question gets its rank (or "not retrieved" / "beyond depth N"), its first result and, for each
relevant document, the question terms (after the tokenizer) that document shares with it. The classes, by
these rules, in this order:

1. **homonymy** (surface homonymy), missed questions only: the first result is non-relevant, shares at
   least one question term, and shares *more* question terms than every relevant document. A confident
   wrong context: the words match, the meaning does not.
2. **vocabulary_gap**, missed questions that are not homonymy: no relevant document shares a term with the
   question and nothing relevant is retrieved. With an empty ranking there is no candidate at all.
   Homonymy and vocabulary gap read the same evidence from two sides (the relevant documents' words miss
   the question's); when a wrong document matches better than every relevant one, that is the actionable
   fact, so homonymy takes precedence and the two never both apply.
3. **late_rank**, missed questions: the first relevant document is retrieved at rank cutoff+1 to
   ``late_limit`` (10), or beyond ``late_limit``, or it is not in a ranking that is full to the depth, so
   it may lie beyond the list depth. ``late_rank_kind`` says which. A relevant document absent from a
   ranking that ended early (the retriever scored nothing else) is "not retrieved", not late. Read late
   ranks with MRR and nDCG, not hit rate. It may accompany homonymy.
4. **duplicates**, every question (crowding costs recall even when the first hit is on time): two or more
   near-identical documents (Jaccard similarity of their word shingles >= ``duplicate_threshold``) occupy
   places of the top ``duplicate_top_k``, pushing other documents out.

A missed question that fits no rule is reported as "unclassified".
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from metrics.evaluate import Evaluation
from metrics.run import PAD, Run
from pipeline.common.names import FAILURES_PREFIX
from pipeline.data.collection import Collection
from retrievers.text import Tokenizer

CLASSES = ("vocabulary_gap", "homonymy", "late_rank", "duplicates")
LABELS = {
    "vocabulary_gap": "vocabulary gap",
    "homonymy": "surface homonymy",
    "late_rank": "late rank",
    "duplicates": "duplicates",
}
NOT_RETRIEVED = "not retrieved"


@dataclass(frozen=True)
class DiagnosisSettings:
    """Knobs of the rules above; ``depth`` is the depth the ranking was asked for (None: the run's width)."""

    cutoff: int = 3
    late_limit: int = 10
    duplicate_threshold: float = 0.6
    duplicate_top_k: int = 10
    shingle_size: int = 2
    depth: int | None = None

    def __post_init__(self) -> None:
        if self.cutoff < 1:
            raise ValueError(f"diagnosis cutoff must be >= 1, got {self.cutoff}")
        if self.late_limit < self.cutoff:
            raise ValueError(f"late_limit ({self.late_limit}) must be >= cutoff ({self.cutoff})")
        if not 0.0 < self.duplicate_threshold <= 1.0:
            raise ValueError(f"duplicate_threshold must be within (0, 1], got {self.duplicate_threshold}")
        if self.duplicate_top_k < 2:
            raise ValueError(f"duplicate_top_k must be >= 2, got {self.duplicate_top_k}")
        if self.shingle_size < 1:
            raise ValueError(f"shingle_size must be >= 1, got {self.shingle_size}")
        if self.depth is not None and self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")


def diagnose(
    collection: Collection,
    run: Run,
    evaluation: Evaluation,
    tokenizer: Callable[[str], Sequence[str]] | None = None,
    settings: DiagnosisSettings | None = None,
) -> pd.DataFrame:
    """One row per scored question (index ``query_id``, aligned with ``evaluation.per_question``).

    Columns: ``question``, ``retrieved`` (ranking length), ``first_relevant_rank`` (0 = none in the ranking),
    ``rank`` (text: "2", "not retrieved", "beyond depth 10"), ``first_result`` ("" for an empty ranking),
    ``first_result_shared`` (its shared question terms), ``shared_terms`` ({relevant doc: shared terms},
    best grade first), ``relevant_ranks`` ({relevant doc: rank, 0 = not retrieved}), ``missed``, one bool
    column per class in :data:`CLASSES`, ``late_rank_kind``, ``duplicate_groups`` (lists of near-identical
    ids in the top k), ``classes`` (comma-separated, "" when none), ``diagnosis`` (the classes with their
    reason, "unclassified" for a missed question no rule explains) and ``evidence`` (rank, first result and
    shared terms, one readable line).
    """
    if evaluation.first_relevant_rank is None:
        raise ValueError("the evaluation carries no first_relevant_rank; build it with metrics.evaluate")
    tokenizer = tokenizer or Tokenizer()
    settings = settings or DiagnosisSettings()
    depth = settings.depth if settings.depth is not None else run.depth
    query_ids = [str(q) for q in evaluation.per_question.index]
    query_text = dict(zip(collection.query_ids, collection.query_texts))
    doc_text = dict(zip(collection.doc_ids, collection.doc_texts))
    relevant = _relevant_docs(collection, evaluation.settings.level)
    first_rank = evaluation.first_relevant_rank.reindex(query_ids).fillna(0).astype(int)
    rows = pd.Index(run.query_ids).get_indexer(query_ids) if len(run.query_ids) else np.full(len(query_ids), -1)
    groups = _duplicate_groups(run, rows, doc_text, tokenizer, settings)
    doc_terms = _TermSets(doc_text, tokenizer)

    records = []
    for i, qid in enumerate(query_ids):
        ranking = _ranking(run, rows[i])
        terms = list(dict.fromkeys(tokenizer(query_text.get(qid, ""))))
        rel = relevant.get(qid, [])
        shared = {d: doc_terms.shared(terms, d) for d in rel}
        position = {d: j + 1 for j, d in enumerate(ranking)}
        first = ranking[0] if ranking else ""
        first_shared = doc_terms.shared(terms, first) if first else []
        records.append(_classify(
            qid, query_text.get(qid, ""), ranking, int(first_rank[qid]), first, first_shared, shared,
            {d: position.get(d, 0) for d in rel}, groups[i], depth, settings,
        ))
    table = pd.DataFrame.from_records(records, index="query_id") if records else _empty_table()
    return table


def failure_counts(table: pd.DataFrame) -> dict[str, int]:
    """Questions per failure class, keyed by :data:`CLASSES` (a question may count in several)."""
    return {c: int(table[c].sum()) if len(table) else 0 for c in CLASSES}


def failure_metrics(table: pd.DataFrame) -> dict[str, int]:
    """The counts under their MLflow keys: ``system/rankscope/failures/vocabulary_gap`` ..."""
    return {FAILURES_PREFIX + c: n for c, n in failure_counts(table).items()}


def diagnosis_text(table: pd.DataFrame, system: str, cutoff: int = 3) -> str:
    """A short terminal section: the counts, then each failing question with its evidence."""
    counts = failure_counts(table)
    failing = table[table["missed"] | table[list(CLASSES)].any(axis=1)] if len(table) else table
    summary = ", ".join(f"{LABELS[c]} {n}" for c, n in counts.items())
    lines = [f"Diagnosis of {system}: {len(failing)} of {len(table)} questions fail at top {cutoff} "
             f"or carry a failure class ({summary})"]
    for qid, row in failing.iterrows():
        lines.append(f"  {qid} {row['question']!r}: {row['diagnosis']}")
        lines.append(f"      {row['evidence']}")
    return "\n".join(lines)


# Columns added to the per-question table. Lists and mappings are written as JSON text, so the CSV and the
# MLflow table hold plain strings (and booleans) and read back unchanged.
COLUMNS = {
    "missed": "missed",  # first relevant document not in the top `cutoff`
    "failure_classes": "classes",  # comma-separated CLASSES, "" when none
    "first_relevant": "rank",  # "2", "not retrieved", "beyond depth 10"
    "first_result": "first_result",
    "first_result_shared": "first_result_shared",  # JSON list of question terms
    "shared_terms": "shared_terms",  # JSON object: relevant document -> shared question terms
    "late_rank_kind": "late_rank_kind",
    "duplicate_groups": "duplicate_groups",  # JSON list of lists of near-identical document ids
    "diagnosis": "diagnosis",
    "evidence": "evidence",
}


def add_columns(per_question: pd.DataFrame, table: pd.DataFrame) -> None:
    """Write the diagnosis into the per-question table (``query_id`` column), row by row, as :data:`COLUMNS`."""
    rows = table.reindex(per_question["query_id"].astype(str))
    for column, source in COLUMNS.items():
        values = rows[source].tolist()
        if source == "missed":
            per_question[column] = [bool(v) for v in values]
        else:
            per_question[column] = [_text(v) for v in values]


def diagnosis_from_table(per_question: pd.DataFrame) -> pd.DataFrame | None:
    """The inverse of :func:`add_columns`, from a per-question table read back (index: question id): the
    columns the sweep's HTML report shows. None for a run logged without a diagnosis."""
    if not set(COLUMNS) <= set(per_question.columns):
        return None
    frame = pd.DataFrame(index=per_question.index)
    for column, source in COLUMNS.items():
        frame[source] = per_question[column]
    frame["question"] = per_question.get("question", pd.Series("", index=per_question.index))
    frame = frame.astype({c: object for c in frame.columns if c != "missed"})
    frame = frame.where(frame.notna(), "")  # an empty text cell reads back as missing
    frame["missed"] = frame["missed"].map(lambda v: str(v).lower() == "true")
    classes = frame["classes"].map(lambda v: {c.strip() for c in str(v).split(",")})
    for name in CLASSES:
        frame[name] = classes.map(lambda found, name=name: name in found)
    return frame


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


# ---------------------------------------------------------------------------------------------- internals


class _TermSets:
    """Each document's token set, computed once and only for the documents the evidence needs."""

    def __init__(self, texts: Mapping[str, str], tokenizer: Callable[[str], Sequence[str]]) -> None:
        self._texts, self._tokenizer, self._sets = texts, tokenizer, {}

    def shared(self, question_terms: Sequence[str], doc_id: str) -> list[str]:
        """The question's terms (in question order) that occur in the document."""
        if doc_id not in self._sets:
            self._sets[doc_id] = frozenset(self._tokenizer(self._texts.get(doc_id, "")))
        terms = self._sets[doc_id]
        return [t for t in question_terms if t in terms]


def _relevant_docs(collection: Collection, level: int) -> dict[str, list[str]]:
    """Relevant documents per question, best grade first, then in judgment order."""
    qrels = collection.qrels
    keep = qrels.grades >= level
    frame = pd.DataFrame({"q": qrels.query_ids[keep], "d": qrels.doc_ids[keep], "g": qrels.grades[keep]})
    frame = frame.sort_values("g", ascending=False, kind="stable")
    return {str(q): [str(d) for d in docs] for q, docs in frame.groupby("q", sort=False)["d"]}


def _ranking(run: Run, row: int) -> list[str]:
    if row < 0:
        return []
    n = int(run.lengths[row])
    return [str(d) for d in run.doc_ids[run.docs[row, :n]]]


def _rank_text(first: int, retrieved: int, depth: int) -> str:
    if first > 0:
        return str(first)
    return f"beyond depth {depth}" if retrieved >= depth else NOT_RETRIEVED


def _classify(
    qid: str, question: str, ranking: list[str], first_rank: int, first: str, first_shared: list[str],
    shared: dict[str, list[str]], relevant_ranks: dict[str, int], groups: list[list[str]], depth: int,
    settings: DiagnosisSettings,
) -> dict:
    """Apply the module's rules to one question and write its evidence line."""
    missed = first_rank == 0 or first_rank > settings.cutoff
    most_shared = max((len(t) for t in shared.values()), default=0)
    homonymy = missed and bool(first) and first not in shared and len(first_shared) > most_shared
    vocabulary_gap = missed and not homonymy and most_shared == 0 and first_rank == 0
    rank = _rank_text(first_rank, len(ranking), depth)
    late_kind = ""
    if missed and first_rank > settings.late_limit:
        late_kind = f"beyond rank {settings.late_limit}"
    elif missed and first_rank > 0:
        late_kind = f"rank {settings.cutoff + 1}-{settings.late_limit}"
    elif missed and rank != NOT_RETRIEVED:
        late_kind = rank
    flags = {"vocabulary_gap": vocabulary_gap, "homonymy": homonymy, "late_rank": bool(late_kind),
             "duplicates": bool(groups)}
    classes = [c for c in CLASSES if flags[c]]

    relevant_part = "; ".join(
        f"{d} ({'rank ' + str(relevant_ranks[d]) if relevant_ranks[d] else NOT_RETRIEVED}) shares "
        f"{_terms(t)}" for d, t in shared.items()
    ) or "no relevant judgment"
    first_part = f"first result {first} shares {_terms(first_shared)}" if first else "empty ranking"
    reasons = []
    if homonymy:
        reasons.append(f"surface homonymy ({first} matches {len(first_shared)} question term(s), "
                       f"the relevant documents at most {most_shared})")
    if vocabulary_gap:
        reasons.append("vocabulary gap (" + ("no candidate at all" if not ranking else
                                             f"{len(ranking)} candidates, none relevant") + ")")
    if late_kind:
        reasons.append(f"late rank ({late_kind})")
    if groups:
        reasons.append("duplicates (" + "; ".join(" = ".join(g) for g in groups) + ")")
    if missed and not reasons:
        reasons.append("unclassified")
    found = f"first relevant at rank {rank}" if first_rank else f"first relevant {rank}"
    return {
        "query_id": qid, "question": question, "retrieved": len(ranking), "first_relevant_rank": first_rank,
        "rank": rank, "first_result": first, "first_result_shared": first_shared, "shared_terms": shared,
        "relevant_ranks": relevant_ranks, "missed": missed, **flags, "late_rank_kind": late_kind,
        "duplicate_groups": groups, "classes": ", ".join(classes), "diagnosis": " + ".join(reasons),
        "evidence": f"{found}; {first_part}; {relevant_part}",
    }


def _terms(terms: list[str]) -> str:
    return ", ".join(repr(t) for t in terms) if terms else "no term"


def _empty_table() -> pd.DataFrame:
    columns = ["question", "retrieved", "first_relevant_rank", "rank", "first_result", "first_result_shared",
               "shared_terms", "relevant_ranks", "missed", *CLASSES, "late_rank_kind", "duplicate_groups",
               "classes", "diagnosis", "evidence"]
    return pd.DataFrame(columns=columns, index=pd.Index([], name="query_id"))


def shingles(tokens: Sequence[str], size: int) -> set[str]:
    """Word shingles of ``size`` tokens (a shorter text is one shingle; an empty one has none)."""
    if not tokens:
        return set()
    if len(tokens) <= size:
        return {"\x1f".join(tokens)}
    return {"\x1f".join(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def _shingle_columns(tokenizer: Callable[[str], Sequence[str]], text: str, size: int) -> np.ndarray:
    """A document's shingles as column numbers of a process-wide shingle vocabulary, remembered across the jobs
    of a process: a sweep's rankings share most of their top documents, and tokenising them (and numbering
    their shingles) again for every sweep point was most of the diagnosis's time."""
    try:
        return _remembered_columns(tokenizer, text, size)
    except TypeError:  # an unhashable tokenizer: nothing to key the memo by
        return _columns(shingles(list(tokenizer(text)), size), {})


_SHINGLE_VOCABULARY: dict[tuple[Callable[[str], Sequence[str]], int], dict[str, int]] = {}


@functools.lru_cache(maxsize=2**16)
def _remembered_columns(tokenizer: Callable[[str], Sequence[str]], text: str, size: int) -> np.ndarray:
    vocabulary = _SHINGLE_VOCABULARY.setdefault((tokenizer, size), {})
    return _columns(shingles(list(tokenizer(text)), size), vocabulary)


def _columns(found: set[str], vocabulary: dict[str, int]) -> np.ndarray:
    """Each shingle's number in ``vocabulary`` (new shingles are added), in a read-only array."""
    columns = np.fromiter((vocabulary.setdefault(s, len(vocabulary)) for s in found), dtype=np.int64,
                          count=len(found))
    columns.flags.writeable = False
    return columns


def _duplicate_groups(
    run: Run, rows: np.ndarray, doc_text: Mapping[str, str], tokenizer: Callable[[str], Sequence[str]],
    settings: DiagnosisSettings,
) -> list[list[list[str]]]:
    """Near-identical documents in each question's top k, as groups of ids in rank order.

    Vectorised over questions: every pair of top-k places is compared at once through a sparse
    (documents x shingles) incidence matrix; only the flagged pairs are then grouped in Python.
    """
    out: list[list[list[str]]] = [[] for _ in rows]
    k = min(settings.duplicate_top_k, run.depth)
    present = np.flatnonzero(rows >= 0)
    if k < 2 or len(present) == 0:
        return out
    top = run.docs[rows[present], :k]
    used = np.unique(top[top != PAD])
    codes = np.full(len(run.doc_ids), -1, dtype=np.int64)
    codes[used] = np.arange(len(used))
    sets = [_shingle_columns(tokenizer, doc_text.get(str(run.doc_ids[d]), ""), settings.shingle_size) for d in used]
    cols = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
    incidence = sp.csr_matrix(
        (np.ones(len(cols)), (np.repeat(np.arange(len(sets)), [len(s) for s in sets]), cols)),
        shape=(len(sets), int(cols.max()) + 1 if len(cols) else 0),
    )
    size = np.asarray(incidence.sum(axis=1)).ravel()
    i, j = np.triu_indices(k, 1)
    a, b = top[:, i], top[:, j]
    valid = (a != PAD) & (b != PAD)
    q_of, pair = np.nonzero(valid)
    ca, cb = codes[a[q_of, pair]], codes[b[q_of, pair]]
    inter = np.asarray(incidence[ca].multiply(incidence[cb]).sum(axis=1)).ravel()
    union = size[ca] + size[cb] - inter
    jaccard = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    hit = np.flatnonzero(jaccard >= settings.duplicate_threshold)
    for q in np.unique(q_of[hit]):
        pairs = [(int(i[pair[h]]), int(j[pair[h]])) for h in hit[q_of[hit] == q]]
        names = [str(run.doc_ids[d]) for d in top[q]]
        out[int(present[q])] = [[names[p] for p in g] for g in _connected(pairs)]
    return out


def _connected(pairs: list[tuple[int, int]]) -> list[list[int]]:
    """Connected groups of places linked by the pairs, each sorted, groups in order of their best place."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for x, y in pairs:
        rx, ry = root(x), root(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    groups: dict[int, list[int]] = {}
    for x in sorted(parent):
        groups.setdefault(root(x), []).append(x)
    return [groups[r] for r in sorted(groups)]
