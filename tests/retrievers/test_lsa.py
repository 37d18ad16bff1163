"""LSA is scikit-learn's TfidfVectorizer + TruncatedSVD (ARPACK, seed 0) scored by cosine, as SPEC.md says."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

from retrievers import LSA
from retrievers.text import Tokenizer


def test_scores_equal_a_plain_scikit_learn_pipeline(helpdesk_collection):
    c = helpdesk_collection
    vectorizer = TfidfVectorizer(analyzer=Tokenizer())
    svd = TruncatedSVD(n_components=6, algorithm="arpack", random_state=0)
    docs = normalize(svd.fit_transform(vectorizer.fit_transform(c.doc_texts)))
    questions = normalize(svd.transform(vectorizer.transform(c.query_texts)))
    expected = questions @ docs.T
    lsa = LSA().index(c)
    order = [c.doc_ids.index(d) for d in lsa.doc_ids]
    assert np.allclose(lsa.scores(c.query_texts), expected[:, order], atol=1e-10)


def test_a_question_with_no_known_term_scores_zero_everywhere(helpdesk_collection):
    lsa = LSA().index(helpdesk_collection)
    assert not lsa.scores(["zzz qqq"]).any()
    assert lsa.rank(["q"], ["zzz qqq"]).ranking("q") == []


def test_too_many_dimensions_is_a_plain_error(helpdesk_collection):
    with pytest.raises(ValueError, match="too large"):
        LSA(dims=28).index(helpdesk_collection)


def test_unset_dimensions_follow_the_corpus_and_give_spec_six_on_the_help_desk_corpus(helpdesk_collection):
    from retrievers.lsa import auto_dims

    lsa = LSA().index(helpdesk_collection)
    assert lsa.used_dims == 6 == auto_dims(28) and lsa.notes() == []
    assert (auto_dims(1400), auto_dims(5183), auto_dims(10)) == (280, 300, 6)


def test_an_explicit_dimension_count_far_too_small_for_the_corpus_is_reported():
    from retrievers.text import Tokenizer

    @dataclass
    class Docs:
        doc_ids: tuple = tuple(f"d{i:04d}" for i in range(600))
        doc_texts: tuple = tuple(f"w{i % 97} w{i % 89} w{i % 83} common" for i in range(600))

    lsa = LSA(dims=6, tokenizer=Tokenizer(stopwords=frozenset())).index(Docs())
    (note,) = lsa.notes()
    assert "6 dimensions for 600 documents" in note and "(120 here)" in note
    assert LSA(dims=13, tokenizer=Tokenizer(stopwords=frozenset())).index(Docs()).notes() == []
