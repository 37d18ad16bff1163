"""Fixtures of the pipeline tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.pipeline.helpers import frozen_code, run_pipeline


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory) -> Path:
    """A freshly migrated, empty MLflow SQLite database, made once per session (migrations take seconds)."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("store-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def launch_dir(tmp_path: Path, empty_store: Path) -> Path:
    """A launch folder whose default store ``mlflow.db`` already exists (a copy of the empty template)."""
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    return tmp_path


@pytest.fixture(scope="session")
def frozen_checkout(tmp_path_factory) -> Path:
    """The code as it was when the session started (:func:`tests.pipeline.helpers.frozen_code`), for tests whose
    commands must agree on the code version (a resume, a sync)."""
    return frozen_code(tmp_path_factory.mktemp("code"))


@pytest.fixture(scope="session")
def four_systems(tmp_path_factory):
    """``python -m pipeline -m retriever=bm25,lsa,weighted,rrf`` once per session: (launch folder, result)."""
    tmp = tmp_path_factory.mktemp("sweep")
    done = run_pipeline(tmp, "-m", "retriever=bm25,lsa,weighted,rrf")
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, done


SLICES_EXAMPLE = Path(__file__).resolve().parent / "data" / "slices_example"


@pytest.fixture(scope="session")
def slices_example(tmp_path_factory, empty_store):
    """``python -m pipeline -m experiment=slices_example`` once per session, in a folder holding a copy of the
    example's files where the experiment names them: two systems' rankings of 72 constructed questions, the
    candidate better overall and worse on every billing question. Returns (launch folder, result)."""
    tmp = tmp_path_factory.mktemp("slices")
    shutil.copy(empty_store, tmp / "mlflow.db")
    shutil.copytree(SLICES_EXAMPLE, tmp / SLICES_EXAMPLE.relative_to(SLICES_EXAMPLE.parents[3]))
    done = run_pipeline(tmp, "-m", "experiment=slices_example", "hydra.sweep.dir=multirun/example")
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, done
