"""Where runs go: the tracking URI, the store opened (and created, once), and where to look at a run afterwards.

A new SQLite store is created by whichever command opens it first. MLflow creates and migrates its tables on the
first connection of a process, and two processes doing that at once break the store (``duplicate column``,
``table ... already exists``); so opening a SQLite store holds an exclusive lock on ``<db>.lock`` beside it for
that first connection. Later calls take no lock.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from metrics.errors import InputError
from pipeline.common.names import ARTIFACT_DIR, CREATING_SUFFIX, DB_NAME, DEFAULT_EXPERIMENT, LOCK_SUFFIX
from pipeline.common.redact import one_line, redact_text
from pipeline.tracking import background
from pipeline.tracking.client import MlflowClient, MlflowException
from pipeline.tracking.links import run_location

SQLITE = "sqlite:///"
_OS_REASON = re.compile(r"\[Errno -?\d+\] ([^\"')\]]+)")
STORE_ERRORS: tuple[type[BaseException], ...] = (MlflowException, OSError)  # what a store that does not answer raises
# The MLflow UI opens an experiment of this kind on its runs (not on the GenAI traces overview of an untagged one).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
_opened: set[str] = set()  # SQLite stores this process has connected to (created and migrated)


class StoreUnavailable(Exception):
    """The tracking store did not answer; the message says why, in one line."""


def store_error(exc: BaseException) -> str:
    """Why the store did not answer, short: the OS's reason (``Connection refused``) rather than urllib3's page."""
    text = one_line(exc)
    found = _OS_REASON.search(text)
    if found:
        return found.group(1).strip()
    return f"{type(exc).__name__}: {text[:300]}"


def unreachable(uri: str, timeout: float = 5.0) -> str | None:
    """Why nothing listens at an ``http(s)://`` store's host and port (``Connection refused``, an unknown host),
    found with one connection attempt; None when something answers, for other stores, and behind a proxy (which
    is what MLflow's requests would reach)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if urllib.request.getproxies() and not urllib.request.proxy_bypass(parts.hostname):
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except ValueError:  # a port out of range: left to MLflow's own message
        return None
    except OSError as exc:
        return exc.strerror or one_line(exc) or type(exc).__name__
    return None


def tracking_uri(configured: str | None, launch_dir: Path) -> str:
    """``tracking.uri`` if set, else $MLFLOW_TRACKING_URI, else a SQLite file in the launch directory.

    The deprecated ``file:`` store (or a bare path) is refused: it is slow and MLflow is removing it.
    """
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI") or f"{SQLITE}{launch_dir.resolve() / DB_NAME}"
    if uri.startswith("file:") or ("://" not in uri and not uri.startswith("databricks")):
        raise InputError(f"tracking URI {redact_text(uri)!r}: use sqlite:///ABSOLUTE/PATH/mlflow.db or an "
                         f"http(s):// server (the file: store is deprecated)")
    return uri


def sqlite_path(uri: str) -> Path | None:
    return Path(uri[len(SQLITE):]) if uri.startswith(SQLITE) else None


def artifact_location(uri: str) -> str | None:
    """For a SQLite store, artifacts go beside the database file (not into whatever the cwd is)."""
    db = sqlite_path(uri)
    return (db.parent / ARTIFACT_DIR).as_uri() if db is not None else None


def create_sqlite(db: Path, artifact_root: str | None = None) -> None:
    """Create and migrate a new SQLite store under a temporary name, then move it into place in one step: a process
    killed while MLflow builds the tables (seconds of migrations) leaves no half-made store that no later command
    could open. Called under :func:`creation_lock`."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    partial = db.with_name(db.name + CREATING_SUFFIX)
    partial.unlink(missing_ok=True)  # what a process killed while creating left
    store = SqlAlchemyStore(SQLITE + str(partial), artifact_root or (db.parent / ARTIFACT_DIR).as_uri())
    store.engine.dispose()
    os.replace(partial, db)


@contextmanager
def creation_lock(uri: str, artifact_root: str | None = None) -> Iterator[None]:
    """Serialise a process's first connection to a SQLite store, creating the store first when there is none."""
    db = sqlite_path(uri)
    if db is None or uri in _opened:
        yield
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + LOCK_SUFFIX), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if not db.exists() or db.stat().st_size == 0:
                create_sqlite(db, artifact_root)
            yield
            _opened.add(uri)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def client_for(uri: str) -> MlflowClient:
    """A client of the store at ``uri``: the store process's when it has opened that store
    (:class:`pipeline.tracking.background.RemoteClient`), else this process's own, its first connection made under
    :func:`creation_lock`."""
    process = background.current()
    if process is not None and process.serves(uri):
        return background.RemoteClient(process, uri)  # type: ignore[return-value]  # an MlflowClient by proxy
    if not uri.startswith(SQLITE) or uri in _opened:
        return MlflowClient(tracking_uri=uri)
    with creation_lock(uri):
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # connects: creates and migrates a new store
    return client


