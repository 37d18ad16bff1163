"""The end-of-sweep summary from child runs: means, ranks of the first relevant document, differences vs best."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.bootstrap import paired_difference
from metrics.power import minimum_detectable_effect, questions_needed
from metrics.spec import parse_metrics
from pipeline.analysis.summary import SystemRun, compare_systems, summarize, unique_names
from pipeline.reports.text import sweep_text
from retrievers import BM25, LSA, WeightedSum
from tests.pipeline.measured import measured

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
    # A minus B, questions resampled as pairs (the help-desk reference's procedure)
    expected = paired_difference(a, b)[0]
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


def test_systems_sharing_a_name_and_job_number_get_one_row_each():
    """A sweep resumed with a setting the names do not show (more resamples) runs job 0 again: two runs named
    "A", both job 0, under one parent."""
    again = child("A", 0, [1, 0.5, 0.6, 0.2, 0.9, 0.0, 0.7, 0.5], [1, 2, 1, 4, 1, NAN, 1, 3])
    again.run_id = "later-run"
    first = child("A", 0, list(A.per_question["ndcg@5"]), list(A.per_question["first_relevant_rank"]))
    systems = [first, again, child("B", 1, list(B.per_question["ndcg@5"]), list(B.per_question["first_relevant_rank"]))]
    unique_names(systems)
    assert [s.name for s in systems] == ["A #0 (run0)", "A #0 (later-ru)", "B"]
    summary = summarize(systems, "parent", SHOW, SHOW[1])
    assert list(summary.means.index) == ["A #0 (run0)", "A #0 (later-ru)", "B"]
    assert "A #0 (later-ru)" in sweep_text(summary, "Sweep t")


def test_systems_measured_on_different_data_are_not_compared_question_by_question():
    other = child("B", 1, [1.0] * 8, [1] * 8, digest="d2")
    summary = summarize([A, other], "parent", SHOW, SHOW[1])
    assert not summary.same_data and summary.differences.empty and summary.first_rank.empty
    assert "different collections" in sweep_text(summary, "Sweep t")


def test_the_report_stars_a_difference_against_the_top_when_the_pair_matrix_does():
    summary = summarize([A, B], "parent", SHOW, SHOW[1])
    text = sweep_text(summary, "Sweep t")
    lines = {tuple(line.split()[:2]): line for line in text.splitlines() if line.startswith("A ")}
    assert lines[("A", "ndcg@5")].endswith("*") == bool(summary.pairs.loc[("A", "B", "ndcg@5"), "significant"])
    assert "q06" in text and "--" in text


# -- honest summaries, from real rankings of the help-desk corpus ----------------------------------------------------

SPEC_SHOW = parse_metrics("hit_rate@3,recall@5,mrr,ndcg@5")
GRID = [(k1, b) for k1 in (0.9, 1.2) for b in (0.3, 0.4, 0.6, 0.75)]


@pytest.fixture(scope="module")
def bm25_grid(helpdesk_collection):
    """Eight BM25 settings that rank the 14 help-desk questions alike (k1 and b move no first relevant document)."""
    c = helpdesk_collection
    return [measured(f"BM25 k1={k1} b={b}", job, BM25(k1=k1, b=b).index(c).rank(c.query_ids, c.query_texts, 100), c,
                     SPEC_SHOW, {"retriever.k1": str(k1), "retriever.b": str(b)})
            for job, (k1, b) in enumerate(GRID)]


@pytest.fixture(scope="module")
def spec_systems(helpdesk_collection, helpdesk_runs):
    c = helpdesk_collection
    return [measured(name, job, run, c, SPEC_SHOW) for job, (name, run) in enumerate(helpdesk_runs.items())]


def test_eight_identical_systems_are_one_line_with_no_best_and_no_rows_of_zero(bm25_grid):
    summary = summarize(bm25_grid, "parent", SPEC_SHOW, SPEC_SHOW[3], resamples=500, permutations=500)
    names = [s.name for s in bm25_grid]
    assert summary.groups == [names] and summary.differences.empty and not summary.single_best
    text = sweep_text(summary, "grid")
    assert "+0.000" not in text and "Best by" not in text
    assert "All 8 systems returned identical per-question results on every shown metric: no best system" in text
    table = text.split("Mean over questions\n")[1].split("\n\n")[0].splitlines()
    assert len(table) == 3  # header, the one row, and the line naming every identical system
    assert table[1].startswith("BM25 k1=0.9 b=0.3 and 7 others (identical per question)")
    assert table[2] == "Identical per question: " + " = ".join(names)


def test_two_identical_systems_share_one_row_named_after_both(bm25_grid, spec_systems):
    lsa = spec_systems[1]
    summary = summarize([*bm25_grid[:2], lsa], "parent", SPEC_SHOW, SPEC_SHOW[3], resamples=500, permutations=500)
    assert summary.label("BM25 k1=0.9 b=0.4") == "BM25 k1=0.9 b=0.3 = BM25 k1=0.9 b=0.4 (identical per question)"
    text = sweep_text(summary, "t")
    label = "BM25 k1=0.9 b=0.3 = BM25 k1=0.9 b=0.4 (identical per question)"
    assert len([line for line in text.splitlines() if line.startswith(label)]) == 1  # one row of means
    assert f"Paired differences against the top system, {label}" in text
    assert f"No single best system by ndcg@5: the top one, {label} (0.691)" in text
    assert summary.pairs.index.get_level_values("a").unique().tolist() == ["BM25 k1=0.9 b=0.3"]


def test_systems_whose_interval_against_the_top_contains_zero_are_tied_with_it(spec_systems):
    summary = summarize(spec_systems, "parent", SPEC_SHOW, SPEC_SHOW[3], resamples=1000, permutations=1000)
    assert summary.best == "RRF"  # helpdesk-reference.md: RRF's nDCG@5 0.737 is the highest mean
    top = spec_systems[3].per_question["ndcg@5"].to_numpy()
    expected = []
    for system in spec_systems[:3]:
        iv = paired_difference(system.per_question["ndcg@5"].to_numpy(), top, resamples=1000)[0]
        if iv.low <= 0 <= iv.high:
            expected.append(system.name)
    assert summary.tied == expected and expected  # on 14 questions, some system is indistinguishable from RRF
    text = sweep_text(summary, "SPEC")
    count = f"{len(expected)} of the 3 others: " if len(expected) > 1 else ""
    assert f"No single best system by ndcg@5: the top one, RRF (0.737), is tied with {count}" + "; ".join(expected) \
        in text
    for name in expected:
        assert any(line.startswith(name) and line.split()[1:2] == ["ndcg@5"] and line.endswith("tied")
                   for line in text.splitlines())


def test_a_summary_compared_later_is_the_summary_compared_at_once(spec_systems):
    """A sweep's end summarises first and compares its systems while its first figures are drawn: the summary it
    ends with is the one made in one go (differences, ties, pairs, sensitivity), and before comparing it has the
    means, groups, ranks and top system the figures need, and no comparison."""
    at_once = summarize(spec_systems, "parent", SPEC_SHOW, SPEC_SHOW[3], resamples=500, permutations=500)
    later = summarize(spec_systems, "parent", SPEC_SHOW, SPEC_SHOW[3], resamples=500, permutations=500,
                      compare=False)
    assert later.best == at_once.best == "RRF" and later.groups == at_once.groups
    assert later.means.equals(at_once.means) and later.first_rank.equals(at_once.first_rank)
    assert later.differences.empty and later.pairs.empty and later.tied == [] and later.sensitivity.empty
    compare_systems(later, resamples=500, permutations=500)
    assert later.differences.equals(at_once.differences) and later.pairs.equals(at_once.pairs)
    assert later.tied == at_once.tied and later.sensitivity.equals(at_once.sensitivity)
    assert sweep_text(later, "SPEC") == sweep_text(at_once, "SPEC")


def test_a_system_ahead_of_every_other_is_named_best(spec_systems, helpdesk_collection):
    c = helpdesk_collection
    # the judgments themselves as a run: the first relevant document first on every question
    perfect = summarize([spec_systems[1], measured("oracle", 9, oracle_run(c), c, SPEC_SHOW)], "parent", SPEC_SHOW,
                        SPEC_SHOW[3], resamples=1000, permutations=1000)
    assert perfect.single_best and perfect.best == "oracle" and not perfect.tied
    assert "Best by ndcg@5: oracle (1.000); every other system's paired 95% interval against it excludes zero" in \
        sweep_text(perfect, "t")


def test_the_rank_table_tells_not_retrieved_from_beyond_depth(helpdesk_collection):
    c = helpdesk_collection
    weighted = WeightedSum([BM25(), LSA()], depth=10).index(c).rank(c.query_ids, c.query_texts, 100)
    bm25 = BM25().index(c).rank(c.query_ids, c.query_texts, 100)
    systems = [measured("BM25", 0, bm25, c, SPEC_SHOW), measured("weighted", 1, weighted, c, SPEC_SHOW)]
    summary = summarize(systems, "parent", SPEC_SHOW, SPEC_SHOW[3], resamples=200, permutations=200)
    # q10 ("I want my data from yesterday back"): BM25 scores one wrong document and stops; the fusion's top 10 is
    # full, and no relevant document is in it
    assert systems[0].per_question.loc["q10", "first_relevant"] == "not retrieved"
    assert systems[1].per_question.loc["q10", "first_relevant"] == "beyond depth 10"
    row = next(line for line in sweep_text(summary, "t").splitlines() if line.startswith("q10"))
    assert row.split() == ["q10", "--", ">10"]


def test_the_question_set_s_detectable_difference_is_reported_from_the_pairs(spec_systems):
    summary = summarize(spec_systems, "parent", SPEC_SHOW, SPEC_SHOW[3], resamples=200, permutations=200)
    assert len(summary.sensitivity) == 6  # four distinct systems, six pairs
    rrf, bm25 = (s.per_question["ndcg@5"] for s in (spec_systems[3], spec_systems[0]))
    pair = summary.sensitivity.loc[("BM25", "RRF")]
    assert pair.sd == pytest.approx((bm25 - rrf).std(ddof=1))
    assert pair.mde == pytest.approx(minimum_detectable_effect(pair.sd, 14))
    found = summary.detectable()
    assert found.sd == pytest.approx(summary.sensitivity["sd"].median()) and found.n == 14
    text = sweep_text(summary, "t")
    assert f"What 14 questions can tell on ndcg@5 (paired t approximation, two-sided alpha 0.05, 80% power): " \
           f"a difference of {found.mde:.3f}" in text
    assert f"0.05: {questions_needed(0.05, found.sd):,}" in text


def oracle_run(c):
    """A run that puts each question's relevant documents first, in judgment order (scores descending)."""
    from metrics.run import Run

    rankings: dict[str, list[tuple[str, float]]] = {q: [] for q in c.query_ids}
    for q, d, g in zip(c.qrels.query_ids, c.qrels.doc_ids, c.qrels.grades):
        if g > 0:
            rankings[q].append((d, 10.0 - len(rankings[q])))
    return Run.from_rankings(rankings, "oracle")


