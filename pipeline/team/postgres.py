"""A private PostgreSQL cluster for a one-command team-server demo and for tests.

It uses the distribution's own binaries (initdb, pg_ctl), listens on 127.0.0.1 only (no Unix socket), and
requires a password that is generated once and kept in a 0600 file next to the cluster. PostgreSQL refuses to
run as root, so when started by root the cluster belongs to the `postgres` system user the Debian package
creates, and every command runs through `runuser`.

``pg_ctl start`` detaches the server from the command, so a guard (:func:`pipeline.team.processes.watch_over`) runs
``pg_ctl stop`` if the command is killed while the cluster runs; the server carries the command's mark in its
environment, by which a later command knows a cluster left running by one that is gone.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.common.names import SERVER_OWNER_ENV
from pipeline.team.processes import Leftover, group_members, is_alive, mark_of, owner_mark, release, watch_over

DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
SUPERUSER = "rankscope"
DATABASE = "mlflow"
SYSTEM_USER = "postgres"  # who runs the cluster when we are root


class PostgresError(RuntimeError):
    """The local cluster could not be created, started or reached; the message says what to do."""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))


def find_binary(name: str) -> Path | None:
    """`name` on PATH, else the newest Debian-packaged one (/usr/lib/postgresql/<major>/bin), else None."""
    found = shutil.which(name)
    if found:
        return Path(found)
    candidates = sorted(Path("/").glob(DEBIAN_BIN_GLOB.lstrip("/") + f"/{name}"), key=_version_key)
    return candidates[-1] if candidates else None


def binaries_available() -> bool:
    return all(find_binary(name) for name in ("initdb", "pg_ctl", "postgres"))


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's choice); callers retry if it is taken meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class LocalPostgres:
    """A running cluster: `uri` carries the password, so log `redacted_uri` instead."""

    root: Path
    port: int
    password: str

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def uri(self) -> str:
        return f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def redacted_uri(self) -> str:
        return f"postgresql://{SUPERUSER}:***@127.0.0.1:{self.port}/{DATABASE}"


class _Runner:
    """Runs PostgreSQL's tools as the user who may own the cluster."""

    def __init__(self) -> None:
        self.as_root = os.geteuid() == 0
        if self.as_root:
            try:
                self.account = pwd.getpwnam(SYSTEM_USER)
            except KeyError:
                raise PostgresError(
                    f"running as root, and PostgreSQL will not run as root: create a system user "
                    f"'{SYSTEM_USER}' (the Debian package 'postgresql' does) or run as an ordinary user"
                ) from None

    def command(self, name: str, *args: str) -> list[str]:
        binary = find_binary(name)
        if binary is None:
            raise PostgresError(
                f"PostgreSQL's '{name}' was found neither on PATH nor in {DEBIAN_BIN_GLOB}: "
                "install it (Debian/Ubuntu: apt-get install postgresql)"
            )
        prefix = ["runuser", "-u", SYSTEM_USER, "--"] if self.as_root else []
        return [*prefix, str(binary), *args]

    def run(self, name: str, *args: str, stdin: str | None = None, check: bool = True,
            env: dict[str, str] | None = None):
        result = subprocess.run(
            self.command(name, *args), input=stdin, capture_output=True, text=True, cwd="/", env=env,
            start_new_session=True,  # a Ctrl-C meant for us must not reach the postmaster first
        )
        if check and result.returncode != 0:
            raise PostgresError(f"{name} {args[0] if args else ''} failed:\n{result.stdout}{result.stderr}".strip())
        return result

    def own(self, path: Path) -> None:
        if self.as_root:
            os.chown(path, self.account.pw_uid, self.account.pw_gid)


def _initialise(runner: _Runner, root: Path) -> str:
    """initdb with a generated superuser password (kept in root/password, 0600), TCP on 127.0.0.1 only."""
    data = root / "data"
    data.mkdir(mode=0o700)
    runner.own(data)
    password = secrets.token_urlsafe(24)
    password_file = root / "password"
    password_file.touch(mode=0o600)
    password_file.write_text(password + "\n", encoding="utf-8")
    # initdb reads the password from a file (never the command line, where `ps` shows it): a 0600 copy inside
    # our folder, readable only by the cluster's user, removed as soon as initdb is done.
    handover = root / "initdb-password"
    handover.touch(mode=0o600)
    handover.write_text(password + "\n", encoding="utf-8")
    runner.own(handover)
    try:
        runner.run(
            "initdb", "-D", str(data), "-U", SUPERUSER, f"--pwfile={handover}", "--auth=scram-sha-256",
            "-E", "UTF8", "--no-locale",
        )
    finally:
        handover.unlink(missing_ok=True)
    with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write("\n# rankscope: reachable from this machine only, over TCP\n")
        conf.write("listen_addresses = '127.0.0.1'\nunix_socket_directories = ''\n")
    return password


