"""Your own retriever in every kind of sweep: a grid over its arguments, resumed, on the joblib launcher, tuned.

Each test runs ``python -m pipeline -m ...`` as a user would, with ``retriever=custom`` naming the small engine of
``tests/pipeline/config/engines.py`` (the worker processes import it from PYTHONPATH, as they would a user's).
"""

from __future__ import annotations

import shutil

import pytest
from mlflow import MlflowClient

from pipeline.common.names import RESOURCE_PREFIXES
from tests.pipeline.helpers import by_system, job_runs, run_pipeline, runs_with_cache
from tests.pipeline.sweep.test_tuning import two_split_corpus

pytestmark = pytest.mark.slow  # several sweeps, a process each

ENGINES = "tests.pipeline.config.engines"
CUSTOM = ["retriever=custom", f"retriever._target_={ENGINES}.ListSearch"]
GRID = ["-m", *CUSTOM, "+retriever.min_length=3,4"]
VARIES = RESOURCE_PREFIXES


def results(runs: list) -> dict[str, dict[str, float]]:
    return {system: {k: v for k, v in run.data.metrics.items() if not k.startswith(VARIES)}
            for system, run in by_system(runs).items()}


@pytest.fixture(scope="module")
def basic(tmp_path_factory, empty_store, frozen_checkout):
    """The grid on the basic launcher, in a sweep folder of its own: (launch folder, sweep folder, results then), run
    on the frozen code the resume below runs too (a job's identity holds the code version)."""
    folder = tmp_path_factory.mktemp("basic")
    sweep_dir = folder / "sweep"
    runs = runs_with_cache(folder, empty_store, folder / "cache", *GRID, f"hydra.sweep.dir={sweep_dir}",
                           code=frozen_checkout)
    return folder, sweep_dir, runs, results(runs)


def test_a_grid_over_your_classs_arguments_logs_one_run_per_point(basic):
    _, _, runs, found = basic
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    assert sorted(found) == ["custom min_length=3", "custom min_length=4"]
    assert [r.data.params["retriever.min_length"] for r in runs] == ["3", "4"]
    assert {r.data.params["retriever._target_"] for r in runs} == {f"{ENGINES}.ListSearch"}
    assert found["custom min_length=3"] != found["custom min_length=4"]  # the argument reached the engine


def test_the_joblib_launcher_gives_the_same_figures(basic, tmp_path, empty_store):
    runs = runs_with_cache(tmp_path, empty_store, tmp_path / "cache", *GRID, "hydra/launcher=joblib")
    assert results(runs) == basic[3]


def test_a_resumed_sweep_skips_the_points_it_holds_and_runs_new_arguments_and_classes(basic, frozen_checkout):
    folder, sweep_dir, _, _ = basic
    again = run_pipeline(folder, "-m", *CUSTOM, "+retriever.min_length=3,4,5", f"hydra.sweep.dir={sweep_dir}",
                         code=frozen_checkout)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming the sweep in" in again.stdout and again.stdout.count("already logged as run") == 2
    assert len(job_runs(folder)) == 3  # min_length=5 is new
    other = run_pipeline(folder, "-m", "retriever=custom", f"retriever._target_={ENGINES}.SameListSearch",
                         "+retriever.min_length=3,4", f"hydra.sweep.dir={sweep_dir}")
    assert other.returncode == 0, other.stderr[-3000:]
    assert "already logged as run" not in other.stdout  # another class: another config, however alike
    runs = job_runs(folder)
    assert len(runs) == 5 and len({r.data.tags["rankscope.config_digest"] for r in runs}) == 5


def test_a_tuning_sweep_searches_your_classs_arguments_and_reports_the_choice_held_out(tmp_path, empty_store):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    corpus = two_split_corpus(tmp_path / "hd2")
    done = run_pipeline(tmp_path, "-m", *CUSTOM, "hydra/sweeper=optuna", "hydra.sweeper.direction=maximize",
                        "hydra.sweeper.n_trials=3", "corpus=beir", f"corpus.path={corpus}", "corpus.split=train",
                        "tune.holdout=test", "metrics.bootstrap.resamples=200",
                        "+retriever.min_length=int(interval(2, 6))")
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    everything = client.search_runs([client.get_experiment_by_name("rankscope").experiment_id])
    parent = next(r for r in everything if r.data.tags.get("rankscope.kind") == "sweep")
    assert parent.info.status == "FINISHED"
    trials = [r for r in everything if r.data.tags.get("rankscope.kind") == "trial"]
    best = max(trials, key=lambda r: (r.data.metrics["ndcg_at_5"], -int(r.data.tags["rankscope.job"])))
    chosen = parent.data.params["tune.best.retriever.min_length"]
    assert chosen == best.data.params["retriever.min_length"]
    role = {r.data.tags.get("rankscope.tune.role"): r for r in everything}
    assert role["tuned/holdout"].data.params["retriever.min_length"] == chosen
    assert role["untuned/holdout"].data.params["retriever.min_length"] == "3"  # the class's default
    assert "Tuned on train, evaluated once on test" in done.stdout
