"""Sweeps that lose nothing: killed and re-run, or cut off from the tracking server and synced afterwards, every
job ends up in MLflow exactly once."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.common.names import JOBS_PREFIX
from pipeline.team.tracking_server import ServerSettings, tracking_server
from pipeline.tracking.records import JobRecord
from tests.pipeline.helpers import cli_env, run_pipeline
from tests.pipeline.sweep.stopper import stop_after

K1 = ["0.3", "0.6", "0.9", "1.2"]


def wait_until_logged(folder: Path, process: subprocess.Popen, timeout: float = 600) -> None:
    """Until the job in ``folder`` has logged its run (its record carries the run id)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = JobRecord.load(folder) if (folder / "record.json").is_file() else None
        if record is not None and record.run_id:
            return
        if process.poll() is not None:
            pytest.fail(f"the sweep ended before {folder.name} was logged: {process.returncode}")
        time.sleep(0.02)
    pytest.fail(f"job {folder.name} not logged within {timeout} s")


def sweep_runs(client: MlflowClient) -> tuple[list, list]:
    """(parents, children) among the active runs of the experiment."""
    experiment = client.get_experiment_by_name("rankscope")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("rankscope.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("rankscope.kind") == "job"]
    return parents, children


def assert_every_job_once(client: MlflowClient, sweep_dir: Path, k1: list[str]) -> list:
    parents, children = sweep_runs(client)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", [p.info.status for p in parents]
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children)
    assert sorted(c.data.params["retriever.k1"] for c in children) == k1  # each job once
    assert all(c.info.status == "FINISHED" for c in children)
    assert len({c.data.tags["rankscope.config_digest"] for c in children}) == len(k1)
    for job in range(len(k1)):  # every job's record names the run that holds it, with the same metrics
        record = JobRecord.load(sweep_dir / str(job))
        (run,) = [c for c in children if c.info.run_id == record.run_id]
        assert run.data.metrics == pytest.approx({k: v for k, v in record.metrics.items() if v == v})
    return children


def test_a_sweep_stopped_after_its_second_job_resumes_and_logs_every_job_exactly_once(launch_dir, frozen_checkout):
    """SIGTERM as job 1 ends (an event of the sweep, not a moment seen from outside): jobs 0 and 1 are logged, 2 and
    3 never start, and the resume skips the first two and runs the others. Both commands run one frozen copy of the
    code: a job's identity holds the code version, which an edit of the checkout meanwhile would change (every job
    would then run again, rightly, and "already logged" count 0)."""
    sweep_dir = launch_dir / "sweep"
    args = ["-m", f"retriever.k1={','.join(K1)}", f"hydra.sweep.dir={sweep_dir}"]
    first = run_pipeline(launch_dir, *args, *stop_after(1), code=frozen_checkout)
    assert first.returncode == 143, first.stderr[-3000:]
    assert "stopped by SIGTERM" in first.stderr and "Traceback" not in first.stderr, first.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    (parent,), before = sweep_runs(client)
    assert parent.info.status == "FAILED"
    assert sorted((c.data.params["retriever.k1"], c.info.status) for c in before) == [(k, "FINISHED") for k in K1[:2]]
    assert sorted(p.name for p in sweep_dir.iterdir() if p.name.isdigit()) == ["0", "1"]  # 2 and 3 never started

    again = run_pipeline(launch_dir, *args, code=frozen_checkout)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming the sweep in" in again.stdout
    skipped = [line for line in again.stdout.splitlines() if "already logged as run" in line]
    assert [line.split(":")[1].strip() for line in skipped] == ["job 0 (retriever.k1=0.3)", "job 1 (retriever.k1=0.6)"]
    children = assert_every_job_once(client, sweep_dir, K1)
    assert {c.info.run_id for c in before} <= {c.info.run_id for c in children}  # not run again


