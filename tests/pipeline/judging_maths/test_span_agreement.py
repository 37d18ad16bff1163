"""Agreement on spans, character by character, checked against scikit-learn's F1 and Jaccard on the characters laid
end to end; merging spans character by character by the rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.judging_maths.span_agreement import merge_spans, span_agreement, tied_span_pairs
from pipeline.judging_maths.spans import ASSESSMENT_COLUMNS, HIGHLIGHT_COLUMNS

RNG = np.random.default_rng(45)


def tables(marked: dict[tuple[str, str, str], list[tuple[int, int, int]]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(highlights, assessments) from {(question, document, assessor): [(start, end, grade)] (empty: not relevant)}."""
    spans = [(q, d, w, s, e, g) for (q, d, w), r in marked.items() for s, e, g in r]
    grades = [(q, d, w, max((g for _, _, g in r), default=0), "") for (q, d, w), r in marked.items()]
    return pd.DataFrame(spans, columns=HIGHLIGHT_COLUMNS), pd.DataFrame(grades, columns=ASSESSMENT_COLUMNS)


def random_marks(pairs: int, length: int = 200) -> dict:
    marked = {}
    for i in range(pairs):
        truth = sorted(RNG.integers(0, length, 2))
        for who in ("ann", "bob", "cy"):
            if RNG.random() < 0.2:
                marked[(f"q{i}", "d", who)] = []  # not relevant
                continue
            s, e = (int(x + RNG.integers(-15, 15)) for x in truth)
            s, e = max(0, min(s, e)), min(length, max(s, e) + 1)
            marked[(f"q{i}", "d", who)] = [(s, e, int(RNG.integers(1, 4)))]
    return marked


def characters(marked: dict, a: str, b: str, length: int = 200) -> tuple[list[int], list[int]]:
    """Two assessors' characters laid end to end over the pairs both judged: 1 where highlighted."""
    ya, yb = [], []
    for q in sorted({k[0] for k in marked}):
        if (q, "d", a) not in marked or (q, "d", b) not in marked:
            continue
        for who, out in ((a, ya), (b, yb)):
            row = np.zeros(length, dtype=int)
            for s, e, _ in marked[(q, "d", who)]:
                row[s:e] = 1
            out.extend(row.tolist())
    return ya, yb


def test_character_f1_and_iou_of_two_assessors_are_scikit_learns():
    from sklearn.metrics import f1_score, jaccard_score

    marked = {k: v for k, v in random_marks(60).items() if k[2] != "cy"}
    found = span_agreement(*tables(marked))
    ya, yb = characters(marked, "ann", "bob")
    assert found.f1 == pytest.approx(f1_score(ya, yb)) and found.iou == pytest.approx(jaccard_score(ya, yb))
    assert found.pairs == 60


def test_three_assessors_pool_every_two_and_report_each_two():
    from sklearn.metrics import f1_score, jaccard_score

    marked = random_marks(40)
    found = span_agreement(*tables(marked))
    ya, yb = [], []
    for a, b in (("ann", "bob"), ("ann", "cy"), ("bob", "cy")):
        x, y = characters(marked, a, b)
        ya, yb = ya + x, yb + y
        assert found.pairwise[(a, b)][0] == pytest.approx(f1_score(x, y))
    assert found.f1 == pytest.approx(f1_score(ya, yb)) and found.iou == pytest.approx(jaccard_score(ya, yb))


def test_disagreements_list_pairs_graded_or_highlighted_differently_least_alike_first():
    found = span_agreement(*tables({("q1", "d1", "ann"): [(0, 10, 2)], ("q1", "d1", "bob"): [(0, 10, 2)],
                                    ("q2", "d1", "ann"): [(0, 10, 2)], ("q2", "d1", "bob"): [(5, 10, 2)],
                                    ("q3", "d1", "ann"): [(0, 10, 2)], ("q3", "d1", "bob"): []}))
    assert found.disagreements[["query_id", "iou"]].values.tolist() == [["q3", 0.0], ["q2", 0.5]]
    assert found.disagreements["highlights"].tolist()[0] == "ann=0:10; bob=none"
    assert found.mean_iou == pytest.approx((1 + 0.5 + 0) / 3)
    assert found.lines()[1] == "2 document(s) graded or highlighted differently"


def test_two_assessors_merge_to_the_characters_both_highlighted_at_the_lower_grade():
    highlights, assessments = tables({("q1", "d1", "ann"): [(0, 20, 3)], ("q1", "d1", "bob"): [(5, 30, 2)],
                                      ("q2", "d1", "ann"): [(0, 10, 2)], ("q2", "d1", "bob"): []})
    pairs, spans = merge_spans(highlights, assessments)
    assert spans.values.tolist() == [["q1", "d1", 5, 20, 2]]
    assert pairs[["query_id", "grade", "tied"]].values.tolist() == [["q1", 2, True], ["q2", 0, True]]
    _, higher = merge_spans(highlights, assessments, ties="higher")
    assert higher.values.tolist() == [["q1", "d1", 0, 20, 3], ["q1", "d1", 20, 30, 2], ["q2", "d1", 0, 10, 2]]
    assert tied_span_pairs(highlights, assessments) == [("q1", "d1"), ("q2", "d1")]


def test_the_majority_of_three_decides_each_character_and_an_adjudication_settles_a_tie():
    highlights, assessments = tables({("q1", "d1", "ann"): [(0, 20, 2)], ("q1", "d1", "bob"): [(10, 30, 2)],
                                      ("q1", "d1", "cy"): []})
    pairs, spans = merge_spans(highlights, assessments)
    assert spans.values.tolist() == [["q1", "d1", 10, 20, 2]] and not pairs["tied"].any()
    two = assessments[assessments["assessor"] != "cy"]
    round_ = tables({("q1", "d1", "dee"): [(2, 25, 3)]})
    pairs, spans = merge_spans(highlights, two, ties="adjudicated", adjudicated=round_)
    assert spans.values.tolist() == [["q1", "d1", 2, 25, 3]] and pairs["adjudicated"].tolist() == [True]
    waiting, _ = merge_spans(highlights, two, ties="adjudicated")
    assert waiting["open"].tolist() == [True]
