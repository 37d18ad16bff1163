"""Slicing a traced application's questions by a tag of their traces (``metrics.slices=[app_version]``): the
application (tests.pipeline.traces.rag_app, real MLflow Tracing) answered every help-desk question as v1, then the
first six again as v2; each question's slice is the version of the trace its ranking came from, read again here
from the trace itself."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import PER_QUESTION_FILE, TAG_OUTPUT_DIR, TRACES_FILE
from tests.pipeline.helpers import log_run, run_pipeline
from tests.pipeline.traces.conftest import run_app


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, empty_store):
    """A store where rag-mix answered the 14 questions as v1, then the first 6 as v2 (no stemming)."""
    folder = tmp_path_factory.mktemp("mixed")
    shutil.copy(empty_store, folder / "mlflow.db")
    run_app(folder, "rag-mix:v1", "rag-mix:v2:nostem:first=6")
    return folder


@pytest.fixture
def folder(mixed, tmp_path):
    shutil.copy(mixed / "mlflow.db", tmp_path / "mlflow.db")
    return tmp_path


def test_each_question_is_in_the_slice_of_the_version_its_trace_was_answered_by(folder):
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    run = client.get_run(log_run(folder, "retriever=traces", "retriever.experiment=rag-mix",
                                 "metrics.slices=[app_version]"))
    out = run.data.tags[TAG_OUTPUT_DIR]
    table = pd.read_csv(f"{out}/{PER_QUESTION_FILE}", dtype={"query_id": str}).set_index("query_id")
    used = pd.read_csv(f"{out}/{TRACES_FILE}", dtype=str)
    used = used[used.status == "used"].set_index("query_id")
    expected = {q: client.get_trace(used.loc[q, "trace_id"]).info.tags["app_version"] for q in table.index}
    assert table["slice:app_version"].to_dict() == expected
    assert table["slice:app_version"].value_counts().to_dict() == {"v1": 8, "v2": 6}
    assert {k.split("/")[2] for k in run.data.metrics if k.startswith("slice/app_version/")} == {"v1", "v2"}


def test_a_tag_no_trace_carries_is_one_line_naming_the_tags_they_do(folder):
    done = run_pipeline(folder, "retriever=traces", "retriever.experiment=rag-mix", "metrics.slices=[version]",
                        f"hydra.run.dir={folder / 'out'}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "rankscope: error: metrics.slices: helpdesk has no question field 'version' (the questions have no field of "
        "their own; trace tags: app_version; built in: question_length)")


def test_systems_that_put_a_question_in_different_slices_follow_the_top_one_and_say_so(folder):
    done = run_pipeline(folder, "-m", "retriever=traces", "retriever.experiment=rag-mix",
                        "retriever.repeated=latest,first", "metrics.slices=[app_version]")
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout[done.stdout.index("By slice: ndcg@5"):]
    # the top system read each question's first trace, v1's: its slices are used, v2 is none of them
    assert "against traces experiment=rag-mix repeated=first (the top system)" in text
    assert next(line for line in text.splitlines() if line.startswith("app_version=v1")).split()[1] == "14"
    assert "app_version=v2" not in text
    note = next(line for line in text.splitlines() if line.startswith("note: slices by app_version"))
    assert "6 question(s) are in another slice in some system's table than in" in note
