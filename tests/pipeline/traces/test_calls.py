"""How one trace is read (pipeline.traces.calls), on plain records as pipeline.tracking.traces hands them over."""

from __future__ import annotations

import json

import pytest

from metrics.errors import InputError
from pipeline.traces.calls import (
    BAD_SCORE,
    FAILED,
    NO_QUESTION,
    NO_SPAN,
    NOT_DOCUMENTS,
    RAISED,
    Answer,
    Problem,
    Reading,
    default_question,
    moment,
    question_key,
    read_call,
)
from pipeline.tracking.traces import SpanRecord, TracedCall

DAY = 86_400_000


def span(name, kind, start, inputs=None, outputs=None, parent="root", error=None):
    return SpanRecord(f"{name}{start}".ljust(16, "0")[:16], parent, name, kind, start,
                      None if inputs is None else json.dumps(inputs), None if outputs is None else json.dumps(outputs),
                      error)


def doc(ident=None, uri=None, score=None, **extra):
    metadata = {k: v for k, v in {"doc_uri": uri, "score": score, **extra}.items() if v is not None}
    return {"page_content": "text", "metadata": metadata, "id": ident}


def call(inputs, *spans, state="OK", tags=None):
    root = SpanRecord("r" * 16, None, "answer", "CHAIN", 0, json.dumps(inputs))
    return TracedCall("tr-1", 1000, state, "answer", dict(tags or {}), root, list(spans),
                      [f"{s.name} ({s.kind})" for s in (root, *spans)], [])


def test_the_question_is_the_input_or_its_only_string_or_the_last_user_message():
    assert default_question("what is sso") == "what is sso"
    assert default_question({"question": "what is sso", "k": 5}) == "what is sso"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "what is sso"}]
    assert default_question({"messages": messages, "model": "x"}) == "what is sso"
    assert default_question({"a": "one", "b": "two"}) is None


def test_a_path_leads_into_the_inputs_by_keys_and_positions():
    retriever = span("retrieve", "RETRIEVER", 1, outputs=[doc(uri="d1")])
    found = read_call(call({"request": {"messages": [{"content": "a"}, {"content": "b"}]}}, retriever),
                      Reading(question="request.messages.-1.content"))
    assert isinstance(found, Answer) and found.question == "b"


def test_document_ids_come_from_the_id_then_doc_uri_then_what_is_named():
    retriever = span("retrieve", "RETRIEVER", 1, outputs=[doc("a", "x"), doc(None, "b"), doc(chunk="c"), doc()])
    found = read_call(call("q", retriever), Reading())
    assert found.docs == ["a", "b"] and found.unnamed == 2
    found = read_call(call("q", retriever), Reading(doc_id=("id", "doc_uri", "chunk")))
    assert found.docs == ["a", "b", "c"] and found.unnamed == 1
    found = read_call(call("q", retriever), Reading(doc_id=("doc_uri",)))
    assert found.docs == ["x", "b"]


def test_scores_are_the_spans_order_unless_a_metadata_key_is_named():
    outputs = [doc(uri="a", score=2.5), doc(uri="b", score=2.5), doc(uri="a", score=1.0), doc(uri="c", score=3)]
    found = read_call(call("q", span("retrieve", "RETRIEVER", 1, outputs=outputs)), Reading())
    assert found.docs == ["a", "b", "c"] and found.scores == [1.0, 0.5, 0.25] and found.repeated == 1
    found = read_call(call("q", span("retrieve", "RETRIEVER", 1, outputs=outputs)), Reading(score="score"))
    assert found.scores == [2.5, 2.5, 3.0]


def test_several_retriever_spans_give_the_first_to_start_or_the_last_or_the_one_named():
    hops = [span("hop", "RETRIEVER", 5, outputs=[doc(uri="late")]), span("hop", "RETRIEVER", 2,
                                                                         outputs=[doc(uri="early")]),
            span("rerank", "RERANKER", 9, outputs=[doc(uri="reranked")])]
    record = call("q", *sorted(hops, key=lambda s: s.start_ns))
    assert read_call(record, Reading()).docs == ["early"] and read_call(record, Reading()).spans == 2
    assert read_call(record, Reading(several="last")).docs == ["late"]
    assert read_call(record, Reading(span="rerank")).docs == ["reranked"]