def test_systems_apart_only_in_where_a_ranking_ended_are_not_identical():
    """Equal metrics and ranks, but one ranking of q06 was full to its depth (a relevant document may lie deeper)
    and the other ended early: two groups, whether the summary's beyond-depth table is given or worked out."""
    from pipeline.analysis.summary import beyond_depth, identical_groups

    ndcg, ranks = A.per_question["ndcg@5"].tolist(), A.per_question["first_relevant_rank"].tolist()
    systems = [child(name, job, ndcg, ranks) for job, name in enumerate(["full", "ended", "same"])]
    for system, q06 in zip(systems, ["beyond depth 10", "not retrieved", "beyond depth 10"]):
        system.per_question["first_relevant"] = ["1"] * 5 + [q06] + ["1"] * 2
    beyond = pd.DataFrame({s.name: beyond_depth(s.per_question) for s in systems})
    expected = [["full", "same"], ["ended"]]
    assert identical_groups(systems, ["ndcg@5"]) == expected
    assert identical_groups(systems, ["ndcg@5"], beyond) == expected
    assert summarize(systems, "parent", SHOW, SHOW[1], resamples=200, permutations=200).groups == expected


def holm_by_hand(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: the k-th smallest p times (m - k + 1), kept monotone, capped at 1."""
    order = sorted(range(len(p)), key=p.__getitem__)
    adjusted, running = [0.0] * len(p), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - k) * p[i]))
        adjusted[i] = running
    return adjusted


def test_one_rule_stars_a_difference_in_every_section_of_the_report(spec_systems):
    """RRF - LSA on the help-desk nDCG@5, -0.058 [-0.120, -0.010]: the interval excludes zero, but the randomisation
    test's p, Holm-adjusted over the six pairs, is not below 0.05. The report starred it against the top (interval
    alone) and not in the pair matrix (interval and Holm): now no section stars it, and the row is not tied either."""
    from pipeline.reports.sweep_page import against_top_html
    from pipeline.reports.tables import pairs_table

    summary = summarize(spec_systems, "parent", SPEC_SHOW, SPEC_SHOW[3])
    lsa = summary.differences.loc[("LSA", "ndcg@5")]
    assert (round(lsa.difference, 3), round(lsa.ci_low, 3), round(lsa.ci_high, 3)) == (-0.058, -0.120, -0.010)
    for (system, metric), row in summary.differences.iterrows():
        pair = summary.pairs.loc[(system, "RRF", metric)]  # RRF is listed last: every pair is (system, RRF)
        assert row.significant == pair.significant == (
            (pair.ci_low > 0 or pair.ci_high < 0) and pair.p_holm < summary.alpha)
    assert not lsa.significant and "LSA" not in summary.tied
    text = next(line for line in sweep_text(summary, "SPEC").splitlines() if line.startswith("LSA       ndcg@5"))
    assert text.endswith("[-0.120, -0.010]"), "neither starred nor tied"
    assert "-0.058 [-0.120, -0.010] *" not in against_top_html(summary)
    matrix = pairs_table(summary)
    lsa_row = next(row for row in matrix.rows if row[1].text == "LSA")
    assert [c.marks for c in lsa_row[2:]] == ["", "", "", ""]


def test_above_the_paired_limit_holm_runs_over_the_comparisons_against_the_top(spec_systems, monkeypatch):
    """More than MAX_PAIRED distinct systems: only the comparisons with the top are made, and Holm's adjustment runs
    over those, metric by metric."""
    from pipeline.analysis import summary as summary_module

    monkeypatch.setattr(summary_module, "MAX_PAIRED", 2)
    summary = summarize(spec_systems, "parent", SPEC_SHOW, SPEC_SHOW[3])
    assert summary.pairs.empty
    for metric, rows in summary.differences.groupby(level="metric"):
        adjusted = holm_by_hand(list(rows.p_value))
        expected = [bool((r.ci_low > 0 or r.ci_high < 0) and q < 0.05) for r, q in zip(rows.itertuples(), adjusted)]
        assert list(rows.significant) == expected, metric
