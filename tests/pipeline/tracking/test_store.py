"""A store that does not exist yet, opened by several real processes at once: created once, nobody fails.

MLflow creates and migrates a SQLite store on a process's first connection; two processes doing that together
break it (``duplicate column``, ``table ... already exists``, ``Online migration expected to match one row``).
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from metrics.errors import InputError
from pipeline.common.names import CREATING_SUFFIX, DB_NAME
from pipeline.tracking import store
from pipeline.tracking.store import Store, still_not_answering, stopped_answering, store_error, unreachable
from tests.pipeline.helpers import cli_env

OPEN = textwrap.dedent("""
    import sys
    from pipeline.tracking.store import Store
    store = Store.open(sys.argv[1], "rankscope")
    print(store.experiment_id)
""")


def started_together(commands: list[list[str]], folder, timeout: float = 900) -> list[subprocess.CompletedProcess]:
    processes = [subprocess.Popen(c, cwd=folder, env=cli_env(folder), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for c in commands]
    done = []
    for process in processes:
        out, err = process.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


# 25 s of processes racing; test_a_new_store_appears_whole_the_moment_its_file_exists stays in the default suite
@pytest.mark.slow
def test_processes_opening_a_new_store_together_all_succeed_and_share_one_experiment(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = started_together([[sys.executable, "-c", OPEN, uri]] * 6, tmp_path)
    assert [d.returncode for d in done] == [0] * 6, [d.stderr[-800:] for d in done if d.returncode]
    assert len({d.stdout.strip() for d in done}) == 1
    assert [e.name for e in MlflowClient(uri).search_experiments()] == ["rankscope", "Default"]


def schema_version(db) -> str | None:
    """The store's migration version as another process sees it now (None: no version table yet)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as connection:
        try:
            return connection.execute("SELECT version_num FROM alembic_version").fetchone()[0]
        except sqlite3.OperationalError:
            return None


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_new_store_appears_whole_the_moment_its_file_exists(tmp_path):
    """MLflow spends seconds building a new store's tables; the store's file appears only once they are all there,
    so a process killed meanwhile (Ctrl-C, kill -9) cannot leave a half-made store no later command opens."""
    db = tmp_path / DB_NAME
    process = subprocess.Popen([sys.executable, "-c", OPEN, f"sqlite:///{db}"], cwd=tmp_path, env=cli_env(tmp_path),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not db.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    first_seen = schema_version(db)
    assert process.wait(timeout=300) == 0, process.stderr.read()[-1500:]
    assert first_seen is not None and first_seen == schema_version(db)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.3, 0.6, 1.0, 1.5, 2.0, 3.0])
def test_a_process_killed_while_creating_the_store_leaves_none_half_made(tmp_path, delay):
    """kill -9 while MLflow builds the tables (the moment the database file, or its temporary twin, appears, plus a
    delay): the next command opens the store and finds it whole."""
    db = tmp_path / DB_NAME
    uri = f"sqlite:///{db}"
    partial = db.with_name(db.name + CREATING_SUFFIX)
    process = subprocess.Popen([sys.executable, "-c", OPEN, uri], cwd=tmp_path, env=cli_env(tmp_path),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (db.exists() or partial.exists()) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    process.kill()
    process.wait(timeout=60)
    done = subprocess.run([sys.executable, "-c", OPEN, uri], cwd=tmp_path, env=cli_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]
    assert [e.name for e in MlflowClient(uri).search_experiments()] == ["rankscope", "Default"]
    assert not partial.exists()


@pytest.mark.slow
def test_eight_commands_started_together_on_a_new_store_all_succeed(tmp_path):
    command = [sys.executable, "-m", "pipeline", "quiet=true"]
    done = started_together([command] * 8, tmp_path)
    assert [d.returncode for d in done] == [0] * 8, [d.stderr[-800:] for d in done if d.returncode]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("rankscope").experiment_id])
    assert len(runs) == 8 and {r.info.status for r in runs} == {"FINISHED"}


@pytest.mark.slow
def test_two_sweeps_started_together_on_a_new_store_both_succeed(tmp_path):
    sweep = [sys.executable, "-m", "pipeline", "-m", "retriever=bm25,lsa", "quiet=true"]
    done = started_together([sweep, sweep], tmp_path)
    assert [d.returncode for d in done] == [0, 0], [d.stderr[-800:] for d in done if d.returncode]


@pytest.mark.slow
def test_eight_joblib_workers_of_a_sweep_on_a_new_store_all_succeed(tmp_path):
    sweep = [sys.executable, "-m", "pipeline", "-m", "retriever.k1=0.3,0.5,0.7,0.9,1.1,1.3,1.5,1.7",
             "hydra/launcher=joblib", "hydra.launcher.n_jobs=8", "quiet=true"]
    (done,) = started_together([sweep], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("rankscope").experiment_id])
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 9


PROXIES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")


def test_a_server_nobody_listens_on_is_refused_at_once_without_mlflows_retries(caplog, monkeypatch):
    """A closed port: one line now, not after MLflow's retries (urllib3 backs off for minutes by default)."""
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")  # were MLflow asked, its one retry would be logged
    caplog.set_level(logging.WARNING, logger="urllib3")
    with pytest.raises(InputError, match=r"^cannot open the MLflow tracking store http://127\.0\.0\.1:9: "
                                         r"Connection refused$"):
        Store.open("http://127.0.0.1:9")
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]


