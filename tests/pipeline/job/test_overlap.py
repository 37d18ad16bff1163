"""A sweep job's tail is written by a forked copy while the next job computes: the same folders and runs as one job
after the other, logged in job order, and nothing lost when the copy fails or the driver is stopped."""

from __future__ import annotations

import os

import pytest
from mlflow import MlflowClient

from pipeline.common.forking import second_core
from pipeline.job import overlap
from tests.pipeline.helpers import run_pipeline

pytestmark = pytest.mark.skipif(not second_core(), reason="tails are handed off only where a second core runs them")


def test_a_tail_is_written_by_another_process_and_finished_here(tmp_path):
    finished: list[tuple[bytes | None, int]] = []

    def write() -> bytes:
        (tmp_path / "written").write_text(str(os.getpid()))
        return b"the job's text"

    overlap.hand_off(write, lambda sent: finished.append((sent, os.getpid())))
    overlap.settle()
    assert finished == [(b"the job's text", os.getpid())]
    assert int((tmp_path / "written").read_text()) != os.getpid()


def test_a_copy_that_fails_leaves_the_tail_to_this_process(tmp_path):
    finished: list[bytes | None] = []

    def write() -> bytes:
        raise RuntimeError("a bug in the copy")

    overlap.hand_off(write, finished.append)
    overlap.settle()
    assert finished == [None]


def test_a_stopped_driver_waits_for_its_copy_and_logs_nothing(tmp_path):
    finished: list[bytes | None] = []

    def write() -> bytes:
        import time

        time.sleep(0.3)
        (tmp_path / "record.json").write_text("{}")
        return b""

    overlap.hand_off(write, finished.append)
    overlap.wait()
    assert (tmp_path / "record.json").is_file() and finished == []
    overlap.settle()
    assert finished == []


def test_a_sweep_logs_the_same_runs_and_prints_the_same_text_with_or_without_tails_handed_off(tmp_path):
    sweeps = {}
    for mode in ("1", "0"):
        folder = tmp_path / f"overlap-{mode}"
        folder.mkdir()
        done = run_pipeline(folder, "-m", "retriever.k1=0.9,1.2", "retriever.b=0.4,0.75", "hydra.sweep.dir=sweep",
                            "quiet=true", env={"RANKSCOPE_OVERLAP": mode})
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
        experiment = client.get_experiment_by_name("rankscope")
        runs = client.search_runs([experiment.experiment_id], "tags.`rankscope.kind` = 'job'")
        sweeps[mode] = (done.stdout, {r.data.tags["rankscope.job"]: r for r in runs}, client)
    (text, runs, client), (text0, runs0, client0) = sweeps["1"], sweeps["0"]
    assert sorted(runs) == sorted(runs0) == ["0", "1", "2", "3"]
    for job, run in runs.items():
        other = runs0[job]
        assert run.info.status == other.info.status == "FINISHED"
        assert ({k: v for k, v in run.data.metrics.items() if not k.startswith("system/time_")}
                == {k: v for k, v in other.data.metrics.items() if not k.startswith("system/time_")})
        files = {f.path for f in client.list_artifacts(run.info.run_id)}
        assert files == {f.path for f in client0.list_artifacts(other.info.run_id)} and "plots" in files
        plots = {f.path for f in client.list_artifacts(run.info.run_id, "plots")}
        assert len(plots) == 2
        for name in ("diagnosis.txt", "run.trec", "per_question.csv"):
            assert (tmp_path / "overlap-1" / "sweep" / job / name).read_bytes() == \
                   (tmp_path / "overlap-0" / "sweep" / job / name).read_bytes()

    def job_sections(stdout: str) -> list[str]:  # what each job printed, in order (the summary's run ids differ)
        return [line for line in stdout.splitlines()
                if not line.startswith("[20") and "run " not in line and "MLflow" not in line][:80]

    assert job_sections(text) == job_sections(text0)
