"""Reciprocal Rank Fusion: sum of 1 / (k + position) over the components' top-``depth`` lists."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from metrics.run import PAD, Run
from retrievers.base import Documents, Retriever, _assemble, _check_batch
from retrievers.topk import top_k_sparse


@dataclass
class RRF(Retriever):
    """Fuses any retrievers (scoring ones or precomputed runs) by rank alone; ties by document id."""

    components: Sequence[Retriever] = ()
    k: float = 60.0
    depth: int = 10
    name: str = "rrf"
    ranks_components = True  # components are used only through rank(): their rankings may come from a memo

    def __post_init__(self) -> None:
        if len(self.components) < 2:
            raise ValueError("RRF needs at least two component retrievers")
        if self.k < 0:
            raise ValueError(f"RRF k must be >= 0, got {self.k}")

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        return all(c.deterministic for c in self.components)

    def notes(self) -> list[str]:
        return [note for c in self.components for note in c.notes()]

    def index(self, docs: Documents) -> RRF:
        for c in self.components:
            c.index(docs)
        return self

    def fused(self, query_ids: Sequence[str], texts: Sequence[str]) -> tuple[sp.csr_matrix, np.ndarray]:
        """The fused scores as a sparse (questions x documents) matrix, and its document axis (sorted ids)."""
        runs = [c.rank(query_ids, texts, self.depth) for c in self.components]
        axis = pd.Index(sorted(set().union(*(r.doc_ids.tolist() for r in runs))))
        rows, cols, vals = [], [], []
        for run in runs:
            docs = run.docs[:, : self.depth]
            r, pos = np.nonzero(docs != PAD)
            rows.append(r)
            cols.append(axis.get_indexer(run.doc_ids[docs[r, pos]]))
            vals.append(1.0 / (self.k + pos + 1.0))
        matrix = sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(query_ids), len(axis))
        )
        matrix.sum_duplicates()
        return matrix, np.asarray(axis, dtype=object)

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        matrix, axis = self.fused(query_ids, texts)
        self.doc_ids = axis
        width = min(depth, len(self.components) * self.depth)
        docs, scores = top_k_sparse(matrix, width, None)
        return _assemble(self, query_ids, [docs], [scores], width)
