"""Failure diagnosis: say *why* a question misses, with the evidence, so a low mean points at what to repair.

Pure functions over a Collection, a Run and its Evaluation: no MLflow, no Hydra, no printing.

A question is **missed** when its first relevant document is not within the top ``cutoff`` (default 3). For
each missed question the rules compare its **first result** (rank 1, never relevant for a missed question) with
its relevant documents, through the question's terms (after the tokenizer) and the corpus's document
frequencies:

- a term's **weight** is its BM25 idf, ``ln(1 + (N - df + 0.5) / (df + 0.5))``; a document **matches** the
  share of the question's total weight carried by the question terms it contains (a term no document
  contains still counts in the total: nothing can match it);
- a term is **rare** when at most ``rare_share`` (5%) of the documents contain it (always when one does);
- the first result's **distinguishing terms** are the question terms it contains that no relevant document
  contains;
- two documents are in the **same context** when the relevant one is among the ``context_share`` (2%) of the
  corpus nearest to the first result (cosine of tf-idf vectors; measured only when a rule needs it).

Every missed question gets exactly one of six causes, decided in this order:

0. **no_results**: the ranking is empty, and either every ranking of the run is (the retriever returned nothing at
   all: a broken retriever, not the words) or a relevant document holds a question term (the words were there).
1. No relevant document contains a question term: **homonymy** if the first result looks like a lone word
   taken in another context (below), else **vocabulary_gap** (with an empty ranking, among rankings that are not:
   no candidate at all).
2. **term_weighting**: a relevant document matches at least as much of the question's weight as the first
   result, or the first result has no distinguishing term: every question word that lifted it, a relevant
   document has too. The words are there; the ranking weighed them against the relevant documents.
3. **common_terms**: the first result's distinguishing terms are all common (none rare): only frequent
   words set it apart.
4. **homonymy** (surface homonymy): a distinguishing term is rare, the first result matches less than
   ``topic_share`` (half) of the question, and no relevant document is in its context: a specific word of
   the question, taken in another context. The words match, the meaning does not.
5. **partial_gap** (partial vocabulary gap): a distinguishing term is rare and the first result is on the
   question's topic (it matches at least half of it, or a relevant document is in its context): the
   relevant documents lack specific words of the question that another document on the topic uses.

Two more classes describe where and what, not why, and may accompany a cause:

- **late_rank**, missed questions: the first relevant document is in the ranking at rank cutoff+1 to
  ``late_limit`` (10) or beyond ``late_limit``; ``late_rank_kind`` says which. A relevant document absent
  from the ranking (whether the ranking ended early or is full to its depth, so it may lie beyond) is not a
  late rank: the ``rank`` column says "not retrieved" or "beyond depth N". Read late ranks with MRR and nDCG,
  not hit rate.
- **duplicates**, every question (crowding costs recall even when the first hit is on time): two or more
  near-identical documents (Jaccard similarity of their word shingles >= ``duplicate_threshold``) occupy
  places of the top ``duplicate_top_k``, pushing other documents out.

docs/diagnosis.md gives each class's counts on real corpora, with examples.
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

from metrics.evaluation import Evaluation
from metrics.run import PAD, Run
from pipeline.common.names import FAILURES_PREFIX
from pipeline.data.collection import Collection
from retrievers.text import TermCounts, Tokenizer, term_counts

NO_RESULTS = "no_results"
CAUSES = (NO_RESULTS, "vocabulary_gap", "partial_gap", "homonymy", "common_terms", "term_weighting")  # one per missed
CLASSES = (*CAUSES, "late_rank", "duplicates")  # question
LABELS = {
    NO_RESULTS: "returned nothing",
    "vocabulary_gap": "vocabulary gap",
    "partial_gap": "partial vocabulary gap",
    "homonymy": "surface homonymy",
    "common_terms": "common terms",
    "term_weighting": "term weighting",
    "late_rank": "late rank",
    "duplicates": "duplicates",
}
NOT_RETRIEVED = "not retrieved"
CONTEXT_SAMPLE = 10_000  # documents the context test compares with: all of a smaller corpus, else evenly spaced


@dataclass(frozen=True)
class DiagnosisSettings:
    """Knobs of the rules above; ``depth`` is the depth the ranking was asked for (None: the run's width)."""

    cutoff: int = 3
    late_limit: int = 10
    duplicate_threshold: float = 0.6
    duplicate_top_k: int = 10
    shingle_size: int = 2
    rare_share: float = 0.05
    topic_share: float = 0.5
    context_share: float = 0.02
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
        for name in ("rare_share", "topic_share"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within (0, 1], got {getattr(self, name)}")
        if not 0.0 <= self.context_share < 1.0:
            raise ValueError(f"context_share must be within [0, 1), got {self.context_share}")
        if self.depth is not None and self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")


def diagnose(
    collection: Collection,
    run: Run,
    evaluation: Evaluation,
    tokenizer: Tokenizer | None = None,
    settings: DiagnosisSettings | None = None,
    counts: TermCounts | None = None,
) -> pd.DataFrame:
    """One row per scored question (index ``query_id``, aligned with ``evaluation.per_question``).

    ``counts``: the corpus's term counts by ``tokenizer`` (a job passes its cached ones); None counts them here.

    Columns: ``question``, ``retrieved`` (ranking length), ``first_relevant_rank`` (0 = none in the ranking),
    ``rank`` (text: "2", "not retrieved", "beyond depth 10"), ``first_result`` ("" for an empty ranking),
    ``first_result_shared`` (its shared question terms), ``shared_terms`` ({relevant doc: shared terms},
    best grade first), ``relevant_ranks`` ({relevant doc: rank, 0 = not retrieved}), ``rare_terms`` (the
    question's rare terms), ``distinguishing_terms``, ``first_result_match`` and ``relevant_match`` (shares
    of the question's weight: the first result's, the best relevant document's), ``closer_share`` (share of
    the corpus nearer to the first result than its nearest relevant document; NaN when not measured),
    ``missed``, one bool column per class in :data:`CLASSES`, ``late_rank_kind``, ``duplicate_groups`` (lists
    of near-identical ids in the top k), ``classes`` (comma-separated, "" when none), ``diagnosis`` (the
    classes with their reason, "unclassified" for a missed question without judged relevant documents) and
    ``evidence`` (rank, first result and shared terms with their weight, one readable line).
    """
    if evaluation.first_relevant_rank is None:
        raise ValueError("the evaluation carries no first_relevant_rank; build it with metrics.evaluation")
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
    corpus = _Corpus(counts if counts is not None else term_counts(collection.doc_ids, collection.doc_texts,
                                                                    tokenizer), settings)
    questions = [query_text.get(qid, "") for qid in query_ids]
    judged = [relevant.get(qid, []) for qid in query_ids]
    firsts = first_rank.to_numpy()
    facts = _ranking_facts(run, rows, judged)
    nothing = not np.asarray(run.lengths).any()  # the retriever returned nothing, for any question
    keys = [(*key, nothing) for key in _question_keys(query_ids, questions, firsts, judged, groups, facts)]
    memo = corpus.stats.records(tokenizer, settings, depth)
    records: list[dict | None] = [None if memo is None else memo.get(key) for key in keys]
    todo = [i for i, record in enumerate(records) if record is None]
    terms = [list(dict.fromkeys(tokenizer(questions[i]))) for i in todo]
    retrieved, first_docs, ranks = facts
    found = _evidence(corpus, [query_ids[i] for i in todo], [questions[i] for i in todo], terms, firsts[todo],
                      [judged[i] for i in todo], (retrieved[todo], [first_docs[i] for i in todo],
                                                  [ranks[i] for i in todo]), settings)
    for e in found:
        e.run_empty = nothing
    closer = corpus.closer_shares([(e.first, e.relevant) for e in found if e.needs_context])
    for e, share in zip([e for e in found if e.needs_context], closer):
        e.closer_share = share
    for i, e in zip(todo, found):
        records[i] = _classify(e, groups[i], depth, settings)
        if memo is not None:
            memo[keys[i]] = records[i]
    if memo is not None and len(memo) > REMEMBERED_QUESTIONS:
        memo.clear()
    return pd.DataFrame.from_records(records, index="query_id") if records else _empty_table()


REMEMBERED_QUESTIONS = 2**14  # diagnosed questions kept per corpus, tokenizer and settings (a few KB each; all
# forgotten beyond): a 12-point sweep of 1,000 questions keeps at most 12,000


def _ranking_facts(run: Run, rows: np.ndarray,
                   judged: list[list[str]]) -> tuple[np.ndarray, list[str], list[dict[str, int]]]:
    """What the rules read of each question's ranking: its length, its first result ("" for none) and where each
    relevant document ranks (0: not in it), for every question at once."""
    retrieved = np.where(rows >= 0, run.lengths[np.maximum(rows, 0)], 0) if len(run.query_ids) else np.zeros(
        len(rows), dtype=np.int64)
    first_docs = [str(run.doc_ids[run.docs[r, 0]]) if n > 0 else "" for r, n in zip(rows.tolist(), retrieved.tolist())]
    return retrieved, first_docs, _relevant_ranks(run, rows, retrieved, judged)


def _question_keys(query_ids: list[str], questions: list[str], firsts: np.ndarray, judged: list[list[str]],
                   groups: list[list[list[str]]],
                   facts: tuple[np.ndarray, list[str], list[dict[str, int]]]) -> list[tuple]:
    """Everything a question's diagnosis reads besides the corpus, tokenizer, settings and depth: its id and text,
    its first relevant rank, the ranking's length and first result, its relevant documents and where they rank, and
    its groups of duplicates. A sweep's jobs rank most questions' top documents alike: a question whose key was
    diagnosed before gets that diagnosis, the one computing it again would give."""
    retrieved, first_docs, ranks = facts
    return [(qid, question, first, length, doc, tuple(docs), tuple(where.values()), tuple(map(tuple, found)))
            for qid, question, first, length, doc, docs, where, found in zip(
                query_ids, questions, firsts.tolist(), retrieved.tolist(), first_docs, judged, ranks, groups)]


def failure_counts(table: pd.DataFrame) -> dict[str, int]:
    """Questions per failure class, keyed by :data:`CLASSES` (a question may count in several)."""
    return {c: int(table[c].sum()) if len(table) else 0 for c in CLASSES}


def failure_metrics(table: pd.DataFrame) -> dict[str, int]:
    """The counts under their MLflow keys: ``system/failures_vocabulary_gap`` ..."""
    return {FAILURES_PREFIX + c: n for c, n in failure_counts(table).items()}


def diagnosis_text(table: pd.DataFrame, system: str, cutoff: int = 3) -> str:
    """A short terminal section: the counts, then each failing question with its evidence."""
    counts = failure_counts(table)
    failing = table[table["missed"] | table[list(CLASSES)].any(axis=1)] if len(table) else table
    missed = int(table["missed"].sum()) if len(table) else 0
    # "returned nothing" is named only when it happened: a retriever that returns something is the usual case
    summary = ", ".join(f"{LABELS[c]} {n}" for c, n in counts.items() if n or c != NO_RESULTS)
    # the missed questions, which the causes add up to; a question found in time can still carry a class (duplicates)
    also = len(failing) - missed
    more = f"; {also} more found in time carr{'ies' if also == 1 else 'y'} a failure class" if also else ""
    lines = [f"Diagnosis of {system}: {missed} of {len(table)} questions fail at top {cutoff}{more} ({summary})"]
    for qid, question, diagnosis, evidence in zip(failing.index.tolist(), failing["question"].tolist(),
                                                 failing["diagnosis"].tolist(), failing["evidence"].tolist()):
        lines.append(f"  {qid} {question!r}: {diagnosis}")  # the columns as lists: no Series built per row
        lines.append(f"      {evidence}")
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
    "distinguishing_terms": "distinguishing_terms",  # JSON list: in the first result, in no relevant document
    "first_result_match": "first_result_match",  # share of the question's weight, "" for a question not missed
    "relevant_match": "relevant_match",  # the same for the best relevant document
    "closer_share": "closer_share",  # share of the corpus nearer to the first result, "" when not measured
    "late_rank_kind": "late_rank_kind",
    "duplicate_groups": "duplicate_groups",  # JSON list of lists of near-identical document ids
    "diagnosis": "diagnosis",
    "evidence": "evidence",
}
# What a per-question table needs to be read back as a diagnosis (runs logged before the match columns have these).
_REQUIRED = ("missed", "failure_classes", "first_relevant", "first_result", "diagnosis", "evidence")


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
    columns the sweep's HTML report shows. None for a run logged without a diagnosis.

    Built as one frame from object arrays (a sweep's end reads a table per job back): every column but the
    booleans holds its cells as objects, an empty text cell (read back as missing) as ``""``."""
    if not set(_REQUIRED) <= set(per_question.columns):
        return None
    blank = np.full(len(per_question), "", dtype=object)

    def cells(column: str) -> np.ndarray:
        if column not in per_question.columns:
            return blank
        values = per_question[column].to_numpy(dtype=object)
        return np.where(pd.isna(values), "", values)

    data = {source: cells(column) for column, source in COLUMNS.items()}
    data["question"] = cells("question")
    data["missed"] = np.array([str(v).lower() == "true" for v in data["missed"].tolist()], dtype=bool)
    classes = [{c.strip() for c in str(v).split(",")} for v in data["classes"].tolist()]
    for name in CLASSES:
        data[name] = np.array([name in found for found in classes], dtype=bool)
    flags = {"missed", *CLASSES}
    texts = pd.DataFrame({c: v for c, v in data.items() if c not in flags}, index=per_question.index, dtype=object)
    booleans = pd.DataFrame({c: data[c] for c in data if c in flags}, index=per_question.index)
    return pd.concat([texts, booleans], axis=1)[list(data)]


_JSON = json.JSONEncoder(ensure_ascii=False)  # json.dumps(value, ensure_ascii=False), without a new encoder per cell


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple, dict)):
        return _JSON.encode(value)
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:.4f}"
    return "" if value is None else str(value)


# ---------------------------------------------------------------------------------------------- internals


class _CorpusStats:
    """What the rules read from a corpus whatever the run: its sorted count matrix, document frequencies, the row of
    each document id, the smoothed idf and the tf-idf vectors of the context test's reference documents.

    Kept in the term counts' ``derived`` (:func:`_stats_of`): a sweep's jobs share the cached counts of their corpus
    and tokenizer, so these are built once per process instead of once per job."""

    def __init__(self, counts: TermCounts) -> None:
        self.matrix = counts.counts.tocsr()
        if not self.matrix.has_sorted_indices:
            self.matrix = self.matrix.sorted_indices()
        self.n_docs, self.n_terms = self.matrix.shape
        self.df = np.bincount(self.matrix.indices[self.matrix.data > 0], minlength=self.n_terms)
        self.doc_index = pd.Index(np.asarray(counts.doc_ids, dtype=object).astype(str))
        self.closer: dict[tuple[int, tuple[int, ...]], float] = {}  # see _Corpus.closer_shares
        self._records: dict[tuple, dict[tuple, dict]] = {}  # see records()

    def records(self, tokenizer: Callable[[str], Sequence[str]], settings: DiagnosisSettings,
                depth: int) -> dict[tuple, dict] | None:
        """The diagnoses of questions made on this corpus with this tokenizer, settings and depth, by
        :func:`_question_keys`; None for an unhashable tokenizer (nothing to key them by)."""
        try:
            return self._records.setdefault((tokenizer, settings, depth), {})
        except TypeError:
            return None

    @functools.cached_property
    def idf(self) -> np.ndarray:
        return np.log((self.n_docs + 1) / (self.df + 1)) + 1.0

    def tfidf(self, rows: np.ndarray) -> sp.csr_matrix:
        """L2-normalised tf-idf rows (sublinear tf, smoothed idf) of the given documents."""
        m = self.matrix[rows].astype(np.float64)
        m.data = (1.0 + np.log(np.maximum(m.data, 1.0))) * self.idf[m.indices]
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
        return sp.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ m

    @functools.cached_property
    def reference(self) -> np.ndarray:
        """The documents the context test compares with: all of a small corpus, else evenly spaced."""
        return np.unique(np.linspace(0, self.n_docs - 1, min(self.n_docs, CONTEXT_SAMPLE)).astype(np.int64))

    @functools.cached_property
    def reference_vectors(self) -> sp.csr_matrix:
        """The reference documents' tf-idf vectors as columns, in the row-major form a product takes (given a
        column-major one, every product would convert it again)."""
        return self.tfidf(self.reference).T.tocsr()


def _stats_of(counts: TermCounts) -> _CorpusStats:
    """The corpus statistics of ``counts``, built on first use and kept as long as the counts are."""
    stats = counts.derived.get("diagnosis")
    if not isinstance(stats, _CorpusStats):
        stats = counts.derived["diagnosis"] = _CorpusStats(counts)
    return stats


class _Corpus:
    """What the rules read from the corpus: each document's terms, document frequencies, term weights, and
    (only when asked) tf-idf vectors for the context test. Built from one term-count matrix, vectorised."""

    def __init__(self, counts: TermCounts, settings: DiagnosisSettings) -> None:
        self.counts, self.stats = counts, _stats_of(counts)
        self.matrix, self.n_docs, self.df = self.stats.matrix, self.stats.n_docs, self.stats.df
        self.rare_limit = max(1.0, settings.rare_share * self.n_docs)
        self._rows: dict[str, int] = {}

    def term_ids(self, terms: Sequence[str]) -> np.ndarray:
        """Column of each term (-1: no document contains it), in one vectorised look-up."""
        if not len(terms):
            return np.zeros(0, dtype=np.int64)
        unique = list(dict.fromkeys(terms))
        columns = self.counts.term_index.get_indexer(unique).astype(np.int64)
        return columns[pd.Index(unique, dtype=object).get_indexer(terms)]

    def look_up(self, doc_ids: Sequence[str]) -> np.ndarray:
        """The rows of ``doc_ids`` (-1: not in the corpus), remembered for :meth:`row`."""
        docs = list(dict.fromkeys(doc_ids))
        found = self.stats.doc_index.get_indexer(docs).tolist() if docs else []
        self._rows.update(zip(docs, found))
        return np.array([self._rows[d] for d in doc_ids], dtype=np.int64)

    def weights(self, ids: np.ndarray) -> np.ndarray:
        """BM25 idf of each term; a term no document contains gets the largest weight."""
        df = np.where(ids >= 0, self.df[np.maximum(ids, 0)], 0)
        return np.log1p((self.n_docs - df + 0.5) / (df + 0.5))

    def rare(self, ids: np.ndarray) -> np.ndarray:
        df = np.where(ids >= 0, self.df[np.maximum(ids, 0)], 0)
        return (df > 0) & (df <= self.rare_limit)

    def row(self, doc_id: str) -> int:
        return self._rows.get(doc_id, -1)

    def contains(self, rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Whether document ``rows[i]`` contains term ``ids[i]``, for every i at once (-1 in either: False)."""
        keep = (rows >= 0) & (ids >= 0)
        out = np.zeros(len(rows), dtype=bool)
        if not keep.any():
            return out
        used, local = np.unique(rows[keep], return_inverse=True)
        sub = self.matrix[used]  # only the documents asked about: sorted indices, rows in `used` order
        keys = np.repeat(np.arange(len(used), dtype=np.int64), np.diff(sub.indptr)) * self.stats.n_terms + sub.indices
        wanted = local.astype(np.int64) * self.stats.n_terms + ids[keep]
        at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
        out[keep] = (keys[at] == wanted) if len(keys) else False
        return out

    def closer_shares(self, pairs: list[tuple[str, list[str]]], chunk: int = 256) -> list[float]:
        """For each (first result, relevant documents): the share of the corpus (or of :data:`CONTEXT_SAMPLE`
        documents evenly spaced through it) nearer to the first result, by tf-idf cosine, than its nearest
        relevant document; 1.0 when no relevant document shares a word with it.

        A share depends only on the first result and the relevant documents, so the corpus statistics remember it:
        a sweep's later jobs mostly fail on the same questions with the same first result, and compute only the
        pairs that are new. Each share is computed row by row, so a remembered one is the same to the bit."""
        if not pairs:
            return []
        keys = [(self.row(f), tuple(sorted({self.row(d) for d in r}))) for f, r in pairs]
        known = self.stats.closer
        new = list(dict.fromkeys(k for k in keys if k not in known))
        if new:
            known.update(zip(new, self._closer_shares(new, chunk)))
        return [known[k] for k in keys]

    def _closer_shares(self, pairs: list[tuple[int, tuple[int, ...]]], chunk: int) -> list[float]:
        """:meth:`closer_shares` of (first result's row, relevant documents' rows) pairs (-1: not in the corpus)."""
        reference, ref = self.stats.reference, self.stats.reference_vectors
        first = np.array([f for f, _ in pairs], dtype=np.int64)
        owner = np.repeat(np.arange(len(pairs)), [len(r) for _, r in pairs])
        rel = np.array([d for _, r in pairs for d in r], dtype=np.int64)
        keep = (rel >= 0) & (first[owner] >= 0)
        owner, rel = owner[keep], rel[keep]
        firsts = self.stats.tfidf(np.maximum(first, 0))
        pair_sim = np.asarray(firsts[owner].multiply(self.stats.tfidf(rel)).sum(axis=1)).ravel()
        nearest = np.zeros(len(pairs))
        np.maximum.at(nearest, owner, pair_sim)
        shares = np.ones(len(pairs))
        in_reference = np.isin(first, reference)
        for start in range(0, len(pairs), chunk):
            part = slice(start, start + chunk)
            sims = (firsts[part] @ ref).toarray()
            closer = (sims > nearest[part, None]).sum(axis=1) - in_reference[part]  # the first result itself
            others = len(reference) - in_reference[part]
            shares[part] = np.where(nearest[part] > 0, np.maximum(closer, 0) / np.maximum(others, 1), 1.0)
        shares[first < 0] = 1.0
        return shares.tolist()


@dataclass
class _Evidence:
    """One question's evidence, gathered before the rules decide."""

    qid: str
    question: str
    retrieved: int  # the ranking's length
    first_rank: int
    first: str
    first_shared: list[str]
    shared: dict[str, list[str]]
    relevant_ranks: dict[str, int]
    rare_terms: list[str]
    distinguishing: list[str]
    first_match: float
    relevant_matches: dict[str, float]
    missed: bool
    needs_context: bool = False
    closer_share: float = float("nan")
    run_empty: bool = False  # every ranking of the run is empty

    @property
    def relevant(self) -> list[str]:
        return list(self.shared)

    @property
    def relevant_match(self) -> float:
        return max(self.relevant_matches.values(), default=0.0)

    @property
    def rare_distinguishing(self) -> list[str]:
        return [t for t in self.distinguishing if t in self.rare_terms]


def _evidence(corpus: _Corpus, query_ids: list[str], questions: list[str], terms: list[list[str]],
              first_ranks: np.ndarray, relevant: list[list[str]],
              facts: tuple[np.ndarray, list[str], list[dict[str, int]]],
              settings: DiagnosisSettings) -> list[_Evidence]:
    """Every question's shared terms, their weights and rarity, and whether the context test is needed; ``facts``
    are its ranking's (:func:`_ranking_facts`).

    The look-ups (term columns, which document holds which question term) are made for all the questions at once;
    only the per-question lists are put together in Python."""
    retrieved, first_docs, ranks = facts
    n_terms = np.array([len(t) for t in terms], dtype=np.int64)
    term_start = np.concatenate([[0], np.cumsum(n_terms)])
    ids = corpus.term_ids([t for ts in terms for t in ts])
    weights, rare = corpus.weights(ids), corpus.rare(ids)
    # (question, document) pairs to look in: each question's first result, then its relevant documents
    pair_q = [i for i, r in enumerate(relevant) for _ in range(1 + len(r))]
    pair_doc = [d for first, r in zip(first_docs, relevant) for d in (first, *r)]
    pair_q_arr = np.array(pair_q, dtype=np.int64)
    lengths = n_terms[pair_q_arr] if len(pair_q) else np.zeros(0, dtype=np.int64)
    flat = (np.repeat(term_start[pair_q_arr] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
            + np.arange(int(lengths.sum()))) if len(pair_q) else np.zeros(0, dtype=np.int64)
    doc_rows = corpus.look_up(pair_doc)
    present = corpus.contains(np.repeat(doc_rows, lengths), ids[flat]) if len(flat) else np.zeros(0, dtype=bool)
    no_first = [j == 0 and d == "" for i, r in enumerate(relevant) for j, d in enumerate((first_docs[i], *r))]
    present[np.repeat(np.array(no_first, dtype=bool), lengths)] = False  # an empty ranking has no first result
    pair_start = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    present_list, rare_list = present.tolist(), rare.tolist()
    out, p = [], 0
    for i, qid in enumerate(query_ids):
        ts, a, b = terms[i], int(term_start[i]), int(term_start[i + 1])
        w = weights[a:b]
        total = float(w.sum())

        def share(mask: list[bool], w: np.ndarray = w, total: float = total) -> float:
            return float(w[np.array(mask, dtype=bool)].sum() / total) if total > 0 else 0.0

        first_mask = present_list[pair_start[p]:pair_start[p + 1]]
        masks = {}
        for j, d in enumerate(relevant[i]):
            masks[d] = present_list[pair_start[p + 1 + j]:pair_start[p + 2 + j]]
        p += 1 + len(relevant[i])
        anywhere = [any(column) for column in zip(*masks.values())] if masks else [False] * len(ts)
        first_rank = int(first_ranks[i])
        missed = first_rank == 0 or first_rank > settings.cutoff
        e = _Evidence(
            qid=qid, question=questions[i], retrieved=int(retrieved[i]), first_rank=first_rank, first=first_docs[i],
            first_shared=_pick(ts, first_mask), shared={d: _pick(ts, m) for d, m in masks.items()},
            relevant_ranks=ranks[i], rare_terms=_pick(ts, rare_list[a:b]),
            distinguishing=_pick(ts, [f and not x for f, x in zip(first_mask, anywhere)]),
            first_match=share(first_mask), relevant_matches={d: share(m) for d, m in masks.items()}, missed=missed,
        )
        e.needs_context = bool(missed and e.first and e.rare_distinguishing and e.first_match < settings.topic_share)
        out.append(e)
    return out


def _relevant_ranks(run: Run, rows: np.ndarray, retrieved: np.ndarray,
                    relevant: list[list[str]]) -> list[dict[str, int]]:
    """Each question's {relevant document: its rank in the ranking, 0 = not in it}, for every question at once."""
    out: list[dict[str, int]] = [{} for _ in relevant]
    pair_q = np.array([i for i, r in enumerate(relevant) for _ in r], dtype=np.int64)
    names = [d for r in relevant for d in r]
    if not len(pair_q):
        return out
    if run.depth == 0:  # every ranking empty: no relevant document is in any
        return [dict.fromkeys(r, 0) for r in relevant]
    index = pd.Index([str(d) for d in run.doc_ids], dtype=object)
    if not index.is_unique:  # two run entries under one name: the ranking, read as names, decides
        for i, r in enumerate(relevant):
            row = int(rows[i])
            ranking = [str(d) for d in run.doc_ids[run.docs[row, :int(retrieved[i])]]] if row >= 0 else []
            position = {d: j + 1 for j, d in enumerate(ranking)}
            out[i] = {d: position.get(d, 0) for d in r}
        return out
    codes = index.get_indexer(names).astype(np.int64) if len(index) else np.full(len(names), -1, dtype=np.int64)
    found = np.zeros(len(names), dtype=np.int64)
    depth = run.depth
    for start in range(0, len(names), 4096):  # a block of pairs at a time: memory stays flat with deep rankings
        part = slice(start, start + 4096)
        q, code = pair_q[part], codes[part]
        row = rows[q]
        docs = run.docs[np.maximum(row, 0)]
        hit = (docs == code[:, None]) & (code[:, None] >= 0) & (row[:, None] >= 0)
        hit &= np.arange(depth)[None, :] < retrieved[q][:, None]
        last = depth - np.argmax(hit[:, ::-1], axis=1)  # a document listed twice: its last place, as before
        found[part] = np.where(hit.any(axis=1), last, 0)
    k = 0
    for i, r in enumerate(relevant):
        out[i] = dict(zip(r, found[k:k + len(r)].tolist()))
        k += len(r)
    return out


def _pick(terms: list[str], mask: np.ndarray) -> list[str]:
    return [t for t, keep in zip(terms, mask) if keep]


def _relevant_docs(collection: Collection, level: int) -> dict[str, list[str]]:
    """Relevant documents per question, best grade first, then in judgment order."""
    qrels = collection.qrels
    keep = np.flatnonzero(qrels.grades >= level)
    order = keep[np.argsort(-qrels.grades[keep], kind="stable")]  # best grade first, ties in judgment order
    out: dict[str, list[str]] = {}
    for q, d in zip(qrels.query_ids[order].tolist(), qrels.doc_ids[order].tolist()):
        out.setdefault(str(q), []).append(str(d))
    return out


def _rank_text(first: int, retrieved: int, depth: int) -> str:
    if first > 0:
        return str(first)
    return f"beyond depth {depth}" if 0 < retrieved >= depth else NOT_RETRIEVED  # an empty ranking is never full


def _cause(e: _Evidence, settings: DiagnosisSettings) -> tuple[str, str]:
    """The one cause of a missed question (by the module's rules, in order) and its reason, in words."""
    first, pct = e.first, _pct(e.first_match)
    lone = e.needs_context and e.closer_share > settings.context_share
    rare = _terms(e.rare_distinguishing)
    if not e.retrieved and (e.run_empty or e.relevant_match > 0):  # nothing to weigh a relevant document against
        matched = ""
        if e.relevant_match > 0:
            best = max(e.relevant_matches, key=e.relevant_matches.__getitem__)
            matched = f"{best} matches {_pct(e.relevant_match)} of the question's weight"
        if e.run_empty:
            return NO_RESULTS, "the retriever returned no document for any question" + (f"; {matched}" if matched
                                                                                         else "")
        return NO_RESULTS, f"an empty ranking, though {matched}"
    if lone:
        why = (f"{first} wins on the rare {rare}, in no relevant document; it matches {pct} of the question, and no "
               f"relevant document is among the {_pct(settings.context_share)} of the corpus nearest to it")
    if e.relevant_match == 0:
        if lone:
            return "homonymy", why
        if not e.retrieved:
            return "vocabulary_gap", "no candidate at all"
        return "vocabulary_gap", f"no relevant document contains a question term; {first} matches {pct}"
    best = max(e.relevant_matches, key=e.relevant_matches.__getitem__)
    if e.relevant_match >= e.first_match:
        return "term_weighting", (f"{best} matches {_pct(e.relevant_match)} of the question's weight, {first} "
                                  f"{pct}, yet {first} ranks first")
    if not e.distinguishing:
        return "term_weighting", (f"every question term {first} contains, a relevant document contains too; "
                                  f"{first} matches {pct}, {best} {_pct(e.relevant_match)}")
    if not e.rare_distinguishing:
        return "common_terms", (f"only common words set {first} apart from the relevant documents: "
                                f"{_terms(e.distinguishing)}")
    if lone:
        return "homonymy", why
    where = (f"it matches {pct} of the question" if e.first_match >= settings.topic_share else
             f"a relevant document is among the {_pct(settings.context_share)} of the corpus nearest to it")
    return "partial_gap", (f"{first} has the rare {rare}, in no relevant document, and is on the question's topic: "
                           f"{where}; {best} matches {_pct(e.relevant_match)}")


def _classify(e: _Evidence, groups: list[list[str]], depth: int, settings: DiagnosisSettings) -> dict:
    """Apply the module's rules to one question and write its evidence line."""
    cause, why = _cause(e, settings) if e.missed and e.relevant else ("", "")
    rank = _rank_text(e.first_rank, e.retrieved, depth)
    late_kind = ""
    if e.missed and e.first_rank > settings.late_limit:
        late_kind = f"beyond rank {settings.late_limit}"
    elif e.missed and e.first_rank > 0:
        late_kind = f"rank {settings.cutoff + 1}-{settings.late_limit}"
    flags = {c: c == cause for c in CAUSES}
    flags.update(late_rank=bool(late_kind), duplicates=bool(groups))
    classes = [c for c in CLASSES if flags[c]]

    relevant_part = "; ".join(
        f"{d} ({'rank ' + str(e.relevant_ranks[d]) if e.relevant_ranks[d] else NOT_RETRIEVED}) shares "
        f"{_terms(t)}" + (f" ({_pct(e.relevant_matches[d])})" if t else "") for d, t in e.shared.items()
    ) or "no relevant judgment"
    first_part = "empty ranking"
    if e.first:
        rare = [t for t in e.first_shared if t in e.rare_terms]
        first_part = (f"first result {e.first} shares {_terms(e.first_shared)}"
                      + (f" ({_pct(e.first_match)}" + (f"; rare: {_terms(rare)}" if rare else "") + ")"
                         if e.first_shared else ""))
    reasons = [f"{LABELS[cause]} ({why})"] if cause else []
    if late_kind:
        reasons.append(f"late rank ({late_kind})")
    if groups:
        reasons.append("duplicates (" + "; ".join(" = ".join(g) for g in groups) + ")")
    if e.missed and not reasons:
        reasons.append("unclassified")
    found = f"first relevant at rank {rank}" if e.first_rank else f"first relevant {rank}"
    return {
        "query_id": e.qid, "question": e.question, "retrieved": e.retrieved, "first_relevant_rank": e.first_rank,
        "rank": rank, "first_result": e.first, "first_result_shared": e.first_shared, "shared_terms": e.shared,
        "relevant_ranks": e.relevant_ranks, "rare_terms": e.rare_terms, "distinguishing_terms": e.distinguishing,
        "first_result_match": round(e.first_match, 4) if e.missed else float("nan"),
        "relevant_match": round(e.relevant_match, 4) if e.missed else float("nan"),
        "closer_share": round(e.closer_share, 4), "missed": e.missed, **flags, "late_rank_kind": late_kind,
        "duplicate_groups": groups, "classes": ", ".join(classes), "diagnosis": " + ".join(reasons),
        "evidence": f"{found}; {first_part}; {relevant_part}",
    }


def _terms(terms: list[str]) -> str:
    return ", ".join(repr(t) for t in terms) if terms else "no term"


def _pct(share: float) -> str:
    """A share as a whole percentage; below 1% but above 0 as '<1%', so it never reads as nothing."""
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def _empty_table() -> pd.DataFrame:
    columns = ["question", "retrieved", "first_relevant_rank", "rank", "first_result", "first_result_shared",
               "shared_terms", "relevant_ranks", "rare_terms", "distinguishing_terms", "first_result_match",
               "relevant_match", "closer_share", "missed", *CLASSES, "late_rank_kind", "duplicate_groups", "classes",
               "diagnosis", "evidence"]
    return pd.DataFrame(columns=columns, index=pd.Index([], name="query_id"))


def shingles(tokens: Sequence[str], size: int) -> set[str]:
    """Word shingles of ``size`` tokens (a shorter text is one shingle; an empty one has none)."""
    if not tokens:
        return set()
    if len(tokens) <= size:
        return {"\x1f".join(tokens)}
    return set(map("\x1f".join, zip(*(tokens[i:] for i in range(size)))))


def _shingle_columns(tokenizer: Callable[[str], Sequence[str]], text: str, size: int,
                     vocabulary: dict[str, int] | None = None) -> np.ndarray:
    """A document's shingles as column numbers of a process-wide shingle vocabulary, remembered across the jobs
    of a process: a sweep's rankings share most of their top documents, and tokenising them (and numbering
    their shingles) again for every sweep point was most of the diagnosis's time.

    ``vocabulary``: where an unhashable tokenizer (nothing to key the memo by) numbers its shingles; the documents
    compared with each other must share one."""
    try:
        return _remembered_columns(tokenizer, text, size)
    except TypeError:
        return _columns(shingles(list(tokenizer(text)), size), {} if vocabulary is None else vocabulary)


_SHINGLE_VOCABULARY: dict[tuple[Callable[[str], Sequence[str]], int], dict[str, int]] = {}


@functools.lru_cache(maxsize=2**16)
def _remembered_columns(tokenizer: Callable[[str], Sequence[str]], text: str, size: int) -> np.ndarray:
    vocabulary = _SHINGLE_VOCABULARY.setdefault((tokenizer, size), {})
    return _columns(shingles(list(tokenizer(text)), size), vocabulary)


def _columns(found: set[str], vocabulary: dict[str, int]) -> np.ndarray:
    """Each shingle's number in ``vocabulary`` (new shingles are added), in a read-only array. Set operations and
    ``map`` keep the per-shingle work in C: a first job numbers the shingles of thousands of documents."""
    new = found.difference(vocabulary)
    if new:
        vocabulary.update(zip(new, range(len(vocabulary), len(vocabulary) + len(new))))
    columns = np.fromiter(map(vocabulary.__getitem__, found), dtype=np.int64, count=len(found))
    columns.flags.writeable = False
    return columns


MEMO_PAIRS = 2**22  # pairs a _PairMemo keeps (16 bytes each) before it starts again


class _PairMemo:
    """The Jaccard similarity of every pair of texts measured so far (for one tokenizer and shingle size), and each
    text's number and shingle count.

    A sweep's rankings share most of their top documents, so most of a job's 12,000 pairs of top-10 places were
    measured by an earlier job: looked up here (``searchsorted`` on sorted keys), only the new ones are measured.
    A pair's similarity depends on nothing but the two texts, so a value found is the value measuring would give.
    """

    def __init__(self, columns: Callable[[str], np.ndarray]) -> None:
        self.columns = columns  # a text's shingle columns
        self.numbers: dict[str, int] = {}
        self.texts: list[str] = []
        self.sizes: list[int] = []
        self.keys = np.zeros(0, dtype=np.int64)  # sorted: smaller number * 2**32 + larger number
        self.values = np.zeros(0)

    def number(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's number (a text seen for the first time is numbered and its shingles counted)."""
        out = np.empty(len(texts), dtype=np.int64)
        for i, text in enumerate(texts):
            n = self.numbers.get(text)
            if n is None:
                n = self.numbers[text] = len(self.texts)
                self.texts.append(text)
                self.sizes.append(len(self.columns(text)))
            out[i] = n
        return out

    def size(self, numbers: np.ndarray) -> np.ndarray:
        """Shingles in each text, as the row sums of an incidence matrix give them (float)."""
        return np.asarray(self.sizes, dtype=np.float64)[numbers] if len(numbers) else np.zeros(0)

    def jaccard(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The Jaccard similarity of the shingles of texts ``a[i]`` and ``b[i]``: remembered, or measured now."""
        keys = np.minimum(a, b) * 2**32 + np.maximum(a, b)
        wanted, back = np.unique(keys, return_inverse=True)
        at = np.minimum(np.searchsorted(self.keys, wanted), max(len(self.keys) - 1, 0))
        known = (self.keys[at] == wanted) if len(self.keys) else np.zeros(len(wanted), dtype=bool)
        found = np.where(known, self.values[at] if len(self.keys) else 0.0, 0.0)
        new = np.flatnonzero(~known)
        if len(new):
            found[new] = self._measure(wanted[new] // 2**32, wanted[new] % 2**32)
            if len(self.keys) + len(new) > MEMO_PAIRS:
                self.keys, self.values = np.zeros(0, dtype=np.int64), np.zeros(0)
            where = np.searchsorted(self.keys, wanted[new])
            self.keys, self.values = np.insert(self.keys, where, wanted[new]), np.insert(self.values, where, found[new])
        return found[back.ravel()]

    def _measure(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Jaccard of each pair of texts through a sparse (texts x shingles) incidence matrix, all pairs at once."""
        used, local = np.unique(np.concatenate([lo, hi]), return_inverse=True)
        sets = [self.columns(self.texts[t]) for t in used.tolist()]
        cols = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
        incidence = sp.csr_matrix(
            (np.ones(len(cols)), (np.repeat(np.arange(len(sets)), [len(s) for s in sets]), cols)),
            shape=(len(sets), int(cols.max()) + 1 if len(cols) else 0),
        )
        size = self.size(used)
        llo, lhi = local[:len(lo)], local[len(lo):]
        inter = np.asarray(incidence[llo].multiply(incidence[lhi]).sum(axis=1)).ravel()
        union = size[llo] + size[lhi] - inter
        return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


_PAIR_MEMOS: dict[tuple[Callable[[str], Sequence[str]], int], _PairMemo] = {}


def _pair_memo(tokenizer: Callable[[str], Sequence[str]], size: int) -> _PairMemo:
    """The process's memo for this tokenizer and shingle size; a fresh one (forgotten after the job) for an
    unhashable tokenizer, its shingles numbered in a vocabulary of its own."""
    try:
        memo = _PAIR_MEMOS.get((tokenizer, size))
    except TypeError:
        vocabulary: dict[str, int] = {}
        return _PairMemo(lambda text: _shingle_columns(tokenizer, text, size, vocabulary))
    if memo is None:
        memo = _PAIR_MEMOS[(tokenizer, size)] = _PairMemo(lambda text: _shingle_columns(tokenizer, text, size))
    return memo


def _duplicate_groups(
    run: Run, rows: np.ndarray, doc_text: Mapping[str, str], tokenizer: Callable[[str], Sequence[str]],
    settings: DiagnosisSettings,
) -> list[list[list[str]]]:
    """Near-identical documents in each question's top k, as groups of ids in rank order.

    Vectorised over questions: every pair of top-k places is compared at once, each pair of texts measured once
    (:class:`_PairMemo`, across the jobs of a process); only the flagged pairs are then grouped in Python.
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
    memo = _pair_memo(tokenizer, settings.shingle_size)
    numbers = memo.number([doc_text.get(str(run.doc_ids[d]), "") for d in used])
    size = memo.size(numbers)
    i, j = np.triu_indices(k, 1)
    a, b = top[:, i], top[:, j]
    valid = (a != PAD) & (b != PAD)
    q_of, pair = np.nonzero(valid)
    ca, cb = codes[a[q_of, pair]], codes[b[q_of, pair]]
    # Jaccard <= smaller size / larger size: a pair whose sizes differ more than that cannot reach the threshold.
    small, large = np.minimum(size[ca], size[cb]), np.maximum(size[ca], size[cb])
    ratio = np.divide(small, large, out=np.zeros_like(small), where=large > 0)
    possible = np.flatnonzero(ratio >= settings.duplicate_threshold)
    jaccard = np.zeros(len(ca))
    jaccard[possible] = memo.jaccard(numbers[ca[possible]], numbers[cb[possible]])
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
