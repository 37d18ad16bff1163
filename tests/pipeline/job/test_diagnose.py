"""Diagnosis in the pipeline: each job's counts, table columns, terminal section and plots; the sweep's report.

The end-to-end tests read the help-desk sweep (``four_systems``, run once per session) back from its SQLite
store, as a user would; the others check the config knobs and the table format without a process.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from hydra.errors import ConfigCompositionException
from mlflow import MlflowClient

from metrics.errors import InputError
from metrics.evaluation import evaluate
from pipeline.analysis.diagnosis import (
    CLASSES,
    COLUMNS,
    DiagnosisSettings,
    add_columns,
    diagnose,
    diagnosis_from_table,
)
from pipeline.common.names import FAILURES_PREFIX as FAILURES
from pipeline.config.build import metric_plan
from pipeline.config.plan import diagnosis_settings, histogram_metric
from pipeline.job.diagnose import JobDiagnosis
from pipeline.job.table import per_question_table
from tests.pipeline.config.test_config import composed

SYSTEMS = ["BM25", "LSA", "weighted", "RRF"]
DEFAULTS = {"cutoff": 3, "late_limit": 10, "duplicate_threshold": 0.6, "duplicate_top_k": 10, "shingle_size": 2,
            "rare_share": 0.05, "topic_share": 0.5, "context_share": 0.02, "histogram_metric": None}
METRICS = {"k": [3, 5, 10], "measures": ["hit_rate", "recall", "mrr", "ndcg"], "show": ["hit_rate@3", "ndcg@5"],
           "primary": "ndcg@5", "level": 1, "gain": "linear", "missing": "zero",
           "bootstrap": {"resamples": 100, "seed": 0, "confidence": 0.95, "method": "percentile"}}


def runs(folder: Path):
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    found = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    children = {r.data.tags["rankscope.system"]: r for r in found if r is not parent}
    return client, parent, children


def artifact_text(client: MlflowClient, run_id: str, path: str, folder: Path) -> str:
    """An artifact's text, downloaded through the client (never ``load_table``: it reads the process-wide URI)."""
    return Path(client.download_artifacts(run_id, path, str(folder))).read_text(encoding="utf-8")


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))

    def handle_data(self, data):
        self.text.append(data)


# --- one job: metrics, table, terminal, plots ------------------------------------------------------------


def test_the_bm25_run_counts_one_vocabulary_gap_and_one_homonymy(four_systems):
    _, _, children = runs(four_systems[0])
    m = children["BM25"].data.metrics
    assert {k: m[k] for k in m if k.startswith(FAILURES)} == {
        FAILURES + "no_results": 0, FAILURES + "vocabulary_gap": 1, FAILURES + "partial_gap": 0,
        FAILURES + "homonymy": 1, FAILURES + "common_terms": 0, FAILURES + "term_weighting": 0,
        FAILURES + "late_rank": 0, FAILURES + "duplicates": 0}
    assert children["LSA"].data.metrics[FAILURES + "late_rank"] == 1  # LSA finds q10's backup2 at rank 13


def test_the_logged_table_marks_q02_and_q10_with_their_evidence(four_systems, tmp_path):
    client, _, children = runs(four_systems[0])
    table = json.loads(artifact_text(client, children["BM25"].info.run_id, "per_question.json", tmp_path))
    rows = {row["query_id"]: row for row in (dict(zip(table["columns"], r)) for r in table["data"])}
    assert set(COLUMNS) <= set(table["columns"])
    assert {q: r["failure_classes"] for q, r in rows.items() if r["failure_classes"]} == {
        "q02": "vocabulary_gap", "q10": "homonymy"}
    assert rows["q02"]["first_relevant"] == "not retrieved" and rows["q02"]["first_result"] == ""
    assert json.loads(rows["q02"]["shared_terms"]) == {"refund1": [], "refund2": [], "refund3": []}
    assert rows["q10"]["first_result"] == "export1" and json.loads(rows["q10"]["first_result_shared"]) == ["data"]
    assert json.loads(rows["q10"]["shared_terms"]) == {"backup3": [], "backup2": []}
    assert json.loads(rows["q10"]["distinguishing_terms"]) == ["data"] and rows["q10"]["closer_share"] == "1.0000"
    assert 0 < float(rows["q10"]["first_result_match"]) < 0.5 and float(rows["q10"]["relevant_match"]) == 0
    assert rows["q01"]["first_result_match"] == "" and rows["q01"]["closer_share"] == ""  # q01 is not missed
    assert rows["q10"]["missed"] is True and rows["q12"]["missed"] is False  # q12: rank 2, within the top 3
    assert json.loads(rows["q01"]["shared_terms"]) == {"pricing1": ["pro", "plan"], "pricing2": ["plan"]}
    csv = pd.read_csv(client.download_artifacts(children["BM25"].info.run_id, "per_question.csv", str(tmp_path)),
                      dtype={"query_id": str}, keep_default_na=False).set_index("query_id")
    assert csv.loc["q10", "failure_classes"] == "homonymy" and csv.loc["q10", "evidence"] == rows["q10"]["evidence"]


