"""A real ``mlflow server`` stopped in the middle of a sweep: the sweep says so at once, goes on computing and saving,
and ends with the command that logs what it saved; stopped meanwhile, it obeys at once, MLflow's retries or not.
Once the server is back, the sync (or the resume) logs every job exactly once.

The server is stopped as job 3 starts (its folder appears). With default settings, before rankscope set MLflow's retry
budget, the sweep sat silent for about 10 minutes; SIGTERM during MLflow's retries was not acted on for minutes.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.team.tracking_server import ServerSettings, _stop, tracking_server
from pipeline.tracking.records import JobRecord
from tests.pipeline.helpers import cli_env

pytestmark = pytest.mark.slow  # a server started twice: 30-60 s each on a busy 2-core machine

K1 = ["0.3", "0.6", "0.9", "1.2", "1.5", "1.8", "2.1", "2.4", "2.7", "3.0", "3.3", "3.6"]
MLFLOWS_OWN_RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "7"}  # MLflow's default budget, as a user may set it


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the sweep ended ({process.returncode}) before {path} appeared: {process.stderr.read()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path} did not appear within {timeout} s")
        time.sleep(0.01)


def sweep_cut_off(folder: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, ServerSettings]:
    """A 12-point sweep logging to a real server, which is stopped as job 3 starts; the server's settings, to start
    it again on the same port and store."""
    settings = ServerSettings(backend_store_uri=f"sqlite:///{folder / 'server.db'}",
                              artifacts_destination=str(folder / "artifacts"), workers=1)
    sweep_dir = folder / "sweep"
    with tracking_server(settings) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "-m", f"retriever.k1={','.join(K1)}", f"hydra.sweep.dir={sweep_dir}",
             "tracking=server", f"tracking.uri={server.uri}", "quiet=true"],
            cwd=folder, env={**cli_env(folder), **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        wait_for(sweep_dir / "3", process)
        _stop(server.process)
        return process, replace(settings, port=server.port)


def assert_every_job_logged_once(uri: str, sweep_dir: Path) -> None:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("rankscope")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("rankscope.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("rankscope.kind") == "job"]
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert sorted(c.data.params["retriever.k1"] for c in children) == sorted(K1)
    assert {c.info.status for c in children} == {"FINISHED"}
    for job in range(len(K1)):
        record = JobRecord.load(sweep_dir / str(job))
        assert not record.pending and record.run_id in {c.info.run_id for c in children}


def command_in(line: str, marker: str) -> list[str]:
    """The command a line ends with, after ``marker``, as arguments for this interpreter."""
    command = shlex.split(line.split(marker, 1)[1])
    return [sys.executable if command[0] in ("python", sys.executable) else command[0], *command[1:]]


def test_a_sweep_whose_server_stops_says_so_goes_on_and_ends_with_the_sync_command(tmp_path):
    sweep_dir = tmp_path / "sweep"
    process, settings = sweep_cut_off(tmp_path)
    _, err = process.communicate(timeout=300)  # MLflow's own retries took about 10 minutes
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    said = [line for line in lines if " does not answer (Connection refused): the sweep goes on" in line]
    assert len(said) == 1, err[-3000:]  # said once, by the process logging while the jobs computed
    assert all((sweep_dir / str(job) / "record.json").is_file() for job in range(len(K1)))  # every job saved
    pending = [job for job in range(len(K1)) if JobRecord.load(sweep_dir / str(job)).pending]
    assert pending and set(pending) <= set(range(len(K1)))
    sync = f"python -m pipeline.sync {sweep_dir}"
    assert lines[-1].endswith(sync) and "did not answer at the end of the sweep" in lines[-1], lines[-1]

    with tracking_server(settings) as server:
        done = subprocess.run(command_in(lines[-1], "run: "), cwd=tmp_path, env=cli_env(tmp_path),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert done.stdout.count("logged as run") == len(pending)
        assert_every_job_logged_once(server.uri, sweep_dir)


@pytest.mark.parametrize("when", ["jobs computing", "sweep ending"])
def test_sigterm_during_mlflows_retries_is_obeyed_at_once_and_the_resume_logs_everything(tmp_path, when):
    """MLflow's own budget (minutes of retries per request) set by the user: the stop still acts at once, whether
    it finds the jobs computing while the store process retries, or the sweep's end waiting for it."""
    sweep_dir = tmp_path / "sweep"
    process, settings = sweep_cut_off(tmp_path, MLFLOWS_OWN_RETRIES)
    wait_for(sweep_dir / ("5" if when == "jobs computing" else "11/record.json"), process)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)  # before: minutes (the store process's retries, then the driver's)
    assert process.returncode == 143, err[-3000:]
    assert "Traceback" not in err
    stopped = [line for line in err.splitlines() if line.startswith("rankscope: stopped by SIGTERM: ")]
    assert len(stopped) == 1 and f"hydra.sweep.dir={sweep_dir}" in stopped[0], err[-3000:]

    with tracking_server(settings) as server:
        again = subprocess.run(command_in(stopped[0], "Resume with: "), cwd=tmp_path, env=cli_env(tmp_path),
                               capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        assert_every_job_logged_once(server.uri, sweep_dir)
