"""The same sweep on Hydra's launchers gives the same metrics, bit for bit, read back from MLflow.

basic (jobs in the driver's process), joblib (local worker processes), submitit's local executor (each job a
submitted process, as on SLURM) and Ray (tasks on a Ray head) share one term-count cache folder: the basic sweep
fills it, and every job of the other launchers reads its counts from disk (or its worker's memory) instead of
tokenising.
"""

from __future__ import annotations

import importlib.util
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.common.names import RESOURCE_PREFIXES
from tests.pipeline.helpers import by_system, cli_env, counters, job_runs, runs_with_cache

pytestmark = pytest.mark.slow  # three sweeps of four jobs; submitit polls its jobs every few seconds

SWEEP = ["-m", "retriever=bm25,lsa,weighted,rrf"]
# what a job spent differs by launcher (an RRF job whose components ranked in another worker builds their indexes
# itself: its index_mb is theirs, not 0); nothing else may
VARIES = RESOURCE_PREFIXES


def results(runs: list) -> dict[str, dict[str, float]]:
    """Every metric of every system except timings and reuse counts."""
    return {system: {k: v for k, v in run.data.metrics.items() if not k.startswith(VARIES)}
            for system, run in by_system(runs).items()}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("launcher-cache")


@pytest.fixture(scope="module")
def basic(tmp_path_factory, empty_store, cache_dir):
    return runs_with_cache(tmp_path_factory.mktemp("basic"), empty_store, cache_dir, *SWEEP)


@pytest.mark.parametrize("launcher", [["hydra/launcher=joblib"], ["hydra/launcher=submitit_local"]],
                         ids=["joblib", "submitit_local"])
def test_a_launcher_gives_the_basic_launchers_metrics_bit_for_bit(launcher, basic, tmp_path, empty_store, cache_dir):
    if "submitit" in launcher[0] and importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        pytest.skip("hydra-submitit-launcher is not installed (pip install -e '.[cluster]')")
    runs = runs_with_cache(tmp_path, empty_store, cache_dir, *SWEEP, *launcher)
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)
    assert results(runs) == results(basic)
    assert all(counters(r)["tokenised"] == 0 for r in runs), "every job found the basic sweep's term counts"
    assert sum(counters(r)["disk_hits"] for r in runs) >= 1


# The Ray launcher against a Ray head started in a folder of its own (head/) and the sweep launched from another, as
# on a cluster where every node has its own working folder: Ray's workers start in the head's folder, and the jobs'
# folders must still land under the sweep's (the driver resolves it for them). Ray (2.60) binds its servers to every
# interface and turns 127.0.0.1 into the machine's address, so the head and the sweep run in a private network
# namespace that has only a loopback interface: nothing outside this machine, nor this machine's network, can reach
# them. Token authentication stays on (a fresh token, in the environment of both); HOME and Ray's temporary folder
# point at scratch folders (the latter short: Ray's socket paths must fit in 107 characters), removed afterwards.
PRIVATE = ["--net", "--pid", "--fork", "--mount-proc"]  # its own network and processes: `ray stop` ends this head's
# processes only, never another Ray on the machine, and whatever is left ends with the namespace
RAY_SCRIPT = """
set -u
ip link set lo up
trap '"$RAY" stop --force >/dev/null 2>&1' EXIT
mkdir head
(cd head && "$RAY" start --head --node-ip-address=127.0.0.1 --port=6380 --num-cpus=2 --include-dashboard=false \\
    --disable-usage-stats --temp-dir="$RAY_TEMP" > ray-head.log 2>&1) || { cat head/ray-head.log >&2; exit 97; }
ss -ltnH > listening.txt
"$PYTHON" -m pipeline "$@"
"""
RAY_LAUNCHER = ["hydra/launcher=ray", "hydra.launcher.ray.init.address=127.0.0.1:6380",
                # the plugin always adds object_store_memory to ray.init, which Ray refuses when joining a cluster
                "+hydra.launcher.ray.init.object_store_memory=null"]


def private_network_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None or shutil.which("ss") is None:
        return False
    return subprocess.run(["unshare", *PRIVATE, "true"], capture_output=True).returncode == 0


def test_the_ray_launcher_on_a_local_head_gives_the_basic_launchers_metrics(basic, tmp_path, empty_store, cache_dir):
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None:
        pytest.skip("hydra-ray-launcher is not installed (pip install -e '.[ray]')")
    if not private_network_available():
        pytest.skip("needs root and unshare/ip/ss to give Ray a private loopback-only network")
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    (tmp_path / "home").mkdir()
    ray_temp = tempfile.mkdtemp(prefix="rs-ray-", dir="/tmp")
    env = {**cli_env(tmp_path), "RANKSCOPE_CACHE_DIR": str(cache_dir), "HOME": str(tmp_path / "home"),
           "RAY": str(Path(sys.executable).parent / "ray"), "PYTHON": sys.executable, "RAY_TEMP": ray_temp,
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        done = subprocess.run(["unshare", *PRIVATE, "bash", "-c", RAY_SCRIPT, "bash", *SWEEP, *RAY_LAUNCHER],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    finally:
        shutil.rmtree(ray_temp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    listening = [line.split()[3] for line in (tmp_path / "listening.txt").read_text().splitlines() if line.strip()]
    assert listening and all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")) for a in listening)
    runs = job_runs(tmp_path)
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)
    assert results(runs) == results(basic)
    assert all(counters(r)["tokenised"] == 0 for r in runs)
    # every job's folder under the sweep's, in the launch folder; none under the head's
    assert not list((tmp_path / "head").rglob("record.json"))
    [sweep_dir] = {Path(r.data.tags["rankscope.output_dir"]).parent for r in runs}
    assert sweep_dir.parent.parent == tmp_path / "multirun"
    assert sorted(p.parent.name for p in sweep_dir.glob("*/record.json")) == ["0", "1", "2", "3"]
    [parent] = [r for r in MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").search_runs(
        [runs[0].info.experiment_id]) if r.data.tags.get("rankscope.kind") == "sweep"]
    assert parent.info.status == "FINISHED" and "4 of 4" in done.stdout
