"""The garbage collector waits while a command starts, then runs for the job, the start-up's objects frozen."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from pipeline.common import collector
from tests.pipeline.helpers import run_pipeline


@pytest.fixture
def collector_state():
    """The collector as the test found it, restored afterwards (and nothing left frozen)."""
    was_enabled = gc.isenabled()
    yield
    collector._paused = False
    gc.unfreeze()
    (gc.enable if was_enabled else gc.disable)()


def test_pause_stops_collecting_and_resume_freezes_what_is_alive_then_collects_again(collector_state):
    gc.enable()
    collector.pause()
    assert not gc.isenabled() and collector.paused()
    alive = [object() for _ in range(3)]  # noqa: F841  (kept alive across the freeze)
    collector.resume()
    assert gc.isenabled() and not collector.paused()
    assert gc.get_freeze_count() > 0
    frozen = gc.get_freeze_count()
    collector.resume()  # once only
    assert gc.get_freeze_count() == frozen


def test_resume_does_nothing_unless_pause_stopped_the_collector(collector_state):
    gc.enable()
    collector.resume()  # a joblib worker's job: the collector was never paused there
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    collector.pause()  # already off (someone else's choice): left to them
    collector.resume()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


@pytest.mark.parametrize("sweep", [False, True])
def test_every_job_of_a_run_or_sweep_runs_with_the_collector_on_and_the_start_up_frozen(launch_dir: Path, sweep):
    probe = launch_dir / "collector.jsonl"
    values = ["+retriever.min_length=3,4"] if sweep else ["+retriever.min_length=3"]
    done = run_pipeline(launch_dir, *(["-m"] if sweep else []), "retriever=custom",
                        "retriever._target_=tests.pipeline.config.engines.CollectorProbe", *values, "quiet=true",
                        env={"RANKSCOPE_TEST_COLLECTOR": str(probe)})
    assert done.returncode == 0, done.stderr[-3000:]
    states = [json.loads(line) for line in probe.read_text(encoding="utf-8").splitlines()]
    assert len(states) == (2 if sweep else 1)
    for state in states:
        assert state["enabled"]
        assert state["frozen"] > 100_000  # Hydra's, pandas', numpy's objects ...


@pytest.mark.slow  # a joblib sweep starts its worker processes
def test_a_sweeps_driver_collects_again_even_when_its_jobs_run_elsewhere(launch_dir: Path):
    """With joblib the jobs run in worker processes: the driver resumes once its parent run is open, or it would
    keep every cycle of the sweep."""
    probe = launch_dir / "collector.jsonl"
    done = run_pipeline(launch_dir, "-m", "hydra/launcher=joblib", "retriever.k1=0.9,1.2", "quiet=true",
                        "+hydra.callbacks.probe._target_=tests.pipeline.common.probes.CollectorAtSweepEnd",
                        env={"RANKSCOPE_TEST_COLLECTOR": str(probe)})
    assert done.returncode == 0, done.stderr[-3000:]
    [state] = [json.loads(line) for line in probe.read_text(encoding="utf-8").splitlines()]
    assert state["enabled"] and state["frozen"] > 100_000
