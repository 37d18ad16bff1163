"""Team tracking: an MLflow tracking server on a database, with artifacts uploaded and served through it.

:func:`tracking_server` creates the database schema once, starts ``mlflow server`` bound to 127.0.0.1 (every
interface when exposed; MLflow's Host-header and CORS checks then admit only this machine's own names), waits until
it answers /health, and always stops it afterwards. :func:`team_server` adds a private PostgreSQL. Passwords never
appear in what they print: every line, MLflow's own included, is redacted (``pipeline.common.redact``).

The server runs under a guard (:mod:`pipeline.team.processes`): if the process that started it is killed (SIGKILL,
the OOM killer), the guard ends every process of the server. A port held by a server of ours whose command is gone
anyway is told apart from another program's, and ended when the caller agrees (``end_leftover``).
"""

from __future__ import annotations

import collections
import fcntl
import io
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO, TypeAlias

from metrics.errors import InputError
from pipeline.common.names import LOOPBACK, SERVED_ARTIFACT_ROOT
from pipeline.common.redact import redact_log_records, redact_text
from pipeline.team.postgres import free_port, local_postgres
from pipeline.team.processes import Holder, Leftover, guarded, leftover_on_port, stop_group
from pipeline.tracking.store import create_database_schema

SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address
TEAM_HINT = "pip install 'rankscope[team]'"
EVERY_INTERFACE = "0.0.0.0"
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql", "sqlite")
ANOTHER_PORT = "give another port (--port N, or --port 0 for any free one)"
EndLeftover: TypeAlias = "Callable[[Leftover], bool]"  # asked whether to end a leftover server of ours: True ends it


class ServerError(RuntimeError):
    """The tracking server could not be configured or started; the message says why."""


def with_driver(uri: str) -> str:
    """A bare postgresql:// (or postgres://) URI means psycopg 3, the `team` extra's driver, whichever default
    the installed SQLAlchemy has (2.0 would pick psycopg2); a URI naming its driver is left alone."""
    for bare in ("postgresql://", "postgres://"):
        if uri.startswith(bare):
            return "postgresql+psycopg://" + uri.removeprefix(bare)
    return uri


def check_backend_uri(uri: str) -> None:
    """Runs and metrics live in a database (many writers at once); MLflow's file store is not for that."""
    scheme = uri.split("://", 1)[0].split("+", 1)[0] if "://" in uri else ""
    if scheme not in DATABASE_SCHEMES:
        raise ServerError(
            f"--backend-store-uri must be a database URI ({', '.join(s + '://' for s in DATABASE_SCHEMES)}), "
            f"got {redact_text(uri)!r}"
        )


def interface_addresses() -> list[str]:
    """The IPv4 addresses of this machine's network interfaces, loopback aside: what a server bound to every
    interface listens on, and what other machines can type (a host name may resolve only here)."""
    found = []
    with suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            with suppress(OSError):  # SIOCGIFADDR: an interface without an IPv4 address answers EADDRNOTAVAIL
                packed = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
                found.append(socket.inet_ntoa(packed[20:24]))
    return [a for a in dict.fromkeys(found) if not a.startswith("127.")]


def machine_names() -> list[str]:
    """This machine's addresses, host name and FQDN: what colleagues type to reach it (addresses first)."""
    names = [*interface_addresses(), socket.gethostname(), socket.getfqdn()]
    with suppress(OSError):
        names += socket.gethostbyname_ex(socket.gethostname())[2]
    return list(dict.fromkeys(n for n in names if n and not n.startswith("127.") and n != "localhost"))


