"""A job sliced by ``metrics.slices``: its per_question.csv carries the slice each question is in (read again here
from the source files by another route), and every figure it gives by slice (slices.csv, the MLflow metrics
``slice/<field>/<slice>/ndcg_at_5``) is recomputed from that CSV alone. Bad input is one line."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.bootstrap import bootstrap_ci
from pipeline.common.names import PER_QUESTION_FILE, SLICES_FILE, TAG_OUTPUT_DIR
from tests.pipeline.helpers import REPO, log_run, run_pipeline

OWN = REPO / "tests" / "pipeline" / "data" / "own_files"
OWN_FILES = ("experiment=own_files", f"corpus.documents.path={OWN / 'chunks.parquet'}",
             f"corpus.questions.path={OWN / 'questions.csv'}", f"corpus.judgments.path={OWN / 'judgments.csv'}")


def finished(folder: Path, *overrides: str) -> tuple[object, Path, pd.DataFrame]:
    """One job in this process: its MLflow run, its folder, its per_question.csv as a reader would load it."""
    run_id = log_run(folder, *overrides)
    run = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").get_run(run_id)
    out = Path(run.data.tags[TAG_OUTPUT_DIR])
    table = pd.read_csv(out / PER_QUESTION_FILE, dtype={"query_id": str}, keep_default_na=False, na_values=[""])
    return run, out, table


def recomputed(table: pd.DataFrame, column: str, metric: str) -> dict[str, tuple[int, float, float, float]]:
    """Per slice of ``column``: questions, mean and 95% percentile bootstrap interval (5,000 resamples, seed 0: the
    job's settings) of ``metric``, from the CSV alone."""
    out = {}
    for label, part in table.groupby(column):
        [interval] = bootstrap_ci(part[metric].to_numpy(dtype=float), 5000, 0, 0.95)
        out[str(label)] = (len(part), float(part[metric].mean()), interval.low, interval.high)
    return out


def test_own_files_sliced_by_team_and_question_length_recompute_from_per_question_csv(launch_dir):
    run, out, table = finished(launch_dir, "experiment=own_files", "metrics.slices=[team,question_length]")
    questions = pd.read_csv(OWN / "questions.csv", dtype=str).set_index("qid")
    assert table["slice:team"].tolist() == questions.loc[table["query_id"], "team"].tolist()  # read again
    lengths = np.array([len(re.findall(r"\w+", q)) for q in table["question"]], dtype=float)
    bins = pd.qcut(lengths, 3, labels=False, duplicates="drop")
    for k in range(bins.max() + 1):  # each tercile's label spans its members' lengths
        members = lengths[bins == k]
        label = {str(x) for x in table.loc[bins == k, "slice:question_length"]}
        assert label == {f"{members.min():.0f}-{members.max():.0f}"}
    metrics = run.data.metrics
    figures = pd.read_csv(out / SLICES_FILE, keep_default_na=False)
    for field in ("team", "question_length"):
        for label, (n, mean, low, high) in recomputed(table, f"slice:{field}", "ndcg@5").items():
            key = f"slice/{field}/{label}/ndcg_at_5"
            assert metrics[key] == pytest.approx(mean, abs=1e-12)
            assert (metrics[key + "_ci_lower"], metrics[key + "_ci_upper"]) == pytest.approx((low, high), abs=1e-12)
            row = figures[(figures.slicing == field) & (figures.slice == label) & (figures.metric == "ndcg@5")]
            assert row[["questions", "mean", "ci_low", "ci_high"]].values.tolist()[0] == pytest.approx(
                [n, mean, low, high], abs=1e-12)
    assert set(figures.metric) == {c for c in table.columns if "@" in c or c == "mrr"}  # every metric, by slice
    assert metrics["system/notes_slices_binned"] == 1
    assert "question_length (" in run.data.tags["rankscope.notes"]


def test_questions_without_the_value_are_a_slice_of_their_own_and_a_lone_question_is_said(launch_dir, tmp_path):
    questions = pd.read_csv(OWN / "questions.csv", dtype=str)
    questions.loc[questions.qid.isin(["q01", "q05"]), "team"] = ""
    questions.loc[questions.qid == "q03", "team"] = "legal"
    questions.to_csv(tmp_path / "questions.csv", index=False)
    run, out, table = finished(launch_dir, "experiment=own_files", "metrics.slices=[team]",
                               f"corpus.questions.path={tmp_path / 'questions.csv'}")
    counts = table["slice:team"].value_counts().to_dict()
    assert counts["(missing)"] == 2 and counts["legal"] == 1
    assert run.data.metrics["system/notes_slices_missing_value"] == 2
    assert run.data.metrics["system/notes_slices_one_question"] == 1
    notes = (out / "notes.txt").read_text()
    assert "metrics.slices: 2 question(s) have no team: they form the slice team=(missing)" in notes
    assert "metrics.slices: team=legal holds one question (q03): its figures are shown, its differences never" in notes
    assert "slice/team/missing/ndcg_at_5" in run.data.metrics and "slice/team/legal/ndcg_at_5" in run.data.metrics


def test_a_field_the_questions_lack_is_one_line_naming_those_they_have(launch_dir):
    done = run_pipeline(launch_dir, *OWN_FILES, f"hydra.run.dir={launch_dir / 'out'}", "metrics.slices=[teem]")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == ("rankscope: error: metrics.slices: helpdesk_chunks has no question field 'teem' (question "
                         "fields: team; built in: question_length)")


def test_an_empty_or_repeated_name_is_refused_before_any_data_is_read(launch_dir):
    done = run_pipeline(launch_dir, "metrics.slices=[team,team]", f"hydra.run.dir={launch_dir / 'out'}")
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].endswith("metrics.slices: team named twice")