def test_a_listening_server_or_a_proxy_is_left_to_mlflow(monkeypatch):
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert unreachable(f"http://127.0.0.1:{port}") is None
    assert unreachable(f"http://127.0.0.1:{port}") == "Connection refused"  # closed now
    assert unreachable(f"sqlite:///{port}.db") is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")  # MLflow's requests go to the proxy
    assert unreachable(f"http://127.0.0.1:{port}") is None


def closed_port() -> int:
    """A port nothing listens on (taken, then released)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        return server.getsockname()[1]


@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+psycopg"])
def test_a_database_nobody_listens_on_is_refused_at_once_in_one_line(scheme, caplog):
    """MLflow's engine would try ten times over 101 s, with a warning of five lines each time."""
    caplog.set_level(logging.WARNING)
    uri = f"{scheme}://alice:s3cret@127.0.0.1:{closed_port()}/mlflow"
    with pytest.raises(InputError) as refused:
        Store.open(uri)
    assert str(refused.value) == (f"cannot open the MLflow tracking store {uri.replace('s3cret', '***')}: "
                                  f"Connection refused")
    assert not caplog.records


def test_a_database_port_where_something_else_answers_is_one_line_from_the_driver(caplog):
    """Something listens, but no database: one connection attempt, and the driver's own reason in one line."""
    caplog.set_level(logging.WARNING)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def hang_up() -> None:
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = server.accept()
                    connection.close()

        threading.Thread(target=hang_up, daemon=True).start()
        with pytest.raises(InputError) as refused:
            Store.open(f"postgresql://alice:s3cret@127.0.0.1:{port}/mlflow")
    message = str(refused.value)
    assert message.startswith(f"cannot open the MLflow tracking store postgresql://alice:***@127.0.0.1:{port}/mlflow: ")
    assert "\n" not in message and "s3cret" not in message
    assert not caplog.records  # not MLflow's ten attempts


def test_mlflows_retry_budget_is_rankscopes_unless_the_user_set_one():
    """MLflow's default (7 retries backing off up to 120 s, 120 s timeouts) kept a sweep silent for minutes."""
    code = ("import pipeline.tracking.client\n"
            "from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES as r, "
            "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR as f, MLFLOW_HTTP_REQUEST_TIMEOUT as t\n"
            "print(r.get(), f.get(), t.get())\n")
    ours = subprocess.run([sys.executable, "-c", code], env=cli_env(Path(".")), capture_output=True, text=True,
                          check=True, timeout=120)
    assert ours.stdout.split() == ["2", "1", "8"]
    theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                            env={**cli_env(Path(".")), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "7"})
    assert theirs.stdout.split() == ["7", "1", "8"]


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the name http.server calls
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args: object) -> None:
        pass


def test_a_store_that_stopped_answering_fails_at_once_until_it_answers_again(monkeypatch):
    port = closed_port()
    uri = f"http://alice:s3cret@127.0.0.1:{port}"
    assert still_not_answering(uri) is None  # never failed: the request is made
    assert stopped_answering(uri, "Connection refused") is True
    assert stopped_answering(uri, "Connection refused") is False  # not news
    monkeypatch.setattr(store, "RECHECK_S", 0.0)  # checked at every request
    assert still_not_answering(uri) == "Connection refused"  # still closed: the request need not be made
    server = http.server.HTTPServer(("127.0.0.1", port), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(store, "RECHECK_S", 3600.0)
        stopped_answering(uri, "Connection refused")
        assert still_not_answering(uri) == "Connection refused"  # checked a moment ago: not again yet
        monkeypatch.setattr(store, "RECHECK_S", 0.0)
        assert still_not_answering(uri) is None  # it answers again (its /health, without the credentials)
        assert still_not_answering(uri) is None
    finally:
        server.shutdown()
        server.server_close()


def test_a_database_store_error_never_makes_the_next_requests_fail_at_once(tmp_path):
    """A locked SQLite file (parallel jobs) says nothing of the next request: only a tracking server is checked."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert stopped_answering(uri, "database is locked") is False
    assert still_not_answering(uri) is None


def test_why_a_store_did_not_answer_is_said_in_a_few_words():
    refused = MlflowException("API request to http://127.0.0.1:9/api/2.0/mlflow/runs/search failed with exception "
                              "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: /api/2.0/"
                              "mlflow/runs/search (Caused by NewConnectionError(\"HTTPConnection(host='127.0.0.1', "
                              "port=9): Failed to establish a new connection: [Errno 111] Connection refused\"))")
    hung = MlflowException("API request to http://127.0.0.1:9/api/2.0/mlflow/runs/search failed with exception "
                           "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: /api/2.0/"
                           "mlflow/runs/search (Caused by ReadTimeoutError(\"HTTPConnectionPool(host='127.0.0.1', "
                           "port=9): Read timed out. (read timeout=8)\"))")
    assert (store_error(refused), store_error(hung)) == ("Connection refused", "Read timed out")