@dataclass(frozen=True)
class ServerSettings:
    """What `mlflow server` is started with. `port=None` picks a free one."""

    backend_store_uri: str
    artifacts_destination: str
    port: int | None = None
    expose: bool = False
    workers: int = 2
    extra_allowed_hosts: tuple[str, ...] = ()
    extra_cors_origins: tuple[str, ...] = ()

    @property
    def host(self) -> str:
        return EVERY_INTERFACE if self.expose else LOOPBACK

    def allowed_hosts(self, port: int) -> list[str]:
        """Host headers accepted (DNS-rebinding guard): loopback names, plus this machine's names if exposed."""
        names = ["127.0.0.1", "localhost", *(machine_names() if self.expose else [])]
        return [f"{name}:{port}" for name in names] + list(self.extra_allowed_hosts)

    def cors_origins(self, port: int) -> list[str]:
        """Browser origins that may change state: the UI's own origin. MLflow always admits localhost ones."""
        names = machine_names() if self.expose else []
        return [f"http://{name}:{port}" for name in names] + list(self.extra_cors_origins)

    def command(self, port: int) -> list[str]:
        """The `mlflow server` command line. The backend URI is not on it (`ps` would show its password)."""
        command = [
            sys.executable, "-m", "mlflow", "server",
            "--host", self.host, "--port", str(port), "--workers", str(self.workers),
            "--serve-artifacts", "--artifacts-destination", self.artifacts_destination,
            "--default-artifact-root", SERVED_ARTIFACT_ROOT,
            "--allowed-hosts", ",".join(self.allowed_hosts(port)),
        ]
        origins = self.cors_origins(port)
        return command + (["--cors-allowed-origins", ",".join(origins)] if origins else [])

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["MLFLOW_BACKEND_STORE_URI"] = self.backend_store_uri
        env["MLFLOW_DISABLE_TELEMETRY"] = "true"
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env