def test_the_terminal_has_a_diagnosis_section_naming_q02_and_q10_with_their_evidence(four_systems):
    out = four_systems[1].stdout
    section = out[out.index("Diagnosis of BM25"):out.index("Diagnosis of LSA")]
    assert section.startswith("Diagnosis of BM25: 2 of 14 questions fail at top 3")
    lines = section.splitlines()
    q02 = next(i for i, line in enumerate(lines) if line.strip().startswith("q02"))
    assert "vocabulary gap (no candidate at all)" in lines[q02]
    assert "refund1 (not retrieved) shares no term" in lines[q02 + 1]
    q10 = next(i for i, line in enumerate(lines) if line.strip().startswith("q10"))
    assert "surface homonymy (export1 wins on the rare 'data'" in lines[q10]
    assert "export1 shares 'data'" in lines[q10 + 1]
    assert not any(line.strip().startswith(("q01", "q12")) for line in lines)


def test_each_run_saves_and_logs_its_histogram_and_failure_counts(four_systems):
    client, _, children = runs(four_systems[0])
    for system in SYSTEMS:
        run = children[system]
        logged = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
        assert logged == {"plots/ndcg_at_10_histogram.png", "plots/failure_classes.png"}, system
        folder = Path(run.data.tags["rankscope.output_dir"])
        for name in ("ndcg_at_10_histogram.png", "failure_classes.png"):
            assert (folder / "plots" / name).read_bytes().startswith(b"\x89PNG")
        assert (folder / "diagnosis.txt").read_text().startswith(f"Diagnosis of {system}: 2 of 14")


# --- the sweep: plots and the HTML report on the parent --------------------------------------------------


def test_the_parent_holds_the_html_report_with_every_system_and_the_plots(four_systems, tmp_path):
    folder, done = four_systems
    client, parent, _ = runs(folder)
    plots = {"plots/metric_means.png", "plots/first_relevant_rank.png", "plots/paired_bootstrap.png"}
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "plots")} == plots
    html = artifact_text(client, parent.info.run_id, "report.html", tmp_path)
    page = Page()
    page.feed(html)
    text = " ".join(page.text)
    for system in SYSTEMS:  # each system's diagnosis, folded under a line that names it
        assert f"<summary>{system}: " in html and f"{system}: 2 of 14 questions miss the top 3" in text
    # the help-desk reference's nDCG@5 of BM25 and RRF, each with its interval
    assert re.search(r"0\.691\s+\[0\.\d{3}, 0\.\d{3}\]", text) and re.search(r"0\.737\s+\[0\.\d{3}, 0\.\d{3}\]", text)
    assert "vocabulary gap (no candidate at all)" in text and "export1" in text
    assert len(page.images) == 3 and all(src.startswith("data:image/png;base64,") for src in page.images)
    sweep_dir = Path(parent.data.tags["rankscope.sweep_dir"])
    assert (sweep_dir / "report.html").read_text(encoding="utf-8") == html
    assert all((sweep_dir / p).read_bytes().startswith(b"\x89PNG") for p in plots)
    assert f"Report (open in a browser): {sweep_dir / 'report.html'}" in done.stdout


# --- configuration and table format ---------------------------------------------------------------------


def test_the_diagnosis_group_composes_to_the_documented_defaults_and_is_typed():
    assert dict(composed().diagnosis) == DEFAULTS
    assert diagnosis_settings(composed().diagnosis) == DiagnosisSettings()  # conf file = the rules' defaults
    # a sweep saved before a setting existed (read back by sync) gets that setting's default
    assert diagnosis_settings({"cutoff": 2, "late_limit": 10}) == DiagnosisSettings(cutoff=2)
    assert composed("diagnosis.late_limit=20").diagnosis.late_limit == 20
    with pytest.raises(ConfigCompositionException):
        composed("diagnosis.cutoff=three")
    with pytest.raises(ConfigCompositionException):
        composed("diagnosis.cutof=1")


