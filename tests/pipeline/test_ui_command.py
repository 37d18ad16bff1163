"""``python -m pipeline.ui`` (``make ui``): the MLflow UI on a local store, served by one real process.

It must serve what ``mlflow ui`` serves (the page, the runs, their artifacts), print the page to open (the
experiment's runs in runs mode, on its newest saved view), tell the links other commands print its address while it
runs, stop on Ctrl-C without a traceback, and say in one line what is wrong with a busy port, a store that is not
local or one that does not exist (never creating it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(folder: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen([sys.executable, "-m", "pipeline.ui", *args], cwd=folder, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read()


def wait_until_served(process: subprocess.Popen, base: str, limit: float = 180) -> None:
    start_time = time.monotonic()
    while time.monotonic() - start_time < limit:
        assert process.poll() is None, process.communicate()[1][-3000:]
        try:
            get(base + "/health")
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the UI did not answer /health")


@pytest.fixture(scope="module")
def store_with_a_run(tmp_path_factory, empty_store):
    """A store made as rankscope makes one (artifacts beside the database), holding one run with a file."""
    folder = tmp_path_factory.mktemp("ui-store")
    shutil.copy(empty_store, folder / "mlflow.db")
    code = """
from pathlib import Path
from pipeline.tracking.store import Store
from pipeline.tracking.views import save_view
store = Store.open('sqlite:///' + str(Path('mlflow.db').resolve()), 'rankscope')
run = store.client.create_run(store.experiment_id, run_name='BM25 · helpdesk')
store.client.log_metric(run.info.run_id, 'ndcg_at_10', 0.75)
Path('per_question.json').write_text('{"columns": ["query_id"], "data": [["q01"]]}')
store.client.log_artifact(run.info.run_id, 'per_question.json')
store.client.set_terminated(run.info.run_id)
save_view(store.client, store.experiment_id, 'helpdesk', 'ndcg_at_10', 'ndcg@10', [])
print(run.info.run_id)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, done.stdout.strip()


def test_it_serves_the_page_the_runs_and_their_artifacts_then_stops_on_ctrl_c(store_with_a_run):
    folder, run_id = store_with_a_run
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = start(folder, "--port", str(port))  # the default store: ./mlflow.db
    try:
        wait_until_served(process, base)
        assert b"<html" in get(base + "/").lower()
        links = subprocess.run([sys.executable, "-c", "from pipeline.tracking.links import run_location; "
                                f"print(run_location('sqlite:///{folder / 'mlflow.db'}', '1', '{run_id}'))"],
                               env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
        assert links.stdout.splitlines()[1] == (f"  its page:  {base}/#/experiments/1/runs/{run_id}"
                                                "?workflowType=machine_learning")  # this UI's port, not 5000
        found = json.loads(get(base + "/ajax-api/2.0/mlflow/runs/get?run_id=" + run_id))
        assert found["run"]["data"]["metrics"][0]["key"] == "ndcg_at_10"
        artifact = get(f"{base}/get-artifact?path=per_question.json&run_uuid={run_id}")
        assert json.loads(artifact)["data"] == [["q01"]]
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert f"MLflow UI on {base}" in out
    assert (f"Open:  {base}/#/experiments/1/runs?workflowType=machine_learning"
            "&viewStateShareKey=rankscope-helpdesk-ndcg_at_10") in out.splitlines()
    assert "Traceback" not in err and not (folder / "mlflow.db.ui").exists()


@pytest.mark.parametrize("typed", ["mlflow.db,", "elsewhere/mlflow.db"])
def test_a_store_that_does_not_exist_is_one_line_and_is_not_created(tmp_path, typed):
    """``--backend-store-uri .../mlflow.db,`` (the comma copied with a path) would serve a new, empty store."""
    process = start(tmp_path, "--backend-store-uri", f"sqlite:///{tmp_path / typed}", "--port", str(free_port()))
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    assert err.strip().count("\n") == 0 and f"no MLflow store at {tmp_path / typed}" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_busy_port_is_one_line(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        process = start(tmp_path, "--port", str(port))
        _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    assert err.strip().count("\n") == 0 and f"port {port}" in err, err


def test_a_tracking_server_is_not_a_local_store(tmp_path):
    process = start(tmp_path, "--backend-store-uri", "http://127.0.0.1:5999")
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    assert err.strip().count("\n") == 0 and "serves its own UI" in err, err


def test_links_printed_before_the_ui_runs_name_the_port_it_then_serves_on(tmp_path):
    """``make ui UI_PORT=5455`` (or RANKSCOPE_UI_PORT=5455 set once): a run's links, printed before any UI runs, name
    that port, its "open the UI" command serves there from any shell, and the UI started with the variable alone
    serves there too."""
    import shlex

    from pipeline.common.names import UI_PORT_ENV
    from tests.pipeline.helpers import run_pipeline

    port = free_port()
    done = run_pipeline(tmp_path, "quiet=true", env={UI_PORT_ENV: str(port)})
    assert done.returncode == 0, done.stderr[-3000:]
    said = dict(line.strip().split(":  ", 1) for line in done.stdout.splitlines() if ":  " in line)
    base = f"http://127.0.0.1:{port}"
    assert said["its page"].startswith(f"{base}/#/experiments/1/runs/"), said
    assert shlex.split(said["open the UI"])[-2:] == ["--port", str(port)], "typed in a shell without the variable"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    process = subprocess.Popen([sys.executable, "-m", "pipeline.ui", "--no-browser"], cwd=tmp_path, text=True,
                               env={**env, "PYTHONPATH": str(REPO), UI_PORT_ENV: str(port)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until_served(process, base)
        run_id = said["its page"].split("/runs/")[1].split("?")[0]
        found = json.loads(get(f"{base}/ajax-api/2.0/mlflow/runs/get?run_id={run_id}"))
        assert found["run"]["info"]["run_id"] == run_id
    finally:
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    assert f"MLflow UI on {base}" in out


def test_a_ui_port_variable_that_is_no_port_is_one_line(tmp_path):
    from pipeline.common.names import UI_PORT_ENV

    env = {**os.environ, "PYTHONPATH": str(REPO), UI_PORT_ENV: "54x"}
    done = subprocess.run([sys.executable, "-m", "pipeline.ui"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip() == (
        "python -m pipeline.ui: RANKSCOPE_UI_PORT='54x' is not a port number (1-65535)")
