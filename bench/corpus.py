"""Seeded synthetic corpora: Zipf-distributed words, so posting lengths and score ties look like real text."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrievers.text import default_stopwords

ALPHABET = np.array(list("abcdefghijklmnopqrstuvwxyz"))
HEAVY_VOCAB = 50_000  # the heavy workload's vocabulary size


@dataclass(frozen=True)
class Synthetic:
    """Documents and questions as plain text, ids zero-padded so that id order is corpus order."""

    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]


def words(n: int) -> np.ndarray:
    """Up to ``n`` distinct lower-case words of three or four letters, none of them a stop word."""
    ranks = np.arange(n, dtype=np.int64) + 26 * 26  # skip the one- and two-letter words
    letters = []
    while ranks.any():
        letters.append(ALPHABET[ranks % 26])
        ranks //= 26
    out = np.array(["".join(chars) for chars in zip(*reversed(letters))], dtype=object)
    stop = default_stopwords()
    return out[[w not in stop for w in out]]


def _zipf_texts(rng: np.random.Generator, vocab: np.ndarray, cdf: np.ndarray, lengths: np.ndarray) -> list[str]:
    draws = np.searchsorted(cdf, rng.random(int(lengths.sum())), side="right")
    tokens = vocab[np.minimum(draws, len(vocab) - 1)]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return [" ".join(tokens[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]


def heavy(n_docs: int, n_queries: int = 1_000, seed: int = 0) -> Synthetic:
    """The heavy workload: a Zipf vocabulary of exactly 50,000 terms with exponent 1.0, document lengths
    log-normal with mean 60 (sigma 0.5, clipped to 5-600), and questions of 1 + Poisson(5) terms drawn from the
    same law. No word is a stop word, so every drawn token is indexed; the top term is in about 97% of the
    documents, so most questions touch nearly the whole corpus (the hard case for pruned top-k)."""
    rng = np.random.default_rng(seed)
    vocab = words(HEAVY_VOCAB + 100)[:HEAVY_VOCAB]  # a few spare ranks make up for the stop words dropped
    weights = 1.0 / np.arange(1, HEAVY_VOCAB + 1, dtype=np.float64)
    cdf = np.cumsum(weights / weights.sum())
    sigma = 0.5
    doc_lens = np.clip(rng.lognormal(np.log(60.0) - sigma**2 / 2, sigma, n_docs), 5, 600).astype(np.int64)
    query_lens = 1 + rng.poisson(5.0, n_queries)
    return _drawn(rng, vocab, cdf, doc_lens, query_lens)


def _drawn(rng: np.random.Generator, vocab: list[str], cdf: np.ndarray, doc_lens: np.ndarray,
           query_lens: np.ndarray) -> Synthetic:
    """Documents and questions of the given lengths, words drawn by ``cdf`` from ``vocab``; ids d0001, q0001 ..."""
    width = len(str(max(len(doc_lens), len(query_lens))))
    return Synthetic(
        [f"d{i:0{width}d}" for i in range(len(doc_lens))],
        _zipf_texts(rng, vocab, cdf, doc_lens),
        [f"q{i:0{width}d}" for i in range(len(query_lens))],
        _zipf_texts(rng, vocab, cdf, query_lens),
    )


def synthetic(
    n_docs: int, n_queries: int, seed: int = 0, vocab_size: int = 200_000, exponent: float = 1.07,
    mean_doc_len: float = 60.0, query_len: tuple[int, int] = (3, 10),
) -> Synthetic:
    """A corpus of ``n_docs`` documents (log-normal lengths around ``mean_doc_len`` words) drawn from a Zipf
    vocabulary, and ``n_queries`` questions of ``query_len`` words drawn from the same distribution."""
    rng = np.random.default_rng(seed)
    vocab = words(vocab_size)
    vocab_size = len(vocab)
    weights = 1.0 / np.arange(1, vocab_size + 1) ** exponent
    cdf = np.cumsum(weights / weights.sum())
    sigma = 0.6
    doc_lens = np.clip(rng.lognormal(np.log(mean_doc_len) - sigma**2 / 2, sigma, n_docs), 3, 1000).astype(np.int64)
    query_lens = rng.integers(query_len[0], query_len[1] + 1, n_queries)
    return _drawn(rng, vocab, cdf, doc_lens, query_lens)
