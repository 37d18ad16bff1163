"""The MLflow UI on a store, served by one process: what ``mlflow ui`` serves, without its start-up cost.

``mlflow ui`` imports MLflow and opens the store in its own process, then starts uvicorn in a second process that
imports MLflow's whole web app again, and a job runner with its task consumers beside it (for GenAI jobs a
retrieval study never runs): 13.4 s before the page answers on the idle 2-core machine, against 5.9 s here. Here
one process sets what ``mlflow server`` passes its workers (the store, where artifacts go), imports the app once and
serves it with uvicorn.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from pipeline.common.names import ARTIFACT_DIR, LOOPBACK, SERVED_ARTIFACT_ROOT
from pipeline.tracking.store import artifact_location, create_database_schema, sqlite_path


def ui_environment(store_uri: str) -> dict[str, str]:
    """The variables ``mlflow server`` sets for its workers, for ``store_uri`` with artifacts served from beside a
    SQLite file (``./mlartifacts`` otherwise), and no job runner."""
    from mlflow.server.constants import (
        ARTIFACT_ROOT_ENV_VAR,
        ARTIFACTS_DESTINATION_ENV_VAR,
        BACKEND_STORE_URI_ENV_VAR,
        REGISTRY_STORE_URI_ENV_VAR,
        SERVE_ARTIFACTS_ENV_VAR,
    )

    db = sqlite_path(store_uri)
    destination = db.parent / ARTIFACT_DIR if db is not None else Path.cwd() / ARTIFACT_DIR
    return {
        BACKEND_STORE_URI_ENV_VAR: store_uri,
        REGISTRY_STORE_URI_ENV_VAR: store_uri,
        ARTIFACT_ROOT_ENV_VAR: SERVED_ARTIFACT_ROOT,
        SERVE_ARTIFACTS_ENV_VAR: "true",
        ARTIFACTS_DESTINATION_ENV_VAR: str(destination),
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "_MLFLOW_SGI_NAME": "uvicorn",
    }


def serve_ui(store_uri: str, port: int, host: str = LOOPBACK) -> None:
    """Create the store if new (as every command does), then serve the UI on ``host:port`` until stopped.

    uvicorn handles Ctrl-C and SIGTERM itself (it finishes open requests), then raises the signal again."""
    create_database_schema(store_uri, artifact_location(store_uri) or SERVED_ARTIFACT_ROOT)
    os.environ.update(ui_environment(store_uri))
    import uvicorn

    with warnings.catch_warnings():  # MLflow's own import of a deprecated Starlette module: not the user's concern
        warnings.simplefilter("ignore", DeprecationWarning)
        from mlflow.server.fastapi_app import app  # reads the variables above

    uvicorn.run(app, host=host, port=port, workers=1, log_level="warning")
