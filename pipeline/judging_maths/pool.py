"""Pooling: the unjudged (question, document) pairs in the systems' top k, in the order that makes the first
judgments do the most good, and how far any budget of them gets each system.

Two orders (``ORDERS``):

- ``depth``: plain depth-k pooling, judged shallowest first (every system's rank 1 for every question, then rank 2,
  ...): the first N pairs are the depth-d pool for the largest d they complete. The reference every pooling study
  compares with (Spärck Jones and van Rijsbergen 1975; TREC since 1992).
- ``rbp``: rank-biased priority (Moffat, Webber and Zobel, "Strategic system comparisons via targeted relevance
  judgments", SIGIR 2007; "MoffatA" in Losada, Parapar and Barreiro 2016): a pair weighs the sum, over the systems
  that rank it, of the weight rank-biased precision gives its rank, (1 - p) p^(rank - 1); heaviest first. A document
  near the top of several systems goes before one deep in a single system, across every question at once.

Losada et al.'s multi-armed bandit orders (move-to-front, Bayesian bandits) are adaptive: each choice depends on the
grades given so far, which a list of tasks pushed to assessors in advance cannot know; they are not offered here.

Already judged means a judgment of grade 0 or more (a negative grade is TREC's "in the pool, not judged").

**Chunked runs** pool the pairs their top chunks point to: each ranking of chunks becomes a ranking of documents with
one entry per chunk (:func:`documents_at_chunks`), so a pair's rank is its best chunk's, RBP weighs each of its chunks
in the top k (a document that fills more of the context weighs more), and judged@k is the share of the top k chunks
whose document is judged. :func:`pooled_chunks` lists the chunks behind each pooled pair, to mark in the document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from metrics.chunks import ChunkRun
from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.run import PAD, Run

DEPTH, RBP = "depth", "rbp"
ORDERS = (DEPTH, RBP)
DEFAULT_DEPTH = 10
DEFAULT_PERSISTENCE = 0.8  # RBP's p: the chance a reader goes on to the next document (Moffat and Zobel 2008)
TARGET = 0.8  # judged@10 at or above it: the summary stops warning that nDCG undercounts
_EPS = 1e-12
COLUMNS = ["query_id", "doc_id", "best_rank", "systems", "weight"]


def cells(runs: Mapping[str, Run], depth: int) -> pd.DataFrame:
    """Every (system, question, document, rank) of the runs' top ``depth``, and each question's ranking length."""
    frames = []
    for system, run in runs.items():
        docs = run.docs[:, :depth]
        rows, cols = np.nonzero(docs != PAD)
        frames.append(pd.DataFrame({"system": system, "query_id": run.query_ids[rows].astype(str),
                                    "doc_id": run.doc_ids[docs[rows, cols]].astype(str), "rank": cols + 1,
                                    "length": run.lengths[rows]}))
    if not frames:
        return pd.DataFrame({"system": [], "query_id": [], "doc_id": [], "rank": [], "length": []})
    return pd.concat(frames, ignore_index=True)


def judged_pairs(qrels: Qrels) -> pd.DataFrame:
    """The (question, document) pairs judged at grade 0 or more."""
    keep = qrels.grades >= 0
    return pd.DataFrame({"query_id": qrels.query_ids[keep].astype(str), "doc_id": qrels.doc_ids[keep].astype(str)})


@dataclass(frozen=True)
class Pool:
    """The pairs to judge, in judging order (``pairs``: one row each, ``COLUMNS``), and what each system ranked."""

    pairs: pd.DataFrame
    order: str
    depth: int
    systems: list[str]
    questions: list[str]  # every question a run ranked (or the questions asked for), in first-seen order
    judged: pd.DataFrame = field(repr=False)  # the pairs judged before pooling
    ranked: pd.DataFrame = field(repr=False)  # cells(runs, depth) of the pooled questions
    persistence: float = DEFAULT_PERSISTENCE

    def __len__(self) -> int:
        return len(self.pairs)

    def keys(self) -> list[tuple[str, str]]:
        return list(zip(self.pairs["query_id"], self.pairs["doc_id"]))

    def judged_curve(self, k: int = 10) -> pd.DataFrame:
        """judged@k of every system after the first N pairs are judged, for N = 0 .. len(pool): a frame indexed by
        N, one column per system. judged@k as ``metrics`` computes it (the judged share of the top k, of what a
        shorter ranking retrieved), averaged over every pooled question (one a system did not rank counts 0)."""
        if k > self.depth:
            raise InputError(f"judged@{k} needs a pool at least {k} deep (this one is {self.depth})")
        top = self.ranked[self.ranked["rank"] <= k]
        position = pd.Series(np.arange(len(self.pairs)), index=pd.MultiIndex.from_frame(self.pairs[["query_id",
                                                                                                     "doc_id"]]))
        keys = pd.MultiIndex.from_frame(top[["query_id", "doc_id"]])
        where = position.reindex(keys).to_numpy()  # NaN: judged before (or never pooled)
        before = pd.MultiIndex.from_frame(self.judged).unique() if len(self.judged) else pd.MultiIndex.from_tuples(
            [], names=["query_id", "doc_id"])
        already = keys.isin(before)
        weight = 1.0 / (np.minimum(top["length"].to_numpy(), k) * max(len(self.questions), 1))
        curve = {}
        for system in self.systems:
            mine = (top["system"] == system).to_numpy()
            start = float(weight[mine & already].sum())
            pooled = mine & ~already & ~np.isnan(where)
            steps = np.bincount(where[pooled].astype(np.int64), weights=weight[pooled], minlength=len(self.pairs))
            curve[system] = start + np.concatenate(([0.0], np.cumsum(steps)))
        return pd.DataFrame(curve, index=pd.RangeIndex(len(self.pairs) + 1, name="judgments"))

    def judged_after(self, budget: int, k: int = 10) -> dict[str, float]:
        """Each system's judged@k once the first ``budget`` pairs are judged (all of them, if fewer)."""
        curve = self.judged_curve(k)
        row = curve.iloc[min(max(budget, 0), len(self.pairs))]
        return {system: float(row[system]) for system in self.systems}

    def needed(self, target: float = TARGET, k: int = 10) -> int | None:
        """The fewest first pairs after which every system's judged@k is at least ``target``; None when even the
        whole pool does not get there."""
        curve = self.judged_curve(k)
        reached = (curve.to_numpy() >= target - _EPS).all(axis=1) if self.systems else np.ones(len(curve), bool)
        hits = np.flatnonzero(reached)
        return int(hits[0]) if len(hits) else None


