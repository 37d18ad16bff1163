"""A store that does not exist yet, opened by several real processes at once: created once, nobody fails.

MLflow creates and migrates a SQLite store on a process's first connection; two processes doing that together
break it (``duplicate column``, ``table ... already exists``, ``Online migration expected to match one row``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from mlflow import MlflowClient

from metrics.errors import InputError
from pipeline.common.names import CREATING_SUFFIX, DB_NAME
from pipeline.tracking.store import Store, unreachable
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