def open_ahead(uri: str, experiment: str = DEFAULT_EXPERIMENT) -> None:
    """Have the store process start opening the store (and if new, creating it) while this process goes on:
    :meth:`Store.open` then takes its answer. Without a store process, nothing: :meth:`Store.open` does it all."""
    process = background.current()
    if process is not None and process.usable():
        with suppress(background.Gone):
            process.open_later(uri, experiment)


@dataclass(frozen=True)
class Store:
    """One experiment of one tracking store: the client, its URI (for messages) and the experiment's id."""

    client: MlflowClient
    uri: str
    experiment_id: str

    @classmethod
    def open(cls, uri: str, experiment: str = DEFAULT_EXPERIMENT) -> Store:
        """Connect, creating the store and the experiment when new (restoring a deleted one).

        An unreachable server or unreadable database is an :class:`InputError` in one line.
        """
        refused = unreachable(uri)
        if refused:  # MLflow would retry for minutes (urllib3's backoff) before saying the same
            raise InputError(f"cannot open the MLflow tracking store {redact_text(uri)}: {refused}")
        process = background.current()
        if process is not None and process.usable():  # opened by the store process, and used through it
            try:
                experiment_id = process.open(uri, experiment)
                return cls(background.RemoteClient(process, uri), uri, experiment_id)  # type: ignore[arg-type]
            except background.Gone:
                pass
        try:
            client = client_for(uri)
            found = client.get_experiment_by_name(experiment)
        except Exception as exc:  # unreachable server, unreadable database: one line, not MLflow's traceback
            raise InputError(f"cannot open the MLflow tracking store {redact_text(uri)}: {store_error(exc)}") from None
        if found is not None:
            if found.lifecycle_stage == "deleted":
                client.restore_experiment(found.experiment_id)
            if not found.tags.get("mlflow.experimentKind"):  # a store made before rankscope tagged experiments
                for key, value in EXPERIMENT_TAGS.items():
                    client.set_experiment_tag(found.experiment_id, key, value)
            return cls(client, uri, found.experiment_id)
        try:
            return cls(client, uri, client.create_experiment(experiment, artifact_location=artifact_location(uri),
                                                             tags=EXPERIMENT_TAGS))
        except MlflowException:  # created meanwhile by another process
            found = client.get_experiment_by_name(experiment)
            if found is None:
                raise
            return cls(client, uri, found.experiment_id)

    @classmethod
    def existing(cls, uri: str, experiment: str | None) -> tuple[MlflowClient, str | None]:
        """A store that must exist already (what compare and gate read): the client and the experiment's id
        (None when it has no such experiment)."""
        db = sqlite_path(uri)
        if db is not None and not db.is_file():
            raise InputError(f"no MLflow store at {uri} (give --tracking-uri, or run from the folder holding "
                             f"{DB_NAME})")
        client = client_for(uri)
        found = client.get_experiment_by_name(experiment) if experiment else None
        return client, found.experiment_id if found is not None else None

    def pair(self) -> tuple[MlflowClient, str]:
        """``(client, experiment_id)``."""
        return self.client, self.experiment_id

    def location(self, run_id: str) -> str:
        return run_location(self.uri, self.experiment_id, run_id)


def create_database_schema(backend_store_uri: str, artifact_root: str) -> None:
    """Create (or verify) MLflow's tables in a database, as a tracking server does on start: absent tables are
    created, an out-of-date schema is refused, the Default experiment gets ``artifact_root``. An InputError in one
    line when the database refuses."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    try:
        with creation_lock(backend_store_uri, artifact_root):
            store = SqlAlchemyStore(backend_store_uri, artifact_root)
    except MlflowException as exc:
        raise InputError(redact_text(exc.message)) from None
    except Exception as exc:
        raise InputError(f"cannot open the tracking database: {redact_text(str(exc))}") from None
    store.engine.dispose()
