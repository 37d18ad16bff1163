"""Exact top-k over sums of posting-list weights: every document scored on a small corpus, MaxScore on a large one.

The index is a (terms x documents) CSR matrix of non-negative weights; a question is a set of terms and a
document's score the sum of its weights for those terms. Exact scores add a document's weights in ascending
term order, as scipy's sparse product does: they equal its scores to the last bit, and ties stay ties (broken
by document position, ascending). Which way is cheapest depends on the corpus size:

- Up to ``WHOLE_DOCS`` documents, every document's exact score is made at once per question, the terms added
  in ascending order into a float64 array: frequent terms (in at least 1/``DENSE_SHARE`` of the documents)
  are kept as dense rows and added whole, the others through their postings. Only documents reaching a lower
  bound of the k-th best score are then ranked. Per question this is a handful of array operations, each
  over the corpus or a short list: cheaper than skipping anything when the corpus is small.
- Above, scoring every document a question touches costs as much as its longest posting lists, and frequent
  terms have long lists but small weights. With a lower bound ``theta`` on the k-th best score, the question's
  terms split in two: the *non-essential* ones, the terms of smallest maximum weight whose maxima sum below
  ``theta`` (a document having only those cannot reach the top k), and the *essential* rest. Only documents in
  essential lists are candidates; those whose essential weights plus the non-essential maxima still reach
  ``theta`` are scored exactly. ``theta`` comes from exactly scoring a few thousand documents of the lists with
  the largest weights. Frequent terms also keep per-document 8-bit upper bounds of their weights.

Frequent terms keep, per block of documents, the count of their postings before it: a weight is then found in
a couple of gathers rather than by a binary search of a list as long as the corpus. Bounds are compared with a
relative margin (``MARGIN``: sums in another order may differ in the last bits), so rounding can never hide a
result or a tie.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from metrics.run import PAD

SEED_POSTINGS = 4096  # postings read to find the first threshold
SEED_DOCS = 256  # of which this many documents (best partial scores) are scored exactly
MARGIN = 1e-9  # relative slack on bounds: sums in different orders may differ in the last bits
DENSE_SHARE = 16  # terms in at least 1/16 of the documents also get dense 8-bit upper bounds
DENSE_MERGE = 8  # essential postings over 1/8 of the documents are summed in a dense array instead of merged
SCAN_RATIO = 16  # a posting list is read whole when at most this many times longer than the candidate list
RANK_BLOCK = 256  # frequent terms count their postings per block of this many documents (<= 256: uint8 offsets)
WHOLE_DOCS = 2**18  # corpora of at most this many documents are scored whole, frequent terms as rows (_whole)
RARE_POSTINGS = 2**21  # ... the other terms' postings laid out flat for at most this many at a time (memory)


def best_k(docs: np.ndarray, scores: np.ndarray, k: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best (score desc, doc asc) of candidates scoring above ``threshold``."""
    keep = scores > threshold
    docs, scores = docs[keep], scores[keep]
    if len(scores) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        docs, scores = docs[keep], scores[keep]
    order = np.lexsort((docs, -scores))[:k]
    return docs[order], scores[order]


@dataclass
class _Flat:
    """Posting ranges laid end to end: ``at`` holds positions in the index, ``ends`` where each range ends."""

    pairs: np.ndarray  # the (question, term) pair of each range
    ends: np.ndarray
    at: np.ndarray


