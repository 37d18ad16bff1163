"""A Ctrl-C whose unwinding makes a clean-up fail (OmegaConf, restoring the flags of a config the interruption left
half-built) still stops the command as a Ctrl-C: status 130 and the one line, not a config error or a failed job
after which a sweep runs on (the interruption stress caught the sweep doing so once)."""

from __future__ import annotations

from tests.pipeline.helpers import job_runs, run_pipeline

ENGINE = "retriever._target_=tests.pipeline.common.probes.CtrlCWhileIndexing"


def test_a_single_run_stopped_while_cleaning_up_says_it_was_stopped(launch_dir):
    done = run_pipeline(launch_dir, "retriever=custom", ENGINE, "quiet=true")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 130, done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("rankscope: stopped by Ctrl-C: "), done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "config:" not in done.stderr


def test_a_sweep_stopped_while_a_job_cleans_up_stops_there(launch_dir):
    sweep_dir = launch_dir / "sweep"
    done = run_pipeline(launch_dir, "-m", "retriever=custom", ENGINE, "+retriever.stop=false,true,false",
                        f"hydra.sweep.dir={sweep_dir}", "quiet=true")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 130, done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("rankscope: stopped by Ctrl-C: "), done.stderr[-3000:]
    assert "1 of 3 points finished and logged" in lines[0], lines[0]
    assert not (sweep_dir / "2").exists()  # the third point never started
    assert [r.info.status for r in job_runs(launch_dir)] == ["FINISHED"]
