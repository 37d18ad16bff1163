"""Team tracking: a real PostgreSQL, the MLflow server of pipeline.server on it, and clients writing at once.

Everything listens on 127.0.0.1 and is stopped by the fixtures even when a test fails.
"""

from __future__ import annotations

import contextlib
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


# -- the command's processes, killed for real -------------------------------------------------------------------------

needs_proc = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc")


def serve(tmp_path: Path, *args: str, name: str = "server") -> tuple[subprocess.Popen, Path]:
    """``python -m pipeline.server ARGS`` in a session of its own, as from a terminal (its stderr in a file)."""
    log = tmp_path / f"{name}.stderr"
    process = subprocess.Popen([sys.executable, "-m", "pipeline.server", *args], cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=log.open("w"), text=True, start_new_session=True)
    return process, log


def until_ready(process: subprocess.Popen, log: Path, timeout: float = 240) -> str:
    """What the command printed up to 'Stop with Ctrl-C.' (it must get there within ``timeout`` seconds)."""
    import select

    said, deadline = "", time.monotonic() + timeout
    while "Stop with" not in said and time.monotonic() < deadline and process.poll() is None:
        if select.select([process.stdout], [], [], 1)[0]:  # raw reads: select sees nothing a buffer holds
            said += os.read(process.stdout.fileno(), 65536).decode(errors="replace")
    assert "Stop with" in said, f"the server never got ready:\n{said}{log.read_text()[-3000:]}"
    return said


