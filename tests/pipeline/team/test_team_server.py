"""Team tracking: a real PostgreSQL, the MLflow server of pipeline.server on it, and clients writing at once.

Everything listens on 127.0.0.1 and is stopped by the fixtures even when a test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipeline.common.redact import redact_text as redact
from pipeline.team.postgres import binaries_available, find_binary
from pipeline.team.tracking_server import ServerError, ServerSettings, create_schema, team_server, with_driver

REPO = Path(__file__).resolve().parents[3]
CLIENTS = 4
EXPERIMENT = "team-sweep"

needs_postgres = pytest.mark.skipif(
    not binaries_available(),
    reason="PostgreSQL's initdb/pg_ctl/postgres are not installed (Debian: apt-get install postgresql)",
)

# One sweep point: logs exactly the payload it is given (argv[1]), after every client is ready (a line on stdin),
# so the four hit the server together. The experiment id is taken from set_experiment's return value: when two
# processes create the same experiment at once, MLflow 3.17 returns it without making it the active one.
CLIENT = textwrap.dedent(
    """
    import json, pathlib, sys
    import mlflow

    payload = json.loads(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    experiment_id = mlflow.set_experiment(payload["experiment"]).experiment_id
    with mlflow.start_run(experiment_id=experiment_id, run_name=payload["name"]) as run:
        mlflow.log_params(payload["params"])
        for step, value in enumerate(payload["history"]):
            mlflow.log_metric("loss", value, step=step)
        mlflow.log_metrics(payload["metrics"])
        mlflow.log_table(payload["table"], artifact_file="per_question.json")
        note = pathlib.Path(payload["name"] + ".txt")
        note.write_text(payload["note"], encoding="utf-8")
        mlflow.log_artifact(str(note), artifact_path="notes")
    print(json.dumps({"run_id": run.info.run_id}), flush=True)
    """
)


def payload(index: int) -> dict:
    """What client `index` logs: different for every client, so a mixed-up read-back shows."""
    return {
        "experiment": EXPERIMENT,
        "name": f"point-{index}",
        "params": {"k1": str(0.9 + 0.3 * index), "b": str(0.4 + 0.1 * index), "retriever": "bm25"},
        "metrics": {"ndcg_at_5": 0.5 + index / 100, "mrr": 0.6 - index / 100},
        "history": [index + step / 10 for step in range(5)],
        "table": {"query_id": [f"q{index}-{j}" for j in range(3)], "ndcg_at_5": [index / 10, 0.25, 1.0]},
        "note": f"artifact of sweep point {index}\n",
    }


def _get(url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _closed(uri: str) -> bool:
    try:
        urllib.request.urlopen(f"{uri}/health", timeout=2)
    except (urllib.error.URLError, OSError):
        return True
    return False


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    if not binaries_available():
        pytest.skip("PostgreSQL's initdb/pg_ctl/postgres are not installed (Debian: apt-get install postgresql)")
    log_path = tmp_path_factory.mktemp("team") / "server.log"
    with log_path.open("w", encoding="utf-8") as log, team_server(log=log) as server:
        yield server
    assert _closed(server.uri), "the tracking server still answers after the fixture stopped it"


@pytest.fixture(scope="module")
def sweep(team, tmp_path_factory):
    """Four client processes started together; returns {index: run_id}. Every client is ended even on failure."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": team.uri}
    processes = []
    try:
        for index in range(CLIENTS):
            cwd = tmp_path_factory.mktemp(f"client{index}")
            processes.append(subprocess.Popen(
                [sys.executable, "-c", CLIENT, json.dumps(payload(index))], cwd=cwd, env=env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            ))
        for process in processes:
            assert process.stdout.readline().strip() == "ready", process.stderr.read()
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        run_ids = {}
        for index, process in enumerate(processes):
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, f"client {index} failed:\n{err}"
            run_ids[index] = json.loads(out.strip().splitlines()[-1])["run_id"]
        return run_ids
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.slow
def test_parallel_clients_runs_all_read_back_through_the_server(team, sweep, tmp_path):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=team.uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = {run.info.run_id: run for run in client.search_runs([experiment.experiment_id])}
    assert set(runs) == set(sweep.values()), "every client's run, and only those, is in the shared experiment"

    for index, run_id in sweep.items():
        sent, run = payload(index), runs[run_id]
        assert run.info.status == "FINISHED"
        assert run.info.run_name == sent["name"]
        assert dict(run.data.params) == sent["params"]
        assert {k: run.data.metrics[k] for k in sent["metrics"]} == sent["metrics"]
        history = sorted(client.get_metric_history(run_id, "loss"), key=lambda m: m.step)
        assert [m.value for m in history] == sent["history"]

        assert run.info.artifact_uri.startswith("mlflow-artifacts:"), "artifacts must go through the server"
        assert {a.path for a in client.list_artifacts(run_id)} == {"per_question.json", "notes"}
        note = Path(client.download_artifacts(run_id, f"notes/{sent['name']}.txt", str(tmp_path)))
        assert note.read_text(encoding="utf-8") == sent["note"]
        # log_table's JSON (split orientation), read directly: MlflowClient.load_table searches through the
        # process-wide tracking URI, not the client's, so it would look in the wrong store here.
        logged = json.loads(Path(client.download_artifacts(run_id, "per_question.json", str(tmp_path))).read_text())
        columns = {name: [row[i] for row in logged["data"]] for i, name in enumerate(logged["columns"])}
        assert columns == sent["table"]
        assert {"path": "per_question.json", "type": "table"} in json.loads(run.data.tags["mlflow.loggedArtifacts"])


