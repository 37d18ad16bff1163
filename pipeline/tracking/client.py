"""MLflow's client, imported once, after quieting what it would otherwise print (progress bars, URIs, migrations).

Every other module of this package imports MLflow's names from here; no module outside the package imports MLflow.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # its bars would flood non-TTY logs
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # it prints URIs with credentials
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # store creation and migrations are chatty at INFO

# How long a request to a tracking server that does not answer is tried. MLflow's own budget (7 retries backing off
# from 4 s to 120 s, a 120 s timeout each) kept a sweep silent for about 4 minutes a request; rankscope saves every
# result before logging it, so it gives up sooner and says so: 2 retries, 0 s then 2-3 s apart (urllib3's backoff,
# factor 1), each try at most 8 s without a byte. A refused connection fails in about 3 s, a server that hangs in
# under 30 s. A user's own settings of these variables win.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "8")

from mlflow import MlflowClient
from mlflow.artifacts import download_artifacts
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, Run, RunStatus, RunTag
from mlflow.exceptions import MlflowException, RestException
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.utils.mlflow_tags import (
    MLFLOW_LOGGED_ARTIFACTS,
    MLFLOW_PARENT_RUN_ID,
    MLFLOW_SOURCE_NAME,
    MLFLOW_SOURCE_TYPE,
)
from mlflow.utils.uri import add_databricks_profile_info_to_artifact_uri

__all__ = [
    "MLFLOW_LOGGED_ARTIFACTS", "MLFLOW_PARENT_RUN_ID", "MLFLOW_SOURCE_NAME", "MLFLOW_SOURCE_TYPE", "Dataset",
    "DatasetInput", "InputTag", "Metric", "MlflowClient", "MlflowException", "Param", "RestException", "Run",
    "RunStatus", "RunTag", "download_artifacts", "run_artifacts", "tracing_client",
]


def run_artifacts(artifact_uri: str, tracking_uri: str) -> Any:
    """The artifact repository of the run whose artifact root is ``artifact_uri``, as MLflow's client picks it."""
    return get_artifact_repository(add_databricks_profile_info_to_artifact_uri(artifact_uri, tracking_uri),
                                   tracking_uri=tracking_uri)


def tracing_client(uri: str) -> Any:
    """MLflow's tracing client bound to the store at ``uri``: what ``mlflow.log_expectation`` writes through, without
    setting the process's tracking URI (MlflowClient has no assessment methods)."""
    from mlflow.tracing.client import TracingClient

    return TracingClient(tracking_uri=uri)
