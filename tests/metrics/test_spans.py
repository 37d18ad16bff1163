"""Span judgments: evidence is the union of a question's spans at the level, a document's grade its best span's, a
judgment without offsets its whole text; spans.tsv reads back."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.spans import Spans, covered, merged, overlap, read_spans, spans_bytes


def spans(*rows):
    q, d, s, e, g = zip(*rows)
    return Spans(np.array(q, dtype=object), np.array(d, dtype=object), s, e, g)


def test_ranges_merge_where_they_overlap_or_touch():
    assert merged([(10, 20), (0, 5), (5, 8), (15, 30), (40, 41)]) == [(0, 8), (10, 30), (40, 41)]
    assert covered([(0, 8), (10, 30)]) == 28


@pytest.mark.parametrize("seed", range(5))
def test_overlap_counts_the_characters_both_cover(seed):
    rng = np.random.default_rng(seed)

    def some():
        out = []
        for _ in range(int(rng.integers(0, 6))):
            s = int(rng.integers(0, 90))
            out.append((s, s + int(rng.integers(1, 15))))
        return merged(out)

    a, b = some(), some()
    chars = lambda rs: {c for s, e in rs for c in range(s, e)}  # noqa: E731
    assert overlap(a, b) == len(chars(a) & chars(b))


def test_a_documents_grade_is_its_best_spans_and_a_judgment_without_offsets_spans_the_whole_text():
    found = spans(("q", "a", 0, 5, 1), ("q", "a", 9, 12, 2), ("q", "b", 3, 4, 0))
    assert found.qrels().to_dict() == {"q": {"a": 2, "b": 0}}
    whole = found.with_documents(Qrels.from_dict({"q": {"a": 2, "c": 1}, "r": {"c": 2}}), {"a": 20, "c": 30})
    assert whole.evidence(1) == {"q": {"a": [(0, 5), (9, 12)], "c": [(0, 30)]}, "r": {"c": [(0, 30)]}}


def test_evidence_keeps_only_spans_at_the_level_and_never_a_negative_grade():
    found = spans(("q", "a", 0, 5, 1), ("q", "a", 3, 9, 2), ("q", "b", 0, 4, -1))
    assert found.evidence(2) == {"q": {"a": [(3, 9)]}}
    assert found.evidence(0) == {"q": {"a": [(0, 9)]}}


def test_spans_tsv_reads_back_and_its_digest_ignores_order(tmp_path):
    found = spans(("q1", "a", 0, 5, 1), ("q2", "b", 2, 9, 2))
    path = tmp_path / "spans.tsv"
    path.write_bytes(spans_bytes(found))
    back = read_spans(path)
    assert back.digest() == found.digest() == spans(("q2", "b", 2, 9, 2), ("q1", "a", 0, 5, 1)).digest()


@pytest.mark.parametrize(("row", "reason"), [("q\ta\t5\t2\t1", r"spans\.tsv:2: the span 5:2 is empty or negative"),
                                             ("q\ta\tx\t2\t1", r"spans\.tsv:2: start, end and grade must be integers")])
def test_a_damaged_spans_file_is_one_line(tmp_path, row, reason):
    path = tmp_path / "spans.tsv"
    path.write_text("query_id\tdoc_id\tstart\tend\tgrade\n" + row + "\n")
    with pytest.raises(InputError, match=reason):
        read_spans(path)
