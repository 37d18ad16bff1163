"""The tokenizer and term counts: docs/helpdesk-reference.md's text processing."""

from __future__ import annotations

from retrievers.text import Tokenizer, default_stopwords, term_counts


def test_default_stop_list_is_specs_45_words():
    assert len(default_stopwords()) == 45


def test_tokens_are_lowercase_alphanumeric_runs_without_stop_words():
    assert Tokenizer()("The Pro-plan costs 49 EUROS, a month!") == ["pro", "plan", "costs", "49", "euros", "month"]


def test_tokenizer_is_configurable():
    t = Tokenizer(pattern=r"\w+", lowercase=False, stopwords=frozenset({"a"}))
    assert t("A b_c a") == ["A", "b_c"]
    assert t.digest != Tokenizer().digest


def test_helpdesk_vocabulary_has_177_terms(helpdesk_collection):
    counts = term_counts(helpdesk_collection.doc_ids, helpdesk_collection.doc_texts, Tokenizer())
    assert len(counts.vocab) == 177
    assert list(counts.vocab) == sorted(counts.vocab)
    assert counts.counts.shape == (28, 177)


def test_encoding_over_a_fixed_vocabulary_counts_exactly_the_known_terms():
    """Questions are looked up by their packed bytes; short and long terms, unknown ones and stop words alike
    give what counting the tokenizer's terms does (a stop word never counts, even when the vocabulary has it)."""
    import numpy as np
    import pandas as pd

    from retrievers.text import encode

    tok = Tokenizer()
    vocab = pd.Index(sorted(["alpha", "beta", "extraordinarily", "the", "zz9", "longwordnumbertwo"]), dtype=object)
    texts = ["Alpha beta beta THE unknownlongword zz9", "", "extraordinarily longwordnumbertwo qq alpha",
             "nothing here at all"]
    got = encode(texts, tok, vocab).toarray()
    want = np.zeros((len(texts), len(vocab)))
    position = {t: i for i, t in enumerate(vocab)}
    for row, text in enumerate(texts):
        for term in tok(text):
            if term in position:
                want[row, position[term]] += 1
    np.testing.assert_array_equal(got, want)
    assert want[0, position["beta"]] == 2 and want[0, position["the"]] == 0


def test_every_default_tokenizer_shares_one_stop_set():
    """Read once: a sweep's jobs each build a tokenizer, and the packed vocabulary is kept for the same stop set."""
    assert Tokenizer().stopwords is Tokenizer().stopwords


def test_encoding_over_one_vocabulary_follows_each_tokenizers_own_stop_words():
    """The packed vocabulary kept between calls is reused for an equal stop set, never for a different one."""
    import pandas as pd

    from retrievers.text import encode

    vocab = pd.Index(["alpha", "beta", "the"], dtype=object)
    keeps_the = Tokenizer(stopwords=frozenset({"beta"}))
    equal = Tokenizer(stopwords=frozenset(["beta"]))  # equal, another object
    assert keeps_the.stopwords is not equal.stopwords
    texts = ["the alpha beta"]
    assert encode(texts, keeps_the, vocab).toarray().tolist() == [[1, 0, 1]]
    assert encode(texts, equal, vocab).toarray().tolist() == [[1, 0, 1]]
    assert encode(texts, Tokenizer(), vocab).toarray().tolist() == [[1, 1, 0]]
    assert encode(texts, keeps_the, vocab).toarray().tolist() == [[1, 0, 1]]
