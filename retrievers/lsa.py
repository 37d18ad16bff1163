"""LSA: TF-IDF (scikit-learn defaults) reduced by truncated SVD, questions scored by cosine (SPEC.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize

from retrievers.base import Documents, NotIndexedError, ScoringRetriever, counts_of
from retrievers.text import TFIDF_STATS, TermCounts, Tokenizer

DEGENERATE = 50  # documents per dimension beyond which an explicit dims is reported as too few


def auto_dims(documents: int) -> int:
    """Dimensions that follow the corpus: a fifth of the documents, at least 6 (the help-desk corpus's 28 get SPEC's
    6) and at most 300 (the usual ceiling in the LSA literature)."""
    return max(6, min(300, documents // 5))


def tfidf_of(terms: TermCounts) -> tuple[TfidfTransformer, sp.csr_matrix]:
    """The fitted TF-IDF transformer and the documents' TF-IDF matrix for ``terms``, computed once per counts
    object: it depends only on the counts, not on ``dims``, so every LSA indexed on them (a sweep over dims, a
    fusion's LSA component) shares it, and it goes when the counts go."""
    kept = terms.derived.get("tfidf")
    if kept is not None:
        TFIDF_STATS["reused"] += 1
        return kept
    transformer = TfidfTransformer().fit(terms.counts)
    terms.derived["tfidf"] = kept = (transformer, transformer.transform(terms.counts))
    TFIDF_STATS["computed"] += 1
    return kept


@dataclass
class LSA(ScoringRetriever):
    """Latent semantic analysis with ``dims`` dimensions; ``algorithm`` and ``seed`` as in TruncatedSVD."""

    dims: int | None = None  # None: follow the corpus (auto_dims): 6 for the help-desk corpus, as SPEC.md has it
    algorithm: str = "arpack"
    seed: int = 0
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    name: str = "lsa"
    deterministic = True
    context_fields = ("tokenizer",)

    def __post_init__(self) -> None:
        if self.dims is not None and self.dims < 1:
            raise ValueError(f"LSA dims must be >= 1, got {self.dims}")
        self.used_dims: int | None = None
        if self.algorithm not in ("arpack", "randomized"):
            raise ValueError(f"LSA algorithm must be 'arpack' or 'randomized', got {self.algorithm!r}")
        self._terms: TermCounts | None = None

    def index(self, docs: Documents, counts: TermCounts | None = None) -> LSA:
        """Fit TF-IDF and the SVD in corpus order (as the reference study did), then sort the axis by id."""
        terms = counts if counts is not None else counts_of(docs, self.tokenizer)
        limit = min(terms.counts.shape) - (1 if self.algorithm == "arpack" else 0)
        dims = self.dims if self.dims is not None else min(auto_dims(terms.counts.shape[0]), max(limit, 1))
        if dims > limit:
            raise ValueError(
                f"LSA dims={dims} is too large for {terms.counts.shape[0]} documents and "
                f"{terms.counts.shape[1]} terms (at most {limit} with algorithm={self.algorithm!r})"
            )
        self.used_dims, self._documents = dims, terms.counts.shape[0]
        self._tfidf, weighted = tfidf_of(terms)
        self._svd = TruncatedSVD(n_components=dims, algorithm=self.algorithm, random_state=self.seed)
        doc_vectors = normalize(self._svd.fit_transform(weighted))
        order = terms.id_order
        self.doc_ids = terms.doc_ids[order]
        self._doc_vectors = doc_vectors[order]
        self._terms = terms
        return self

    def notes(self) -> list[str]:
        """A dimension count far below what the corpus needs ranks it poorly without failing: say so."""
        if self.dims is None or self.used_dims is None or self._documents < DEGENERATE * self.dims:
            return []
        return [f"{self.name}: {self.dims} dimensions for {self._documents} documents keep too little of the corpus "
                f"to rank it well; leave retriever.dims unset (null) to follow the corpus "
                f"({auto_dims(self._documents)} here)"]

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        if self._terms is None:
            raise NotIndexedError("call index() before ranking")
        counts = self._terms.encode(texts, self.tokenizer)
        vectors = normalize(self._svd.transform(self._tfidf.transform(counts)))
        return vectors @ self._doc_vectors.T