def pool(runs: Mapping[str, Run], qrels: Qrels, depth: int = DEFAULT_DEPTH, order: str = DEPTH,
         questions: Sequence[str] | None = None, persistence: float = DEFAULT_PERSISTENCE) -> Pool:
    """The unjudged pairs in the ``runs``' top ``depth`` (of ``questions``, by default every question ranked), in
    ``order``. A question without any judgment is pooled like any other."""
    if order not in ORDERS:
        raise InputError(f"pooling order {order!r}: expected one of {', '.join(ORDERS)}")
    if depth < 1:
        raise InputError(f"pool depth must be at least 1, got {depth}")
    if not 0 < persistence < 1:
        raise InputError(f"RBP persistence must be within (0, 1), got {persistence}")
    if not runs:
        raise InputError("no run to pool")
    ranked = cells(runs, depth)
    if questions is None:
        questions = list(dict.fromkeys(q for run in runs.values() for q in run.query_ids.astype(str).tolist()))
    else:
        questions = list(dict.fromkeys(str(q) for q in questions))
        ranked = ranked[ranked["query_id"].isin(set(questions))]
    judged = judged_pairs(qrels)
    ranked = ranked.reset_index(drop=True)
    fresh = ranked.merge(judged.assign(_judged=True), on=["query_id", "doc_id"], how="left")
    fresh = fresh[fresh["_judged"].isna()].drop(columns="_judged")
    fresh = fresh.assign(weight=(1 - persistence) * persistence ** (fresh["rank"].to_numpy() - 1.0))
    pairs = (fresh.groupby(["query_id", "doc_id"], sort=False)
             .agg(best_rank=("rank", "min"), systems=("system", "nunique"), weight=("weight", "sum"))
             .reset_index())
    place = {q: i for i, q in enumerate(questions)}
    pairs["_question"] = pairs["query_id"].map(place)
    keys = ["best_rank", "_question", "doc_id"] if order == DEPTH else ["_weight", "best_rank", "_question", "doc_id"]
    pairs["_weight"] = -pairs["weight"].round(12)  # equal weights (the same ranks) tie exactly
    pairs = pairs.sort_values(keys, kind="stable").drop(columns=["_question", "_weight"]).reset_index(drop=True)
    return Pool(pairs[COLUMNS], order, depth, list(runs), questions, judged, ranked, persistence)


def documents_at_chunks(chunk_run: ChunkRun) -> Run:
    """A ranking of chunks as a ranking of their documents, one entry per chunk (a document as often as its chunks are
    ranked), in the chunks' order."""
    run = chunk_run.run
    codes, vocab = chunk_run.doc_vocab
    docs = np.where(run.docs == PAD, PAD, codes[np.maximum(run.docs, 0)])
    return Run(run.query_ids, vocab, docs, run.scores, run.name)


CHUNK_COLUMNS = ["query_id", "doc_id", "start", "end", "best_rank", "systems"]


def pooled_chunks(chunk_runs: Mapping[str, ChunkRun], depth: int, pairs: pd.DataFrame) -> pd.DataFrame:
    """The chunks of the runs' top ``depth`` behind the pooled ``pairs`` (``CHUNK_COLUMNS``): each chunk once, its
    best rank and the systems that ranked it (``BM25, RRF``), by pair then start."""
    frames = []
    for system, chunk_run in chunk_runs.items():
        run, chunks = chunk_run.run, chunk_run.chunks
        docs = run.docs[:, :depth]
        rows, cols = np.nonzero(docs != PAD)
        axis = docs[rows, cols]
        frames.append(pd.DataFrame({"query_id": run.query_ids[rows].astype(str),
                                    "doc_id": chunks.doc_ids[axis].astype(str), "start": chunks.starts[axis],
                                    "end": chunks.ends[axis], "rank": cols + 1, "system": system}))
    if not frames:
        return pd.DataFrame(columns=CHUNK_COLUMNS)
    found = pd.concat(frames, ignore_index=True).merge(pairs[["query_id", "doc_id"]].astype(str),
                                                       on=["query_id", "doc_id"])
    order = {s: i for i, s in enumerate(chunk_runs)}
    grouped = (found.groupby(["query_id", "doc_id", "start", "end"], sort=False)
               .agg(best_rank=("rank", "min"),
                    systems=("system", lambda s: ", ".join(sorted(set(s), key=order.__getitem__))))
               .reset_index())
    return grouped.sort_values(["query_id", "doc_id", "start", "end"], kind="stable").reset_index(drop=True)[
        CHUNK_COLUMNS]
