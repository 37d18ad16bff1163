"""Text processing shared by every lexical retriever: the tokenizer and the term-count matrix.

Counting is the cost of indexing a large corpus, so the usual tokenizer (one character class repeated, such as
the default ``[a-z0-9]+``) takes a vectorised path: each batch of texts is joined, lower-cased and encoded once,
tokens are found as runs of bytes in numpy, and each token is identified by its bytes packed into 64-bit
integers, so no Python string is made per token, only one per distinct term. Any other pattern runs the
regular expression text by text. Both paths give the same matrix (checked in the tests).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

# A pattern of this form (one class of ASCII letters, digits and '_' repeated) can be matched byte by byte.
_ASCII_RUN = re.compile(r"\[(?:[A-Za-z0-9]-[A-Za-z0-9]|[A-Za-z0-9_])+\]\+")
_SEPARATOR = "\x00"  # joins the texts of a batch; never part of a token of an ASCII class
_BATCH_CHARS = 2**22  # characters per batch at most: bounds the temporary arrays of the vectorised path ...
_BATCHES = 32  # ... and a smaller corpus is cut in about this many, so its temporaries shrink with it ...
_MIN_BATCH_CHARS = 2**18  # ... down to this (below, per-batch costs would start to show)


@cache
def default_stopwords() -> frozenset[str]:
    """docs/helpdesk-reference.md's 45-word stop list, shipped with the package (read once: every tokenizer shares the
    one set)."""
    text = resources.files("retrievers").joinpath("stopwords/default.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.split() if w.strip())


@dataclass(frozen=True)
class Tokenizer:
    """Lower-case, keep maximal runs of ``pattern``, drop stop words (docs/helpdesk-reference.md's defaults)."""

    pattern: str = r"[a-z0-9]+"
    lowercase: bool = True
    stopwords: frozenset[str] = field(default_factory=default_stopwords)

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    @cached_property
    def byte_table(self) -> np.ndarray | None:
        """Which bytes make up tokens, when the pattern is a repeated ASCII class; None otherwise."""
        if not _ASCII_RUN.fullmatch(self.pattern):
            return None
        regex = self._regex
        return np.array([regex.fullmatch(chr(c)) is not None for c in range(256)]) & (np.arange(256) < 128)

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


# What work derived from term counts was computed or reused in this process (LSA's TF-IDF: retrievers.lsa counts it
# here, so reading the counts does not import scikit-learn).
TFIDF_STATS: Counter = Counter()


@dataclass(frozen=True)
class TermCounts:
    """A documents x terms count matrix; ``vocab`` is sorted, rows follow ``doc_ids`` as given."""

    doc_ids: np.ndarray
    vocab: np.ndarray
    counts: sp.csr_matrix
    # what retrievers derive from these counts (LSA's TF-IDF), kept exactly as long as the counts are
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def term_index(self) -> pd.Index:
        """Hash index of the vocabulary. Object dtype: pandas' default string dtype would load Arrow's string
        kernels (~16 MB resident) and convert every looked-up term."""
        return pd.Index(self.vocab, dtype=object)

    @cached_property
    def id_order(self) -> np.ndarray:
        """Row order that sorts the documents by id: the tie rule's order."""
        ids = self.doc_ids.astype(str)
        if len(ids) < 2 or bool(np.all(ids[1:] >= ids[:-1])):
            return np.arange(len(ids))
        return np.argsort(ids, kind="stable")

    def encode(self, texts: Iterable[str], tokenizer: Tokenizer, binary: bool = False) -> sp.csr_matrix:
        """Question texts as a (questions x vocab) count matrix; unknown terms are dropped."""
        return encode(texts, tokenizer, self.term_index, binary)


class _Vocabulary:
    """Term ids in order of first appearance (or a fixed sorted vocabulary), a batch of distinct terms at a time.

    Terms of at most 8 bytes are also known by their packed bytes, looked up in one vectorised call, so a
    term is decoded into a Python string only the first time it is seen.
    """

    def __init__(self, fixed: pd.Index | None, stopwords: frozenset[str]) -> None:
        self.fixed = fixed
        self.stopwords = stopwords
        self.ids: dict[str, int] = {}
        self.packed = pd.Index(np.zeros(0, dtype=np.uint64))  # packed bytes of known short terms ...
        self.packed_ids = np.zeros(0, dtype=np.int64)  # ... and their ids (-1: a stop word)
        if fixed is not None:
            self.packed, self.packed_ids = _packed_vocabulary(fixed, stopwords)

    def __len__(self) -> int:
        return len(self.fixed) if self.fixed is not None else len(self.ids)

    def _ids(self, terms: list[str]) -> np.ndarray:
        """Ids of distinct ``terms``: new ones are added (-1 when the vocabulary is fixed), stop words get -1."""
        stop = self.stopwords
        kept = [i for i, t in enumerate(terms) if t not in stop]
        out = np.full(len(terms), -1, dtype=np.int64)
        if not kept:
            return out
        words = [terms[i] for i in kept]
        if self.fixed is not None:
            out[kept] = self.fixed.get_indexer(pd.Index(words, dtype=object))  # no Arrow string conversion
            return out
        found = np.fromiter(map(self.ids.get, words, repeat(-1)), dtype=np.int64, count=len(words))
        new = np.flatnonzero(found < 0)
        found[new] = np.arange(len(self.ids), len(self.ids) + len(new))
        self.ids.update(zip([words[i] for i in new.tolist()], found[new].tolist()))
        out[kept] = found
        return out

    def lookup(self, batch: _Tokens) -> np.ndarray:
        """The id of each distinct token of ``batch``."""
        if batch.packed is None:
            return self._ids(batch.terms(np.arange(batch.n_distinct)))
        out = np.full(batch.n_distinct, -1, dtype=np.int64)
        short = np.flatnonzero(~batch.long)
        where = self.packed.get_indexer(batch.packed[short])
        out[short[where >= 0]] = self.packed_ids[where[where >= 0]]
        unseen = short[where < 0]
        if len(unseen) and self.fixed is None:  # (a short term a fixed vocabulary lacks is unknown: -1)
            ids = self._ids(batch.terms(unseen))
            out[unseen] = ids
            self.packed = self.packed.append(pd.Index(batch.packed[unseen]))
            self.packed_ids = np.concatenate((self.packed_ids, ids))
        long = np.flatnonzero(batch.long)
        if len(long):
            out[long] = self._ids(batch.terms(long))
        return out

    def terms(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted vocabulary and, for each id, its position in it."""
        if self.fixed is not None:
            return np.asarray(self.fixed, dtype=object), np.arange(len(self.fixed))
        words = np.array(list(self.ids), dtype=object)
        order = np.array(sorted(range(len(words)), key=words.__getitem__), dtype=np.int64)
        position = np.empty(len(words), dtype=np.int64)
        position[order] = np.arange(len(words))
        return words[order], position


# the last fixed vocabulary, its stop words, its packed terms and their ids (one tuple: replaced whole, so that a
# thread never reads one vocabulary's terms with another's ids)
_fixed_packed: tuple[Any, ...] = (None, None, None, None)


def _packed_vocabulary(fixed: pd.Index, stopwords: frozenset[str]) -> tuple[pd.Index, np.ndarray]:
    """A fixed vocabulary's terms of at most 8 ASCII bytes packed as tokens are (little-endian, zero past the
    end: see :func:`_pack`), and their ids (-1 for a stop word), so that questions are looked up without
    decoding their tokens. The last vocabulary's are kept: questions are encoded over it again and again."""
    global _fixed_packed
    last = _fixed_packed
    if last[0] is fixed and (last[1] is stopwords or last[1] == stopwords):
        return last[2], last[3]
    ids, packed = [], []
    for i, term in enumerate(fixed.tolist()):
        if len(term) <= 8 and term.isascii():
            ids.append(-1 if term in stopwords else i)
            packed.append(int.from_bytes(term.encode("ascii"), "little"))
    index, known = pd.Index(np.array(packed, dtype=np.uint64)), np.array(ids, dtype=np.int64)
    _fixed_packed = (fixed, stopwords, index, known)
    return index, known


@dataclass
class _Tokens:
    """A tokenised batch: the text of each token, a code per token (equal codes = equal tokens), and per code
    how to get the term (``packed`` bytes for terms of at most 8 bytes when found in bytes, ``long`` flags)."""

    text_of: np.ndarray
    codes: np.ndarray
    n_distinct: int
    decode: Callable[[np.ndarray], list[str]]
    packed: np.ndarray | None = None
    long: np.ndarray | None = None

    def terms(self, which: np.ndarray) -> list[str]:
        return self.decode(which)


_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [2**64 - 1], dtype=np.uint64)