@pytest.mark.slow
def test_a_server_stopped_mid_sweep_then_sync_logs_every_result_exactly_once(tmp_path, scifact_folder):
    """SciFact jobs (seconds each) so the server is surely down before the last two jobs log."""
    settings = ServerSettings(backend_store_uri=f"sqlite:///{tmp_path / 'server.db'}",
                              artifacts_destination=str(tmp_path / "artifacts"), workers=1)
    env = {**cli_env(tmp_path), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
    sweep_dir = tmp_path / "sweep"
    with tracking_server(settings) as server:
        settings = replace(settings, port=server.port)  # to restart it on the same port
        args = ["-m", "corpus=beir", f"corpus.path={scifact_folder}", "metrics=beir",
                f"retriever.k1={','.join(K1)}", f"hydra.sweep.dir={sweep_dir}", "tracking=server",
                f"tracking.uri={server.uri}"]
        log = (tmp_path / "sweep.log").open("w")
        process = subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=tmp_path, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        wait_until_logged(sweep_dir / "1", process)
    assert process.wait(timeout=900) == 1
    log.close()
    output = (tmp_path / "sweep.log").read_text()
    assert "but not logged: the tracking store" in output and f"python -m pipeline.sync {sweep_dir}" in output
    assert "Traceback" not in output
    unlogged = [job for job in range(len(K1)) if JobRecord.load(sweep_dir / str(job)).pending]
    assert unlogged and 0 not in unlogged and 1 not in unlogged  # computed, saved, waiting

    with tracking_server(settings) as server:
        sync = [sys.executable, "-m", "pipeline.sync", str(sweep_dir)]
        done = subprocess.run(sync, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert done.stdout.count("logged as run") == len(unlogged)
        client = MlflowClient(server.uri)
        assert_every_job_once(client, sweep_dir, K1)
        (parent,), _ = sweep_runs(client)
        jobs = parent.data.metrics
        assert jobs[JOBS_PREFIX + "finished"] == len(K1) and jobs[JOBS_PREFIX + "not_logged"] == 0
        again = subprocess.run(sync, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0 and "is complete" in again.stdout
        assert_every_job_once(client, sweep_dir, K1)


def test_a_result_computed_while_the_store_was_down_is_logged_by_the_next_attempt_without_recomputing(
        launch_dir, monkeypatch, capsys):
    """The resume path: the job's folder holds a pending record; the next run of the job logs it as it is."""
    from hydra import compose, initialize_config_dir

    import pipeline.app
    from pipeline.job.context import JobContext, SweepHandle
    from pipeline.job.run import execute_job
    from pipeline.tracking.runs import Tracker
    from pipeline.tracking.store import Store

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"sqlite:///{launch_dir / 'mlflow.db'}"
    client, experiment_id = Store.open(uri, "rankscope").pair()
    parent = Tracker.start(client, experiment_id, "sweep", {"rankscope.kind": "sweep"})
    sweep_dir = launch_dir / "sweep"
    SweepHandle(experiment_id, parent.run_id, []).write(sweep_dir)
    ctx = JobContext(launch_dir=launch_dir, output_dir=sweep_dir / "0", sweep_dir=sweep_dir)

    def job(tracking_uri: str):
        with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[f"tracking.uri={tracking_uri}", f"cache.dir={launch_dir / 'cache'}"])
        return execute_job(cfg, ctx).run_id

    assert job("http://127.0.0.1:9") is None  # nothing answers on the discard port
    assert "results saved in" in capsys.readouterr().err
    pending = JobRecord.load(sweep_dir / "0")
    assert pending.pending and pending.metrics["ndcg_at_5"] == pytest.approx(0.691, abs=5e-4)
    run_id = job(uri)
    assert "logged the results computed earlier" in capsys.readouterr().out
    run = client.get_run(run_id)
    assert run.data.tags["rankscope.record"] == pending.record_id  # the saved record, not a new computation
    assert run.data.tags["mlflow.parentRunId"] == parent.run_id and run.info.status == "FINISHED"
    assert job(uri) == run_id and "already logged as run" in capsys.readouterr().out


def test_a_sweep_whose_jobs_wrote_their_folders_elsewhere_is_recovered_by_its_resume(launch_dir, frozen_checkout):
    """What a Ray sweep launched in another folder than its head's left before the driver resolved the sweep folder
    for its jobs: every job logged under the parent, their folders (records included) under the head's folder, the
    parent closed FAILED as incomplete. The resume, from the sweep's own folder given absolute, skips every job
    (MLflow holds their results), notes each in its folder, and closes the parent FINISHED."""
    args = ["-m", "retriever.k1=0.6,1.2"]
    first = run_pipeline(launch_dir, *args, "hydra.sweep.dir=sweep", code=frozen_checkout)
    assert first.returncode == 0, first.stderr[-3000:]
    sweep_dir, elsewhere = launch_dir / "sweep", launch_dir / "head" / "sweep"
    elsewhere.mkdir(parents=True)
    for job in ("0", "1"):
        (sweep_dir / job).rename(elsewhere / job)
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    (parent,), before = sweep_runs(client)
    client.set_terminated(parent.info.run_id, status="FAILED")

    again = run_pipeline(launch_dir / "head", *args, f"hydra.sweep.dir={sweep_dir}", code=frozen_checkout,
                         env={"MLFLOW_TRACKING_URI": f"sqlite:///{launch_dir / 'mlflow.db'}"})
    assert again.returncode == 0, again.stderr[-3000:]
    assert len([line for line in again.stdout.splitlines() if "already logged as run" in line]) == 2
    (parent,), children = sweep_runs(client)
    assert parent.info.status == "FINISHED" and parent.data.tags.get("rankscope.error") is None
    assert {c.info.run_id for c in children} == {c.info.run_id for c in before}  # nothing ran again
    noted = {JobRecord.load(sweep_dir / job).run_id for job in ("0", "1")}
    assert noted == {c.info.run_id for c in before}
