"""Where runs go: the tracking URI, the store opened (and created, once), and where to look at a run afterwards.

A new SQLite store is created by whichever command opens it first. MLflow creates and migrates its tables on the
first connection of a process, and two processes doing that at once break the store (``duplicate column``,
``table ... already exists``); so opening a SQLite store holds an exclusive lock on ``<db>.lock`` beside it for
that first connection. Later calls take no lock.

A store that stops answering is given up on quickly and said so: MLflow's own retries would keep a command silent for
minutes (its HTTP client's backoff, its database engine's ten attempts over 101 s), while rankscope saves every result
before logging it. Once a tracking server has not answered (:func:`stopped_answering`), the process's later requests
to it fail at once while one quick request to its ``/health`` finds it still down (:func:`still_not_answering`); a
command that is stopped tries each request once (:func:`last_tries`).
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from metrics.errors import InputError
from pipeline.common import interrupts
from pipeline.common.names import ARTIFACT_DIR, CREATING_SUFFIX, DB_NAME, DEFAULT_EXPERIMENT, LOCK_SUFFIX
from pipeline.common.redact import one_line, redact_text
from pipeline.tracking import background
from pipeline.tracking.client import MlflowClient, MlflowException, RestException
from pipeline.tracking.links import run_location

SQLITE = "sqlite:///"
_OS_REASON = re.compile(r"\[Errno -?\d+\] ([^\"')\]]+)")
_HTTP_REASON = re.compile(r"(Read timed out|Connection timed out|Remote end closed connection without response|"
                          r"Connection reset by peer|Connection aborted)")  # urllib3's, for a server that hangs
STORE_ERRORS: tuple[type[BaseException], ...] = (MlflowException, OSError)  # what a store that does not answer raises
# Database stores, with the port their server listens on by default (a URI without a host uses a local socket).
DATABASE_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433}
PROBE_S = 3.0  # how long the quick check of a store that stopped answering waits for it
RECHECK_S = 10.0  # and how often it is checked again, at most (meanwhile its requests fail at once)
LAST_TRY_S = 3  # after a stop: each request to a tracking server is tried once, for at most this long
# The MLflow UI opens an experiment of this kind on its runs (not on the GenAI traces overview of an untagged one).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
_opened: set[str] = set()  # stores this process has connected to (SQLite: created and migrated; databases: checked)


class StoreUnavailable(Exception):
    """The tracking store did not answer; the message says why, in one line."""


class NotAnswering(MlflowException):
    """A store call not made: the store did not answer this process before, and still does not; the message says
    why, in a few words. An ``MlflowException``, as the call would have raised after MLflow's retries."""


def store_error(exc: BaseException) -> str:
    """Why the store did not answer, short: the OS's reason (``Connection refused``) rather than urllib3's page."""
    if isinstance(exc, (StoreUnavailable, NotAnswering)):
        return str(exc)
    text = one_line(exc)
    found = _OS_REASON.search(text) or _HTTP_REASON.search(text)
    if found:
        return found.group(1).strip()
    return f"{type(exc).__name__}: {text[:300]}"


def refusal(says: str, exc: BaseException) -> str:
    """The one line a command prints when it refuses bad input (an ``InputError``) or its store does not answer
    (``STORE_ERRORS``): the command's name first, secrets masked."""
    if isinstance(exc, STORE_ERRORS):
        return f"{says}: the tracking store did not answer: {store_error(exc)}"
    return f"{says}: {redact_text(str(exc))}".replace("\n", " ")


def unreachable(uri: str, timeout: float = 5.0) -> str | None:
    """Why nothing listens at an ``http(s)://`` store's or a database's host and port (``Connection refused``, an
    unknown host), found with one connection attempt; None when something answers, for other stores (SQLite, a
    database on a local socket), and behind a proxy (which is what MLflow's requests would reach)."""
    parts = urllib.parse.urlsplit(uri)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in ("http", "https", *DATABASE_PORTS) or not parts.hostname:
        return None
    if scheme in ("http", "https") and urllib.request.getproxies() and not urllib.request.proxy_bypass(parts.hostname):
        return None
    try:
        port = parts.port or DATABASE_PORTS.get(scheme) or (443 if scheme == "https" else 80)
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except ValueError:  # a port out of range, several hosts: left to MLflow's own message
        return None
    except OSError as exc:
        return exc.strerror or one_line(exc) or type(exc).__name__
    return None