def seed_scidocs(home: Path, years: list[int]) -> None:
    """``beir/scidocs`` as ir_datasets downloads it (``beir/scidocs/source.zip``), made here: one document and one
    question per year, each question judging its document relevant (its text shares the document's words)."""
    archive = home / "beir" / "scidocs" / "source.zip"
    shutil.rmtree(home / "beir" / "scidocs", ignore_errors=True)
    archive.parent.mkdir(parents=True)
    meta = {"authors": ["a"], "cited_by": [], "references": []}
    docs = [{"_id": f"d{y}", "title": f"paper {y}", "text": f"results of the year {y} study number {y}",
             "metadata": {**meta, "year": y}} for y in years]
    queries = [{"_id": f"q{y}", "text": f"study {y}", "metadata": {**meta, "year": y}} for y in years]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{y}\td{y}\t1\n" for y in years)
    with zipfile.ZipFile(archive, "w") as packed:
        packed.writestr("scidocs/corpus.jsonl", "".join(json.dumps(d) + "\n" for d in docs))
        packed.writestr("scidocs/queries.jsonl", "".join(json.dumps(q) + "\n" for q in queries))
        packed.writestr("scidocs/qrels/test.tsv", qrels)


def test_an_ir_datasets_query_field_slices_and_a_number_of_many_values_is_binned_saying_how(launch_dir):
    pytest.importorskip("ir_datasets")
    from tests.conftest import TEST_IRDS_HOME

    years = list(range(1990, 2015))  # 25 distinct years: more than MAX_SLICES, so terciles
    seed_scidocs(TEST_IRDS_HOME, years)
    run, out, table = finished(launch_dir, "corpus=irds", "corpus.id=beir/scidocs", "metrics.slices=[year]")
    year = table["query_id"].str[1:].astype(float).to_numpy()  # q1990 asks about 1990
    bins = pd.qcut(year, 3, labels=False)
    assert [table["slice:year"][bins == k].unique().tolist() for k in range(3)] == [["1990-1998"], ["1999-2006"],
                                                                                     ["2007-2014"]]
    assert "year (25 distinct values) binned into 3 slices by value, at its terciles: 1990-1998, 1999-2006, " \
           "2007-2014" in (out / "notes.txt").read_text()
    assert {k for k in run.data.metrics if k.startswith("slice/")} == {
        f"slice/year/{label}/ndcg_at_5{end}" for label in ("1990-1998", "1999-2006", "2007-2014")
        for end in ("", "_ci_lower", "_ci_upper")}


def test_scifact_s_claims_by_question_length_are_its_terciles_and_recompute_from_per_question_csv(launch_dir,
                                                                                                   scifact_folder):
    run, _out, table = finished(launch_dir, "corpus=scifact", f"corpus.path={scifact_folder}", "metrics=beir",
                               "metrics.slices=[question_length]")
    lengths = np.array([len(re.findall(r"\w+", q)) for q in table["question"]], dtype=float)
    bins = pd.qcut(lengths, 3, labels=False, duplicates="drop")
    spans = [(lengths[bins == k].min(), lengths[bins == k].max()) for k in range(3)]
    labels = [f"{low:.0f}-{high:.0f}" for low, high in spans]
    assert table["slice:question_length"].tolist() == [labels[k] for k in bins]
    assert len(table) == 300 and all(80 <= (bins == k).sum() <= 120 for k in range(3))
    for label, (_n, mean, low, high) in recomputed(table, "slice:question_length", "ndcg@10").items():
        key = f"slice/question_length/{label}/ndcg_at_10"
        assert run.data.metrics[key] == pytest.approx(mean, abs=1e-12)
        assert (run.data.metrics[key + "_ci_lower"], run.data.metrics[key + "_ci_upper"]) == pytest.approx(
            (low, high), abs=1e-12)