def _check_reachable(runner: _Runner, root: Path) -> None:
    if runner.as_root and runner.run("test", "-x", str(root), check=False).returncode != 0:
        raise PostgresError(
            f"user '{SYSTEM_USER}' cannot reach {root}: every parent folder must be searchable by it "
            "(e.g. choose a folder under /var/lib or a fresh one under /tmp)"
        )


def _create_database(cluster: LocalPostgres) -> None:
    import psycopg  # the `team` extra (SQLAlchemy's default PostgreSQL driver); only team tracking needs it

    with psycopg.connect(
        host="127.0.0.1", port=cluster.port, user=SUPERUSER, password=cluster.password, dbname="postgres",
        autocommit=True,
    ) as connection:
        if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
            connection.execute(f"CREATE DATABASE {DATABASE}")


def _running(runner: _Runner, data: Path) -> bool:
    return runner.run("pg_ctl", "status", "-D", str(data), check=False).returncode == 0


def _stop_arguments(data: Path) -> tuple[str, ...]:
    return ("stop", "-D", str(data), "-m", "fast", "-w", "-t", "60")


def _postmaster(data: Path) -> int | None:
    """The running server's pid, from the first line of its postmaster.pid."""
    try:
        return int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _already_running(runner: _Runner, data: Path, end_leftover: Callable[[Leftover], bool] | None) -> None:
    """A cluster that runs already: left by a rankscope command that is gone (ended if ``end_leftover`` agrees), or
    in use (one line: what to do)."""
    pid = _postmaster(data)
    mark = mark_of(pid) if pid is not None else None
    if pid is not None and mark is not None and not is_alive(mark):
        leftover = Leftover(what="a PostgreSQL server", where=str(data), owner=mark,
                            processes=len(group_members(pid)) or 1,  # pg_ctl made it a group's leader (setsid)
                            end=lambda: runner.run("pg_ctl", *_stop_arguments(data), check=False))
        if end_leftover is not None and end_leftover(leftover):
            leftover.end()
            if not _running(runner, data):
                return
        raise PostgresError(f"{leftover.describe()}: end it with --end-stale, or `pg_ctl stop -D {data}`")
    if mark is not None:
        raise PostgresError(f"a PostgreSQL server already runs on {data} for a rankscope command that still runs "
                            f"(pid {mark.partition(':')[0]}): stop that command first")
    raise PostgresError(f"a PostgreSQL server already runs on {data}: stop it with `pg_ctl stop -D {data}`")


@contextmanager
def local_postgres(root: Path | str, port: int | None = None, attempts: int = 3,
                   end_leftover: Callable[[Leftover], bool] | None = None) -> Iterator[LocalPostgres]:
    """Create (first time) and start a cluster under `root`, yield it, and always stop it on the way out, even if
    this process is killed (a guard stops it then).

    The data folder is root/data; the server's log is root/data/server.log. With no `port` a free one is chosen,
    and another is tried if it was taken in between. A cluster left running by a rankscope command that is gone is
    stopped first if `end_leftover` agrees.
    """
    runner = _Runner()
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    if runner.as_root:
        root.chmod(0o711)  # the cluster's user must pass through; it may not list or read our files
    _check_reachable(runner, root)
    data = root / "data"
    password = (root / "password").read_text().strip() if (data / "PG_VERSION").exists() else None
    if password is None:
        if data.exists() and any(data.iterdir()):
            raise PostgresError(f"{data} exists but holds no PostgreSQL cluster: choose an empty folder")
        if data.exists():
            data.rmdir()
        password = _initialise(runner, root)
    if _running(runner, data):
        _already_running(runner, data, end_leftover)

    guard = watch_over(runner.command("pg_ctl", *_stop_arguments(data)))  # first: a kill while it starts stops it too
    marked = {**os.environ, SERVER_OWNER_ENV: owner_mark()}
    try:
        for attempt in range(attempts):
            chosen = port or free_port()
            started = runner.run(
                "pg_ctl", "start", "-D", str(data), "-w", "-t", "60", "-l", str(data / "server.log"),
                "-o", f"-p {chosen}", check=False, env=marked,
            )
            if started.returncode == 0:
                break
            if port is not None or attempt == attempts - 1:
                log = data / "server.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise PostgresError(f"PostgreSQL did not start on 127.0.0.1:{chosen}:\n{started.stdout}{tail}")
        cluster = LocalPostgres(root=root, port=chosen, password=password)
        _create_database(cluster)
        yield cluster
    finally:
        if _running(runner, data):
            runner.run("pg_ctl", *_stop_arguments(data), check=False)
        release(guard)
