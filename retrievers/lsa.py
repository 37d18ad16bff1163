"""LSA: TF-IDF (scikit-learn defaults) reduced by truncated SVD, questions scored by cosine
(docs/helpdesk-reference.md).

The maths is scikit-learn's, step for step and bit for bit (``TfidfTransformer`` with its defaults, ARPACK
``TruncatedSVD``, ``normalize``), written against numpy and SciPy directly: importing ``sklearn.decomposition``
costs about 1.6 s, longer than the whole help-desk study's LSA. The tests hold every array to scikit-learn's.
Only ``algorithm='randomized'`` still calls scikit-learn (imported then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from retrievers.base import Documents, NotIndexedError, ScoringRetriever, array_bytes, counts_of
from retrievers.text import TFIDF_STATS, TermCounts, Tokenizer

DEGENERATE = 50  # documents per dimension beyond which an explicit dims is reported as too few


def auto_dims(documents: int) -> int:
    """Dimensions that follow the corpus: a fifth of the documents, at least 6 (the help-desk corpus's 28 get the
    help-desk reference's 6) and at most 300 (the usual ceiling in the LSA literature)."""
    return max(6, min(300, documents // 5))


@dataclass(frozen=True)
class Tfidf:
    """scikit-learn's ``TfidfTransformer()``: smoothed idf, ``log((1 + n) / (1 + df)) + 1``, rows scaled to unit
    length."""

    idf: np.ndarray

    @classmethod
    def fit(cls, counts: sp.csr_matrix) -> Tfidf:
        df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.float64)
        df += 1.0
        idf = np.full_like(df, counts.shape[0] + 1)
        idf /= df
        np.log(idf, out=idf)
        idf += 1.0
        return cls(idf)

    def transform(self, counts: sp.csr_matrix) -> sp.csr_matrix:
        weighted = sp.csr_matrix(counts, dtype=np.float64, copy=True)
        weighted.data *= self.idf[weighted.indices]
        return unit_rows_sparse(weighted)


def unit_rows_sparse(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """Each row divided by its length, in place; an all-zero row stays. Each row's sum of squares is added up in
    order, as scikit-learn's ``inplace_csr_row_normalize_l2`` does (a weighted ``bincount`` adds in input order)."""
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    norms = np.sqrt(np.bincount(rows, weights=matrix.data * matrix.data, minlength=matrix.shape[0]))
    norms[norms == 0.0] = 1.0
    matrix.data /= norms[rows]
    return matrix


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """scikit-learn's ``normalize(matrix)`` for a dense array: a copy, each row of length 1 (rows of length below
    10 machine epsilons are left as they are)."""
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    norms[norms < 10 * np.finfo(norms.dtype).eps] = 1.0
    return matrix / norms[:, None]


def arpack_svd(matrix: sp.csr_matrix, dims: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's ``TruncatedSVD(dims, algorithm='arpack', random_state=seed).fit_transform``: the rows'
    coordinates (U times Sigma) and the components (the rows of V transposed), largest first, each component's sign
    set so that its largest entry is positive."""
    from scipy.sparse.linalg import svds  # 0.08 s; only LSA needs it

    start = np.random.RandomState(seed).uniform(-1, 1, min(matrix.shape))
    u, sigma, vt = svds(matrix, k=dims, tol=0.0, v0=start)
    u, sigma, vt = u[:, ::-1], sigma[::-1], vt[::-1]
    signs = np.sign(vt[np.arange(vt.shape[0]), np.argmax(np.abs(vt), axis=1)])
    u *= signs[np.newaxis, :]
    vt *= signs[:, np.newaxis]
    return u * sigma, vt


def tfidf_of(terms: TermCounts) -> tuple[Tfidf, sp.csr_matrix]:
    """The fitted TF-IDF and the documents' TF-IDF matrix for ``terms``, computed once per counts object: it depends
    only on the counts, not on ``dims``, so every LSA indexed on them (a sweep over dims, a fusion's LSA component)
    shares it, and it goes when the counts go."""
    kept = terms.derived.get("tfidf")
    if kept is not None:
        TFIDF_STATS["reused"] += 1
        return kept
    tfidf = Tfidf.fit(terms.counts)
    terms.derived["tfidf"] = kept = (tfidf, tfidf.transform(terms.counts))
    TFIDF_STATS["computed"] += 1
    return kept


def randomized_svd(matrix: sp.csr_matrix, dims: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``TruncatedSVD(dims, algorithm='randomized', random_state=seed)``: scikit-learn's own, imported only here."""
    from sklearn.decomposition import TruncatedSVD

    svd = TruncatedSVD(n_components=dims, algorithm="randomized", random_state=seed)
    return svd.fit_transform(matrix), svd.components_


@dataclass
class LSA(ScoringRetriever):
    """Latent semantic analysis with ``dims`` dimensions; ``algorithm`` and ``seed`` as in TruncatedSVD."""

    # None: follow the corpus (auto_dims): 6 for the help-desk corpus, as docs/helpdesk-reference.md has it
    dims: int | None = None
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
        svd = arpack_svd if self.algorithm == "arpack" else randomized_svd
        coordinates, self._components = svd(weighted, dims, self.seed)
        order = terms.id_order
        self.doc_ids = terms.doc_ids[order]
        self._doc_vectors = unit_rows(coordinates)[order]
        self._terms = terms
        return self

    def index_bytes(self) -> int:
        return array_bytes(self._doc_vectors, self._components)

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
        vectors = unit_rows(self._tfidf.transform(counts) @ self._components.T)
        return vectors @ self._doc_vectors.T
