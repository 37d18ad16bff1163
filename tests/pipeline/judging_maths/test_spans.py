"""Assessors' marks checked against the documents: every offset against the text, a text located in it, and what
cannot be used set aside with one line each while the rest is read."""

from __future__ import annotations

import pandas as pd

from pipeline.judging_maths.spans import MARK_COLUMNS, check_marks, disjoint, occurrences, text_digest

DOCS = {"d1": "Refunds are paid within 14 days. Refunds need the receipt.", "d2": "Export your data as CSV."}
POOLED = {d: text_digest(t) for d, t in DOCS.items()}


def marks(*rows: tuple) -> pd.DataFrame:
    """Rows of (query, doc, assessor, grade, start, end, text); ``when``, ``where`` and ``seen`` filled in."""
    return pd.DataFrame([(*r, "", f"task {i}", "") for i, r in enumerate(rows, 1)], columns=MARK_COLUMNS)


def test_a_highlight_whose_text_matches_is_read_with_its_offsets_and_grade():
    found = check_marks(marks(("q1", "d1", "ann", 2, 0, 31, "Refunds are paid within 14 days")), DOCS, POOLED)
    assert found.highlights.values.tolist() == [["q1", "d1", "ann", 0, 31, 2]]
    assert found.assessments[["query_id", "doc_id", "assessor", "grade"]].values.tolist() == [["q1", "d1", "ann", 2]]
    assert found.set_aside.empty and found.lines() == []


def test_a_highlight_whose_text_no_longer_matches_is_one_line_and_not_used_the_others_are():
    found = check_marks(marks(("q1", "d1", "ann", 2, 0, 31, "Refunds are paid within 30 days"),
                              ("q1", "d2", "ann", 1, 0, 6, "Export")), DOCS, POOLED)
    assert found.highlights[["doc_id", "start", "end"]].values.tolist() == [["d2", 0, 6]]
    [line] = found.lines()
    assert line.startswith("task 1: the highlighted text 'Refunds are paid within 30 days' no longer matches "
                           "document 'd1' at 0:31 (which reads 'Refunds are paid within 14 days'); not used")


def test_a_document_changed_since_pooled_sets_its_marks_aside_even_a_not_relevant_one():
    changed = {**DOCS, "d1": DOCS["d1"].replace("14", "30")}
    found = check_marks(marks(("q1", "d1", "ann", 2, 33, 58, "Refunds need the receipt."), ("q2", "d1", "ann", 0, None,
                                                                                            None, "")), changed, POOLED)
    assert found.highlights.empty and found.assessments.empty and len(found.set_aside) == 2
    assert f"document 'd1' changed since it was pooled (digest {POOLED['d1']}, now {text_digest(changed['d1'])})" \
        in found.lines()[0]


def test_empty_and_outside_highlights_are_one_line_each():
    found = check_marks(marks(("q1", "d1", "ann", 2, 5, 5, ""), ("q1", "d1", "bob", 2, 50, 99, ""),
                              ("q1", "d1", "cy", 2, 0, 7, "Refunds")), DOCS, POOLED)
    lines = found.lines()
    assert lines[0] == "task 1: the highlight 5:5 of document 'd1' is empty; not used"
    assert lines[1] == "task 2: the highlight 50:99 is outside document 'd1' (58 characters); not used"
    assert found.highlights["assessor"].tolist() == ["cy"]


def test_a_text_is_located_once_and_one_found_twice_or_never_is_said_with_where():
    assert occurrences("aa", "aaa") == [0, 1]
    found = check_marks(marks(("q1", "d1", "ann", 2, None, None, "within 14 days"),
                              ("q1", "d1", "bob", 2, None, None, "Refunds"),
                              ("q1", "d1", "cy", 2, None, None, "never there")), DOCS, POOLED)
    assert found.highlights[["assessor", "start", "end"]].values.tolist() == [["ann", 17, 31]]
    assert "task 2: the text 'Refunds' occurs 2 times (at 0, 33) in document 'd1': give start and end instead" \
        in found.lines()[0]
    assert "task 3: the text 'never there' does not occur in document 'd1'" in found.lines()[1]


def test_a_grade_without_a_span_is_the_whole_document_and_the_lowest_grade_is_not_relevant():
    found = check_marks(marks(("q1", "d2", "ann", 3, None, None, ""), ("q1", "d1", "ann", 0, None, None, "")),
                        DOCS, POOLED)
    assert found.highlights[["doc_id", "start", "end", "grade"]].values.tolist() == [["d2", 0, len(DOCS["d2"]), 3]]
    assert dict(zip(found.assessments["doc_id"], found.assessments["grade"])) == {"d2": 3, "d1": 0}


def test_overlapping_highlights_are_read_as_one_at_the_higher_grade_and_said_so():
    found = check_marks(marks(("q1", "d1", "ann", 1, 0, 20, ""), ("q1", "d1", "ann", 3, 10, 31, "")), DOCS, POOLED)
    assert found.highlights[["start", "end", "grade"]].values.tolist() == [[0, 10, 1], [10, 31, 3]]
    assert found.lines() == ["task 1: ann's highlights 0:20 (grade 1) and 10:31 (grade 3) of document 'd1' overlap: "
                             "read as one, each character at the higher grade"]
    assert found.assessments["grade"].tolist() == [3]


def test_not_relevant_beside_highlights_sets_the_assessors_marks_of_that_document_aside():
    found = check_marks(marks(("q1", "d1", "ann", 0, None, None, ""), ("q1", "d1", "ann", 2, 0, 7, "Refunds"),
                              ("q1", "d1", "bob", 2, 0, 7, "Refunds")), DOCS, POOLED)
    assert found.assessments["assessor"].tolist() == ["bob"] and len(found.set_aside) == 2
    assert "ann marked document 'd1' not relevant to question 'q1' and also highlighted 1 span(s) in it" \
        in found.lines()[0]


def test_disjoint_ranges_keep_the_highest_grade_per_character_and_join_touching_ones():
    assert disjoint([(0, 5, 2), (5, 9, 2), (3, 7, 3)]) == ([(0, 3, 2), (3, 7, 3), (7, 9, 2)],
                                                          [((0, 5, 2), (3, 7, 3)), ((3, 7, 3), (5, 9, 2))])


def test_a_task_that_showed_an_older_text_is_checked_against_the_digest_it_showed():
    older = marks(("q1", "d2", "ann", 1, 0, 6, "Export"))
    older["seen"] = ["0123456789abcdef"]  # the task was pushed by an earlier pool, before d2 changed
    found = check_marks(older, DOCS, POOLED)
    assert found.highlights.empty and "changed since it was pooled (digest 0123456789abcdef" in found.lines()[0]