def port_free(host: str, port: int) -> bool:
    """Whether the server could bind ``host:port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # as the server binds (uvicorn sets SO_REUSEADDR): a listener blocks it, the closed connections of a server
        # just stopped on that port (TIME_WAIT) do not
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def check_port_free(host: str, port: int, end_leftover: EndLeftover | None = None) -> None:
    """A port another program holds is one line, before anything starts. A server of ours left running by a command
    that is gone (its guard killed too, or an older version's) is said to be one, and ended if ``end_leftover``
    agrees; a server of a command that still runs is named too."""
    if port_free(host, port):
        return
    found = leftover_on_port(host, port, "an MLflow server")
    if isinstance(found, Leftover):
        if end_leftover is not None and end_leftover(found):
            found.end()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not port_free(host, port):
                time.sleep(0.2)
            if port_free(host, port):
                return
            raise ServerError(f"port {port} on {host} is still in use after its leftover server was ended: "
                              f"{ANOTHER_PORT}")
        how = "--end-stale" if end_leftover is not None else f"`kill -- -{found.group}` (its process group)"
        raise ServerError(f"{found.describe()}: end it with {how}, or {ANOTHER_PORT}")
    if found is None and port_free(host, port):  # a leftover that its guard has just ended
        return
    if isinstance(found, Holder) and found.ours and found.owner_alive:
        raise ServerError(f"port {port} on {host} is in use by the tracking server of a rankscope command that still "
                          f"runs (pid {found.owner.partition(':')[0]}): stop that command first, or {ANOTHER_PORT}")
    raise ServerError(f"port {port} on {host} is already in use: stop what holds it, or {ANOTHER_PORT}")


def _check_reachable(backend_store_uri: str) -> None:
    """One quick connection first: MLflow itself retries an unreachable database for about two minutes."""
    import sqlalchemy

    if backend_store_uri.startswith("sqlite"):
        return
    try:
        engine = sqlalchemy.create_engine(backend_store_uri)
    except ImportError as exc:  # the database's driver is an optional package
        raise ServerError(f"the database driver is not installed ({exc.name or exc}): {TEAM_HINT}") from None
    try:
        with engine.connect():
            pass
    except Exception as exc:  # the driver's own error says what is wrong (refused, bad password, no database)
        reason = getattr(exc, "orig", None) or exc
        raise ServerError(f"cannot connect to {redact_text(backend_store_uri)}: "
                          f"{redact_text(str(reason)).strip()}") from None
    finally:
        engine.dispose()


def create_schema(backend_store_uri: str) -> None:
    """Create (or verify) MLflow's tables once, before any worker starts, so none of them races to create them."""
    redact_log_records()
    _check_reachable(backend_store_uri)
    try:
        create_database_schema(backend_store_uri, SERVED_ARTIFACT_ROOT)
    except InputError as exc:
        raise ServerError(str(exc)) from None


@dataclass
class TrackingServer:
    """A running server: `uri` is what clients set as MLFLOW_TRACKING_URI."""

    settings: ServerSettings
    port: int
    process: subprocess.Popen
    output: collections.deque = field(default_factory=lambda: collections.deque(maxlen=60))

    @property
    def uri(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def recent_output(self) -> str:
        return "".join(self.output)


def _forward(stream, sink: TextIO | None, keep: collections.deque) -> None:
    for line in stream:
        line = redact_text(line)
        keep.append(line)
        if sink is not None:
            sink.write(line)
            sink.flush()


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the server's process group (its guard, uvicorn and its workers, MLflow's job runner), SIGKILL whatever
    is left after `grace`."""
    stop_group(process, grace)


def _start(settings: ServerSettings, port: int, log: TextIO | None, timeout: float) -> TrackingServer:
    # in a session of its own (our Ctrl-C / SIGTERM handler decides when and in which order things stop), under a
    # guard that ends it if this process is killed
    process = guarded(settings.command(port), env=settings.environment(), stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT)
    server = TrackingServer(settings=settings, port=port, process=process)
    lines = io.TextIOWrapper(process.stdout, encoding="utf-8", errors="replace")
    forwarder = threading.Thread(target=_forward, args=(lines, log, server.output), daemon=True)
    forwarder.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            forwarder.join(timeout=5)  # its last words say why
            return server
        if _healthy(server.uri):
            return server
        time.sleep(0.25)
    _stop(process)
    raise ServerError(f"MLflow did not answer {server.uri}/health within {timeout:.0f} s:\n{server.recent_output()}")


@contextmanager
def tracking_server(
    settings: ServerSettings, log: TextIO | None = None, timeout: float = 120.0, attempts: int = 3,
    end_leftover: EndLeftover | None = None,
) -> Iterator[TrackingServer]:
    """Create the schema, start `mlflow server`, wait for /health, yield it, and always stop it afterwards.

    `log` receives the server's output, redacted. With no fixed port another free one is tried if the chosen one
    was taken between choosing and binding. A fixed port held by a leftover server of ours is freed if
    `end_leftover` says so (:func:`check_port_free`).
    """
    settings = replace(settings, backend_store_uri=with_driver(settings.backend_store_uri))
    check_backend_uri(settings.backend_store_uri)
    create_schema(settings.backend_store_uri)
    if "://" not in settings.artifacts_destination:
        Path(settings.artifacts_destination).mkdir(parents=True, exist_ok=True)
    if settings.port is not None:
        check_port_free(settings.host, settings.port, end_leftover)
    server = None
    try:
        for attempt in range(attempts):
            server = _start(settings, settings.port or free_port(), log, timeout)
            if server.process.poll() is None:
                break
            port_taken = "address already in use" in server.recent_output().lower()
            if not port_taken or settings.port is not None or attempt == attempts - 1:
                raise ServerError(f"MLflow server exited with code {server.process.returncode}:\n"
                                  f"{server.recent_output()}")
        yield server
    finally:
        if server is not None:
            _stop(server.process)


@dataclass(frozen=True)
class TeamServer:
    """PostgreSQL and the tracking server on it (see `team_server`)."""

    tracking: TrackingServer
    database_uri: str  # carries the password: for connecting, never for printing
    artifacts: Path

    @property
    def uri(self) -> str:
        return self.tracking.uri


@contextmanager
def team_server(workdir: Path | str | None = None, log: TextIO | None = None, workers: int = 2) -> Iterator[TeamServer]:
    """A private PostgreSQL under workdir/postgres and a server storing artifacts in workdir/artifacts.

    Everything runs on 127.0.0.1 and is stopped on exit, server first. With no `workdir` a fresh one is made
    under the system temporary folder and removed afterwards. (A given one must be searchable by the `postgres`
    user when running as root; pytest's tmp_path is not.)
    """
    made = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="rankscope-team-") if made else workdir).resolve()
    if made:
        workdir.chmod(0o711)
    artifacts = workdir / "artifacts"
    try:
        with local_postgres(workdir / "postgres") as database:
            settings = ServerSettings(database.uri, str(artifacts), workers=workers)
            with tracking_server(settings, log=log) as server:
                yield TeamServer(tracking=server, database_uri=database.uri, artifacts=artifacts)
    finally:
        if made:
            shutil.rmtree(workdir, ignore_errors=True)


