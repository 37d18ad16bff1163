"""A question set's rules (pipeline.traces.sampling): duplicates, sampling, and judgments read from assessments,
on plain records."""

from __future__ import annotations

from collections import Counter

import pytest

from metrics.errors import InputError
from pipeline.traces.calls import Reading, question_key
from pipeline.traces.sampling import Asked, Question, distinct, grade_of, judgments, sample, shares
from pipeline.tracking.traces import AssessmentRecord


def asked(text, at, stratum="(none)", trace=None, listed=None, assessments=()):
    return Asked(trace or f"tr-{at}", at, text, question_key(text), stratum, dict(listed or {}), list(assessments))


def test_exact_duplicates_fold_into_one_question_and_near_ones_into_the_most_asked():
    found, exact, near = distinct([
        asked("How do I export all my notes?", 1), asked("how do i export all my  notes", 2),
        asked("how do I export all of my notes", 3), asked("What does the Pro plan cost?", 4),
    ])
    assert (exact, near) == (1, 1)
    assert [q.text for q in found] == ["How do I export all my notes?", "What does the Pro plan cost?"]
    first = found[0]
    assert len(first.asked) == 2 and len(first.near) == 1 and first.count == 3
    assert first.id == "q" + __import__("hashlib").sha256(first.key.encode()).hexdigest()[:12]


def test_near_one_keeps_every_distinct_question():
    found, exact, near = distinct([asked("export all my notes", 1), asked("export all of my notes", 2)], near=1)
    assert (len(found), exact, near) == (2, 0, 0)
    with pytest.raises(InputError, match="--near 0: expected a similarity within"):
        distinct([asked("a", 1)], near=0)


def test_different_questions_are_not_near_duplicates():
    found, _, near = distinct([asked("how do I reset my password", 1), asked("how do I export my data", 2),
                               asked("reset my passcode on the phone app", 3)])
    assert near == 0 and len(found) == 3


def questions(strata: dict[str, int]) -> list[Question]:
    out, at = [], 0
    for stratum, n in strata.items():
        for i in range(n):
            at += 1
            a = asked(f"{stratum} question number {i} about {at}", at, stratum)
            out.append(Question(f"q{at}", a.text, a.key, stratum, [a]))
    return out


def test_a_uniform_sample_is_seeded_and_in_order_of_first_asking():
    pool = questions({"a": 50})
    one, again, other = sample(pool, 10, seed=1), sample(pool, 10, seed=1), sample(pool, 10, seed=2)
    assert one == again and one != other and len(one) == 10
    assert [q.first_ms for q in one] == sorted(q.first_ms for q in one)
    assert sample(pool, None) == pool and sample(pool, 500) == pool


def test_stratified_shares_are_proportional_or_equal_and_never_more_than_a_stratum_has():
    assert shares({"a": 60, "b": 30, "c": 10}, 10, "proportional") == {"a": 6, "b": 3, "c": 1}
    assert shares({"a": 60, "b": 30, "c": 10}, 9, "equal") == {"a": 3, "b": 3, "c": 3}
    assert shares({"a": 60, "b": 30, "c": 1}, 9, "equal") == {"a": 4, "b": 4, "c": 1}
    assert sum(shares({"a": 7, "b": 5, "c": 1}, 10, "proportional").values()) == 10
    pool = questions({"v1": 40, "v2": 20})
    chosen = sample(pool, 9, "stratified", seed=0)
    assert Counter(q.stratum for q in chosen) == {"v1": 6, "v2": 3}


def assessment(name, value, span="s1", at=1, kind="feedback", valid=True, source="HUMAN", failed=False, **metadata):
    return AssessmentRecord(name, kind, value, span, {k: str(v) for k, v in metadata.items()}, source, "someone",
                            valid, at, failed)


@pytest.mark.parametrize("value, grade", [(True, 1), (False, 0), (2, 2), (3.0, 3), ("yes", 1), ("no", 0), ("2", 2),
                                          (0.5, None), ("maybe", None), (None, None), ([1], None)])
def test_the_value_types_a_judgment_may_have(value, grade):
    assert grade_of(value) == grade