@pytest.mark.parametrize("record, reading, kind", [
    (call("q", span("retrieve", "RETRIEVER", 1, outputs=[]), state="ERROR"), Reading(), FAILED),
    (call({"a": "x", "b": "y"}, span("retrieve", "RETRIEVER", 1, outputs=[])), Reading(), NO_QUESTION),
    (call("q", span("retrieve", "RETRIEVER", 1, outputs=[])), Reading(question_id="tag:qid"), NO_QUESTION),
    (call("q", span("llm", "LLM", 1, outputs="answer")), Reading(), NO_SPAN),
    (call("q", span("retrieve", "RETRIEVER", 1, error="TimeoutError")), Reading(), RAISED),
    (call("q", span("retrieve", "RETRIEVER", 1, outputs=["d1", "d2"])), Reading(), NOT_DOCUMENTS),
    (call("q", span("retrieve", "RETRIEVER", 1, outputs={"documents": []})), Reading(), NOT_DOCUMENTS),
    (call("q", span("retrieve", "RETRIEVER", 1, outputs=[doc(uri="a", score="high")])), Reading(score="score"),
     BAD_SCORE),
])
def test_what_gives_no_ranking_is_a_problem_of_its_kind(record, reading, kind):
    found = read_call(record, reading)
    assert isinstance(found, Problem) and found.kind == kind


def test_an_empty_ranking_is_a_ranking():
    found = read_call(call("q", span("retrieve", "RETRIEVER", 1, outputs=[])), Reading())
    assert isinstance(found, Answer) and found.docs == [] and found.listed == 0


def test_a_span_that_raised_in_a_trace_that_finished_ok_says_it_raised():
    """The application caught the exception: the trace is OK, the span has no outputs and its status is ERROR."""
    found = read_call(call("q", span("retrieve", "RETRIEVER", 1, error="ConnectionError: the index is down")),
                      Reading())
    assert isinstance(found, Problem) and found.kind == RAISED
    assert found.detail == "span 'retrieve' raised ConnectionError: the index is down"
    assert read_call(call("q", span("retrieve", "RETRIEVER", 1, error="")), Reading()).detail == \
        "span 'retrieve' raised an exception"


def test_the_question_id_comes_from_the_inputs_or_a_tag():
    retriever = span("retrieve", "RETRIEVER", 1, outputs=[doc(uri="d")])
    assert read_call(call({"q": "text", "qid": 7}, retriever), Reading(question="q", question_id="qid")) \
        .question_id == "7"
    assert read_call(call("text", retriever, tags={"qid": "q3"}), Reading(question_id="tag:qid")).question_id == "q3"


def test_window_bounds_are_iso_times_in_utc_or_durations_back_from_now():
    now = 1_800_000_000_000
    assert moment("2026-12-04", now, "k") == 1_796_342_400_000
    assert moment("2026-12-04T09:30:00+01:00", now, "k") == 1_796_342_400_000 + 8.5 * 3_600_000
    assert moment("7d", now, "k") == now - 7 * DAY and moment("30m", now, "k") == now - 1_800_000
    assert moment(None, now, "k") is None
    with pytest.raises(InputError, match=r"^k='last week': expected an ISO date"):
        moment("last week", now, "k")


def test_two_questions_are_the_same_when_they_read_the_same_masked_case_and_spacing_aside():
    assert question_key("  How do I  reset my PASSWORD?") == question_key("how do i reset my password") == \
        "how do i reset my password"
    assert question_key("write to a@b.io!") == question_key("Write to c@d.org") == "write to email"
    assert question_key("reset my password") != question_key("reset my passcode")