@dataclass
class Postings:
    """Posting lists (CSR of a terms x documents weight matrix, documents sorted) with each list's maximum."""

    indptr: np.ndarray
    docs: np.ndarray
    weights: np.ndarray
    n_docs: int
    top: np.ndarray  # per term: its largest weight
    dense_row: np.ndarray  # per term: its row in ``dense`` (-1: none)
    dense: np.ndarray  # (frequent terms x documents) uint8: each weight rounded *up* to a multiple of ...
    dense_scale: np.ndarray  # ... this step, per frequent term: upper bounds read in one gather
    block_rank: np.ndarray  # (frequent terms x document blocks) uint32: the term's postings before each block
    in_block: np.ndarray  # (frequent terms x documents) uint8: a posting's position counted from its block's first
    rows: np.ndarray | None  # small corpora only: (frequent terms x documents) float64 weights, 0 where absent
    kth: dict[int, np.ndarray] = field(default_factory=dict)  # per k: each term's k-th largest weight (NaN: unknown)

    @classmethod
    def build(cls, by_term: sp.csr_matrix) -> Postings:
        by_term = by_term.tocsr()
        if not by_term.has_sorted_indices:
            by_term = by_term.sorted_indices()
        indptr = by_term.indptr.astype(np.int64)
        n_terms, n_docs = by_term.shape
        df = np.diff(indptr)
        top = np.zeros(n_terms)
        filled = np.flatnonzero(df > 0)
        if len(filled):
            top[filled] = np.maximum.reduceat(by_term.data, indptr[filled])
        frequent = np.flatnonzero((df > 0) & (df * DENSE_SHARE >= n_docs))
        dense_row = np.full(n_terms, -1, dtype=np.int64)
        dense_row[frequent] = np.arange(len(frequent))
        scale = top[frequent] * (1 + MARGIN) / 255.0
        whole = n_docs <= WHOLE_DOCS
        width = 0 if whole else n_docs  # rows hold the weights themselves: no bounds, no positions needed
        n_blocks = -(-width // RANK_BLOCK)
        dense = np.zeros((len(frequent), width), dtype=np.uint8)
        block_rank = np.zeros((len(frequent), n_blocks), dtype=np.uint32)
        in_block = np.zeros((len(frequent), width), dtype=np.uint8)
        rows = np.zeros((len(frequent), n_docs)) if whole else None
        for row, t in enumerate(frequent.tolist()):
            lo, hi = indptr[t], indptr[t + 1]
            listed = by_term.indices[lo:hi]
            if rows is not None:
                rows[row, listed] = by_term.data[lo:hi]
                continue
            # a weight is > 0, so its bound is at least 1: 0 marks exactly the documents without the term
            dense[row, listed] = np.clip(np.ceil(by_term.data[lo:hi] / scale[row]), 1, 255)
            block = listed // RANK_BLOCK
            np.cumsum(np.bincount(block, minlength=n_blocks)[:-1], out=block_rank[row, 1:])
            in_block[row, listed] = np.arange(hi - lo) - block_rank[row, block]
        return cls(indptr, by_term.indices, by_term.data, n_docs, top, dense_row, dense, scale, block_rank, in_block,
                   rows)

    def top_k(self, questions: sp.csr_matrix, k: int, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` documents of each question (a row of term indicators) scoring above ``threshold``.

        Returns ``(docs, scores)`` of shape (questions, k), padded with PAD / NaN. A small corpus is scored
        whole (:meth:`_whole`); a larger one skips what cannot matter (MaxScore).
        """
        questions = questions.tocsr()
        n = questions.shape[0]
        out_docs = np.full((n, k), PAD, dtype=np.int64)
        out_scores = np.full((n, k), np.nan)
        if k == 0:
            return out_docs, out_scores
        # each question's distinct terms that have postings, ascending: (question, term) pairs sorted
        asked = np.repeat(np.arange(n, dtype=np.int64), np.diff(questions.indptr))
        terms = questions.indices.astype(np.int64)
        keep = (questions.data != 0) & (self.indptr[terms + 1] > self.indptr[terms])
        if questions.has_canonical_format:  # sorted, no duplicates: the pairs are already
            asked, terms = asked[keep], terms[keep]
        else:
            asked, terms = np.divmod(np.unique(asked[keep] * len(self.top) + terms[keep]), len(self.top))
        ptr = np.searchsorted(asked, np.arange(n + 1))
        if self.rows is not None:
            return self._whole(terms, ptr, k, threshold, out_docs, out_scores)
        sums = np.zeros(self.n_docs)  # scratch for dense sums, always left at 0 (pages are touched only if used)
        slots = np.full(self.n_docs, -1, dtype=np.int32)  # scratch for lookups, always left at -1
        ptr = ptr.tolist()
        for i in range(n):
            if ptr[i] == ptr[i + 1]:
                continue
            d, s = self._question(terms[ptr[i] : ptr[i + 1]], k, threshold, slots, sums)
            out_docs[i, : len(d)] = d
            out_scores[i, : len(s)] = s
        return out_docs, out_scores

    def _kth(self, terms: np.ndarray, k: int) -> np.ndarray:
        """Each term's ``k``-th largest weight (0 for a list shorter than ``k``), computed once per term and k.

        A question's scores are sums of non-negative weights, and a rounded sum is never below one of its
        terms: so its ``k``-th best score is at least the ``k``-th largest weight of each of its terms.
        """
        known = self.kth.setdefault(k, np.full(len(self.top), np.nan))
        for t in terms[np.isnan(known[terms])].tolist():
            lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
            known[t] = np.partition(self.weights[lo:hi], hi - lo - k)[hi - lo - k] if hi - lo >= k else 0.0
        return known

    def _whole(self, terms, ptr, k, threshold, out_docs, out_scores) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` of each question over a small corpus; ``terms`` are the (question, term) pairs, sorted by
        question then term, question i's starting at ``ptr[i]``.

        Every document's exact score is made at once, adding the question's terms in ascending order into a
        float64 scratch: a frequent term as a whole row, a run of other terms through their postings in one
        ``np.add.at`` (which adds in the order given, so still term by term). Only documents scoring at least
        the largest k-th weight of the question's terms (at most its k-th best score, see :meth:`_kth`) are
        then ranked.
        """
        # questions a block at a time, so that the postings laid out flat stay within RARE_POSTINGS
        lengths = np.where(self.dense_row[terms] < 0, self.indptr[terms + 1] - self.indptr[terms], 0)
        spread = np.concatenate(([0], np.cumsum(lengths)))[ptr]  # postings before each question
        start = 0
        while start < len(ptr) - 1:
            stop = max(start + 1, int(np.searchsorted(spread, spread[start] + RARE_POSTINGS, side="right")) - 1)
            stop = min(stop, len(ptr) - 1)
            block = slice(ptr[start], ptr[stop])
            self._whole_block(terms[block], ptr[start : stop + 1] - ptr[start], k, threshold,
                              out_docs[start:stop], out_scores[start:stop])
            start = stop
        return out_docs, out_scores

    def _whole_block(self, terms, ptr, k, threshold, out_docs, out_scores) -> None:
        """:meth:`_whole` for a block of questions, writing into ``out_docs`` and ``out_scores`` (views)."""
        bounds = np.maximum(self._kth(np.unique(terms), k)[terms], threshold)
        frequent = self.dense_row[terms] >= 0
        rows = self.dense_row[terms].tolist()
        rare = self._rare_postings(terms, ~frequent)
        rare_docs, rare_weights = self.docs[rare.at].astype(np.intp), self.weights[rare.at]
        ends = np.zeros(len(terms), dtype=np.int64)  # where each pair's postings end in the flat arrays
        ends[rare.pairs] = rare.ends
        ends = np.maximum.accumulate(ends)
        # per question (numpy here, so that the loop below does little but the additions): its bound, its
        # frequent terms' count, where its other terms' postings start and end, and whether its frequent terms
        # all come first (every pair has postings: no other term's postings before the last frequent one)
        asked = np.flatnonzero(np.diff(ptr))
        first = ptr[asked]
        last = ptr[asked + 1]
        bound = np.maximum.reduceat(bounds, first) if len(asked) else np.zeros(0)
        n_frequent = np.add.reduceat(frequent, first) if len(asked) else np.zeros(0, dtype=np.int64)
        start = np.where(first > 0, ends[np.maximum(first - 1, 0)], 0)
        end = ends[last - 1]
        leading = (n_frequent == 0) | (ends[first + np.maximum(n_frequent, 1) - 1] == start)
        # the most a document can score from the question's frequent terms alone (their largest weights summed):
        # below the bound, only documents with one of its other terms can rank (see _rare_only)
        frequent_most = (np.add.reduceat(np.where(frequent, self.top[terms], 0.0), first) if len(asked)
                         else np.zeros(0)) * (1 + MARGIN)
        rare_only = leading & (end > start) & (bound > threshold) & (frequent_most < bound)
        ends = ends.tolist()
        sums = np.zeros(self.n_docs)  # scratch, overwritten by each question
        weights = self.rows
        for i, p, stop, n, lo, hi, ordered, b, few in zip(asked.tolist(), first.tolist(), last.tolist(),
                                                          n_frequent.tolist(), start.tolist(), end.tolist(),
                                                          leading.tolist(), bound.tolist(), rare_only.tolist()):
            if few:
                docs, scores = self._rare_only(rows[p : p + n], rare_docs[lo:hi], rare_weights[lo:hi], b, sums)
            elif ordered:
                # frequent terms first (BM25 numbers terms by decreasing document frequency): their rows, the
                # first two added in one pass, then every other posting in one np.add.at
                if n >= 2:
                    np.add(weights[rows[p]], weights[rows[p + 1]], out=sums)
                    for q in range(p + 2, p + n):
                        sums += weights[rows[q]]
                elif n:
                    sums[:] = weights[rows[p]]  # 0 + w is w: the same as adding to zeros
                else:
                    sums[:] = 0.0
                if hi > lo:
                    np.add.at(sums, rare_docs[lo:hi], rare_weights[lo:hi])
            else:
                self._interleaved(p, stop, rows, ends, lo, rare_docs, rare_weights, sums)
            if not few:
                docs = (sums >= b if b > threshold else sums > threshold).nonzero()[0]
                scores = sums[docs]
            if len(docs) > 2 * k:
                keep = scores >= np.partition(scores, len(docs) - k)[len(docs) - k]
                docs, scores = docs[keep], scores[keep]
            order = np.argsort(-scores, kind="stable")[:k]  # documents are in ascending order: ties stay so
            out_docs[i, : len(order)] = docs[order]
            out_scores[i, : len(order)] = scores[order]

    def _rare_only(self, rows: list[int], docs: np.ndarray, weights: np.ndarray, bound: float,
                   sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The documents of a question's other terms' postings (``docs``, ``weights``: in ascending term order)
        scoring at least ``bound``, with their exact scores, ascending by document; ``rows``: its frequent terms.

        For a question whose frequent terms can add up to less than the bound (their largest weights summed,
        with a margin), a document without any of its other terms scores below the bound: only the documents in
        those terms' postings are scored, in the scratch ``sums`` (only their places are written), each exactly
        as :meth:`_whole_block` scores every document (its frequent terms' weights in order, then its other
        weights in term order), so the scores are the same to the bit and nothing that could rank is left out.
        At 100,000 documents a question's other terms list a few thousand, where adding whole rows and scanning
        them cost a pass over every document each. (A document listed twice gets the same value twice: the
        frequent terms' sums need no deduplication.)"""
        if rows:
            scores = self.rows[rows[0]].take(docs)
            for row in rows[1:]:
                scores += self.rows[row].take(docs)
            sums[docs] = scores
        else:
            sums[docs] = 0.0
        np.add.at(sums, docs, weights)
        ranked = docs[sums.take(docs) >= bound]
        ranked.sort()
        if len(ranked) > 1:
            ranked = ranked[np.concatenate(([True], ranked[1:] != ranked[:-1]))]
        return ranked, sums.take(ranked)

    def _interleaved(self, first, last, rows, ends, run, rare_docs, rare_weights, sums) -> None:
        """Pairs ``first`` .. ``last`` (one question) summed into ``sums`` in ascending term order, frequent terms
        (``rows``) and runs of other terms' postings (flat, ending at ``ends``; this question's from ``run``)
        taking turns."""
        started = False  # sums holds this question's first terms (else an earlier question's scores)
        for p in range(first, last):
            if rows[p] < 0:
                continue
            if ends[p] > run:  # the terms before this one
                if not started:
                    sums[:] = 0.0
                np.add.at(sums, rare_docs[run : ends[p]], rare_weights[run : ends[p]])
                run, started = ends[p], True
            if started:
                sums += self.rows[rows[p]]
            else:
                sums[:] = self.rows[rows[p]]  # 0 + w is w: the same as adding to zeros
                started = True
        if ends[last - 1] > run:
            if not started:
                sums[:] = 0.0
            np.add.at(sums, rare_docs[run : ends[last - 1]], rare_weights[run : ends[last - 1]])

    def _rare_postings(self, terms: np.ndarray, which: np.ndarray) -> _Flat:
        """The postings of the (question, term) pairs ``which`` selects, one after the other."""
        pairs = np.flatnonzero(which)
        starts = self.indptr[terms[pairs]]
        lengths = self.indptr[terms[pairs] + 1] - starts
        ends = np.cumsum(lengths)
        at = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)
        return _Flat(pairs, ends, at)

    def lookup(self, term: int, docs: np.ndarray, slots: np.ndarray | None) -> np.ndarray:
        """``term``'s weight in each of ``docs`` (sorted, distinct; 0 where absent).

        A short list is read whole through ``slots`` (a per-document scratch array holding each of ``docs``'
        positions and -1 elsewhere); a long one is searched for the documents instead.
        """
        lo, hi = self.indptr[term], self.indptr[term + 1]
        listed = self.docs[lo:hi]
        out = np.zeros(len(docs))
        if slots is not None and hi - lo <= SCAN_RATIO * len(docs):
            where = slots[listed]
            found = where >= 0
            out[where[found]] = self.weights[lo:hi][found]
            return out
        if hi == lo or len(docs) == 0:
            return out
        row = self.dense_row[term]
        if row >= 0:
            present = np.flatnonzero(self.dense[row, docs])
            out[present] = self.weights[lo + self._ranks(row, docs[present])]
            return out
        pos = np.minimum(np.searchsorted(listed, docs), hi - lo - 1)
        found = listed[pos] == docs
        out[found] = self.weights[lo:hi][pos[found]]
        return out

    def _ranks(self, row: int, docs: np.ndarray) -> np.ndarray:
        """Positions of ``docs`` (all listed) in frequent term ``row``'s posting list, in two gathers."""
        return self.block_rank[row, docs // RANK_BLOCK].astype(np.int64) + self.in_block[row, docs]

    def bound(self, term: int, docs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """An upper bound of ``term``'s weight in each of ``docs``: the 8-bit one when the term is frequent."""
        row = self.dense_row[term]
        if row >= 0:
            return self.dense[row, docs] * self.dense_scale[row]
        slots[docs] = np.arange(len(docs), dtype=np.int32)
        out = self.lookup(term, docs, slots)
        slots[docs] = -1
        return out

    def exact(self, terms: np.ndarray, docs: np.ndarray, slots: np.ndarray | None = None) -> np.ndarray:
        """Scores of ``docs`` (sorted, distinct) for ``terms`` (ascending), summed in term order."""
        if slots is not None:
            slots[docs] = np.arange(len(docs), dtype=np.int32)
        scores = np.zeros(len(docs))
        for t in terms.tolist():
            scores += self.lookup(t, docs, slots)
        if slots is not None:
            slots[docs] = -1
        return scores

    def _question(self, terms, k, threshold, slots, sums) -> tuple[np.ndarray, np.ndarray]:
        starts, df = self.indptr[terms], self.indptr[terms + 1] - self.indptr[terms]
        top = self.top[terms]
        by_top = np.argsort(top, kind="stable")
        theta = self._seed_threshold(terms, starts, df, by_top[::-1], k, threshold, slots)

        # non-essential: the smallest maxima whose sum stays below theta
        cumulative = np.cumsum(top[by_top])
        n_rest = int(np.count_nonzero(cumulative * (1 + MARGIN) < theta))
        essential = np.sort(by_top[n_rest:])
        # documents are dropped as soon as even the maxima of the terms still to add cannot lift them to theta
        def floor(position: int) -> float:
            return theta / (1 + MARGIN) - (float(cumulative[position - 1]) if position else 0.0)

        docs, partial = self._partial(starts[essential], df[essential], floor(n_rest), sums)
        # add the non-essential terms' weights (or upper bounds of them), largest maxima first
        # a document below a floor stays below every later one (a bound adds at most the maximum it removes
        # from the floor), so the arrays are compacted only when that pays: when at least half is dropped
        for position in range(n_rest - 1, -1, -1):
            partial += self.bound(int(terms[by_top[position]]), docs, slots)
            keep = partial >= floor(position)
            if position == 0 or 2 * np.count_nonzero(keep) <= len(keep):
                docs, partial = docs[keep], partial[keep]
        if len(docs) > 2 * k:  # score the k best bounds first: their k-th score is a better theta
            first = np.sort(np.argpartition(-partial, k - 1)[:k])
            scores = self.exact(terms, docs[first], slots)
            if int(np.count_nonzero(scores > threshold)) == k:
                theta = max(theta, float(scores.min()))
            rest = np.ones(len(docs), dtype=bool)
            rest[first] = False
            rest &= partial >= theta / (1 + MARGIN)
            more = np.flatnonzero(rest)
            docs = np.concatenate((docs[first], docs[more]))
            scores = np.concatenate((scores, self.exact(terms, docs[len(first):], slots)))
            return best_k(docs, scores, k, threshold)
        return best_k(docs, self.exact(terms, docs, slots), k, threshold)

    def _seed_threshold(self, terms, starts, df, by_top_desc, k, threshold, slots) -> float:
        """A lower bound on the k-th best score: the k-th best exact score among a few promising documents."""
        taken = np.minimum(df[by_top_desc], SEED_POSTINGS)
        budget = np.concatenate(([0], np.cumsum(taken)[:-1]))
        taken = np.clip(SEED_POSTINGS - budget, 0, taken)
        docs, partial = self._partial(starts[by_top_desc], taken)
        if len(docs) < k:
            return threshold
        if len(docs) > SEED_DOCS:
            best = np.argpartition(-partial, SEED_DOCS - 1)[:SEED_DOCS]
            docs = np.sort(docs[best])
        scores = self.exact(terms, docs, slots)
        if int(np.count_nonzero(scores > threshold)) < k:
            return threshold
        return max(threshold, float(np.partition(scores, len(scores) - k)[len(scores) - k]))

    def _partial(self, starts, lengths, floor: float = -np.inf, sums: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Distinct documents of the given posting ranges (sorted) whose weights there sum to ``floor`` or more,
        and those sums.

        Each range is sorted already, so a stable sort (timsort, which merges runs) is close to linear. When
        the ranges hold a large share of the corpus, adding them into ``sums`` (a zeroed per-document scratch,
        left zeroed) and reading it whole is cheaper than sorting them.
        """
        ranges = [(int(a), int(a) + int(n)) for a, n in zip(starts.tolist(), lengths.tolist()) if n > 0]
        if not ranges:
            return np.zeros(0, dtype=self.docs.dtype), np.zeros(0)
        if len(ranges) == 1:
            (lo, hi), = ranges
            keep = self.weights[lo:hi] >= floor
            return self.docs[lo:hi][keep], self.weights[lo:hi][keep]
        if sums is not None and sum(hi - lo for lo, hi in ranges) * DENSE_MERGE > self.n_docs:
            (lo, hi), *rest = ranges
            sums[self.docs[lo:hi]] = self.weights[lo:hi]
            for lo, hi in rest:
                sums[self.docs[lo:hi]] += self.weights[lo:hi]
            # a document outside every range has a sum of 0: never a candidate, even when the floor is <= 0
            docs = np.flatnonzero(sums >= floor if floor > 0 else sums > 0).astype(self.docs.dtype)
            partial = sums[docs]
            sums[:] = 0.0
            return docs, partial
        docs = np.concatenate([self.docs[lo:hi] for lo, hi in ranges])
        order = np.argsort(docs, kind="stable")
        docs = docs[order]
        first = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
        totals = np.add.reduceat(np.concatenate([self.weights[lo:hi] for lo, hi in ranges])[order], first)
        keep = totals >= floor
        # documents keep the postings' dtype: searchsorted would otherwise convert a whole list per call
        return docs[first[keep]], totals[keep]
