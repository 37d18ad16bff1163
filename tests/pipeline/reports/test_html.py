"""The sweep report: one self-contained, escaped HTML file with every system, its tables and its plots."""

from __future__ import annotations

import base64
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from metrics.bootstrap import bootstrap_ci
from metrics.evaluate import evaluate
from pipeline.analysis.diagnosis import diagnose, failure_counts
from pipeline.reports import plots
from pipeline.reports.html import (
    Section,
    figure_filename,
    means_table,
    render_html,
    save_figures,
    sweep_html,
    write_report,
)

METRICS = ["hit_rate@3", "recall@5", "mrr", "ndcg@5"]
SYSTEMS = ["BM25", "LSA", "weighted", "RRF"]


class Page(HTMLParser):
    """Collects the text, the tags and the image sources of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        for key in ("href", "src"):
            if key in attrs:
                self.links.append(attrs[key])

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


@pytest.fixture(scope="module")
def sweep(helpdesk_collection, helpdesk_runs):
    """The help-desk study as a sweep would hand it over: summary, ranks, diagnoses and figures."""
    c = helpdesk_collection
    rows, ranks, ndcg, diagnoses = [], {}, {}, {}
    for name, run in helpdesk_runs.items():
        evaluation = evaluate(run, c.qrels, METRICS)
        for metric, interval in zip(METRICS, bootstrap_ci(evaluation.per_question[METRICS].to_numpy())):
            rows.append({"system": name, "metric": metric, "mean": interval.mean, "ci_low": interval.low,
                         "ci_high": interval.high})
        ranks[name] = evaluation.first_relevant_rank
        ndcg[name] = evaluation.per_question["ndcg@5"]
        diagnoses[name] = diagnose(c, run, evaluation)
    summary, ranks, ndcg = pd.DataFrame(rows), pd.DataFrame(ranks), pd.DataFrame(ndcg)
    figures = {
        "Metric means": plots.means_bars(summary),
        "First relevant rank": plots.first_relevant_heatmap(ranks),
        "Paired bootstrap": plots.paired_bootstrap(ndcg, "ndcg@5"),
        "BM25 failures": plots.failure_bars(failure_counts(diagnoses["BM25"]), "BM25", 14),
    }
    return summary, ranks, diagnoses, figures


def test_the_report_parses_and_holds_every_system_table_and_plot(sweep):
    summary, ranks, diagnoses, figures = sweep
    html = sweep_html("help-desk study", summary, ranks, diagnoses, figures, meta={"collection": "helpdesk"})
    page = parse(html)
    text = " ".join(page.text)
    for system in SYSTEMS:
        assert system in text
        assert f"Diagnosis: {system}" in text
    assert "0.691 [" in text and "0.737 [" in text  # SPEC's nDCG@5 of BM25 and RRF, with their intervals
    assert "export1" in text and "vocabulary gap (no candidate at all)" in text
    assert len(page.images) == len(figures)
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG")
    assert all(link.startswith("data:") for link in page.links)  # nothing to fetch: readable offline
    assert page.tags.count("table") >= 4 and "script" not in page.tags


def test_every_text_is_escaped():
    summary = pd.DataFrame([{"system": "<script>alert(1)</script>", "metric": "mrr", "mean": 0.5, "ci_low": 0.4,
                             "ci_high": 0.6}])
    html = render_html("a & b <i>", [Section("x < y", "one\n\ntwo <b>", means_table(summary), preformatted="<pre>")],
                       meta={"data": "<digest>"})
    page = parse(html)
    assert "script" not in page.tags and "i" not in page.tags and "b" not in page.tags
    text = "".join(page.text)
    assert "<script>alert(1)</script>" in text and "a & b <i>" in text and "<digest>" in text
    assert page.tags.count("p") == 2


def test_a_large_sweep_reports_rank_buckets_instead_of_one_row_per_question():
    rng = np.random.default_rng(3)
    ranks = pd.DataFrame({"a": rng.integers(0, 20, 1000), "b": rng.integers(0, 20, 1000)},
                         index=[f"q{i:04d}" for i in range(1000)])
    summary = pd.DataFrame([{"system": s, "metric": "mrr", "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
                            for s in ("a", "b")])
    page = parse(sweep_html("big", summary, ranks))
    text = " ".join(page.text)
    assert "not retrieved" in text and "q0999" not in text
    assert page.tags.count("tr") < 40


def test_means_table_pairs_each_mean_with_its_interval():
    summary = pd.DataFrame([
        {"system": "s1", "metric": "mrr", "mean": 0.8214, "ci_low": 0.6071, "ci_high": 1.0},
        {"system": "s1", "metric": "ndcg@5", "mean": 0.69, "ci_low": 0.5, "ci_high": 0.85},
        {"system": "s0", "metric": "mrr", "mean": 0.1, "ci_low": 0.0, "ci_high": 0.2},
    ])
    table = means_table(summary)
    assert table.index.tolist() == ["s1", "s0"] and table.columns.tolist() == ["mrr", "ndcg@5"]
    assert table.loc["s1", "mrr"] == "0.821 [0.607, 1.000]"
    assert table.loc["s0", "ndcg@5"] == ""


def test_save_figures_writes_non_empty_pngs_with_safe_names(tmp_path, sweep):
    figures = sweep[3]
    paths = save_figures(figures, tmp_path / "plots")
    assert [p.name for p in paths] == ["Metric_means.png", "First_relevant_rank.png", "Paired_bootstrap.png",
                                       "BM25_failures.png"]
    for path in paths:
        assert path.stat().st_size > 1000 and path.read_bytes().startswith(b"\x89PNG")
    assert figure_filename("../../etc/ndcg@5 vs rrf") == "etc_ndcg_5_vs_rrf.png"
    report = write_report("<html></html>", tmp_path / "sweep" / "report.html")
    assert report.read_text(encoding="utf-8") == "<html></html>"
