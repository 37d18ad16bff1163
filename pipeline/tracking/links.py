"""Where a user opens what rankscope logged: the MLflow UI's address for a store, and links into it.

Every link opens the UI in its runs mode ("Model training", ``workflowType=machine_learning``). MLflow 3.17 shows an
experiment in the mode the browser last chose (local storage ``mlflow.workflowType``, GenAI for a browser that never
chose) and ignores the experiment's ``mlflow.experimentKind`` tag: its experiment-kind lookup is switched to follow
that mode (read in MLflow 3.17.2's JS, ``useExperimentKind``), and no server setting changes it. GenAI mode opens an
experiment on its traces overview, where no run is in sight, so only the link can ask for the runs.

The address is the one that really serves the store: a tracking server's own URI; for a local store, the address
``python -m pipeline.ui`` serves it on, which that command writes beside the database (``mlflow.db.ui``) while it
runs; else the address it serves on by default (port ``$RANKSCOPE_UI_PORT``, which ``make ui UI_PORT=N`` sets, else
5000: :func:`ui_port`), printed with the command that starts it there.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from metrics.errors import InputError
from pipeline.common import commands
from pipeline.common.names import LOOPBACK, UI_ADDRESS_SUFFIX, UI_PORT_ENV
from pipeline.common.redact import redact_text

UI_PORT = 5000  # python -m pipeline.ui's default port (and make ui's) when $RANKSCOPE_UI_PORT is not set
RUNS_MODE = {"workflowType": "machine_learning"}  # the UI's "Model training" mode: runs, not traces
SQLITE = "sqlite:///"


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def database(uri: str) -> Path | None:
    """The SQLite file of a ``sqlite:///`` store, else None."""
    return Path(uri[len(SQLITE):]) if uri.startswith(SQLITE) else None


def address_file(db: Path) -> Path:
    """Where ``python -m pipeline.ui`` says which address serves the store ``db`` while it runs."""
    return db.with_name(db.name + UI_ADDRESS_SUFFIX)


@contextmanager
def announced(uri: str, url: str) -> Iterator[None]:
    """While the UI at ``url`` serves the local store ``uri``: links printed meanwhile, by any command, use ``url``.
    The file goes when the UI stops (unless another UI has announced itself since)."""
    db = database(uri)
    if db is None:
        yield
        return
    path = address_file(db)
    mine = {"url": url, "pid": os.getpid()}
    with suppress(OSError):  # a read-only folder: links fall back to the default address
        path.write_text(json.dumps(mine), encoding="utf-8")
    try:
        yield
    finally:
        with suppress(OSError, ValueError):
            if json.loads(path.read_text(encoding="utf-8")) == mine:
                path.unlink()


def served_at(uri: str) -> str | None:
    """The address a running ``python -m pipeline.ui`` serves the local store ``uri`` on, if one does."""
    db = database(uri)
    if db is None:
        return None
    try:
        found = json.loads(address_file(db).read_text(encoding="utf-8"))
        pid, url = int(found["pid"]), str(found["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)  # a UI killed without cleaning up left its file: its process is gone
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return url


def ui_port() -> int:
    """The port ``python -m pipeline.ui`` serves on unless given ``--port``, and that links name before it runs:
    ``$RANKSCOPE_UI_PORT`` (``make ui UI_PORT=N`` and ``make run UI_PORT=N`` set it), else 5000. A value that is no
    port number is an :class:`InputError`."""
    given = os.environ.get(UI_PORT_ENV, "").strip()
    if not given:
        return UI_PORT
    if not given.isdigit() or not 1 <= int(given) <= 65535:
        raise InputError(f"{UI_PORT_ENV}={given!r} is not a port number (1-65535)")
    return int(given)


def _link_port() -> int:
    """:func:`ui_port` for a link: a link printed after a command's work never fails it (pipeline.ui says what is
    wrong with the variable when it is started)."""
    try:
        return ui_port()
    except InputError:
        return UI_PORT


def ui_base(uri: str) -> str:
    """The UI's address for the store ``uri``: the server itself, the running ``pipeline.ui``, or its default."""
    if is_server(uri):
        return uri.rstrip("/")
    return served_at(uri) or f"http://{LOOPBACK}:{_link_port()}"


def _query(extra: dict[str, str] | None = None) -> str:
    return urllib.parse.urlencode({**RUNS_MODE, **(extra or {})})


def experiment_url(uri: str, experiment_id: str, view_key: str | None = None, mode: str | None = None,
                   base: str | None = None) -> str:
    """The experiment's runs, in runs mode; opened on the saved view ``view_key`` and in the runs page's ``mode``
    (``CHART``, ``ARTIFACT``) when given. ``base``: the UI's address, when known better than :func:`ui_base`."""
    extra = {"viewStateShareKey": view_key} if view_key else {}
    if mode:
        extra["compareRunsMode"] = mode
    return f"{base or ui_base(uri)}/#/experiments/{experiment_id}/runs?{_query(extra)}"


def run_url(uri: str, experiment_id: str, run_id: str) -> str:
    """A run's page, in runs mode."""
    return f"{ui_base(uri)}/#/experiments/{experiment_id}/runs/{run_id}?{_query()}"


def ui_command(uri: str) -> str:
    """The command that serves the local store ``uri``'s UI at :func:`ui_base`'s default address (its port given,
    when not 5000: the shell it is typed in may not have ``$RANKSCOPE_UI_PORT``)."""
    port = _link_port()
    return commands.line(commands.module("pipeline.ui", "--backend-store-uri", uri,
                                         *(["--port", str(port)] if port != UI_PORT else [])))


def run_location(uri: str, experiment_id: str, run_id: str, indent: str = "  ") -> str:
    """Where to look at a run, each part on its own line so that it copies whole: the run and its store, the command
    that opens the UI on a local store nobody serves yet, and the run's page."""
    lines = [f"run {run_id} in {uri}"]
    if not is_server(uri) and served_at(uri) is None:
        lines.append(f"{indent}open the UI:  {ui_command(uri)}")
    lines.append(f"{indent}its page:  {run_url(uri, experiment_id, run_id)}")
    return redact_text("\n".join(lines))
