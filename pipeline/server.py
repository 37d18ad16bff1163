"""``python -m pipeline.server``: an MLflow tracking server for a team, runs in a database, artifacts served by it.

``--backend-store-uri postgresql://user:pass@host:5432/mlflow`` (or ``--postgres-dir DIR`` for a private local
PostgreSQL) creates the database schema once, starts ``mlflow server`` bound to 127.0.0.1, waits until it answers
/health and prints the URI clients set as MLFLOW_TRACKING_URI / ``tracking.uri``. ``--expose`` binds every
interface. Passwords never appear in what it prints.

Killed (SIGKILL, the OOM killer), it leaves nothing running: a guard ends the MLflow server and stops the private
PostgreSQL (:mod:`pipeline.team.processes`). A server or cluster of ours that was left running anyway (its guard killed
too) is recognised when the command starts again: it says so and offers to end it (``--end-stale`` ends it without
asking).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.server",
        description="Start an MLflow tracking server for a team: runs in a database, artifacts served by it.",
    )
    backend = parser.add_mutually_exclusive_group()
    backend.add_argument(
        "--backend-store-uri", default=os.environ.get("MLFLOW_BACKEND_STORE_URI"),
        help="database for runs, e.g. postgresql://user:pass@db:5432/mlflow or sqlite:///mlflow.db "
        "(default: $MLFLOW_BACKEND_STORE_URI, which keeps the password out of your shell history)",
    )
    backend.add_argument(
        "--postgres-dir", type=Path,
        help="create (first time) and run a private PostgreSQL cluster in this folder, on 127.0.0.1 only",
    )
    parser.add_argument("--postgres-port", type=int, default=None,
                        help="with --postgres-dir: PostgreSQL's port on 127.0.0.1 (default: a free one, printed "
                        "when it starts)")
    parser.add_argument("--artifacts-destination", default="mlartifacts",
                        help="where the server keeps uploaded artifacts: a folder or e.g. s3://bucket/path "
                        "(default: ./mlartifacts)")
    parser.add_argument("--port", type=int, default=5000, help="port to listen on (default: 5000; 0 = any free)")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (default: 2)")
    parser.add_argument("--expose", action="store_true",
                        help="listen on every interface (0.0.0.0) instead of 127.0.0.1; there is no login, so "
                        "only on a network you trust or behind an authenticating proxy")
    parser.add_argument("--allowed-hosts", default="",
                        help="extra Host headers to accept, comma-separated (e.g. a proxy's name mlflow.corp.com)")
    parser.add_argument("--cors-allowed-origins", default="",
                        help="extra browser origins allowed to write, comma-separated (e.g. https://notebooks.corp)")
    parser.add_argument("--end-stale", action="store_true",
                        help="end, without asking, a server that an earlier run of this command left running on the "
                        "port (or on --postgres-dir) when it was killed")
    return parser


def _split(values: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in values.split(",") if v.strip())


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _announce(server: Any, backend: str, exposed: bool) -> None:
    """Where the server is, as clients on this machine and (exposed) on others type it: an address, not a host
    name that other machines may not resolve."""
    from pipeline.common.redact import redact_text
    from pipeline.team.tracking_server import interface_addresses

    artifacts = server.settings.artifacts_destination
    print(f"MLflow tracking server ready (backend {redact_text(backend)}, artifacts {artifacts}).")
    print("On clients set:")
    print(f"  export MLFLOW_TRACKING_URI={server.uri}      # or tracking.uri={server.uri}")
    if exposed:
        for address in interface_addresses():
            print(f"  export MLFLOW_TRACKING_URI=http://{address}:{server.port}   # from other machines")
    print("Stop with Ctrl-C.", flush=True)


def _end_leftover(without_asking: bool) -> Callable[[Any], bool]:
    """Whether to end a server an earlier command left running (a :class:`pipeline.team.processes.Leftover`): yes with
    ``--end-stale`` (said in one line), or when the user answers yes at a terminal; otherwise no, and the command
    stops with one line that says how to end it."""

    def decide(leftover: Any) -> bool:
        if without_asking:
            print(f"Ending {leftover.describe()} (--end-stale).", file=sys.stderr, flush=True)
            return True
        if not sys.stdin.isatty():
            return False
        print(f"Found {leftover.describe()}.", file=sys.stderr, flush=True)
        try:
            answer = input("End it? [y/N] ")
        except EOFError:
            return False
        return answer.strip().lower() in ("y", "yes")

    return decide


def _serve(settings: Any, backend_for_display: str, end_leftover: Callable[[Any], bool]) -> int:
    from pipeline.team.tracking_server import tracking_server

    with tracking_server(settings, log=sys.stderr, end_leftover=end_leftover) as server:
        _announce(server, backend_for_display, settings.expose)
        server.process.wait()
        print(f"MLflow server exited with code {server.process.returncode}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.backend_store_uri and not args.postgres_dir:
        _parser().error("give --backend-store-uri (or set MLFLOW_BACKEND_STORE_URI) or --postgres-dir")
    if args.postgres_port is not None and not args.postgres_dir:
        _parser().error("--postgres-port goes with --postgres-dir")
    if args.expose:
        print("WARNING: --expose listens on every network interface. MLflow has no login: anyone who can reach "
              "its port can read, change and delete runs. Use it only on a trusted network or behind an "
              "authenticating proxy.", file=sys.stderr)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # stop as on Ctrl-C: server first, then PostgreSQL
    destination = args.artifacts_destination
    if "://" not in destination:
        destination = str(Path(destination).resolve())
    try:  # the work's imports come after the arguments are read, and a stop while they run is a stop too
        from pipeline.common.redact import redact_text
        from pipeline.team.postgres import PostgresError, local_postgres
        from pipeline.team.tracking_server import ServerError, ServerSettings

        def settings(uri: str) -> ServerSettings:
            return ServerSettings(uri, destination, port=args.port or None, expose=args.expose,
                                  workers=args.workers, extra_allowed_hosts=_split(args.allowed_hosts),
                                  extra_cors_origins=_split(args.cors_allowed_origins))

        end_leftover = _end_leftover(args.end_stale)
        if args.postgres_dir:
            with local_postgres(args.postgres_dir, port=args.postgres_port, end_leftover=end_leftover) as database:
                print(f"PostgreSQL running: {database.redacted_uri} (password in {database.root / 'password'})")
                return _serve(settings(database.uri), database.redacted_uri, end_leftover)
        return _serve(settings(args.backend_store_uri), args.backend_store_uri, end_leftover)
    except KeyboardInterrupt:  # first: were the imports stopped, the next clause's names would not exist
        print("Stopped.", file=sys.stderr)
        return 0
    except (ServerError, PostgresError) as exc:
        print(f"error: {redact_text(str(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from pipeline.common import interrupts

    interrupts.started()  # stops are handled here, as main() says
    sys.exit(main())
