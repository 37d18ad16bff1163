"""Text processing shared by every lexical retriever: the tokenizer and the term-count matrix."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources

import numpy as np
import pandas as pd
import scipy.sparse as sp


def default_stopwords() -> frozenset[str]:
    """SPEC.md's 45-word stop list, shipped with the package."""
    text = resources.files("retrievers").joinpath("stopwords/default.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.split() if w.strip())


@dataclass(frozen=True)
class Tokenizer:
    """Lower-case, keep maximal runs of ``pattern``, drop stop words (SPEC.md's defaults)."""

    pattern: str = r"[a-z0-9]+"
    lowercase: bool = True
    stopwords: frozenset[str] = field(default_factory=default_stopwords)

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        stop = self.stopwords
        return [t for t in self._regex.findall(text) if t not in stop]

    @property
    def digest(self) -> str:
        """Identifies the settings, so caches of tokenised text can be keyed by it."""
        h = hashlib.sha256(f"{self.pattern}\0{self.lowercase}\0".encode())
        h.update("\n".join(sorted(self.stopwords)).encode())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class TermCounts:
    """A documents x terms count matrix; ``vocab`` is sorted, rows follow ``doc_ids`` as given."""

    doc_ids: np.ndarray
    vocab: np.ndarray
    counts: sp.csr_matrix

    @cached_property
    def term_index(self) -> pd.Index:
        return pd.Index(self.vocab)

    @cached_property
    def id_order(self) -> np.ndarray:
        """Row order that sorts the documents by id: the tie rule's order."""
        return np.argsort(self.doc_ids.astype(str), kind="stable")

    def encode(self, texts: Iterable[str], tokenizer: Tokenizer, binary: bool = False) -> sp.csr_matrix:
        """Question texts as a (questions x vocab) count matrix; unknown terms are dropped."""
        return _count_matrix(texts, tokenizer, self.term_index, binary)[0]


def _count_matrix(
    texts: Iterable[str], tokenizer: Tokenizer, vocab: pd.Index | None, binary: bool = False
) -> tuple[sp.csr_matrix, np.ndarray]:
    flat: list[str] = []
    lengths: list[int] = []
    for text in texts:
        tokens = tokenizer(text)
        if binary:
            tokens = list(dict.fromkeys(tokens))
        flat.extend(tokens)
        lengths.append(len(tokens))
    rows = np.repeat(np.arange(len(lengths)), lengths)
    if vocab is None:
        codes, uniques = pd.factorize(pd.Series(flat, dtype=object), sort=True)
        terms = np.asarray(uniques, dtype=object)
    else:
        codes = vocab.get_indexer(flat) if flat else np.zeros(0, dtype=np.int64)
        known = codes >= 0
        rows, codes = rows[known], codes[known]
        terms = np.asarray(vocab, dtype=object)
    data = np.ones(len(codes), dtype=np.float64)
    matrix = sp.csr_matrix((data, (rows, codes)), shape=(len(lengths), len(terms)))
    matrix.sum_duplicates()
    return matrix, terms


def term_counts(doc_ids: Sequence[str], texts: Iterable[str], tokenizer: Tokenizer) -> TermCounts:
    """Tokenise every document once into a sparse count matrix with a sorted vocabulary."""
    matrix, vocab = _count_matrix(texts, tokenizer, None)
    return TermCounts(np.asarray(doc_ids, dtype=object), vocab, matrix)