def _pack(words: np.ndarray, starts: np.ndarray, lengths: np.ndarray, offset: int) -> np.ndarray:
    """Bytes ``offset .. offset + 7`` of each token as one integer (0 past the token's end).

    ``words[i]`` holds the 8 bytes from position ``i`` of the text: one gather reads them all.
    """
    left = np.minimum(lengths - offset, 8) if offset == 0 else np.minimum(np.maximum(lengths - offset, 0), 8)
    return words[np.minimum(starts + offset, len(words) - 1)] & _MASKS[left]


def _byte_words(raw: bytes) -> np.ndarray:
    """An (unaligned) view of ``raw`` as the 64-bit little-endian integer starting at every byte."""
    padded = np.frombuffer(raw + bytes(8), dtype=np.uint8)
    return np.ndarray(shape=(len(raw),), dtype="<u8", buffer=padded, offset=0, strides=(1,))


def _distinct_tokens(words: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
    """A code per token (equal codes = equal bytes), per code the index of its first token, and the packed
    first 8 bytes of each token."""
    packed = _pack(words, starts, lengths, 0)
    codes = pd.factorize(packed)[0]
    long = np.flatnonzero(lengths > 8)
    if len(long):  # refine tokens longer than 8 bytes 8 bytes at a time, exactly (no hashing)
        refined = codes[long].astype(np.uint64)
        for offset in range(8, int(lengths[long].max()), 8):
            part = pd.factorize(_pack(words, starts[long], lengths[long], offset))[0].astype(np.uint64)
            refined = pd.factorize((refined << np.uint64(32)) | part)[0].astype(np.uint64)
        merged = codes.astype(np.uint64)
        merged[long] = refined | np.uint64(1 << 63)
        codes = pd.factorize(merged)[0]
    n_codes = int(codes.max()) + 1 if len(codes) else 0
    # pd.factorize numbers codes in order of first appearance: a code first appears where it exceeds all before
    first = np.flatnonzero(np.concatenate(([True], codes[1:] > np.maximum.accumulate(codes)[:-1])))
    return codes, first[:n_codes], packed


def _batch_tokens(texts: list[str], tokenizer: Tokenizer) -> _Tokens | None:
    """Vectorised tokenisation of a batch; None when a text holds the separator character."""
    joined = _SEPARATOR.join(texts)
    if joined.count(_SEPARATOR) != len(texts) - 1:
        return None
    if tokenizer.lowercase:
        joined = joined.lower()
    raw = joined.encode("utf-8", "surrogatepass")
    buf = np.frombuffer(raw, dtype=np.uint8)
    edges = np.diff(tokenizer.byte_table[buf].view(np.int8), prepend=np.int8(0), append=np.int8(0))
    bounds = np.flatnonzero(edges)  # runs alternate: start, end, start, end ...
    del edges
    starts, lengths = bounds[0::2], bounds[1::2] - bounds[0::2]
    before = np.searchsorted(starts, np.flatnonzero(buf == 0))  # tokens before each separator
    per_text = np.diff(np.concatenate(([0], before, [len(starts)])))
    text_of = np.repeat(np.arange(len(texts), dtype=np.int32), per_text)
    codes, first, packed = _distinct_tokens(_byte_words(raw), starts, lengths)
    first_starts, first_lengths = starts[first], lengths[first]

    def decode(which: np.ndarray) -> list[str]:
        return [raw[s : s + n].decode("ascii") for s, n in zip(first_starts[which].tolist(),
                                                                 first_lengths[which].tolist())]

    return _Tokens(text_of, codes, len(first), decode, packed[first], first_lengths > 8)


def _regex_tokens(texts: list[str], tokenizer: Tokenizer) -> _Tokens:
    """The same batch, one regular-expression call per text."""
    find = tokenizer._regex.findall
    lower = str.lower if tokenizer.lowercase else str
    flat: list[str] = []
    lengths = np.zeros(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        tokens = find(lower(text))
        flat.extend(tokens)
        lengths[i] = len(tokens)
    codes, uniques = pd.factorize(np.array(flat, dtype=object)) if flat else (np.zeros(0, np.int64), [])
    uniques = list(uniques)
    return _Tokens(np.repeat(np.arange(len(texts), dtype=np.int32), lengths), codes, len(uniques),
                   lambda which: [uniques[i] for i in which.tolist()])


def _batches(texts: list[str]) -> Iterable[tuple[int, int]]:
    """Consecutive ranges of texts of about ``_BATCH_CHARS`` characters, fewer for a small corpus (at least one
    text each)."""
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1)
    size = min(_BATCH_CHARS, max(_MIN_BATCH_CHARS, int(ends[-1]) // _BATCHES if len(ends) else 0))
    start = 0
    while start < len(texts):
        done = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, done + size, side="right")))
        yield start, stop
        start = stop