@pytest.mark.slow
def test_runs_and_artifacts_are_plain_rest_resources_stored_by_server_and_database(team, sweep):
    import psycopg

    for index, run_id in sweep.items():
        sent = payload(index)
        status, body = _get(f"{team.uri}/api/2.0/mlflow/runs/get?run_id={run_id}")
        assert status == 200
        run = json.loads(body)["run"]
        assert {p["key"]: p["value"] for p in run["data"]["params"]} == sent["params"]

        # mlflow-artifacts:/<experiment>/<run>/artifacts is the server's proxy path for the same files.
        relative = run["info"]["artifact_uri"].removeprefix("mlflow-artifacts:").lstrip("/")
        status, body = _get(f"{team.uri}/api/2.0/mlflow-artifacts/artifacts/{relative}/notes/{sent['name']}.txt")
        assert (status, body.decode()) == (200, sent["note"])
        assert (team.artifacts / relative / "notes" / f"{sent['name']}.txt").read_text() == sent["note"]

    with psycopg.connect(team.database_uri) as connection:
        stored = connection.execute(
            "SELECT r.run_uuid FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id WHERE e.name = %s",
            (EXPERIMENT,),
        ).fetchall()
    assert {row[0] for row in stored} == set(sweep.values()), "the runs are rows of the PostgreSQL database"


@pytest.mark.slow
def test_server_refuses_foreign_host_headers_and_cross_site_writes(team):
    search = f"{team.uri}/api/2.0/mlflow/experiments/search"
    query = json.dumps({"max_results": 1}).encode()
    json_type = {"Content-Type": "application/json"}
    assert _get(search, json_type, query)[0] == 200
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own name as Host.
    assert _get(search, {**json_type, "Host": f"evil.example:{team.tracking.port}"}, query)[0] == 403
    assert _get(search, {**json_type, "Origin": "http://evil.example"}, query)[0] == 403


@pytest.mark.slow
def test_a_wrong_database_password_is_reported_without_the_password(team):
    wrong = team.database_uri.replace(urlsplit(team.database_uri).password, "not-the-password-42")
    with pytest.raises(ServerError, match="password authentication failed") as raised:
        create_schema(wrong)
    assert "not-the-password-42" not in str(raised.value)


