"""Weighted-sum fusion of min-max normalised scores over the whole corpus (docs/helpdesk-reference.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metrics.run import PAD, Run
from retrievers.base import MIN_SCORE, Documents, ScoringRetriever, _assemble, _check_batch, same_axis
from retrievers.topk import top_k_dense


def min_max(scores: np.ndarray) -> np.ndarray:
    """Rescale each row to [0, 1]; a row of equal scores becomes all zeros."""
    lo = scores.min(axis=1, keepdims=True)
    span = scores.max(axis=1, keepdims=True) - lo
    return np.divide(scores - lo, span, out=np.zeros_like(scores, dtype=np.float64), where=span > 0)


@dataclass
class WeightedSum(ScoringRetriever):
    """``alpha * first + (1 - alpha) * second`` (or explicit ``weights`` for any number of components).

    Every document is ranked (no score threshold) and the top ``depth`` kept; a question for which no
    component scores any document above zero gets an empty ranking.
    """

    components: Sequence[ScoringRetriever] = ()
    alpha: float = 0.5
    weights: Sequence[float] | None = None
    depth: int = 10
    name: str = "weighted"
    threshold = None

    def __post_init__(self) -> None:
        if len(self.components) < 2:
            raise ValueError("weighted fusion needs at least two component retrievers")
        not_scoring = [c.name for c in self.components if not isinstance(c, ScoringRetriever)]
        if not_scoring:
            raise ValueError(f"weighted fusion needs score-producing components; {', '.join(not_scoring)} only "
                             f"ranks (use retriever=rrf to fuse it)")
        if self.weights is None:
            if len(self.components) != 2:
                raise ValueError("with more than two components, give one weight per component")
            if not 0.0 <= self.alpha <= 1.0:
                raise ValueError(f"alpha must be within [0, 1], got {self.alpha}")
            self.weights = (self.alpha, 1.0 - self.alpha)
        if len(self.weights) != len(self.components):
            raise ValueError(f"{len(self.weights)} weights for {len(self.components)} components")

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        return all(c.deterministic for c in self.components)

    def notes(self) -> list[str]:
        return [note for c in self.components for note in c.notes()]

    def index(self, docs: Documents) -> WeightedSum:
        for c in self.components:
            c.index(docs)
        self.doc_ids = same_axis(self.components)
        return self

    def _fuse(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        fused = np.zeros((len(texts), len(self.doc_ids)))
        anything = np.zeros(len(texts), dtype=bool)
        for weight, component in zip(self.weights, self.components):
            raw = component.scores(texts)
            anything |= raw.max(axis=1, initial=0.0) > MIN_SCORE
            fused += weight * min_max(raw)
        return fused, anything

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        return self._fuse(texts)[0]

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int | None = None) -> Run:
        _check_batch(query_ids, texts)
        depth = self.depth if depth is None else min(depth, self.depth)
        docs, scores = [], []
        step = self.block_size()
        for start in range(0, len(texts), step):
            fused, anything = self._fuse(texts[start : start + step])
            d, s = top_k_dense(fused, depth, None)
            d[~anything] = PAD
            s[~anything] = np.nan
            docs.append(d)
            scores.append(s)
        return _assemble(self, query_ids, docs, scores, depth)