def _count_matrix(
    texts: Iterable[str], tokenizer: Tokenizer, vocab: pd.Index | None, binary: bool = False
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Tokenise batch by batch, keeping (text, term id) per token; once the vocabulary is complete and sorted,
    count each batch into CSR rows (sorted, so the matrix is canonical without a global sort)."""
    texts = texts if isinstance(texts, list) else list(texts)
    table = _Vocabulary(vocab, tokenizer.stopwords)
    found: list[tuple[int, np.ndarray, np.ndarray]] = []
    for start, end in _batches(texts):
        batch = texts[start:end]
        tokens = _batch_tokens(batch, tokenizer) if tokenizer.byte_table is not None else None
        tokens = tokens if tokens is not None else _regex_tokens(batch, tokenizer)
        ids = table.lookup(tokens)[tokens.codes] if len(tokens.codes) else np.zeros(0, dtype=np.int64)
        known = ids >= 0
        found.append((end - start, tokens.text_of[known], ids[known].astype(np.int32)))
    terms, position = table.terms()
    position = position.astype(np.int32)
    # fill preallocated arrays part by part (tokens bound the entries), then shrink them in place
    total = sum(len(ids) for _, _, ids in found)
    indices = np.empty(total, dtype=np.int32)
    data = np.empty(total)
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    filled, row = 0, 0
    while found:
        n, text_of, ids = found.pop(0)
        part_ptr = np.concatenate(([0], np.cumsum(np.bincount(text_of, minlength=n))))
        part = sp.csr_matrix((np.ones(len(ids)), position[ids], part_ptr), shape=(n, max(len(terms), 1)))
        part.sum_duplicates()
        indices[filled : filled + part.nnz] = part.indices
        data[filled : filled + part.nnz] = part.data
        indptr[row + 1 : row + n + 1] = part.indptr[1:] + filled
        filled, row = filled + part.nnz, row + n
    indices.resize(filled, refcheck=False)
    data.resize(filled, refcheck=False)
    matrix = sp.csr_matrix((data, indices, indptr), shape=(len(texts), len(terms)))
    matrix.has_sorted_indices = True
    if binary:
        matrix.data[:] = 1.0
    return matrix, terms


def encode(texts: Iterable[str], tokenizer: Tokenizer, vocab: pd.Index, binary: bool = False) -> sp.csr_matrix:
    """Texts as a (texts x vocab) count matrix over a fixed sorted vocabulary; unknown terms are dropped."""
    return _count_matrix(texts, tokenizer, vocab, binary)[0]


def term_counts(doc_ids: Sequence[str], texts: Iterable[str], tokenizer: Tokenizer) -> TermCounts:
    """Tokenise every document once into a sparse count matrix with a sorted vocabulary."""
    matrix, vocab = _count_matrix(texts, tokenizer, None)
    return TermCounts(np.asarray(doc_ids, dtype=object), vocab, matrix)
