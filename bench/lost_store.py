"""A tracking store that stops answering, measured: how soon a sweep says so, how it ends, how fast it obeys a stop.

``python -m bench.lost_store`` starts a real ``mlflow server`` (SQLite behind it), runs a 12-point help-desk sweep
logging to it (``tracking=server``), and stops the server as job 3 starts (its folder appears). Then:

- **lost**: nothing else; the time from the server's stop to the first line saying the store does not answer, to the
  end of the command, its exit status, and whether its last line is the sync command;
- **sigterm**: SIGTERM is sent to the sweep as job 5 starts, while the process logging beside it is still trying the
  server, and the time to its exit is measured; with ``--user-retries N``, MLflow's own retry budget is set in the
  environment (``MLFLOW_HTTP_REQUEST_MAX_RETRIES=N``, the backoff factor MLflow's default 2), as a user may;
- **hung**: as **lost**, but the server is frozen (SIGSTOP) instead: it accepts connections and answers none;
- **closed ports**: ``python -m pipeline`` with ``tracking.uri`` on a port nothing listens on, for HTTP and
  PostgreSQL: the time to fail and the lines printed; and, for scale, a whole run logged to a new SQLite store.

Figures depend on the machine and its load: compare them with the same script run before and after a change.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.paths import REPO

K1 = [f"{0.3 * i:.1f}" for i in range(1, 13)]
NOT_ANSWERING = re.compile(r"does not answer|did not answer|not logged")


def environment(folder: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["RANKSCOPE_CACHE_DIR"] = str(folder / "cache")
    return {**env, **(extra or {})}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lines:
    """A stream's lines as they come, each with the time it was read."""

    def __init__(self, stream) -> None:
        self.lines: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), line.rstrip("\n")))


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 600) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def lost_server(sigterm: bool, user_retries: int | None, cap: float, hung: bool = False) -> dict[str, object]:
    from pipeline.team.tracking_server import ServerSettings, _stop, tracking_server

    with tempfile.TemporaryDirectory(prefix="rankscope-lost-") as tmp:
        folder = Path(tmp)
        settings = ServerSettings(backend_store_uri=f"sqlite:///{folder / 'server.db'}",
                                  artifacts_destination=str(folder / "artifacts"), workers=1)
        extra = {} if user_retries is None else {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(user_retries)}
        sweep_dir = folder / "sweep"
        with tracking_server(settings) as server:
            command = [sys.executable, "-m", "pipeline", "-m", f"retriever.k1={','.join(K1)}",
                       f"hydra.sweep.dir={sweep_dir}", "tracking=server", f"tracking.uri={server.uri}", "quiet=true"]
            started = time.monotonic()
            process = subprocess.Popen(command, cwd=folder, env=environment(folder, extra), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True, start_new_session=True)
            err = Lines(process.stderr)
            if not wait_for(sweep_dir / "3", process):
                os.killpg(process.pid, signal.SIGKILL)
                return {"error": "the sweep ended before job 3", "stderr": [t for _, t in err.lines]}
            stopped = time.monotonic()  # the server stops answering at the signal; it takes a moment to exit
            # frozen, it accepts connections and answers none; stopped, it refuses them from the signal on
            os.killpg(server.process.pid, signal.SIGSTOP if hung else signal.SIGTERM)
            sent = None
            if sigterm and wait_for(sweep_dir / "5", process):
                sent = time.monotonic()
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=cap)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # its store process too, which may be retrying still
                process.wait()
            ended = time.monotonic()
            if hung:
                os.killpg(server.process.pid, signal.SIGCONT)
            _stop(server.process)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever it left behind
        err.thread.join(timeout=5)
        first = next((t for t, line in err.lines if NOT_ANSWERING.search(line)), None)
        saved = sum((sweep_dir / str(job) / "record.json").is_file() for job in range(len(K1)))
        return {
            "scenario": ("sigterm" if sigterm else "lost") + (" (hung)" if hung else ""), "user_retries": user_retries,
            "server_stopped_after_s": round(stopped - started, 1),
            "first_not_answering_s": None if first is None else round(first - stopped, 1),
            "sigterm_to_exit_s": None if sent is None else round(ended - sent, 1),
            "stop_to_exit_s": round(ended - stopped, 1), "capped": ended - stopped >= cap,
            "exit": process.returncode, "records_saved": saved, "stderr_lines": len(err.lines),
            "last_line": err.lines[-1][1] if err.lines else "",
            "stderr": [f"{t - stopped:+.1f} s {line}" for t, line in err.lines],
        }


def closed_port(uri: str | None) -> dict[str, object]:
    """``python -m pipeline tracking.uri=URI``; with no URI, the whole run on a new SQLite store, for scale."""
    with tempfile.TemporaryDirectory(prefix="rankscope-closed-") as tmp:
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pipeline", *([f"tracking.uri={uri}"] if uri else [])],
                              cwd=tmp, env=environment(Path(tmp)), capture_output=True, text=True, timeout=900)
        took = time.monotonic() - start
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return {"scenario": "closed port" if uri else "a whole run (SQLite)", "uri": uri, "seconds": round(took, 1),
            "exit": done.returncode, "stderr_lines": len(lines), "first_line": lines[0] if lines else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lost_store", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="lost,sigterm,hung,closed",
                        help="comma-separated: lost, sigterm, hung, closed")
    parser.add_argument("--user-retries", type=int, help="MLFLOW_HTTP_REQUEST_MAX_RETRIES set by the user (sigterm)")
    parser.add_argument("--cap", type=float, default=900, help="seconds after which a sweep is killed (default 900)")
    parser.add_argument("--show", action="store_true", help="print each sweep's lines, timed from the server's stop")
    args = parser.parse_args(argv)
    scenarios = args.scenarios.split(",")
    results = []
    if "lost" in scenarios:
        results.append(lost_server(False, None, args.cap))
    if "sigterm" in scenarios:
        results.append(lost_server(True, args.user_retries, args.cap))
    if "hung" in scenarios:
        results.append(lost_server(False, None, args.cap, hung=True))
    if "closed" in scenarios:
        port = free_port()
        for uri in (f"http://127.0.0.1:{port}", f"postgresql://user:pass@127.0.0.1:{port}/mlflow", None):
            results.append(closed_port(uri))
    for result in results:
        lines = result.pop("stderr", [])
        print(json.dumps(result), flush=True)
        if args.show:
            print("\n".join(f"    {line}" for line in lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
