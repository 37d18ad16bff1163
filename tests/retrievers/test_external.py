"""Your own ``search(questions, k)`` engine behind the checking adapter: what it may return, what is corrected and
reported, what stops the job, and the order its results are scored in (trec_eval's, as a run file would be)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from metrics.errors import InputError
from metrics.trec import read_trec_run, trec_lines
from retrievers.external import ANSWER_SHOWN, BadAnswer, EngineFailed, ExternalSearch
from retrievers.run_file import RunFile


@dataclass
class Docs:
    doc_ids: list[str]
    doc_texts: list[str]


CORPUS = Docs(["a", "b", "c", "d", "e"], ["alpha", "beta", "gamma", "delta", "epsilon"])
QUESTIONS = (["q1", "q2"], ["first question", "second question"])


class Fixed:
    """An engine that answers what it was given, and remembers what it was asked."""

    def __init__(self, *answers) -> None:
        self.answers, self.asked, self.indexed = list(answers), [], []

    def index(self, doc_ids, texts) -> None:
        self.indexed.append((doc_ids, texts))

    def search(self, questions, k):
        self.asked.append((questions, k))
        return self.answers


def ranked(*answers, depth: int = 10):
    adapter = ExternalSearch(engine=Fixed(*answers), name="mine").index(CORPUS)
    return adapter, adapter.rank(*QUESTIONS, depth)


def ranking(run, row: int) -> list[tuple[str, float]]:
    docs, scores = run.docs[row], run.scores[row]
    return [(run.doc_ids[d], float(s)) for d, s in zip(docs, scores) if d >= 0]


def test_the_engine_is_indexed_once_with_the_corpus_then_asked_for_k_results_per_question():
    engine = Fixed([("a", 1.0)], [])
    ExternalSearch(engine=engine).index(CORPUS).rank(*QUESTIONS, 7)
    assert engine.indexed == [(CORPUS.doc_ids, CORPUS.doc_texts)]
    assert engine.asked == [(QUESTIONS[1], 7)]


def test_an_engine_without_index_is_asked_directly():
    class SearchOnly:
        def search(self, questions, k):
            return [[("b", 2.0)] for _ in questions]

    run = ExternalSearch(engine=SearchOnly()).index(CORPUS).rank(*QUESTIONS, 5)
    assert ranking(run, 0) == ranking(run, 1) == [("b", 2.0)]


def test_results_are_ordered_as_trec_eval_orders_a_run_score_descending_ties_by_id_descending():
    _, run = ranked([("a", 1.0), ("c", 2.0), ("b", 1.0), ("d", 2.0)], [("e", 0.5)])
    assert ranking(run, 0) == [("d", 2.0), ("c", 2.0), ("b", 1.0), ("a", 1.0)]
    assert ranking(run, 1) == [("e", 0.5)]


def test_the_same_results_written_as_a_run_file_rank_the_same(tmp_path):
    answers = [[("a", 1.0), ("c", 2.0), ("b", 1.0), ("d", 2.0), ("e", 0.25)], [("e", 0.5), ("a", 0.5)]]
    _, run = ranked(*answers, depth=3)
    path = tmp_path / "mine.trec"
    path.write_text("".join(f"{q} Q0 {d} {r} {s!r} mine\n" for q, hits in zip(QUESTIONS[0], answers)
                            for r, (d, s) in enumerate(hits, 1)), encoding="utf-8")
    from_file = RunFile(path=path).index(CORPUS).rank(*QUESTIONS, 3)
    assert [ranking(run, i) for i in (0, 1)] == [ranking(from_file, i) for i in (0, 1)]
    assert list(trec_lines(run, "t")) == list(trec_lines(read_trec_run(path).truncated(3), "t"))


def test_more_than_k_results_keep_the_best_k_and_are_reported():
    adapter, run = ranked([("e", 0.1), ("a", 5.0), ("b", 4.0), ("c", 3.0)], [], depth=2)
    assert ranking(run, 0) == [("a", 5.0), ("b", 4.0)]  # the best two, not the first two the engine listed
    assert any("1 question(s) got more results than asked for" in note for note in adapter.notes())
    assert any("not in descending order: q1" in note for note in adapter.notes())


def test_unknown_ids_are_dropped_and_reported():
    adapter, run = ranked([("a", 3.0), ("zz", 2.0), ("b", 1.0)], [("yy", 1.0), ("zz", 0.5)])
    assert ranking(run, 0) == [("a", 3.0), ("b", 1.0)] and ranking(run, 1) == []
    unknown, empty = adapter.notes()
    assert unknown.endswith("3 result(s) name 2 document id(s) the corpus does not hold: zz, yy (dropped)")
    assert empty.endswith("1 question(s) got no result and score 0 (1 with no id the corpus holds): q2")
    assert (empty.kind, empty.count, empty.ids) == ("questions_without_results", 1, ("q2",))


def test_questions_left_with_no_result_are_counted_and_named_whichever_the_reason():
    adapter, run = ranked([], [("zz", 1.0)])  # q1: an empty answer; q2: only an id the corpus does not hold
    assert run.depth == 0 and list(run.lengths) == [0, 0]
    (empty,) = [n for n in adapter.notes() if n.kind == "questions_without_results"]
    assert empty.endswith("2 question(s) got no result and score 0 (1 with an empty answer, 1 with no id the corpus "
                          "holds): q1, q2") and empty.count == 2


class Raises(Fixed):
    """An engine with a bug: its search raises for any batch that holds a question with "second"."""

    def search(self, questions, k):
        self.asked.append((questions, k))
        if any("second" in q for q in questions):
            raise KeyError("second")
        return [[("a", 1.0)] for _ in questions]


def test_an_engine_that_raises_is_one_line_naming_the_question_it_raised_on_with_its_traceback_kept():
    engine = Raises()
    adapter = ExternalSearch(engine=engine, name="mine").index(CORPUS)
    with pytest.raises(EngineFailed) as failed:
        adapter.rank(*QUESTIONS, 10)
    assert str(failed.value) == (f"{__name__}.Raises: search() raised on question q2 ('second question'): "
                                 "KeyError: 'second'")
    assert engine.asked == [(QUESTIONS[1], 10), (["first question"], 10), (["second question"], 10)]
    assert failed.value.details.startswith("Traceback (most recent call last)") and "KeyError" in failed.value.details
    assert isinstance(failed.value, InputError)  # the job reports it in one line, as it does bad input


def test_an_engine_that_fails_only_on_the_whole_batch_says_so():
    class BatchOnly(Fixed):
        def search(self, questions, k):
            if len(questions) > 1:
                raise MemoryError()
            return [[("a", 1.0)]]

    with pytest.raises(EngineFailed, match=r"search\(\) raised on a batch of 2 questions \(each passes alone\): "
                                           r"MemoryError$"):
        ExternalSearch(engine=BatchOnly()).index(CORPUS).rank(*QUESTIONS, 10)


def test_an_id_listed_twice_for_a_question_keeps_its_first_score_and_is_reported():
    adapter, run = ranked([("a", 1.0), ("b", 3.0), ("a", 9.0)], [])
    assert ranking(run, 0) == [("b", 3.0), ("a", 1.0)]
    assert any("1 result(s) repeat a document already listed for the same question: a" in n for n in adapter.notes())


def test_numbers_as_ids_and_numpy_scores_are_accepted():
    ids = ExternalSearch(engine=Fixed(), name="n").index(Docs(["1", "2"], ["x", "y"]))
    ids.engine.answers = [[(2, np.float32(0.5)), (1, np.int64(3))], []]
    run = ids.rank(*QUESTIONS, 5)
    assert ranking(run, 0) == [("1", 3.0), ("2", 0.5)]


@pytest.mark.parametrize("hits, reason", [
    ([("a", float("nan"))], "score nan is not a finite number"),
    ([("a", float("inf"))], "score inf is not a finite number"),
    ([("a", "0.5")], "score '0.5' is not a number"),
    ([("a", True)], "score 'True' is not a number"),
    ([("a", None)], "score 'None' is not a number"),
    ([("a", 1.0, "extra")], "expected (id, score) pairs"),
    ([["a"]], "expected (id, score) pairs"),
    ([(None, 1.0)], "a document id must be a string"),
    ({"a": 1.0}, "expected a list of (id, score) pairs"),
    ("a", "expected a list of (id, score) pairs"),
])
def test_an_answer_of_the_wrong_shape_stops_with_one_line_naming_the_question_and_the_engine(hits, reason):
    with pytest.raises(InputError) as caught:
        ranked([("b", 1.0)], hits)
    message = str(caught.value)
    assert message.startswith(f"{__name__}.Fixed: question q2 ('second question'): {reason}")
    assert "\n" not in message


def test_a_long_bad_answer_is_quoted_to_its_first_200_characters():
    hits = [(f"doc{i:04d}", 1.0) for i in range(100)] + [("a", float("nan"))]
    with pytest.raises(InputError) as caught:
        ranked(hits, [])
    quoted = str(caught.value).split("is not a finite number: ", 1)[1]
    assert quoted.endswith("...") and len(quoted) == ANSWER_SHOWN + 3 and quoted.startswith("[('doc0000', 1.0)")


@pytest.mark.parametrize("answers, count", [([[("a", 1.0)]], "1"), (None, "no list"), ("ab", "no list")])
def test_one_answer_per_question_is_required(answers, count):
    class Wrong(Fixed):
        def search(self, questions, k):
            return answers

    with pytest.raises(InputError, match=f"must return one list of .* per question: asked 2 questions, got {count}"):
        ExternalSearch(engine=Wrong()).index(CORPUS).rank(*QUESTIONS, 5)


def test_an_engines_own_bad_answer_is_told_with_the_questions_id():
    class Refuses(Fixed):
        def describe(self):
            return "http://search.local/x"

        def search(self, questions, k):
            raise BadAnswer(1, questions[1], "the answer is not JSON", "<html>")

    with pytest.raises(InputError) as caught:
        ExternalSearch(engine=Refuses()).index(CORPUS).rank(*QUESTIONS, 5)
    assert str(caught.value) == ("http://search.local/x: question q2 ('second question'): the answer is not JSON: "
                                 "<html>")


def test_an_object_without_search_is_refused():
    with pytest.raises(ValueError, match="has no search"):
        ExternalSearch(engine=object())
