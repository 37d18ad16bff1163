"""The tokenizer and term counts: SPEC.md's text processing."""

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
