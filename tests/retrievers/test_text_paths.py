"""Term counting takes a vectorised byte path for ASCII-class patterns; it must count exactly as the tokenizer.

The reference here is the tokenizer itself applied text by text (docs/helpdesk-reference.md's text processing), counted
with collections.Counter: no shared code with either counting path.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from retrievers import text
from retrievers.text import Tokenizer, encode, term_counts

AWKWARD = [
    "Hello WORLD, hello again",
    "",
    "   ",
    "K\u212aelvin sign and İstanbul lower-case to ASCII; ΣΑΣ café naïve",
    "a\x00b c",  # the separator character inside a text: that batch takes the per-text path
    "supercalifragilisticexpialidocious antidisestablishmentarianism12345678 x",
    "abcdefgh abcdefghi abcdefghij abcdefgh abcdefghijklmnopq abcdefghijklmnopqr",  # 8-byte boundaries
    "THE the The and of",  # stop words only
    "emoji 😀 between words, surrogate-free",
    "numbers 2024 and 3.14 and x86_64",
]


def reference_counts(texts: list[str], tokenizer: Tokenizer) -> tuple[list[str], list[Counter]]:
    counters = [Counter(tokenizer(t)) for t in texts]
    return sorted(set().union(*counters)), counters


def as_counters(matrix, vocab) -> list[Counter]:
    matrix = matrix.tocsr()
    out = []
    for i in range(matrix.shape[0]):
        row = slice(matrix.indptr[i], matrix.indptr[i + 1])
        out.append(Counter({vocab[j]: int(v) for j, v in zip(matrix.indices[row], matrix.data[row])}))
    return out


TOKENIZERS = {
    "default": Tokenizer(),
    "ascii class, no lower-casing, no stop words": Tokenizer(lowercase=False, stopwords=frozenset()),
    "wider ascii class": Tokenizer(pattern=r"[a-zA-Z_]+"),
    "word characters (per-text path)": Tokenizer(pattern=r"\w+"),
}


@pytest.mark.parametrize("name", list(TOKENIZERS))
@pytest.mark.parametrize("batch_chars", [2**24, 40])
def test_counts_equal_the_tokenizer_text_by_text(name, batch_chars, monkeypatch):
    monkeypatch.setattr(text, "_BATCH_CHARS", batch_chars)  # 40: many small batches, vocabulary grows across
    tokenizer = TOKENIZERS[name]
    texts = AWKWARD * 3
    counts = term_counts([f"d{i}" for i in range(len(texts))], texts, tokenizer)
    vocab, expected = reference_counts(texts, tokenizer)
    assert list(counts.vocab) == vocab
    assert as_counters(counts.counts, list(counts.vocab)) == expected
    assert counts.counts.has_sorted_indices
    assert np.all(np.diff(counts.counts.indices[counts.counts.indptr[2] : counts.counts.indptr[3]]) > 0)


def test_questions_are_encoded_over_the_corpus_vocabulary():
    tokenizer = Tokenizer()
    counts = term_counts(["a", "b"], ["refund policy refund", "shipping times"], tokenizer)
    questions = ["Refund? REFUND shipping!", "unknown words only", ""]
    binary = encode(questions, tokenizer, counts.term_index, binary=True).toarray()
    counted = encode(questions, tokenizer, counts.term_index).toarray()
    assert list(counts.vocab) == ["policy", "refund", "shipping", "times"]
    assert binary.tolist() == [[0, 1, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert counted.tolist() == [[0, 2, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


def test_byte_path_is_taken_only_for_ascii_classes():
    assert Tokenizer().byte_table is not None
    assert Tokenizer(pattern=r"[a-zA-Z_]+").byte_table is not None
    assert Tokenizer(pattern=r"\w+").byte_table is None
    assert Tokenizer(pattern=r"[^ ]+").byte_table is None
    assert Tokenizer(pattern=r"[a-z]+'?[a-z]*").byte_table is None
