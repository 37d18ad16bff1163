"""Join a Run with Qrels into dense per-question arrays: the only input the metric functions need."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from metrics import ranking
from metrics.hashing import positions
from metrics.qrels import Qrels
from metrics.ranking import Hits
from metrics.run import PAD, Run


@dataclass(frozen=True)
class Judged:
    """What a run retrieved for each question (rows), as far as the judgments know it.

    ``hits`` lists every retrieved document that is judged, by question and rank, valued with its grade;
    ``lengths`` counts each question's retrieved documents; ``ideal`` holds every judgment of each question
    best first (the ideal ordering for nDCG), as ``hits`` at ranks 1, 2, and so on. A negative grade (TREC's
    -1: in the pool, not judged) is never relevant, whatever the level, and gains nothing, as in trec_eval.
    """

    query_ids: list[str]
    hits: Hits
    lengths: np.ndarray
    ideal: Hits

    def relevant(self, level: int = 1) -> Hits:
        """The retrieved documents judged at ``level`` or above (a negative grade never is)."""
        return self.hits.where(self.hits.values >= max(level, 0))

    def n_relevant(self, level: int = 1) -> np.ndarray:
        """Relevant judgments per question, retrieved or not."""
        return self.ideal.where(self.ideal.values >= max(level, 0)).count()

    def judged(self) -> Hits:
        """The retrieved documents that are judged: any grade of 0 or more (a negative grade is trec_eval's "in the
        pool, not judged")."""
        return self.relevant(0)

    def n_nonrelevant(self, level: int = 1) -> np.ndarray:
        """Judgments below ``level`` (and not negative) per question, retrieved or not: bpref's N."""
        values = self.ideal.values
        return self.ideal.where((values >= 0) & (values < level)).count()

    def gains(self, kind: str) -> tuple[Hits, Hits]:
        """The gains of the retrieved documents and of the ideal ordering."""
        return (replace(self.hits, values=ranking.gains(self.hits.values, kind)),
                replace(self.ideal, values=ranking.gains(self.ideal.values, kind)))


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _bits(n_keys: int) -> int:
    """Slots of the bit table, as a power of two: ~16 per key, within [2^10, 2^26]."""
    return int(min(max(np.ceil(np.log2(max(n_keys, 1) * 16)), 10), 26))


def _hash_in_place(values: np.ndarray, bits: int) -> np.ndarray:
    """Fibonacci hashing of uint64 ``values`` into ``2**bits`` slots, overwriting them (no temporaries: the
    first call in a process would otherwise pay page faults on several arrays of the run's size)."""
    values *= _GOLDEN
    values >>= np.uint64(64 - bits)
    return values.view(np.intp)


def lookup(keys: np.ndarray, docs: np.ndarray, universe: int) -> tuple[np.ndarray, np.ndarray]:
    """Which retrieved cells are judged: their flat positions in ``docs`` and their positions in ``keys``.

    A cell (row ``i``, document ``d``) is the integer ``i * universe + d``; ``keys`` (unique) are the judged
    ones. Most retrieved cells are unjudged, so a bit table of the keys' hashes (a one-hash Bloom filter, ~16
    slots per key) first discards them with one gather each; only the few candidates left go to the exact hash
    lookup. Several times faster than hashing every cell, and exact: a judged cell's slot is always marked.
    """
    if len(keys) == 0 or docs.size == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    bits = _bits(len(keys))
    marked = np.zeros(1 << bits, dtype=bool)
    marked[_hash_in_place(keys.astype(np.uint64), bits)] = True
    depth = docs.shape[1]
    cells = docs.astype(np.uint64)  # PAD (-1) wraps exactly as it would in int64: row * universe - 1
    cells += (np.arange(len(docs), dtype=np.uint64) * np.uint64(universe))[:, None]
    candidates = np.flatnonzero(marked[_hash_in_place(cells, bits).ravel()])
    exact = (candidates // depth) * universe + docs.ravel()[candidates]
    which = positions(keys, exact)
    hit = which >= 0
    return candidates[hit], which[hit]


def judge(run: Run, qrels: Qrels, query_ids: list[str]) -> Judged:
    """Look up every retrieved document's grade, vectorised over all questions.

    ``query_ids`` are the questions to score, in order; one absent from the run gets an empty ranking.
    Distinct ids are hashed once each, through indexes the Run and Qrels keep; judgments then join as integers.
    """
    n = len(query_ids)
    scored = np.asarray(query_ids, dtype=object)
    rows = run.query_positions(scored)
    if n == len(run.query_ids) and np.array_equal(rows, np.arange(n)):
        docs, lengths = run.docs, run.lengths
    else:
        docs = np.full((n, run.depth), PAD, dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        present = rows >= 0
        docs[present] = run.docs[rows[present]]
        lengths[present] = run.lengths[rows[present]]

    codes = qrels.codes
    qi = positions(scored, codes.query_vocab)[codes.query_codes]
    keep = qi >= 0
    if not keep.all():
        qi, doc_codes, grades = qi[keep], codes.doc_codes[keep], qrels.grades[keep]
    else:
        doc_codes, grades = codes.doc_codes, qrels.grades

    # (question, document) as one integer; PAD's cell, row * universe - 1, names no document of any row
    universe = len(run.doc_ids) + 1
    di = run.doc_positions(codes.doc_vocab)[doc_codes]
    in_run = di >= 0
    keys = qi[in_run] * universe + di[in_run]
    flat, which = lookup(keys, docs, universe)
    rows, cols = np.divmod(flat, docs.shape[1]) if docs.shape[1] else (flat, flat)
    hits = Hits(rows, cols, grades[in_run][which], n)

    # every judgment of each question, best first: the ideal ordering for nDCG
    n_judged = np.bincount(qi, minlength=n)
    order = np.lexsort((-grades, qi))
    sq = qi[order]
    starts = np.concatenate(([0], np.cumsum(n_judged)[:-1]))
    ideal = Hits(sq, np.arange(len(sq)) - starts[sq], grades[order], n)
    return Judged(list(query_ids), hits, lengths, ideal)


def judged_only(run: Run, qrels: Qrels) -> Run:
    """``run`` with every document not judged (grade >= 0) for its question removed, order kept: trec_eval's -J.

    Later documents move up, so ranks are counted among judged documents only.
    """
    joined = judge(run, qrels, list(run.query_ids))
    kept = joined.judged()
    keep = np.zeros(run.docs.shape, dtype=bool)
    keep[kept.rows, kept.cols] = True
    order = np.argsort(~keep, axis=1, kind="stable")
    docs = np.take_along_axis(np.where(keep, run.docs, PAD), order, axis=1)
    scores = np.take_along_axis(np.where(keep, run.scores, np.nan), order, axis=1)
    width = int(keep.sum(axis=1).max()) if keep.size else 0
    return Run(run.query_ids, run.doc_ids, docs[:, :width], scores[:, :width], run.name)
