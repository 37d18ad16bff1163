"""The rest of trec_eval 10.0's ``all_trec`` measures, as trec_eval defines and adds them (issue 47).

Each measure is a per-question array computed from one :class:`~metrics.judged.Judged` join, vectorised over every
question at once. Definitions follow trec_eval 10.0's C files (github.com/usnistgov/trec_eval, ``m_<name>.c``; the
docstrings name the file), including the order in which it adds terms, so values agree with trec_eval to the last
bit where it sums floats (a sum whose terms are added in another order may differ in the last place).

trec_eval's view of a ranking (``form_res_rels.c``): each retrieved document is judged (grade >= 0), *in the pool but
unjudged* (a negative grade in the qrels) or *not in the pool* (absent from the qrels). Gains are the grades
(``gain_init.c``; ``EvalSettings.gain='exponential'`` gives ``2^grade - 1`` instead), a negative grade gains 0.

Where trec_eval divides 0 by 0 (``iprec_at_recall_0.00`` and ``11pt_avg`` of a question that retrieved nothing, which
only ``-J`` makes possible; ``Rndcg`` at relevance level 0 for a question without a positive grade), rankscope
gives 0: a NaN would poison every mean it enters.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from metrics import ranking
from metrics.judged import Judged
from metrics.ranking import Hits, _ordinals, _safe_div
from metrics.spec import IPREC_LEVELS, RBP_PERSISTENCE, MetricSpec

MIN_GEO_MEAN = 1e-5  # trec_eval.h: a value's floor before its log is taken (gm_map, gm_bpref)
INFAP_EPSILON = 1e-5  # trec_eval.h
# A recall level's number of relevant documents is int(level * R + IPREC_ROUNDING): trec_eval 10.0 rounds to nearest
# (its test suite's all_trec output: iprec_at_recall_0.60 of query 302, R = 77, is taken at 46 relevant documents);
# trec_eval 9's m_iprec_at_recall.c, which pytrec_eval bundles, adds 0.9 (47 there): TREC9_IPREC_ROUNDING
IPREC_ROUNDING = 0.5
TREC9_IPREC_ROUNDING = 0.9
UTILITY = (1.0, -1.0, 0.0, 0.0)  # m_utility.c: worth of a relevant retrieved, non-relevant retrieved, ... document
SET_F_BETA = 1.0  # m_set_F.c
RELSTRING_DEPTH = 10  # m_relstring.c
_SLAB_CELLS = 1 << 22  # cells of the (rank x question) slabs rbp_resid sums a rank at a time


def log2_of(values: np.ndarray) -> np.ndarray:
    """C's log2 of each value (numpy's vectorised log2 differs in the last bit for a few arguments): computed once
    per distinct value."""
    distinct, inverse = np.unique(np.asarray(values, dtype=np.float64), return_inverse=True)
    return np.array([math.log2(v) for v in distinct.tolist()])[inverse]


def log_floor(values: np.ndarray) -> np.ndarray:
    """``log(max(value, MIN_GEO_MEAN))`` with C's log: the per-question value trec_eval's gm_ measures average."""
    return np.array([math.log(max(v, MIN_GEO_MEAN)) for v in np.asarray(values, dtype=np.float64).tolist()])


def persistence_powers(p: float, n: int) -> np.ndarray:
    """``p^i`` for i = 0..n, each the previous times ``p`` (as m_rbp.c's ``cur_p = cur_p * p``), not ``pow``."""
    factors = np.full(n + 1, p)
    factors[0] = 1.0
    return np.multiply.accumulate(factors)


def running_sums(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """Each cell's running sum within its row (rows sorted), added one cell at a time in order, as trec_eval's loops
    add: a sum over the whole array with a base subtracted would round differently."""
    out = np.empty(len(values), dtype=np.float64)
    if not len(values):
        return out
    counts = np.bincount(rows, minlength=n)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    position = np.arange(len(rows)) - starts[rows]
    order = np.argsort(position, kind="stable")  # the cells at position 0 of every row, then 1, ...
    bounds = np.searchsorted(position[order], np.arange(int(counts.max()) + 1))
    acc = np.zeros(n, dtype=np.float64)
    for c in range(int(counts.max())):
        cells = order[bounds[c]: bounds[c + 1]]
        at = rows[cells]
        acc[at] += values[cells]
        out[cells] = acc[at]
    return out


def row_starts(hits: Hits) -> np.ndarray:
    """Where each row's cells start in ``hits`` (its end for a row without cells)."""
    return np.searchsorted(hits.rows, np.arange(hits.n + 1))


def reverse_running_max(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """Each cell's maximum over itself and the later cells of its row (exact: the values are ranked first, so the
    rows can be kept apart by an integer offset)."""
    if not len(values):
        return values.copy()
    distinct, rank = np.unique(values, return_inverse=True)
    width = len(distinct)
    keys = (n - rows[::-1]).astype(np.int64) * width + rank[::-1]  # reversed: later rows first, larger offsets
    return distinct[np.maximum.accumulate(keys)[::-1] % width]


class TrecMeasures:
    """The measures of one join at one relevance ``level``, sharing what several of them need."""

    def __init__(self, judged: Judged, level: int = 1, gain: str = "linear") -> None:
        self.judged = judged
        self.level = max(level, 0)
        self.gain_kind = gain
        self.n = judged.hits.n

    # -- shared pieces ---------------------------------------------------------------------------------------------
    @cached_property
    def rel(self) -> Hits:
        return self.judged.relevant(self.level)

    @cached_property
    def n_rel(self) -> np.ndarray:
        return self.judged.n_relevant(self.level)

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.asarray(self.judged.lengths, dtype=np.int64)

    @cached_property
    def rel_ret(self) -> np.ndarray:
        return self.rel.count()

    @cached_property
    def judged_ret(self) -> Hits:
        """Retrieved documents with a grade of 0 or more (negative: in the pool, not judged)."""
        return self.judged.judged()

    @cached_property
    def gain_cells(self) -> Hits:
        """Retrieved documents with a non-zero gain, valued with it."""
        hits = self.judged.hits
        gains = ranking.gains(hits.values, self.gain_kind)
        keep = gains != 0
        return Hits(hits.rows[keep], hits.cols[keep], gains[keep], self.n)

    @cached_property
    def ideal_gains(self) -> Hits:
        """Each question's positive gains, best first, at positions 0, 1, ... (the ideal ranking's gains)."""
        ideal = self.judged.ideal
        gains = ranking.gains(ideal.values, self.gain_kind)
        keep = gains > 0
        return Hits(ideal.rows[keep], ideal.cols[keep], gains[keep], self.n)

    @cached_property
    def n_positive(self) -> np.ndarray:
        """Judgments with a positive gain per question (ndcg_rel's num_rel: whatever the relevance level)."""
        return self.ideal_gains.count()

    @cached_property
    def results_dcg(self) -> np.ndarray:
        """Each gain cell's DCG so far (its own term included), summed rank by rank."""
        g = self.gain_cells
        depth = int(g.cols.max()) + 1 if len(g.cols) else 0
        return running_sums(g.values / ranking.log2_positions(depth)[g.cols], g.rows, self.n)

    @cached_property
    def ideal_dcg(self) -> np.ndarray:
        """Each positive ideal position's ideal DCG so far (its own term included)."""
        g = self.ideal_gains
        depth = int(g.cols.max()) + 1 if len(g.cols) else 0
        return running_sums(g.values / ranking.log2_positions(depth)[g.cols], g.rows, self.n)

    def _last_per_row(self, hits: Hits, running: np.ndarray) -> np.ndarray:
        """Each row's last running value (0 for a row without cells)."""
        out = np.zeros(self.n, dtype=np.float64)
        ends = row_starts(hits)[1:] - 1
        has = np.bincount(hits.rows, minlength=self.n) > 0
        out[has] = running[ends[has]]
        return out

    # -- counts ----------------------------------------------------------------------------------------------------
    @cached_property
    def _counts(self) -> dict[str, np.ndarray]:
        return {"num_ret": self.lengths, "num_rel": self.n_rel, "num_rel_ret": self.rel_ret,
                "num_nonrel_judged_ret": self.judged_ret.count() - self.rel_ret}

    def counts(self) -> dict[str, np.ndarray]:
        """trec_eval's per-question counts (m_num_*.c): num_nonrel_judged_ret is the judged retrieved documents below
        the level."""
        return self._counts

    # -- one value per question ------------------------------------------------------------------------------------
    def gm_map(self) -> np.ndarray:
        """m_gm_map.c: log(max(AP, 1e-5)); the mean of these, exponentiated, is the geometric mean."""
        return log_floor(ranking.average_precision(self.rel, self.n_rel))

    def gm_bpref(self) -> np.ndarray:
        """m_gm_bpref.c: log(max(bpref, 1e-5))."""
        bpref = ranking.bpref(self.judged_ret, self.level, self.n_rel, self.judged.n_nonrelevant(self.level))
        return log_floor(bpref)

    def infap(self) -> np.ndarray:
        """m_infap.c (Yilmaz and Aslam, CIKM 2006): at each relevant document at rank j + 1, 1/(j+1) plus j/(j+1)
        times the share of the documents above that are in the pool (judged or not), times the smoothed share of
        the judged ones above that are relevant; documents not in the pool are skipped. Summed over R."""
        hits = self.judged.hits
        rel = hits.values >= self.level
        nonrel = (hits.values >= 0) & ~rel
        pool = hits.values < 0
        starts = row_starts(hits)[hits.rows]

        def above(mask: np.ndarray) -> np.ndarray:  # cells of the kind strictly above each cell, in its row
            seen = np.cumsum(mask) - mask
            return seen - np.concatenate(([0], np.cumsum(mask)))[starts]

        r, nr, pu = above(rel)[rel], above(nonrel)[rel], above(pool)[rel]
        j = hits.cols[rel].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            term = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((r + nr + pu) / j) * (
                (r + INFAP_EPSILON) / (r + nr + 2 * INFAP_EPSILON))
        term = np.where(j == 0, 1.0, term)
        total = np.bincount(hits.rows[rel], weights=term, minlength=self.n)
        return _safe_div(total, self.n_rel)

    @cached_property
    def best_precision_below(self) -> np.ndarray:
        """At each relevant retrieved document, the highest precision at its rank or below (interpolated)."""
        rel = self.rel
        return reverse_running_max(_ordinals(rel) / (rel.cols + 1.0), rel.rows, self.n)

    def iprec_at_recall(self, level: float, rounding: float = IPREC_ROUNDING) -> np.ndarray:
        """m_iprec_at_recall.c: the highest precision at or below the rank where ``int(level * R + rounding)``
        relevant documents have been retrieved (the first of them for 0; 0 when fewer were retrieved)."""
        best = self.best_precision_below
        cut = (level * self.n_rel.astype(np.float64) + rounding).astype(np.int64)
        reached = (cut <= self.rel_ret) & (self.rel_ret > 0)
        if not len(best):
            return np.zeros(self.n)
        at = row_starts(self.rel)[:-1] + np.maximum(cut, 1) - 1
        return np.where(reached, best[np.clip(at, 0, len(best) - 1)], 0.0)

    def eleven_point_average(self, rounding: float = IPREC_ROUNDING) -> np.ndarray:
        """m_11pt_avg.c: the interpolated precisions at the 11 recall levels, added from level 1.0 down, over 11."""
        total = np.zeros(self.n)
        for level in reversed(IPREC_LEVELS):
            total = total + self.iprec_at_recall(level, rounding)
        return total / float(len(IPREC_LEVELS))

    def rprec_mult(self, multiple: float) -> np.ndarray:
        """m_Rprec_mult.c: precision at rank ``int(multiple * R + 0.9)`` (0 at rank 0)."""
        cut = (multiple * self.n_rel.astype(np.float64) + 0.9).astype(np.int64)
        rel = self.rel
        within = np.bincount(rel.rows[rel.cols < cut[rel.rows]], minlength=self.n)
        return _safe_div(within, cut)

    def utility(self) -> np.ndarray:
        """m_utility.c with its default coefficients: relevant retrieved minus non-relevant retrieved."""
        a, b, c, d = UTILITY
        got, ret, rel = (x.astype(np.float64) for x in (self.rel_ret, self.lengths, self.n_rel))
        return a * got + b * (ret - got) + c * (rel - got) + d * (0.0 + got - ret - rel)

    def bin_g(self) -> np.ndarray:
        """m_binG.c: each relevant document counts 1 / log2(2 + non-relevant documents above it), summed over R."""
        rel = self.rel
        terms = 1.0 / log2_of(3.0 + rel.cols - _ordinals(rel))
        return np.where(self.rel_ret > 0, _safe_div(rel.total(terms), self.n_rel), 0.0)

    def g(self) -> np.ndarray:
        """m_G.c: each document's gain over log2(2 + ideal cost so far - gain so far), where the ideal cost adds the
        ideal ranking's gain at each rank (1 where it is below 1); summed, over the ideal ranking's total gain."""
        cells, ideal = self.gain_cells, self.ideal_gains
        ideal_starts = row_starts(ideal)
        positive = np.diff(ideal_starts)
        extra = np.cumsum(np.maximum(ideal.values, 1.0) - 1.0)  # whole numbers: exact in any order
        extra_base = np.concatenate(([0.0], extra))[ideal_starts[:-1]]
        so_far = np.cumsum(cells.values)
        so_far_base = np.concatenate(([0.0], so_far))[row_starts(cells)[:-1]]
        rows, cols = cells.rows, cells.cols
        # the ideal cost above 1 a rank at a time, up to this rank (past the ideal ranking's end, nothing more)
        reached = ideal_starts[rows] + np.minimum(cols, positive[rows] - 1)
        cost_extra = (extra[np.maximum(reached, 0)] - extra_base[rows]) if len(extra) else np.zeros(len(rows))
        cost = (cols + 1.0) + cost_extra  # a cell has a positive gain, so its question has a positive ideal gain
        gained = so_far - so_far_base[rows]
        terms = cells.values / log2_of(2 + cost - gained)
        total_ideal = np.bincount(ideal.rows, weights=ideal.values, minlength=self.n)
        return _safe_div(np.bincount(rows, weights=terms, minlength=self.n), total_ideal)

    def ndcg_rel(self) -> np.ndarray:
        """m_ndcg_rel.c: nDCG at each retrieved document of positive gain, plus the final nDCG once for each
        such document not retrieved, over the number of documents of positive gain."""
        cells, ideal = self.gain_cells, self.ideal_gains
        positive = self.n_positive
        ideal_starts = row_starts(ideal)[:-1]
        rows, cols = cells.rows, cells.cols
        at = ideal_starts[rows] + np.minimum(cols, positive[rows] - 1)
        has_ideal = positive[rows] > 0
        ideal_here = np.where(has_ideal, self.ideal_dcg[np.where(has_ideal, at, 0)] if len(self.ideal_dcg) else 0.0,
                              0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = self.results_dcg / ideal_here
            found = np.bincount(rows, weights=ratios, minlength=self.n)
            rd, idcg = self._last_per_row(cells, self.results_dcg), self._last_per_row(ideal, self.ideal_dcg)
            missed = (positive - cells.count()).astype(np.float64)
            total = found + missed * rd / idcg
        return np.where(total > 0, np.divide(total, positive, out=np.zeros(self.n), where=positive > 0), 0.0)

    def rndcg(self) -> np.ndarray:
        """m_Rndcg.c: nDCG averaged at each R level, the ranks where the ideal ranking's gain changes (the last one
        where it falls to 0), plus once at the end of the ranking when it runs past the last such rank."""
        cells, ideal = self.gain_cells, self.ideal_gains
        positive = self.n_positive
        ideal_starts = row_starts(ideal)
        # boundaries: position t (1..P) where the ideal gain changes, P itself included
        change = np.ones(len(ideal.rows), dtype=bool)
        change[1:] = (ideal.values[1:] != ideal.values[:-1]) | (ideal.rows[1:] != ideal.rows[:-1])
        change[ideal.cols == 0] = False  # t = 0 is never a boundary ...
        ends = ideal_starts[1:] - 1
        t_rows = np.concatenate((ideal.rows[change], np.flatnonzero(positive > 0)))
        t = np.concatenate((ideal.cols[change], positive[positive > 0]))  # ... and t = P always is
        order = np.lexsort((t, t_rows))
        t_rows, t = t_rows[order], t[order]
        ideal_before = self.ideal_dcg[ideal_starts[t_rows] + t - 1] if len(t) else np.zeros(0)
        upto = np.minimum(t, self.lengths[t_rows])
        results_before = self._results_before(t_rows, upto)
        ratios = results_before / ideal_before
        total = np.bincount(t_rows, weights=ratios, minlength=self.n)
        count = np.bincount(t_rows, minlength=self.n).astype(np.float64)
        past = (self.lengths > positive + 1) & (positive > 0)
        idcg = np.zeros(self.n)
        idcg[positive > 0] = self.ideal_dcg[ends[positive > 0]] if len(self.ideal_dcg) else 0.0
        rd = self._last_per_row(cells, self.results_dcg)
        with np.errstate(divide="ignore", invalid="ignore"):
            total = np.where(past, total + rd / idcg, total)
        count = count + past
        return np.where((self.n_rel > 0) & (count > 0), np.divide(total, count, out=np.zeros(self.n),
                                                                    where=count > 0), 0.0)

    def _results_before(self, rows: np.ndarray, upto: np.ndarray) -> np.ndarray:
        """The DCG of each row's first ``upto`` ranks (the running DCG of its last gain cell above that rank)."""
        cells = self.gain_cells
        if not len(cells.rows):
            return np.zeros(len(rows))
        width = int(max(cells.cols.max() + 1, upto.max() if len(upto) else 0)) + 1
        keys = cells.rows.astype(np.int64) * width + cells.cols
        at = np.searchsorted(keys, rows.astype(np.int64) * width + upto) - 1
        ok = (at >= 0) & (cells.rows[np.maximum(at, 0)] == rows)
        return np.where(ok, self.results_dcg[np.maximum(at, 0)], 0.0)

    def map_cut(self, k: int) -> np.ndarray:
        """m_map_cut.c: average precision counting only the top k."""
        return ranking.average_precision(self.rel.top(k), self.n_rel)

    def relative_p(self, k: int) -> np.ndarray:
        """m_rel_P.c: relevant documents in the top k over min(k, R)."""
        return _safe_div(self.rel.count(k), np.minimum(k, self.n_rel))

    def set_p(self) -> np.ndarray:
        """m_set_P.c: relevant retrieved over retrieved."""
        return _safe_div(self.rel_ret, self.lengths)

    def set_relative_p(self) -> np.ndarray:
        """m_set_rel_P.c: relevant retrieved over min(retrieved, R)."""
        return _safe_div(self.rel_ret, np.minimum(self.lengths, self.n_rel))

    def set_recall(self) -> np.ndarray:
        """m_set_recall.c: relevant retrieved over R."""
        return _safe_div(self.rel_ret, self.n_rel)

    def set_map(self) -> np.ndarray:
        """m_set_map.c: set precision times set recall."""
        got = self.rel_ret.astype(np.float64)
        return _safe_div(got * got, self.lengths.astype(np.float64) * self.n_rel.astype(np.float64))

    def set_f(self) -> np.ndarray:
        """m_set_F.c: the weighted harmonic mean of set precision and set recall (beta 1)."""
        x = SET_F_BETA
        with np.errstate(divide="ignore", invalid="ignore"):
            p = self.rel_ret / self.lengths.astype(np.float64)
            r = self.rel_ret / self.n_rel.astype(np.float64)
            f = (x + 1.0) * p * r / (x * p + r)
        return np.where(self.rel_ret > 0, f, 0.0)

    def rbp(self, p: float = RBP_PERSISTENCE) -> np.ndarray:
        """m_rbp.c (Moffat and Zobel, TOIS 2008): (1 - p) times the sum of each document's gain times p^(rank - 1);
        gains are scaled into [0, 1] by the question's largest gain when it is above 1 (min-max, the smallest gain,
        grade 0's, being 0)."""
        cells = self.gain_cells
        top = np.zeros(self.n)
        ideal = self.judged.ideal
        first = row_starts(ideal)[:-1]
        has = np.bincount(ideal.rows, minlength=self.n) > 0
        top[has] = ranking.gains(ideal.values[first[has]], self.gain_kind)
        scale = np.where(top > 1, top, 1.0)
        gains = cells.values / scale[cells.rows] if len(cells.rows) else cells.values
        depth = int(cells.cols.max()) + 1 if len(cells.cols) else 0
        powers = persistence_powers(p, depth)
        return (1.0 - p) * np.bincount(cells.rows, weights=gains * powers[cells.cols], minlength=self.n)

    def rbp_resid(self, p: float = RBP_PERSISTENCE) -> np.ndarray:
        """m_rbp_resid.c: how much rbp could still rise, were every unjudged retrieved document (not in the pool,
        or in it unjudged) of the largest gain and the ranking continued past its end with such documents:
        p^n + (1 - p) * sum of p^(rank - 1) over the unjudged ranks. 0 when every retrieved document is judged,
        as trec_eval 10.0 has it (its ranking's tail is not counted then)."""
        lengths = self.lengths
        depth = int(lengths.max()) if len(lengths) else 0
        powers = persistence_powers(p, depth)
        judged = self.judged_ret
        unjudged = lengths - judged.count()
        total = np.zeros(self.n)
        step = max(1, _SLAB_CELLS // max(self.n, 1))
        for start in range(0, depth, step):  # ranks in slabs; each slab's first row is the sum so far: one sequence
            stop = min(depth, start + step)
            slab = np.empty((stop - start + 1, self.n))
            slab[0] = total
            slab[1:] = np.where(np.arange(start, stop)[:, None] < lengths[None, :], powers[start:stop, None], 0.0)
            inside = (judged.cols >= start) & (judged.cols < stop)
            slab[1 + judged.cols[inside] - start, judged.rows[inside]] = 0.0
            total = np.add.reduce(slab, axis=0)
        return np.where(unjudged > 0, powers[lengths] + (1 - p) * total, 0.0)

    def unj(self, k: int) -> np.ndarray:
        """m_unjudged.c: documents in the top k not judged (not in the pool, or judged negative) over k; a ranking
        shorter than k counts its missing ranks as judged."""
        return (np.minimum(self.lengths, k) - self.judged_ret.count(k)) / float(k)

    def relstring(self, depth: int = RELSTRING_DEPTH) -> list[str]:
        """m_relstring.c: the grades of the top ``depth`` documents, one character each: the digit, '>' above 9,
        '.' for a negative grade (in the pool, not judged), '-' for a document not in the pool."""
        width = np.minimum(self.lengths, depth)
        chars = np.full((self.n, depth), ord("-"), dtype=np.uint8)
        hits = self.judged.hits.top(depth)
        grades = hits.values
        chars[hits.rows, hits.cols] = np.where(grades > 9, ord(">"), np.where(grades < 0, ord("."),
                                                                                  ord("0") + np.clip(grades, 0, 9)))
        text = chars.tobytes().decode("ascii")
        return [text[i * depth: i * depth + int(w)] for i, w in enumerate(width.tolist())]


def value(measures: TrecMeasures, spec: MetricSpec) -> np.ndarray:
    """The per-question values of one of :data:`metrics.spec.TREC_MEASURES`'s specs."""
    name, k = spec.measure, spec.k
    if name in measures.counts():
        return measures.counts()[name].astype(np.float64)
    if name in ("rbp", "rbp_resid"):
        p = RBP_PERSISTENCE if k is None else k / 100
        return measures.rbp(p) if name == "rbp" else measures.rbp_resid(p)
    if name == "iprec_at_recall":
        return measures.iprec_at_recall(k / 100)
    if name == "rprec_mult":
        return measures.rprec_mult(k / 100)
    if k is not None:
        return {"map_cut": measures.map_cut, "relative_p": measures.relative_p, "unj": measures.unj}[name](k)
    return {"gm_map": measures.gm_map, "gm_bpref": measures.gm_bpref, "infap": measures.infap,
            "11pt_avg": measures.eleven_point_average, "utility": measures.utility, "bing": measures.bin_g,
            "g": measures.g, "ndcg_rel": measures.ndcg_rel, "rndcg": measures.rndcg, "set_p": measures.set_p,
            "set_relative_p": measures.set_relative_p, "set_recall": measures.set_recall, "set_map": measures.set_map,
            "set_f": measures.set_f}[name]()