def answers(uri: str, timeout: float = PROBE_S) -> bool:
    """Whether the store at ``uri`` answers now, found quickly: a tracking server answers one HTTP request (its
    ``/health``, whatever the status), a database server accepts a connection. Other stores always answer."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return unreachable(uri, timeout) is None
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")  # no credentials
    try:
        with urllib.request.urlopen(f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}/health", timeout=timeout):
            return True
    except urllib.error.HTTPError:  # an answer all the same (a proxy asking for a login, no /health route)
        return True
    except (OSError, ValueError):  # refused, timed out, unknown host (URLError is an OSError)
        return False


_NOT_ANSWERING: dict[str, tuple[str, float]] = {}  # stores that did not answer this process: why, checked when


def stopped_answering(uri: str, reason: str) -> bool:
    """Record that the tracking server at ``uri`` did not answer a request (``reason``, in a few words): until a
    quick check finds it answering again, this process's requests to it fail at once (:func:`still_not_answering`).
    True when this is news (it answered, as far as this process knew). A database store is not recorded: its errors
    (a locked SQLite file, a deadlock) say nothing of the next request, and a refused connection fails at once."""
    if not uri.startswith(("http://", "https://")):
        return False
    new = uri not in _NOT_ANSWERING
    _NOT_ANSWERING[uri] = (reason, time.monotonic())
    return new


def not_answering(uri: str) -> str | None:
    """Why the store at ``uri`` did not answer this process's last request to it; None when it answered."""
    found = _NOT_ANSWERING.get(uri)
    return found[0] if found else None


def any_not_answering() -> str | None:
    """Why a store this process uses did not answer its last request, if one did not."""
    return next((reason for reason, _ in _NOT_ANSWERING.values()), None)


def still_not_answering(uri: str) -> str | None:
    """Why the store at ``uri`` does not answer, when it did not before and still does not now: the request about to
    be made would wait out MLflow's retries to fail the same way. None when it answers. Whether it answers now is
    checked (:func:`answers`) at most every :data:`RECHECK_S`: a server that hangs takes :data:`PROBE_S` to fail it."""
    found = _NOT_ANSWERING.get(uri)
    if found is None:
        return None
    reason, checked = found
    if time.monotonic() - checked < RECHECK_S:
        return reason
    if answers(uri):
        _NOT_ANSWERING.pop(uri, None)
        return None
    _NOT_ANSWERING[uri] = (reason, time.monotonic())
    return reason


def did_not_answer(exc: BaseException) -> bool:
    """Whether a store call's exception may say the store did not answer (refused, timed out, unreachable, locked),
    not that it answered with a refusal of its own (MLflow's ``RestException``: no such run, a bad request)."""
    return isinstance(exc, STORE_ERRORS) and not isinstance(exc, RestException)


def writes_here(client: object) -> bool:
    """Whether ``client`` writes in this process's own database transactions (SQLite, or a database opened here),
    which a stop must not cut half-way; a tracking server's client, or the store process's, writes elsewhere."""
    if not isinstance(client, MlflowClient):
        return False
    return str(client.tracking_uri).split("://", 1)[0].split("+", 1)[0] in ("sqlite", *DATABASE_PORTS)


def last_tries() -> None:
    """From now on this process tries each request to a tracking server once, for at most :data:`LAST_TRY_S`, and
    waits a bounded time for the store process (:func:`pipeline.tracking.background.hurry`): it has been stopped,
    and what it still asks of the store (closing its runs FAILED) must not keep it from ending."""
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(LAST_TRY_S)
    background.hurry()


interrupts.when_stopped(last_tries)


def check_database(uri: str) -> None:
    """One connection to a database store, before MLflow's engine makes ten attempts over 101 s, each with a
    warning: an ``MlflowException`` with the driver's own reason (refused, a wrong password, no such database)."""
    if uri.split("://", 1)[0].split("+", 1)[0] not in DATABASE_PORTS:
        return
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(uri)
    except ImportError as exc:  # the database's driver is an optional package
        raise MlflowException(f"the database driver is not installed ({exc.name or exc})") from None
    try:
        with engine.connect():
            pass
    except Exception as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise MlflowException(redact_text(reason[0] if reason else type(exc).__name__)) from None
    finally:
        engine.dispose()


def check_reachable(uri: str) -> None:
    """An InputError in one line when nothing listens at the store's host and port (:func:`unreachable`): MLflow
    would try again for seconds (its HTTP retries) or minutes (a database engine's) before saying the same."""
    refused = unreachable(uri)
    if refused:
        raise InputError(f"cannot open the MLflow tracking store {redact_text(uri)}: {refused}")


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
        if uri not in _opened:
            check_database(uri)
            _opened.add(uri)
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
        check_reachable(uri)
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
