"""A real Label Studio server for the tests and the docs' screenshots: ``label-studio start`` on SQLite in a temporary
data folder, its first user and legacy API token set from the environment (about 25 s to answer), and no call to the
package index at start (``LATEST_VERSION_CHECK=false``: it otherwise asks pypi.org for a newer version)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER, PASSWORD, TOKEN = "admin@example.com", "rankscope-test-pass", "0123456789abcdef0123456789abcdef01234567"


def executable() -> Path | None:
    found = Path(sys.executable).with_name("label-studio")
    return found if found.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(folder: Path) -> dict[str, str]:
    """The environment ``label-studio start`` runs in: the first user, its legacy token, the data folder; offline."""
    return {**os.environ, "LABEL_STUDIO_USERNAME": USER, "LABEL_STUDIO_PASSWORD": PASSWORD,
            "LABEL_STUDIO_USER_TOKEN": TOKEN, "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
            "LABEL_STUDIO_BASE_DATA_DIR": str(folder / "data"), "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
            "LATEST_VERSION_CHECK": "false", "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": ""}


def log_of(folder: Path) -> Path:
    return folder / "label-studio.log"


@contextmanager
def label_studio(folder: Path, wait: float = 900.0) -> Iterator[str]:
    """The server's URL while it runs (its log in ``log_of(folder)``)."""
    port = free_port()
    env = server_env(folder)
    log = log_of(folder).open("w")
    process = subprocess.Popen([str(executable()), "start", "--no-browser", "--port", str(port),
                                "--internal-host", "127.0.0.1", "--data-dir", str(folder / "data")],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait
        while True:
            if process.poll() is not None:
                said = log_of(folder).read_text()[-2000:]
                raise RuntimeError(f"label-studio ended ({process.returncode}): {said}")
            try:
                request = urllib.request.Request(url + "/api/current-user/whoami",
                                                 headers={"Authorization": f"Token {TOKEN}"})
                with urllib.request.urlopen(request, timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"label-studio did not answer in {wait:.0f} s")
            time.sleep(1.0)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
