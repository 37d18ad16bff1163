"""A new qrels version: the old judgments plus the new ones, contradictions listed and kept unless overridden."""

from __future__ import annotations

import pandas as pd

from metrics.qrels import Qrels
from pipeline.judging_maths.versions import next_version

OLD = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}})
NEW = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d2", "d3", "d9"], "grade": [2, 0, 3]})


def test_the_new_version_adds_the_new_pairs_and_keeps_an_old_grade_a_new_one_contradicts():
    version = next_version(OLD, NEW)
    assert version.qrels.to_dict() == {"q1": {"d1": 1, "d2": 0, "d3": 0}, "q2": {"d9": 3}}
    assert version.contradictions.to_dict("records") == [{"query_id": "q1", "doc_id": "d2", "old": 0, "new": 2}]
    assert version.counts()["added"] == 2 and version.counts()["overridden"] == 0
    assert version.parent_digest == OLD.digest() != version.digest


def test_override_takes_the_new_grade():
    version = next_version(OLD, NEW, override=True)
    assert version.qrels.to_dict()["q1"]["d2"] == 2 and version.counts()["overridden"] == 1


def test_the_same_judgments_again_make_the_same_version():
    first = next_version(OLD, NEW)
    again = next_version(first.qrels, NEW)
    assert again.digest == first.digest and again.counts()["confirmed"] == 2


def test_a_span_version_brings_the_new_pairs_spans_keeps_the_old_ones_and_reads_back_as_written(tmp_path):
    from metrics.spans import Spans, judgments_digest, read_beir_spans
    from pipeline.judging_maths.versions import beir_span_text, next_span_version

    old_spans = Spans(["q1"], ["d1"], [3], [9], [1])
    spans = pd.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d3", "d9"], "start": [0, 4], "end": [5, 8],
                          "grade": [2, 3]})
    judged = NEW.assign(grade=[2, 2, 3])  # q1 d2 contradicts (0 -> 2), q1 d3 and q2 d9 are new
    version = next_span_version(OLD, old_spans, judged, spans)
    assert sorted(zip(version.spans.query_ids, version.spans.doc_ids, version.spans.starts.tolist())) == [
        ("q1", "d1", 3), ("q1", "d3", 0), ("q2", "d9", 4)]
    assert version.parent_digest == judgments_digest(OLD, old_spans) != OLD.digest()
    assert version.counts()["spans"] == 3 and version.counts()["evidence_characters"] == 6 + 5 + 4
    path = tmp_path / "qrels.tsv"
    path.write_text(beir_span_text(version.qrels, version.spans))
    qrels, read, _ = read_beir_spans(path)
    assert judgments_digest(qrels, read) == version.digest
