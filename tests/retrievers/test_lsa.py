"""LSA is scikit-learn's TfidfVectorizer + TruncatedSVD (ARPACK, seed 0) scored by cosine, as docs/helpdesk-reference.md
says: its maths, written without importing scikit-learn, gives scikit-learn's arrays bit for bit."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer, TfidfVectorizer
from sklearn.preprocessing import normalize

from retrievers import LSA
from retrievers.lsa import Tfidf, arpack_svd, unit_rows
from retrievers.text import Tokenizer, term_counts


def random_counts(seed: int, documents: int = 400, terms: int = 900):
    """Term counts of a random corpus: Zipf-like words, some documents with a single word, one with none."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(terms)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 60)), p=None)) for _ in range(documents - 1)]
    return term_counts([f"d{i}" for i in range(documents)], [*texts, ""], Tokenizer(stopwords=frozenset()))


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


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tfidf_is_scikit_learns_tfidf_transformer_bit_for_bit(seed):
    counts = random_counts(seed).counts
    ours = Tfidf.fit(counts).transform(counts)
    theirs = TfidfTransformer().fit_transform(counts)
    assert np.array_equal(ours.indptr, theirs.indptr) and np.array_equal(ours.indices, theirs.indices)
    assert np.array_equal(ours.data, theirs.data)
    assert np.array_equal(Tfidf.fit(counts).idf, TfidfTransformer().fit(counts).idf_)


@pytest.mark.parametrize(("seed", "dims"), [(0, 5), (1, 40), (2, 120)])
def test_the_svd_is_scikit_learns_arpack_truncated_svd_bit_for_bit(seed, dims):
    weighted = TfidfTransformer().fit_transform(random_counts(seed).counts)
    svd = TruncatedSVD(n_components=dims, algorithm="arpack", random_state=seed)
    theirs = svd.fit_transform(weighted)
    coordinates, components = arpack_svd(weighted, dims, seed)
    assert np.array_equal(coordinates, theirs) and np.array_equal(components, svd.components_)
    assert np.array_equal(unit_rows(coordinates), normalize(theirs))
    assert np.array_equal(weighted @ components.T, svd.transform(weighted))


def test_a_row_of_zeros_stays_zero_when_rows_are_made_unit_length():
    rows = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert np.array_equal(unit_rows(rows), normalize(rows)) and np.array_equal(unit_rows(rows)[0], [0.6, 0.8])


def test_ranking_with_lsa_does_not_import_scikit_learn(helpdesk_collection):
    """scikit-learn's import (about 1.6 s) would be most of a small study's LSA time."""
    code = ("import sys; from retrievers import LSA; from pipeline.data.sources import helpdesk; c = helpdesk(); "
            "LSA().index(c).rank(c.query_ids, c.query_texts); print(sorted(m for m in sys.modules if 'sklearn' in m))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "[]"


def test_the_randomized_algorithm_is_scikit_learns_own(helpdesk_collection):
    c = helpdesk_collection
    vectorizer = TfidfVectorizer(analyzer=Tokenizer())
    svd = TruncatedSVD(n_components=6, algorithm="randomized", random_state=0)
    docs = normalize(svd.fit_transform(vectorizer.fit_transform(c.doc_texts)))
    expected = normalize(svd.transform(vectorizer.transform(c.query_texts))) @ docs.T
    lsa = LSA(algorithm="randomized").index(c)
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