def test_an_unreachable_database_stops_the_command_with_a_redacted_message(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.server", "--backend-store-uri", "postgresql://u:hunter2@127.0.0.1:1/x"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "cannot connect to postgresql+psycopg://u:***@127.0.0.1:1/x" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == [], "nothing is created before the database is reached"


def test_default_settings_bind_loopback_and_accept_only_loopback_host_names():
    settings = ServerSettings("postgresql://u:secret@db:5432/mlflow", "/srv/artifacts")
    command = settings.command(5123)
    assert command[command.index("--host") + 1] == "127.0.0.1"
    hosts = command[command.index("--allowed-hosts") + 1].split(",")
    assert set(hosts) == {"127.0.0.1:5123", "localhost:5123"}
    assert "--cors-allowed-origins" not in command
    assert "secret" not in " ".join(command), "the password must not be visible in `ps`"
    assert settings.environment()["MLFLOW_BACKEND_STORE_URI"] == settings.backend_store_uri


def test_exposed_settings_bind_every_interface_and_add_this_machines_names():
    settings = ServerSettings("sqlite:///m.db", "/srv/artifacts", expose=True, extra_allowed_hosts=("mlflow.corp",))
    command = settings.command(5123)
    assert command[command.index("--host") + 1] == "0.0.0.0"
    hosts = command[command.index("--allowed-hosts") + 1].split(",")
    assert {"127.0.0.1:5123", "localhost:5123", "mlflow.corp"} <= set(hosts)
    assert "*" not in hosts
    origins = command[command.index("--cors-allowed-origins") + 1].split(",")
    assert all(origin.startswith("http://") and origin.endswith(":5123") for origin in origins)


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("postgresql://u:p@db:5432/mlflow", "postgresql+psycopg://u:p@db:5432/mlflow"),
        ("postgres://u:p@db/mlflow", "postgresql+psycopg://u:p@db/mlflow"),
        ("postgresql+psycopg2://u:p@db/mlflow", "postgresql+psycopg2://u:p@db/mlflow"),
        ("sqlite:////srv/mlflow.db", "sqlite:////srv/mlflow.db"),
    ],
)
def test_a_bare_postgresql_uri_uses_the_team_extras_driver(given, used):
    assert with_driver(given) == used


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("postgresql://alice:s3cr%40t@db:5432/mlflow", "s3cr%40t", "postgresql://alice:***@db:5432/mlflow"),
        ("postgresql+psycopg2://bob:pa:ss@127.0.0.1/x failed", "pa:ss", "bob:***@127.0.0.1/x failed"),
        ("connect(password=hunter2 host=db)", "hunter2", "password=*** host=db"),
    ],
)
def test_redact_hides_passwords_and_keeps_the_rest(text, hidden, kept):
    assert hidden not in redact(text)
    assert kept in redact(text)
    assert redact("http://127.0.0.1:5000/health") == "http://127.0.0.1:5000/health"


