"""MLflow's client, imported once, after quieting what it would otherwise print (progress bars, URIs, migrations).

Every other module of this package imports MLflow's names from here; no module outside the package imports MLflow.
"""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # its bars would flood non-TTY logs
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # it prints URIs with credentials
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # store creation and migrations are chatty at INFO

from mlflow import MlflowClient
from mlflow.artifacts import download_artifacts
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, Run, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.utils.mlflow_tags import (
    MLFLOW_LOGGED_ARTIFACTS,
    MLFLOW_PARENT_RUN_ID,
    MLFLOW_SOURCE_NAME,
    MLFLOW_SOURCE_TYPE,
)

__all__ = [
    "MLFLOW_LOGGED_ARTIFACTS", "MLFLOW_PARENT_RUN_ID", "MLFLOW_SOURCE_NAME", "MLFLOW_SOURCE_TYPE", "Dataset",
    "DatasetInput", "InputTag", "Metric", "MlflowClient", "MlflowException", "Param", "Run", "RunStatus", "RunTag",
    "download_artifacts",
]
