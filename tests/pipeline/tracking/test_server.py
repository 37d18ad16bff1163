"""A joblib sweep logged to a real ``mlflow server`` on 127.0.0.1, read back through its REST API.

The tracking URI carries credentials (the server ignores them): none may appear in what was logged.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pipeline.common.names import FAILURES_PREFIX
from tests.pipeline.helpers import run_pipeline

pytestmark = pytest.mark.slow  # the server alone takes 30-60 s to start on a busy 2-core machine

SECRET = "s3cret-Pa55"
SPEC_NDCG5 = {"BM25": 0.691, "LSA": 0.679, "weighted": 0.734, "RRF": 0.737}
EXPERIMENT = "server-sweep"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("server")
    port = free_port()
    mlflow = Path(sys.executable).parent / "mlflow"
    log = (folder / "server.log").open("w")
    process = subprocess.Popen(
        [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{folder / 'server.db'}",
         "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server exited: {(folder / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server not healthy after 240 s: {(folder / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the server's own process group (start_new_session)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def rest(url: str, path: str, body: dict | None = None) -> dict | str:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}{path}", data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return json.loads(text) if response.headers.get_content_type() == "application/json" else text


@pytest.fixture(scope="module")
def sweep(server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("launch")
    uri = server.replace("http://", f"http://alice:{SECRET}@")
    done = run_pipeline(folder, "-m", "retriever=bm25,lsa,weighted,rrf", "hydra/launcher=joblib", "tracking=server",
                        f"tracking.uri={uri}", f"tracking.experiment={EXPERIMENT}")
    assert done.returncode == 0, done.stderr[-3000:]
    experiment = rest(server, f"/api/2.0/mlflow/experiments/get-by-name?experiment_name={EXPERIMENT}")
    experiment_id = experiment["experiment"]["experiment_id"]
    runs = rest(server, "/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment_id], "max_results": 100})
    return done, experiment_id, runs["runs"]


def tags(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def split(runs: list[dict]) -> tuple[dict, list[dict]]:
    parents = [r for r in runs if "mlflow.parentRunId" not in tags(r)]
    assert len(parents) == 1
    parent = parents[0]
    return parent, [r for r in runs if tags(r).get("mlflow.parentRunId") == parent["info"]["run_id"]]


def artifact(server: str, experiment_id: str, run_id: str, path: str) -> str:
    return rest(server, f"/api/2.0/mlflow-artifacts/artifacts/{experiment_id}/{run_id}/artifacts/{path}")


def test_the_parent_holds_four_nested_children_and_the_sweep_summary(server, sweep):
    _, experiment_id, runs = sweep
    parent, children = split(runs)
    assert len(runs) == 5 and len(children) == 4
    assert parent["info"]["status"] == "FINISHED"
    assert parent["info"]["run_name"] == "retriever=bm25,lsa,weighted,rrf · helpdesk"
    assert tags(parent)["rankscope.launcher"] == "joblib" and tags(parent)["rankscope.kind"] == "sweep"
    listed = rest(server, f"/api/2.0/mlflow/artifacts/list?run_id={parent['info']['run_id']}")
    files = {f["path"] for f in listed["files"]}
    assert {"summary.txt", "systems.csv", "differences.csv", "sweep_summary.json", "report.html", "plots"} <= files
    plots = rest(server, f"/api/2.0/mlflow/artifacts/list?run_id={parent['info']['run_id']}&path=plots")
    assert {f["path"] for f in plots["files"]} == {"plots/metric_means.png", "plots/first_relevant_rank.png",
                                                   "plots/paired_bootstrap.png"}
    report = artifact(server, experiment_id, parent["info"]["run_id"], "report.html")
    assert all(f"<summary>{system}: " in report for system in SPEC_NDCG5) and SECRET not in report
    table = json.loads(artifact(server, experiment_id, parent["info"]["run_id"], "sweep_summary.json"))
    assert [row[0] for row in table["data"]] == ["BM25", "LSA", "weighted", "RRF"]


def test_each_child_has_params_metrics_table_and_dataset_input(server, sweep):
    _, experiment_id, runs = sweep
    _, children = split(runs)
    for child in children:
        name = tags(child)["rankscope.system"]
        assert child["info"]["status"] == "FINISHED"
        params = {p["key"]: p["value"] for p in child["data"]["params"]}
        assert params["retriever.name"] == name and params["corpus.name"] == "helpdesk"
        metrics = {m["key"]: m["value"] for m in child["data"]["metrics"]}
        assert round(metrics["ndcg_at_5"], 3) == SPEC_NDCG5[name]
        assert metrics["ndcg_at_5_ci_lower"] <= metrics["ndcg_at_5"] <= metrics["ndcg_at_5_ci_upper"]
        (dataset,) = child["inputs"]["dataset_inputs"]
        assert dataset["dataset"]["name"] == "helpdesk/test"
        assert dataset["dataset"]["digest"] == tags(child)["rankscope.corpus_digest"]
        table = json.loads(artifact(server, experiment_id, child["info"]["run_id"], "per_question.json"))
        assert {"query_id", "question", "ndcg@5", "first_relevant_rank", "top_3", "failure_classes",
                "evidence"} <= set(table["columns"])
        assert len(table["data"]) == 14
        assert metrics[FAILURES_PREFIX + "vocabulary_gap"] == 1 and metrics[FAILURES_PREFIX + "homonymy"] == 1


def test_no_credential_reaches_params_tags_artifacts_or_the_terminal(server, sweep):
    done, experiment_id, runs = sweep
    assert SECRET not in done.stdout + done.stderr
    assert SECRET not in json.dumps(runs)
    for run in runs:
        run_id = run["info"]["run_id"]
        for entry in rest(server, f"/api/2.0/mlflow/artifacts/list?run_id={run_id}")["files"]:
            if entry["is_dir"]:  # plots/: images drawn from metrics and question ids
                continue
            assert SECRET not in artifact(server, experiment_id, run_id, entry["path"]), entry["path"]
    assert "alice:***@" in tags(split(runs)[0])["rankscope.overrides"]
