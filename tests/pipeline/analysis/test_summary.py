"""The end-of-sweep summary from child runs: means, ranks of the first relevant document, differences vs best."""

from __future__ import annotations

import numpy as np
import pandas as pd

from metrics.bootstrap import paired_difference
from metrics.spec import parse_metrics
from pipeline.analysis.summary import SystemRun, summarize
from pipeline.reports.text import sweep_text

SHOW = parse_metrics("hit_rate@3,ndcg@5")
QUESTIONS = [f"q{i:02d}" for i in range(1, 9)]


def child(name: str, job: int, ndcg: list[float], ranks: list[float], status: str = "FINISHED",
          digest: str = "d1") -> SystemRun:
    hit = [1.0 if r == r and r <= 3 else 0.0 for r in ranks]
    table = pd.DataFrame({"hit_rate@3": hit, "ndcg@5": ndcg, "first_relevant_rank": ranks},
                         index=pd.Index(QUESTIONS, name="query_id"))
    metrics = {"hit_rate_at_3": float(np.mean(hit)), "ndcg_at_5": float(np.mean(ndcg))}
    return SystemRun(f"run{job}", name, status, job, metrics, corpus_digest=digest,
                     per_question=table if status == "FINISHED" else None)


NAN = float("nan")
A = child("A", 0, [1, 0.5, 0.6, 0.2, 0.9, 0.0, 0.7, 0.4], [1, 2, 1, 4, 1, NAN, 1, 3])
B = child("B", 1, [1, 0.9, 0.8, 0.6, 0.9, 0.3, 0.8, 0.6], [1, 1, 1, 1, 1, 5, 1, 1])


def test_the_best_system_is_chosen_by_the_primary_metric_and_others_compared_to_it():
    summary = summarize([A, B], "parent", SHOW, SHOW[1])
    assert summary.best == "B"
    row = summary.differences.loc[("A", "ndcg@5")]
    a, b = A.per_question["ndcg@5"].to_numpy(), B.per_question["ndcg@5"].to_numpy()
    expected = paired_difference(a, b)[0]  # A minus B, questions resampled as pairs (SPEC's procedure)
    assert np.isclose(row.difference, expected.mean)
    assert (row.ci_low, row.ci_high) == (expected.low, expected.high)
    assert list(summary.differences.index.get_level_values("system").unique()) == ["A"]


def test_ranks_of_the_first_relevant_document_line_up_by_question():
    ranks = summarize([A, B], "parent", SHOW, SHOW[1]).first_rank
    assert list(ranks.columns) == ["A", "B"]
    assert ranks.loc["q06", "A"] is pd.NA and ranks.loc["q06", "B"] == 5


def test_failed_jobs_are_listed_and_left_out_of_the_tables():
    failed = child("C", 2, [0.0] * 8, [NAN] * 8, status="FAILED")
    failed.error = "/missing: corpus folder does not exist"
    summary = summarize([A, B, failed], "parent", SHOW, SHOW[1])
    assert [s.name for s in summary.failed] == ["C"] and list(summary.means.index) == ["A", "B"]
    text = sweep_text(summary, "Sweep t")
    assert "2 of 3 jobs finished" in text and "FAILED job 2 (C): /missing: corpus folder does not exist" in text


def test_systems_measured_on_different_data_are_not_compared_question_by_question():
    other = child("B", 1, [1.0] * 8, [1] * 8, digest="d2")
    summary = summarize([A, other], "parent", SHOW, SHOW[1])
    assert not summary.same_data and summary.differences.empty and summary.first_rank.empty
    assert "different collections" in sweep_text(summary, "Sweep t")


def test_the_report_marks_differences_whose_interval_excludes_zero():
    text = sweep_text(summarize([A, B], "parent", SHOW, SHOW[1]), "Sweep t")
    lines = {tuple(line.split()[:2]): line for line in text.splitlines() if line.startswith("A ")}
    row = summarize([A, B], "parent", SHOW, SHOW[1]).differences.loc[("A", "ndcg@5")]
    assert lines[("A", "ndcg@5")].endswith("*") == bool(row.ci_high < 0 or row.ci_low > 0)
    assert "q06" in text and "--" in text