@pytest.fixture
def demo_dir():
    """A folder the `postgres` user can enter (pytest's tmp_path is private to root); cleaned up afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="rankscope-demo-"))
    folder.chmod(0o711)
    yield folder
    data = folder / "pg" / "data"
    if (data / "postmaster.pid").exists():  # the test failed before the server stopped PostgreSQL
        runner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*runner, str(find_binary("pg_ctl")), "stop", "-D", str(data), "-m", "immediate"], cwd="/")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@needs_postgres
def test_one_command_demo_serves_runs_and_stops_everything_on_sigterm(demo_dir, tmp_path):
    from mlflow import MlflowClient

    from pipeline.team.postgres import free_port

    postgres_port = free_port()  # asked for: the line that says PostgreSQL runs names it
    errors = (tmp_path / "stderr.log").open("w+", encoding="utf-8")  # a file, so MLflow's log never fills a pipe
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.server", "--postgres-dir", str(demo_dir / "pg"), "--port", "0",
         "--postgres-port", str(postgres_port), "--artifacts-destination", str(demo_dir / "artifacts")],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
        stdout=subprocess.PIPE, stderr=errors, start_new_session=True,
    )
    try:
        lines = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            lines.append(process.stdout.readline())
            if lines[-1].startswith("Stop with"):
                break
        announced = [line.split("=", 1)[1].split()[0] for line in lines if "MLFLOW_TRACKING_URI=" in line]
        log = (tmp_path / "stderr.log").read_text()
        assert announced, f"the server never announced its URI:\n{''.join(lines)}{log}"
        uri = announced[0]
        assert uri.startswith("http://127.0.0.1:")
        assert any(line.startswith("PostgreSQL running: ") and f"@127.0.0.1:{postgres_port}/" in line for line in lines)

        client = MlflowClient(tracking_uri=uri)
        run = client.create_run(client.create_experiment("demo"))
        client.log_metric(run.info.run_id, "mrr", 0.5)
        assert client.get_run(run.info.run_id).data.metrics == {"mrr": 0.5}

        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        errors.seek(0)
        err = errors.read()
        errors.close()
    assert process.returncode == 0, err
    assert _closed(uri)
    assert not (demo_dir / "pg" / "data" / "postmaster.pid").exists(), "PostgreSQL was left running"
    password = (demo_dir / "pg" / "password").read_text().strip()
    assert password not in "".join(lines) + out + err


@pytest.mark.slow
def test_a_joblib_sweep_against_the_team_server_reads_back_every_run(team, tmp_path):
    """``python -m pipeline`` with parallel joblib workers, tracking.uri = the PostgreSQL-backed server."""
    import psycopg
    from mlflow import MlflowClient

    from tests.pipeline.helpers import run_pipeline
    from tests.retrievers.test_helpdesk_study import EXPECTED

    done = run_pipeline(tmp_path, "-m", "retriever=bm25,lsa,weighted,rrf", "hydra/launcher=joblib", "tracking=server",
                        f"tracking.uri={team.uri}", "tracking.experiment=team-joblib-sweep")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "mlflow.db").exists(), "nothing was logged to a local store"
    client = MlflowClient(tracking_uri=team.uri)
    experiment = client.get_experiment_by_name("team-joblib-sweep")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = {r.data.tags["rankscope.system"]: r for r in runs if r is not parent}
    assert parent.info.status == "FINISHED" and sorted(children) == sorted(EXPECTED)
    assert {"summary.txt", "systems.csv"} <= {a.path for a in client.list_artifacts(parent.info.run_id)}
    for system, (hit, recall, mrr, ndcg) in EXPECTED.items():
        run = children[system]
        assert run.info.status == "FINISHED" and run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        m = run.data.metrics
        assert (round(m["hit_rate_at_3"], 2), round(m["recall_at_5"], 2), round(m["mrr"], 2),
                round(m["ndcg_at_5"], 3)) == (hit, recall, mrr, ndcg), system
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")
        table = Path(client.download_artifacts(run.info.run_id, "per_question.csv", str(tmp_path)))
        assert len(table.read_text(encoding="utf-8").splitlines()) == 15  # header + 14 questions
    with psycopg.connect(team.database_uri) as connection:
        stored = connection.execute(
            "SELECT r.run_uuid, r.status FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id "
            "WHERE e.name = %s", ("team-joblib-sweep",)).fetchall()
    assert dict(stored) == {r.info.run_id: "FINISHED" for r in runs}, "every run is a row of the PostgreSQL database"


def server_command(tmp_path: Path, *args: str, hide: str | None = None) -> subprocess.CompletedProcess:
    """``python -m pipeline.server ARGS``; ``hide``: a module made unimportable first, as if not installed."""
    code = "import sys\n"
    if hide:
        code += f"sys.modules[{hide!r}] = None\n"
    code += f"from pipeline.server import main\nsys.exit(main({list(args)!r}))\n"
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)


def test_without_the_team_extra_the_server_says_what_to_install_in_one_line(tmp_path):
    done = server_command(tmp_path, "--backend-store-uri", "postgresql://u:hunter2@127.0.0.1:1/x", hide="psycopg")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "pip install 'rankscope[team]'" in lines[0] and "hunter2" not in lines[0]


def test_a_busy_port_is_one_line_before_anything_starts(tmp_path):
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = server_command(tmp_path, "--backend-store-uri", f"sqlite:///{tmp_path / 'm.db'}", "--port", str(port))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in lines[0]


def test_a_port_just_freed_by_a_stopped_server_is_free_again():
    """The server closed its connections first, so they linger in TIME_WAIT on its port: a restart on the same port
    (as after an outage) must not be refused as busy."""
    import socket

    from pipeline.team.tracking_server import check_port_free

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()  # the server side closes first: its end of the connection waits in TIME_WAIT
        client.close()
    check_port_free("127.0.0.1", port)


def test_exposed_settings_allow_every_address_the_server_listens_on():
    from pipeline.team.tracking_server import interface_addresses

    addresses = interface_addresses()
    if not addresses:
        pytest.skip("this machine has no network interface with an IPv4 address besides loopback")
    hosts = ServerSettings("sqlite:///m.db", "/srv", expose=True).allowed_hosts(5123)
    assert {f"{a}:5123" for a in addresses} <= set(hosts)


@pytest.mark.slow
def test_an_exposed_server_answers_requests_that_use_the_machines_address(tmp_path):
    from pipeline.team.tracking_server import interface_addresses, tracking_server

    addresses = interface_addresses()
    if not addresses:
        pytest.skip("this machine has no network interface with an IPv4 address besides loopback")
    settings = ServerSettings(f"sqlite:///{tmp_path / 'm.db'}", str(tmp_path / "artifacts"), expose=True, workers=1)
    with tracking_server(settings) as server:
        url = f"http://{addresses[0]}:{server.port}/api/2.0/mlflow/experiments/search"
        status, _ = _get(url, {"Content-Type": "application/json"}, json.dumps({"max_results": 1}).encode())
    assert status == 200