@pytest.mark.parametrize("key, value", [("cutoff", 0), ("late_limit", 2), ("duplicate_threshold", 1.5),
                                        ("duplicate_top_k", 1), ("shingle_size", 0), ("rare_share", 0),
                                        ("topic_share", 2), ("context_share", -0.1)])
def test_an_out_of_range_setting_is_a_one_line_input_error(key, value):
    with pytest.raises(InputError, match=f"^diagnosis: .*{key}"):
        diagnosis_settings({**DEFAULTS, key: value})


def test_the_histogram_shows_ndcg_at_the_largest_cutoff_unless_configured():
    plan = metric_plan(METRICS)
    assert histogram_metric(DEFAULTS, plan) == "ndcg@10"
    assert histogram_metric({**DEFAULTS, "histogram_metric": "MRR"}, plan) == "mrr"
    assert histogram_metric(DEFAULTS, metric_plan({**METRICS, "measures": ["mrr"], "show": ["mrr"],
                                                   "primary": "mrr"})) == "mrr"
    with pytest.raises(InputError, match="histogram_metric 'map' is not computed"):
        histogram_metric({**DEFAULTS, "histogram_metric": "map"}, plan)


def test_the_table_columns_survive_a_csv_round_trip(helpdesk_collection, helpdesk_runs, tmp_path):
    c, run = helpdesk_collection, helpdesk_runs["LSA"]
    evaluation = evaluate(run, c.qrels, ["ndcg@5"])
    diagnosis = diagnose(c, run, evaluation, settings=DiagnosisSettings(depth=100))
    table = per_question_table(c, run, evaluation)
    add_columns(table, diagnosis)
    table.to_csv(tmp_path / "t.csv", index=False)
    back = pd.read_csv(tmp_path / "t.csv", dtype={"query_id": str}, keep_default_na=False, na_values=[""])
    read = diagnosis_from_table(back.set_index("query_id"))
    for column in ("question", "rank", "first_result", "diagnosis", "evidence", "missed", *CLASSES):
        assert read[column].tolist() == diagnosis[column].tolist(), column
    assert diagnosis_from_table(back.drop(columns="evidence").set_index("query_id")) is None  # no diagnosis
    # a run logged before the match columns existed still shows its diagnosis
    older = diagnosis_from_table(back.drop(columns=["distinguishing_terms", "first_result_match", "relevant_match",
                                                    "closer_share"]).set_index("query_id"))
    assert older is not None and older["late_rank"].tolist() == diagnosis["late_rank"].tolist()
    assert (older["distinguishing_terms"] == "").all()  # a column the run lacks reads as empty text


def test_a_table_read_back_gives_text_cells_as_objects_and_the_flags_as_booleans():
    table = pd.DataFrame({"query_id": ["q1", "q2"], "question": ["a", None], "missed": ["True", "false"],
                          "failure_classes": ["late_rank, duplicates", None], "first_relevant": [3, None],
                          "first_result": ["d1", ""], "diagnosis": ["late", None], "evidence": ["e", float("nan")],
                          "closer_share": [0.25, float("nan")]}).set_index("query_id")
    read = diagnosis_from_table(table)
    assert read["missed"].dtype == bool and read["missed"].tolist() == [True, False]
    assert read["late_rank"].tolist() == [True, False] and read["duplicates"].tolist() == [True, False]
    assert all(read[c].dtype == object for c in ("question", "rank", "evidence", "closer_share", "classes"))
    assert read.loc["q2", "question"] == "" and read.loc["q2", "evidence"] == "" and read.loc["q2", "rank"] == ""
    assert read.loc["q1", "closer_share"] == 0.25 and read.loc["q1", "rank"] == 3.0


def test_the_terminal_section_is_cut_after_a_few_questions_and_says_where_the_rest_is(tmp_path):
    rows = [{"query_id": f"q{i}", "question": f"question {i}", "missed": True, "diagnosis": "late rank",
             "evidence": f"evidence {i}", **{c: c == "late_rank" for c in CLASSES}} for i in range(20)]
    diagnosis = JobDiagnosis("BM25", pd.DataFrame(rows).set_index("query_id"), DiagnosisSettings(), {})
    diagnosis.write(tmp_path)
    lines = diagnosis.terminal_text(limit=5).splitlines()
    assert len(lines) == 1 + 2 * 5 + 1 and "20 of 20 questions" in lines[0]
    assert lines[-1] == f"  ... and 15 more failing question(s): see {tmp_path / 'diagnosis.txt'}"
    assert (tmp_path / "diagnosis.txt").read_text().count("evidence ") == 20
