"""Where a sweep's jobs run: a relative sweep folder given to every job as the driver's absolute one, and a Ray
cluster the settings cannot join refused in one line before any MLflow run exists. The Ray head itself:
tests/pipeline/sweep/test_launchers.py (slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from pipeline.sweep.placement import RAY_JOIN_FIX, anchor_sweep_dir, quoted_value
from tests.pipeline.helpers import run_pipeline

FOLDERS = ["/srv/sweeps/a b", "/x/k1=0.9,1.2", "/it's/here", "/back\\slash/x", "/ends/in\\", "/odd/${name}/x", "/plain"]


@pytest.mark.parametrize("path", FOLDERS)
def test_a_folder_quoted_for_hydra_reads_back_as_itself(path):
    [override] = OverridesParser.create().parse_overrides([f"hydra.sweep.dir={quoted_value(path)}"])
    assert OmegaConf.create({"dir": override.value()}).dir == path  # as the job's config holds it


def test_a_relative_sweep_folder_becomes_the_drivers_absolute_one_for_every_job(tmp_path):
    config = OmegaConf.create({"hydra": {"sweep": {"dir": "multirun/2026-12-06/10-00-00-abc123"},
                                         "overrides": {"hydra": ["hydra.verbose=false"], "task": ["a=1,2"]}}})
    OmegaConf.set_readonly(config.hydra, True)  # as Hydra hands it over
    resolved = tmp_path / "multirun" / "2026-12-06" / "10-00-00-abc123"
    anchor_sweep_dir(config, resolved)
    assert config.hydra.sweep.dir == str(resolved)
    # a launcher composes each job again from these: the job's folder is the absolute one wherever it runs
    assert list(config.hydra.overrides.hydra) == ["hydra.verbose=false", f"hydra.sweep.dir='{resolved}'"]
    anchor_sweep_dir(config, Path("/elsewhere"))  # absolute already: left as it is
    assert config.hydra.sweep.dir == str(resolved) and len(config.hydra.overrides.hydra) == 2


def test_joining_a_ray_cluster_without_dropping_the_object_store_size_is_one_line_and_no_run(launch_dir):
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None:
        pytest.skip("hydra-ray-launcher is not installed (pip install -e '.[ray]')")
    done = run_pipeline(launch_dir, "-m", "retriever=bm25,lsa", "hydra/launcher=ray",
                        "hydra.launcher.ray.init.address=127.0.0.1:9")
    assert done.returncode == 1
    [line] = [line for line in done.stderr.splitlines() if line.strip() and "[HYDRA]" not in line]
    assert line.startswith("rankscope: hydra.launcher.ray.init.address=127.0.0.1:9: ") and line.endswith(RAY_JOIN_FIX)
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    assert client.search_runs(experiments) == []  # no parent run, FAILED or otherwise