def ended(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture
def server_groups():
    """Process groups of servers a test started: whatever is left of them is killed afterwards."""
    from pipeline.team.guard import group_members

    groups: list[int] = []
    yield groups
    for group in groups:
        for pid in group_members(group):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def server_group(port: int) -> int:
    from pipeline.team.processes import listeners

    return os.getpgid(listeners(port)[0])


@needs_proc
def test_a_server_command_killed_with_sigkill_takes_its_mlflow_server_along_and_restarts_at_once(tmp_path,
                                                                                                   server_groups):
    """SIGKILL gives the command no chance to clean up: its guard ends MLflow's server (uvicorn, its workers, the job
    runner and its consumers), and the documented restart, typed at once, waits for that and serves on the port."""
    from pipeline.team.guard import group_members
    from pipeline.team.postgres import free_port
    from pipeline.team.tracking_server import port_free

    port = free_port()
    args = ("--backend-store-uri", f"sqlite:///{tmp_path / 'm.db'}", "--port", str(port), "--workers", "1",
            "--artifacts-destination", str(tmp_path / "artifacts"))
    first, log = serve(tmp_path, *args)
    try:
        until_ready(first, log)
        group = server_group(port)
        server_groups.append(group)
        processes = group_members(group)
        assert len(processes) >= 4, "the guard, MLflow's command, uvicorn and its worker at least"
        first.send_signal(signal.SIGKILL)
        first.wait()
        second, log = serve(tmp_path, *args, name="restart")
        try:
            said = until_ready(second, log)
            assert f"MLFLOW_TRACKING_URI=http://127.0.0.1:{port}" in said
            assert not group_members(group), "a process of the killed command's server is still running"
            server_groups.append(server_group(port))
            second.send_signal(signal.SIGKILL)
            second.wait()
        finally:
            ended(second)
    finally:
        ended(first)
    deadline = time.monotonic() + 60
    while group_members(server_groups[-1]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert port_free("127.0.0.1", port) and not group_members(server_groups[-1]), "killed again: all gone again"


def answer_on_a_terminal(command: list[str], cwd: Path, answer: str, until: str, timeout: float = 240) -> str:
    """Run ``command`` on a pseudo-terminal, answer its question ('[y/N]') with ``answer``; what it printed up to
    ``until`` (or its end). It runs on if ``until`` came: the caller stops it (its pid is the last line)."""
    import pty
    import select

    pid, terminal = pty.fork()
    if pid == 0:  # the child: the command, its stdin a terminal
        os.chdir(cwd)
        os.execve(command[0], command, {**os.environ, "PYTHONPATH": str(REPO)})
    said, answered, deadline = b"", False, time.monotonic() + timeout
    while time.monotonic() < deadline and until.encode() not in said:
        if select.select([terminal], [], [], 0.5)[0]:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # the command ended
                break
            said += chunk
        if not answered and b"[y/N]" in said:
            os.write(terminal, answer.encode() + b"\n")
            answered = True
    return said.decode(errors="replace").replace("\r\n", "\n") + f"\n{pid}"


@pytest.mark.slow
@needs_proc
def test_a_server_left_running_by_a_killed_command_and_guard_is_named_and_ended_when_the_user_agrees(
        tmp_path, server_groups):
    """Both the command and its guard killed (nothing can clean up then): the next start finds MLflow's server still on
    the port, says whose it is and ends it only when told: --end-stale, or yes at the terminal."""
    from pipeline.team.guard import group_members
    from pipeline.team.postgres import free_port

    port = free_port()
    args = ("--backend-store-uri", f"sqlite:///{tmp_path / 'm.db'}", "--port", str(port), "--workers", "1",
            "--artifacts-destination", str(tmp_path / "artifacts"))

    def leave_one() -> int:
        command, log = serve(tmp_path, *args, name="left")
        try:
            until_ready(command, log)
            group = server_group(port)
            server_groups.append(group)
            os.kill(group, signal.SIGKILL)  # the guard first (the group's leader), then the command
            command.send_signal(signal.SIGKILL)
            command.wait()
        finally:
            ended(command)
        time.sleep(2)
        assert len(group_members(group)) >= 3, "MLflow's server outlived its command and guard"
        return group

    left = leave_one()
    refused = subprocess.run([sys.executable, "-m", "pipeline.server", *args], cwd=tmp_path, stdin=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=240)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "that an earlier rankscope command" in lines[0] and f"left running on port {port} on 127.0.0.1" in lines[0]
    assert "end it with --end-stale" in lines[0] and group_members(left), "asked nothing, ended nothing"

    said = answer_on_a_terminal([sys.executable, "-m", "pipeline.server", *args], tmp_path, "y", "Stop with")
    pid = int(said.rsplit("\n", 1)[1])
    try:
        assert "End it? [y/N]" in said and "Stop with Ctrl-C." in said, said
        assert not group_members(left), "the leftover server was ended"
        server_groups.append(server_group(port))
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)

    left = leave_one()
    command, log = serve(tmp_path, *args, "--end-stale", name="end-stale")
    try:
        until_ready(command, log)
        assert "(--end-stale)" in log.read_text() and not group_members(left)
        server_groups.append(server_group(port))
        command.send_signal(signal.SIGTERM)
        assert command.wait(timeout=120) == 0
    finally:
        ended(command)


@pytest.mark.slow
@needs_postgres
@needs_proc
def test_a_killed_demo_command_stops_its_postgresql_too_and_a_cluster_left_running_is_offered_to_end(
        demo_dir, tmp_path, server_groups):
    """--postgres-dir: killed with SIGKILL, the command's watch stops PostgreSQL (pg_ctl detached it from the command);
    with that watch killed too, the next start names the cluster left running and ends it with --end-stale."""
    from pipeline.team.guard import group_members
    from pipeline.team.postgres import free_port

    data = demo_dir / "pg" / "data"
    args = ("--postgres-dir", str(demo_dir / "pg"), "--port", str(free_port()), "--workers", "1",
            "--artifacts-destination", str(demo_dir / "artifacts"))

    def killed(watch_too: bool) -> None:
        command, log = serve(tmp_path, *args)
        try:
            until_ready(command, log)
            if watch_too:
                for pid in children_of(command.pid):
                    if b"--then" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        os.kill(pid, signal.SIGKILL)
            command.send_signal(signal.SIGKILL)
            command.wait()
        finally:
            ended(command)

    killed(watch_too=False)
    deadline = time.monotonic() + 90
    while (data / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not (data / "postmaster.pid").exists(), "PostgreSQL was left running"

    killed(watch_too=True)
    time.sleep(3)
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    assert group_members(postmaster), "with its watch killed too, PostgreSQL outlived the command"
    refused = subprocess.run([sys.executable, "-m", "pipeline.server", *args], cwd=tmp_path, stdin=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=240)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "a PostgreSQL server (" in lines[0] and f"left running on {data}: end it with --end-stale" in lines[0]

    command, log = serve(tmp_path, *args, "--end-stale", name="end-stale")
    try:
        until_ready(command, log)
        assert "(--end-stale)" in log.read_text()
        command.send_signal(signal.SIGTERM)
        assert command.wait(timeout=120) == 0
    finally:
        ended(command)
    assert not (data / "postmaster.pid").exists()


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found
