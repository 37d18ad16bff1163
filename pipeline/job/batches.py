"""Rank a job's questions a batch at a time: a progress bar over questions, and memory bounded by the batch.

A batch holds about :data:`BATCH_CELLS` (question, document) cells, whatever the retriever: at a million
documents 64 questions, so even a retriever that materialises every (question, document) score of its batch
(BM25's sparse product, when most documents share a frequent word with most questions) stays within about a
gigabyte. Batches are whole multiples of the retrievers' own score-block size (``retrievers.base.BLOCK_CELLS``
cells), so every score block a retriever computes is the one it would compute for all the questions at once:
the Run is the same, bit for bit, with or without batches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from metrics.run import PAD, Run
from pipeline.common import progress
from retrievers import Retriever
from retrievers.base import BLOCK_CELLS

BATCH_CELLS = 2**26


def batch_length(n_docs: int) -> int:
    """Questions per batch: a whole number of dense score blocks, about :data:`BATCH_CELLS` cells in all."""
    block = max(1, BLOCK_CELLS // max(1, n_docs))
    return block * max(1, BATCH_CELLS // max(1, n_docs) // block)


def rank_in_batches(retriever: Retriever, query_ids: Sequence[str], texts: Sequence[str], depth: int,
                   n_docs: int, label: str = "ranking") -> Run:
    """``retriever.rank`` over batches of questions, joined into one Run (rows in question order)."""
    step = batch_length(n_docs)
    if len(query_ids) <= step:
        return retriever.rank(query_ids, texts, depth)
    runs = []
    with progress.ticker(len(query_ids), label, "question", unit_scale=True) as tick:
        for start in range(0, len(query_ids), step):
            runs.append(retriever.rank(query_ids[start : start + step], texts[start : start + step], depth))
            tick(len(runs[-1].query_ids))
    return concat_runs(runs)


def concat_runs(runs: Sequence[Run]) -> Run:
    """Stack Runs of disjoint question batches; their document axes are merged when they differ (RRF's)."""
    first = runs[0]
    if all(r.doc_ids is first.doc_ids or np.array_equal(r.doc_ids, first.doc_ids) for r in runs[1:]):
        axis, blocks = first.doc_ids, [r.docs for r in runs]
    else:
        axis = np.asarray(sorted(set().union(*(r.doc_ids.tolist() for r in runs))), dtype=object)
        index = pd.Index(axis)
        blocks = [np.where(r.docs == PAD, PAD, index.get_indexer(r.doc_ids)[np.maximum(r.docs, 0)]) for r in runs]
    width = max(r.depth for r in runs)
    docs = np.vstack([_pad(b, width, PAD) for b in blocks])
    scores = np.vstack([_pad(r.scores, width, np.nan) for r in runs])
    query_ids = np.concatenate([r.query_ids for r in runs])
    return Run(query_ids, axis, docs, scores, first.name)


def _pad(block: np.ndarray, width: int, fill) -> np.ndarray:
    if block.shape[1] == width:
        return block
    out = np.full((block.shape[0], width), fill, dtype=block.dtype)
    out[:, : block.shape[1]] = block
    return out
