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
