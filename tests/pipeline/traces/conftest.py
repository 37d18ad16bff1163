"""A traced RAG application's store, made once per session by running the application for real
(:mod:`tests.pipeline.traces.rag_app`): tantivy over the help-desk corpus, every question answered."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.helpers import cli_env

pytest.importorskip("tantivy")

APP = "tests.pipeline.traces.rag_app"


def run_app(folder: Path, *args: str, timeout: float = 600) -> None:
    """``python -m tests.pipeline.traces.rag_app sqlite:///FOLDER/mlflow.db ARGS``: the application in its own
    process, as it runs in production."""
    done = subprocess.run([sys.executable, "-m", APP, f"sqlite:///{folder / 'mlflow.db'}", *args],
                          cwd=folder, env=cli_env(folder), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="session")
def traced_store(tmp_path_factory, empty_store) -> Path:
    """A store where the application answered the 14 help-desk questions: in ``rag-app`` as v1 (stemmed index) and
    as v2 (no stemming); in ``rag-outside`` the first 10 and one question the corpus does not hold; and in one
    experiment per other shape (:mod:`tests.pipeline.traces.rag_app`)."""
    folder = tmp_path_factory.mktemp("traced")
    shutil.copy(empty_store, folder / "mlflow.db")
    run_app(folder, "rag-app:v1", "rag-app:v2:nostem", "rag-outside:v1:first=10:outside",
            "rag-bad-no-span:v1:no_span", "rag-bad-not-documents:v1:not_documents",
            "rag-bad-unknown-ids:v1:unknown_ids", "rag-bad-failing:v1:failing", "rag-bad-raising:v1:raising",
            "rag-bad-empty:v1:empty", "rag-chunk-ids:v1:chunk_ids", "rag-uris:v1:uris")
    return folder


@pytest.fixture
def folder(traced_store: Path, tmp_path: Path) -> Path:
    """A copy of the traced store for one test (its runs do not meet another test's)."""
    shutil.copy(traced_store / "mlflow.db", tmp_path / "mlflow.db")
    return tmp_path
