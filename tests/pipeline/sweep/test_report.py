"""The sweep's plots and report from a summary of child runs, whatever the sweep held: one system, systems on
different data, failed jobs, a run logged without a diagnosis."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.spec import parse_metrics
from pipeline.analysis.diagnosis import DiagnosisSettings
from pipeline.analysis.summary import SystemRun, summarize
from pipeline.common.names import DIAGNOSIS_DIR, PAIRS_FILE, REPORT_FILE, SUMMARY_LATEX, SUMMARY_MARKDOWN
from pipeline.config.build import metric_plan
from pipeline.reports import means_plot, paired_plot
from pipeline.sweep.drawing import FirstFigures
from pipeline.sweep.figures import interval_figure, long_means, sweep_figures, uncompared_figures
from pipeline.sweep.report import plots_and_report, report_html
from pipeline.tracking.runs import Tracker
from pipeline.tracking.store import Store

PLAN = metric_plan({"k": [5], "measures": ["hit_rate", "ndcg"], "show": ["hit_rate@5", "ndcg@5"],
                    "primary": "ndcg@5", "level": 1, "gain": "linear", "missing": "zero",
                    "bootstrap": {"resamples": 200, "seed": 0, "confidence": 0.9, "method": "percentile"}})
SHOW = parse_metrics("hit_rate@5,ndcg@5")
QUESTIONS = [f"q{i}" for i in range(1, 7)]
SETTINGS = DiagnosisSettings()


def child(name: str, job: int, ndcg: list[float], digest: str = "d1", status: str = "FINISHED",
          diagnosed: bool = True) -> SystemRun:
    ranks = [1.0 if v > 0.5 else (4.0 if v > 0 else np.nan) for v in ndcg]
    table = pd.DataFrame({"question": [f"text of {q}" for q in QUESTIONS], "hit_rate@5": [float(v > 0) for v in ndcg],
                          "ndcg@5": ndcg, "first_relevant_rank": ranks}, index=pd.Index(QUESTIONS, name="query_id"))
    if diagnosed:
        late = [r == 4.0 for r in ranks]
        table["missed"] = [r != 1.0 for r in ranks]
        table["failure_classes"] = ["late_rank" if x else ("vocabulary_gap" if m else "") for x, m in
                                    zip(late, table["missed"])]
        table["first_relevant"] = ["not retrieved" if r != r else str(int(r)) for r in ranks]
        for column in ("first_result", "first_result_shared", "shared_terms", "late_rank_kind", "duplicate_groups",
                       "evidence"):
            table[column] = ""
        table["diagnosis"] = [f"diagnosed by {name}" if m else "" for m in table["missed"]]
    metrics = {}
    for spec in SHOW:
        mean = float(table[spec.name].mean())
        metrics.update({spec.mlflow_key: mean, f"{spec.mlflow_key}_ci_lower": mean - 0.1,
                        f"{spec.mlflow_key}_ci_upper": min(1.0, mean + 0.1)})
    return SystemRun(f"run{job}", name, status, job, metrics, corpus_digest=digest,
                     per_question=table if status == "FINISHED" else None)


A = child("A", 0, [1.0, 0.3, 0.0, 1.0, 0.8, 1.0])
B = child("B", 1, [1.0, 0.9, 0.0, 1.0, 1.0, 0.7])
C = child("C", 2, [0.5, 0.2, 0.0, 0.2, 0.6, 0.4])


def summary_of(*systems: SystemRun):
    return summarize(list(systems), "parent", SHOW, SHOW[1], PLAN.confidence, PLAN.resamples, PLAN.seed)


def test_three_systems_get_means_heat_map_and_the_paired_bootstrap_of_the_two_best():
    figures = sweep_figures(summary_of(A, B, C), PLAN, SETTINGS)
    assert [f.stem for f in figures] == ["metric_means", "first_relevant_rank", "paired_bootstrap"]
    assert all(f.figure.startswith(b"\x89PNG") for f in (figures[0], figures[2]))  # drawn with PIL
    means, _, paired = uncompared_figures(summary_of(A, B, C), PLAN, SETTINGS, makers=True)
    texts = [text for text, _ in means_plot.means_bars(*means.figure.args).boxes]
    assert "Mean score per metric, 90% bootstrap intervals" in texts  # the configured confidence
    paired_canvas = paired_plot.paired_bootstrap(*paired.figure.args, **paired.figure.keywords)
    assert any("B − A" in text for text, _ in paired_canvas.boxes)  # the two best by mean nDCG@5, best first


def test_one_system_has_no_pair_and_different_data_no_per_question_plots():
    assert [f.stem for f in sweep_figures(summary_of(A), PLAN, SETTINGS)] == ["metric_means", "first_relevant_rank"]
    other = child("B", 1, [1.0] * 6, digest="d2")
    assert [f.stem for f in sweep_figures(summary_of(A, other), PLAN, SETTINGS)] == ["metric_means"]


def test_the_heat_map_has_a_row_per_question_up_to_fifty_then_a_row_per_rank_bucket():
    from matplotlib.figure import Figure

    from pipeline.reports.rank_buckets import HEATMAP_MAX_ROWS
    from pipeline.sweep.figures import rank_heatmap

    ranks = pd.DataFrame({"A": np.arange(HEATMAP_MAX_ROWS + 1) % 12, "B": 1})
    per_question = rank_heatmap(ranks.iloc[:HEATMAP_MAX_ROWS], 3, 10, None)
    assert isinstance(per_question, Figure) and per_question.axes[0].images[0].get_array().shape == (50, 2)
    buckets = rank_heatmap(ranks, 3, 10, None)
    assert isinstance(buckets, bytes) and buckets.startswith(b"\x89PNG")  # drawn with PIL, handed over as its PNG


def test_long_means_pairs_every_system_and_shown_metric_with_its_bounds():
    frame = long_means(summary_of(A, B))
    assert list(frame["system"]) == ["A", "A", "B", "B"] and list(frame["metric"]) == ["hit_rate@5", "ndcg@5"] * 2
    for row in frame.itertuples():
        key = parse_metrics(row.metric)[0].mlflow_key
        metrics = {"A": A, "B": B}[row.system].metrics
        assert (row.mean, row.ci_low, row.ci_high) == (metrics[key], metrics[f"{key}_ci_lower"],
                                                       metrics[f"{key}_ci_upper"])
    assert frame.loc[1, "mean"] == pytest.approx(A.per_question["ndcg@5"].mean())


def test_the_report_names_every_system_and_each_failed_job_with_its_reason():
    failed = child("D", 3, [0.0] * 6, status="FAILED")
    failed.error = "/nowhere: corpus folder does not exist"
    old = child("E", 4, [1.0] * 6, diagnosed=False)  # logged before diagnosis existed: in the tables only
    summary = summary_of(A, B, failed, old)
    html = report_html(summary, sweep_figures(summary, PLAN, SETTINGS), "Sweep t", SETTINGS, {"sweep folder": "x"})
    for system in ("A", "B", "E"):
        assert f"<th>{system}</th>" in html
    assert "<summary>A: " in html and "diagnosed by B" in html and "<summary>E: " not in html
    assert "failed job 3" in html and "D: /nowhere: corpus folder does not exist" in html


def test_the_report_header_lists_each_data_note_once():
    a, b = child("A", 0, [1.0] * 6), child("B", 1, [0.5] * 6)
    a.notes = b.notes = ["corpus: 2 judgment(s) name 1 documents missing from the corpus: ghost (dropped)"]
    summary = summary_of(a, b)
    html = report_html(summary, sweep_figures(summary, PLAN, SETTINGS), "Sweep t", SETTINGS, {"sweep folder": "x"})
    assert "Data validation notes" in html and html.count("ghost (dropped)") == 1


def test_plots_and_report_are_saved_and_logged_to_the_parent(tmp_path: Path, empty_store: Path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    (tmp_path / "mlflow.db").write_bytes(empty_store.read_bytes())
    client, experiment_id = Store.open(uri, "t").pair()
    parent = Tracker.start(client, experiment_id, "sweep", {})
    settings = {"cutoff": 3, "late_limit": 10, "duplicate_threshold": 0.6, "duplicate_top_k": 10, "shingle_size": 2}
    sweep = tmp_path / "sweep"
    files = plots_and_report(summary_of(A, B), PLAN, settings, "Sweep t", sweep, parent, {})
    assert files == [sweep / REPORT_FILE, sweep / SUMMARY_MARKDOWN, sweep / SUMMARY_LATEX, sweep / PAIRS_FILE]
    html = files[0].read_text()
    assert "<summary>B: " in html and 'href="summary.md"' in html and 'href="pairs.csv"' in html
    assert "### Systems and their means" in files[1].read_text() and "\\toprule" in files[2].read_text()
    assert len(pd.read_csv(files[3])) == 1 * len(SHOW)  # one pair, every shown metric
    client = MlflowClient(uri)
    logged = {a.path for a in client.list_artifacts(parent.run_id, "plots")}
    assert logged == {"plots/metric_means.png", "plots/first_relevant_rank.png", "plots/paired_bootstrap.png"}
    diagnosis = {a.path for a in client.list_artifacts(parent.run_id, DIAGNOSIS_DIR)}
    assert diagnosis == {"diagnosis/job00_A.csv", "diagnosis/job01_B.csv"}
    for path in diagnosis:
        assert f'href="{path}"' in html
        table = pd.read_csv(sweep / path, dtype={"query_id": str}).set_index("query_id")
        assert list(table.columns) == ["question", "rank", "first_result", "diagnosis", "evidence"]
        assert len(table) == int({"A": A, "B": B}[path[-5]].per_question["missed"].sum())
    # the figure of the primary metric's intervals is logged as an MLflow image (the saved view's chart), not a plot
    assert {p.name for p in (tmp_path / "sweep" / "plots").iterdir()} == {Path(p).name for p in logged} | {
        f"{PLAN.primary.mlflow_key}_intervals.png"}
    assert f"Report (open in a browser): {files[0]}" in capsys.readouterr().out
    parent.finish()


def test_a_broken_plot_is_reported_and_costs_nothing_else(tmp_path: Path, capsys):
    broken = {"cutoff": 0, "late_limit": 10, "duplicate_threshold": 0.6, "duplicate_top_k": 10, "shingle_size": 2}
    assert plots_and_report(summary_of(A, B), PLAN, broken, "t", tmp_path, None, {}) == []
    err = capsys.readouterr().err
    assert err.startswith("rankscope: the sweep's plots and report were not made: InputError") and "cutoff" in err


def test_the_first_figures_start_with_the_heat_map_and_come_back_in_the_reports_order(tmp_path: Path):
    """The drawing copy starts with the longest figure to draw (the end draws from the last one back); the report
    gets them in its own order, each with its own file's PNG."""
    settings = {"cutoff": 3, "late_limit": 10, "duplicate_threshold": 0.6, "duplicate_top_k": 10, "shingle_size": 2}
    first = FirstFigures(summary_of(A, B), PLAN, settings, tmp_path)
    try:
        assert next(iter(first.drawing.figures)).name == "first_relevant_rank.png"
        files, figures = first.drawn()
    finally:
        first.stop()
    assert [f.stem for f in figures] == ["metric_means", "first_relevant_rank", "paired_bootstrap"]
    assert [path.name for path in files] == [f"{f.stem}.png" for f in figures]
    assert all(f.figure == path.read_bytes() for f, path in zip(figures, files))


def test_the_interval_figure_for_mlflow_s_chart_view_is_drawn_for_one_corpus_only(tmp_path):
    """Two corpora never share an axis: a sweep over corpora gets no such figure."""
    one = [dataclasses.replace(s, tags={"rankscope.corpus": "scifact"}) for s in (A, B)]
    path = interval_figure(summary_of(*one), PLAN, tmp_path)
    assert path == tmp_path / "ndcg_at_5_intervals.png" and path.read_bytes().startswith(b"\x89PNG")
    two = [dataclasses.replace(A, tags={"rankscope.corpus": "scifact"}),
           dataclasses.replace(B, tags={"rankscope.corpus": "nfcorpus"})]
    assert interval_figure(summary_of(*two), PLAN, tmp_path / "two") is None
