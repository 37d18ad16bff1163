"""LSA is scikit-learn's TfidfVectorizer + TruncatedSVD (ARPACK, seed 0) scored by cosine, as SPEC.md says."""

from __future__ import annotations

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
