"""The MLflow UI on a store, served by one process: what ``mlflow ui`` serves, without its start-up cost.

``mlflow ui`` imports MLflow and opens the store in its own process, then starts uvicorn in a second process that
imports MLflow's whole web app again, and a job runner with its task consumers beside it (for GenAI jobs a
retrieval study never runs): 13.4 s before the page answers on the idle 2-core machine, against 5.9 s here. Here
one process sets what ``mlflow server`` passes its workers (the store, where artifacts go), imports the app once and
serves it with uvicorn. While it serves, the store's links printed by any command use its address
(:func:`pipeline.tracking.links.announced`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.request
import warnings
import webbrowser
from pathlib import Path

from metrics.errors import InputError
from pipeline.common.names import ARTIFACT_DIR, DB_NAME, LOOPBACK, SERVED_ARTIFACT_ROOT
from pipeline.tracking.links import announced, experiment_url
from pipeline.tracking.store import artifact_location, create_database_schema, sqlite_path
from pipeline.tracking.views import newest_view

OPEN_WAIT_S = 120.0  # how long the browser waits for the UI to answer before it is opened anyway


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


def check_exists(store_uri: str) -> None:
    """A SQLite store must exist: the UI of a path typed wrong (a comma copied with it) would be an empty new store."""
    db = sqlite_path(store_uri)
    if db is not None and not db.is_file():
        raise InputError(f"no MLflow store at {db}: nothing there to show (`python -m pipeline` makes "
                         f"{DB_NAME} where it runs; check the path for a character copied with it)")


def first_page(store_uri: str, base: str, experiment: str) -> str:
    """The page to open at ``base``: the experiment's runs in runs mode, on its newest rankscope view; the home
    page when the store has no such experiment yet."""
    from pipeline.tracking.client import MlflowClient

    try:
        found = MlflowClient(tracking_uri=store_uri).get_experiment_by_name(experiment)
    except Exception:  # an unreadable store: the server says why when it starts
        found = None
    if found is None:
        return base + "/"
    return experiment_url(store_uri, found.experiment_id, newest_view(found.tags), base=base)


def desktop() -> bool:
    """Whether a browser can open here without taking over the terminal (a console browser would)."""
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_when_served(base: str, page: str) -> None:
    """Open ``page`` in the desktop's browser once the UI at ``base`` answers (from a thread beside the server)."""
    deadline = time.monotonic() + OPEN_WAIT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/health", timeout=2):
                break
        except OSError:
            time.sleep(0.3)
    webbrowser.open(page)


def serve_ui(store_uri: str, port: int, host: str = LOOPBACK, open_page: str | None = None) -> None:
    """Serve the UI of an existing store on ``host:port`` until stopped (its tables are created if it has none, as
    ``mlflow server`` does); ``open_page``: opened in the desktop's browser once the UI answers.

    uvicorn handles Ctrl-C and SIGTERM itself (it finishes open requests), then raises the signal again."""
    create_database_schema(store_uri, artifact_location(store_uri) or SERVED_ARTIFACT_ROOT)
    os.environ.update(ui_environment(store_uri))
    import uvicorn

    with warnings.catch_warnings():  # MLflow's own import of a deprecated Starlette module: not the user's concern
        warnings.simplefilter("ignore")
        from mlflow.server.fastapi_app import app  # reads the variables above

    base = f"http://{host}:{port}"
    if open_page and desktop():
        threading.Thread(target=open_when_served, args=(base, open_page), daemon=True).start()
    with announced(store_uri, base):
        uvicorn.run(app, host=host, port=port, workers=1, log_level="warning")
