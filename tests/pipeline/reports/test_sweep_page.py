"""The sweep report as a colleague reads it: a header saying what was measured, a table of contents whose links
resolve, the verdict, the systems with their settings, every pair, what the questions can detect, ranks that agree
with the diagnosis, and each system's diagnosis folded with its first failing questions inline."""

from __future__ import annotations

import re

import pytest

from metrics.spec import parse_metrics
from pipeline.analysis.diagnosis import DiagnosisSettings
from pipeline.analysis.summary import summarize
from pipeline.config.build import metric_plan
from pipeline.reports.sweep_page import (
    INLINE_FAILURES,
    PageFiles,
    failing,
    judged_html,
    measured_facts,
    notes_html,
    retriever_settings,
)
from pipeline.sweep.exports import diagnoses_of
from pipeline.sweep.figures import sweep_figures
from pipeline.sweep.report import report_html
from retrievers import BM25, LSA
from tests.pipeline.measured import measured
from tests.pipeline.reports.test_html import parse

SHOW = parse_metrics("hit_rate@3,recall@5,mrr,ndcg@5")
PLAN = metric_plan({"k": [3, 5, 10], "measures": ["hit_rate", "recall", "mrr", "ndcg"],
                    "show": [s.name for s in SHOW], "primary": "ndcg@5", "level": 1, "gain": "linear",
                    "missing": "zero", "bootstrap": {"resamples": 1000, "seed": 0, "confidence": 0.95,
                                                     "method": "percentile"}})
COMPONENTS = {"retriever.components.first._target_": "retrievers.BM25", "retriever.components.first.k1": "1.2",
              "retriever.components.first.b": "0.75", "retriever.components.first.name": "BM25",
              "retriever.components.second._target_": "retrievers.LSA", "retriever.components.second.dims": "6",
              "retriever.components.second.name": "LSA", "retriever.depth": "10"}
# the params each retriever's job logs (as MLflow holds them for `python -m pipeline -m experiment=helpdesk_study`)
PARAMS = {
    "BM25": {"retriever": "bm25", "retriever._target_": "retrievers.BM25", "retriever.name": "BM25",
             "retriever.k1": "1.2", "retriever.b": "0.75"},
    "LSA": {"retriever": "lsa", "retriever._target_": "retrievers.LSA", "retriever.name": "LSA", "retriever.dims": "6"},
    "weighted": {"retriever": "weighted", "retriever._target_": "retrievers.WeightedSum", "retriever.name": "weighted",
                 "retriever.alpha": "0.5", "retriever.weights": "null", **COMPONENTS},
    "RRF": {"retriever": "rrf", "retriever._target_": "retrievers.RRF", "retriever.name": "RRF", "retriever.k": "60.0",
            **COMPONENTS},
}


@pytest.fixture(scope="module")
def study(helpdesk_collection, helpdesk_runs):
    c = helpdesk_collection
    systems = [measured(name, job, run, c, SHOW, PARAMS[name]) for job, (name, run) in enumerate(helpdesk_runs.items())]
    systems[0].notes = ["qrels/test.tsv: 2 judgment(s) name unknown documents (dropped)"]
    systems[2].notes = ["qrels/test.tsv: 2 judgment(s) name unknown documents (dropped)"]
    return summarize(systems, "parent", SHOW, SHOW[3], resamples=1000, permutations=2000)


@pytest.fixture(scope="module")
def page(study):
    settings = DiagnosisSettings()
    files = PageFiles({s.name: f"diagnosis/job0{s.job}.csv" for s in study.finished},
                      {"the summary tables as Markdown": "summary.md"})
    html = report_html(study, sweep_figures(study, PLAN, settings), "Sweep helpdesk_study", settings,
                       {"sweep folder": "/tmp/x"}, files)
    return html, parse(html)