def test_judgments_come_from_named_assessments_on_documents_named_by_id_or_place():
    listed = {"s1": ["d1", "d2", "d3"]}
    one = asked("q", 1, listed=listed, assessments=[
        assessment("relevance", 2, doc_uri="d9"),
        assessment("retrieval_relevance", "yes", chunk_index=1),  # MLflow's RetrievalRelevance: a place in the span
        assessment("retrieval_relevance", "no", chunk_index=2),
        assessment("retrieval_relevance/precision", 0.5),  # the span's average: no document, not a judgment name
        assessment("relevance", 1, doc_id="d1", at=1), assessment("relevance", 0, doc_id="d1", at=5),  # latest wins
        assessment("relevance", 3, doc_id="d4", valid=False),  # overridden
        assessment("relevance", None, doc_id="d5", failed=True),  # an error instead of a value
        assessment("relevance", "high", doc_id="d6"),
        assessment("relevance", 1),  # no document named
        assessment("expected_retrieved_context", [{"doc_uri": "d7", "content": "..."}, "d8"], kind="expectation",
                   span=None),
    ])
    found = judgments([Question("qa", "q", one.key, "(none)", [one])])
    assert {d: g for (_, d), (g, *_) in found.grades.items()} == {"d9": 2, "d2": 1, "d3": 0, "d1": 0, "d7": 1, "d8": 1}
    assert found.left_out == {"overridden": 1, "an error, not a value": 1, "value not a grade (str)": 1,
                              "no document named": 1}
    only_code = judgments([Question("qa", "q", one.key, "(none)", [one])], sources=["CODE"])
    assert not only_code.grades and only_code.left_out["other source"] == 10


def traced(outputs, *assessments):
    """A trace asking 'q', whose RETRIEVER span (s1) listed ``outputs``, with ``assessments`` on it."""
    import json

    from pipeline.tracking.traces import SpanRecord, TracedCall

    root = SpanRecord("r" * 16, None, "answer", "CHAIN", 0, json.dumps({"question": "q"}))
    span = SpanRecord("s1", "r" * 16, "retrieve", "RETRIEVER", 1, None, json.dumps(outputs))
    return TracedCall("tr-1", 1, "OK", "answer", {}, root, [span], ["answer (CHAIN)", "retrieve (RETRIEVER)"],
                      list(assessments))


URL = "https://help.example.com/articles/"
CONVENTION = [{"id": d, "page_content": "...", "metadata": {"doc_uri": URL + d}} for d in ("sso1", "sso2", "export1")]


@pytest.mark.parametrize("places, ids", [
    (("id", "doc_uri"), {"sso1": 2, "sso2": 0, "export1": 1, "refund1": 1}),  # the retriever's default order
    (("doc_uri",), {URL + "sso1": 2, URL + "sso2": 0, URL + "export1": 1, "refund1": 1}),
])
def test_judged_documents_get_the_ids_the_ranking_holds_by_the_same_setting(places, ids):
    """MLflow's convention: Document.id the corpus id, metadata.doc_uri the source's URL. A judge names the document
    by its doc_uri, by its place, or lists it as expected context; each judgment lands on the id retriever=traces reads
    with the same doc_id (the judgments were dropped as unknown documents when doc_uri was taken literally)."""
    from pipeline.traces.sampling import gather

    call = traced(CONVENTION,
                  assessment("relevance", 2, doc_uri=URL + "sso1"),  # the docs' judging script: metadata.doc_uri
                  assessment("retrieval_relevance", "no", chunk_index=1),  # MLflow's judge: the place
                  assessment("expected_retrieved_context", [{"doc_uri": URL + "export1"}, "refund1"], span=None,
                             kind="expectation"))  # refund1: not listed, taken as its id
    (one,) = gather([call], Reading(doc_id=places)).asked
    found = judgments([Question("qa", "q", one.key, "(none)", [one])], places=places)
    assert {d: g for (_, d), (g, *_) in found.grades.items()} == ids and not found.left_out


def test_an_id_wins_over_another_documents_other_name():
    """Document B's id is document A's doc_uri: a judgment naming it means B, the document of that id."""
    from pipeline.traces.sampling import documents_listed

    ids, names = documents_listed([{"id": "a", "metadata": {"doc_uri": "b"}}, {"id": "b", "metadata": {}}],
                                  ("id", "doc_uri"))
    assert ids == ["a", "b"] and names == {"a": "a", "b": "b"}