def header(html: str, table: int = 1) -> dict[str, str]:
    """The facts of the page's ``table``-th header table (1: what was measured; 2: where the results are)."""
    found = html.split('<table class="meta">')[table].split("</table>", 1)[0]
    return dict(re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", found))


def test_the_header_says_what_was_measured_from_the_runs(page, study):
    facts = header(page[0])
    assert facts["corpus"] == "helpdesk" and facts["split"] == "test"
    assert facts["questions"] == "14 evaluated" and facts["documents"] == "28"
    longest = {s.name: int(s.per_question["retrieved"].max()) for s in study.finished}
    assert facts["depth"].startswith("100 asked; the longest ranking returned: ")  # what each system really ranked
    for name, n in longest.items():
        assert re.search(rf"{n} by [^;]*\b{name}\b", facts["depth"]), (name, n, facts["depth"])
    assert facts["metrics"].startswith("primary ndcg@5; shown hit_rate@3, recall@5, mrr, ndcg@5; cutoffs [3, 5, 10]")
    assert "relevant from grade 1; nDCG gain linear" in facts["metrics"]
    assert facts["bootstrap"] == "percentile intervals, 1000 resamples, seed 0, 95% confidence"
    assert facts["date"] == "2026-01-01 00:00–00:03 UTC (runs started)"
    assert facts["code version"] == "0.1.0+test" and "Holm-adjusted" in facts["comparisons"]
    where = header(page[0], 2)  # folded under the header: where the results are
    assert where["sweep folder"] == "/tmp/x" and where["corpus digest"] == "d1"
    assert where["judgments"].endswith("qrels/test.tsv") and "<summary>Where these results are: " in page[0]


def test_a_setting_that_differs_between_runs_is_said_to_vary(study):
    study.finished[1].params["depth"] = "50"
    try:
        assert measured_facts(study)["depth"] == "varies: 100, 50"
    finally:
        study.finished[1].params["depth"] = "100"


def test_one_data_note_is_one_line_under_the_header_with_nothing_to_unfold(page):
    html = page[0]
    notes = html.split('<section id="data-notes"', 1)[1].split("</section>", 1)[0]
    assert notes.count("<summary>") == 0 and notes.count("<li>") == 0  # the one line is the note itself
    assert "<p>Data validation notes (1): qrels/test.tsv: 2 judgment(s) name unknown documents" in notes
    assert html.index("Data validation notes") < html.index('<nav class="toc">')


def test_several_kinds_of_data_note_fold_under_one_line_that_counts_them(study):
    study.systems[1].notes = ["queries.jsonl: 1 question(s) with empty text (dropped)"]
    try:
        notes = notes_html(study)
    finally:
        study.systems[1].notes = []
    assert notes.count("<summary>") == 1 and notes.count("<li>") == 2  # each distinct note once, in the fold
    assert "Data validation notes: 2 kinds of correction" in notes


def test_the_means_table_comes_before_the_contents_and_the_repeated_judgment_warnings_fold_into_one_line(
        study, page):
    """On SciFact every system's judged@10 is low: one line names them all, the full warnings folded; the means
    table follows the header at once (the contents after it), so the first screen shows it."""
    html = page[0]
    assert html.index('<section id="means">') < html.index('<nav class="toc">')
    thin = dict.fromkeys(s.name for s in study.finished)
    for system in study.finished:
        system.metrics["judged_at_10"] = 0.087
    try:
        judged = judged_html(study)
    finally:
        for system in study.finished:
            del system.metrics["judged_at_10"]
    assert judged.count("<summary>") == 1 and judged.count("<li>") == len(thin)
    summary = judged.split("<summary>", 1)[1].split("</summary>", 1)[0]
    assert summary.startswith("Incomplete judgments: judged@10 below 0.8 for all 4 systems (0.087 to 0.087)")
    study.finished[0].metrics["judged_at_10"] = 0.5  # one system only: named
    try:
        judged = judged_html(study)
    finally:
        del study.finished[0].metrics["judged_at_10"]
    assert f"below 0.8 for {study.finished[0].name} (0.500): nDCG" in judged


def test_every_contents_link_resolves_and_no_heading_repeats(page):
    html, parsed = page
    targets = [link[1:] for link in parsed.links if link.startswith("#")]
    assert targets and set(targets) <= set(parsed.ids)
    h2 = re.findall(r"<h2>(.*?)</h2>", html)
    assert len(h2) == len(set(h2))
    assert [t for t in ("means", "settings", "pairs", "power", "plots", "ranks", "diagnosis")
            if t not in targets] == []


def test_the_verdict_names_no_single_best_among_tied_systems(page, study):
    html = page[0]
    tied = "; ".join(study.tied)
    count = f"{len(study.tied)} of the 3 others: " if len(study.tied) > 1 else ""
    assert f"No single best system by ndcg@5: the top one, RRF (0.737), is tied with {count}{tied}" in html
    assert html.index('id="verdict"') < html.index('<table class="meta">')  # first thing under the title
    assert "With these 14 questions, a difference in ndcg@5 smaller than about" in html


def test_each_system_s_settings_are_shown_and_say_which_alpha_is_weighted_s(page):
    html = page[0]
    settings = html.split('id="settings"', 1)[1].split("</section>", 1)[0]
    row = next(r for r in settings.split("<tr>") if "<td>weighted</td>" in r)
    assert "alpha=0.5" in row and "first: BM25 (k1=1.2, b=0.75)" in row and "second: LSA (dims=6)" in row
    assert "alpha" not in next(r for r in settings.split("<tr>") if "<td>RRF</td>" in r)
    assert retriever_settings(PARAMS["RRF"]) == ("k=60.0, depth=10; first: BM25 (k1=1.2, b=0.75); second: LSA "
                                                 "(dims=6)")


def test_a_setting_left_to_follow_the_corpus_shows_the_value_it_took_and_each_system_its_longest_ranking(page, study):
    """LSA's dims: null (its default) follows the corpus; its run tags the value it took (rankscope.resolved)."""
    params = {**PARAMS["LSA"], "retriever.dims": "null"}
    assert retriever_settings(params, used={"retriever.dims": "6"}) == "dims=6 (auto)"
    assert retriever_settings(params) == "dims=null"  # nothing known: as logged
    fused = {**PARAMS["RRF"], "retriever.components.second.dims": "null"}
    assert "second: LSA (dims=6 (auto))" in retriever_settings(fused, used={"retriever.components.second.dims": "6"})
    settings = page[0].split('id="settings"', 1)[1].split("</section>", 1)[0]
    assert "<th>ranks to</th>" in settings
    for system in study.finished:
        row = next(r for r in settings.split("<tr>") if f"<td>{system.name}</td>" in r)
        assert re.search(rf"<td[^>]*>{int(system.per_question['retrieved'].max())}</td>", row), row


def test_the_rank_table_and_the_diagnosis_agree_on_beyond_depth(helpdesk_collection):
    from retrievers import WeightedSum

    c = helpdesk_collection
    systems = [measured("BM25", 0, BM25().index(c).rank(c.query_ids, c.query_texts, 100), c, SHOW),
               measured("weighted", 1, WeightedSum([BM25(), LSA()], depth=10).index(c).rank(c.query_ids, c.query_texts,
                                                                                            100), c, SHOW)]
    summary = summarize(systems, "parent", SHOW, SHOW[3], resamples=200, permutations=200)
    html = report_html(summary, [], "t", DiagnosisSettings(), {})
    ranks = html.split('id="ranks"', 1)[1].split("</section>", 1)[0]
    row = next(r for r in ranks.split("<tr>") if r.startswith("<th>q10</th>"))
    assert re.findall(r"<td>(.*?)</td>", row) == ["--", "&gt;10"]
    diagnosis = html.split('id="diagnosis"', 1)[1]
    assert "<th>q10</th><td>I want my data from yesterday back</td><td>beyond depth 10</td>" in diagnosis
    assert "<th>q10</th><td>I want my data from yesterday back</td><td>not retrieved</td>" in diagnosis


def test_the_diagnosis_folds_and_shows_the_first_failing_questions_with_a_link_to_all(page, study):
    html = page[0]
    diagnosis = html.split('id="diagnosis"', 1)[1].split("</section>", 1)[0]
    assert diagnosis.count("<details>") == len(study.finished) and "<details open" not in diagnosis
    tables = diagnoses_of(study)[0]
    for system in study.finished:
        block = diagnosis.split(f"<summary>{system.name}: ", 1)[1].split("</details>", 1)[0]
        bad = failing(tables[system.name])
        assert block.startswith(f"{len(bad)} of 14 questions miss the top 3")
        assert block.count("<tr>") == 1 + min(len(bad), INLINE_FAILURES)
        assert f'<a href="diagnosis/job0{system.job}.csv">' in block


def test_the_page_needs_nothing_from_outside(page):
    parsed = page[1]
    assert "script" not in parsed.tags and "link" not in parsed.tags
    assert all(src.startswith("data:image/png;base64,") for src in parsed.images) and len(parsed.images) == 3
    assert all(link.startswith("#") or not re.match(r"[a-z]+:", link) for link in parsed.links)
