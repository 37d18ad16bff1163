"""Tuning sweeps (hydra/sweeper=optuna): search on one split, report the chosen configuration once on another.

The end-to-end run tunes BM25 for three trials on a two-split copy of the help-desk corpus (questions q01-q07
judged in ``train``, q08-q14 in ``test``), with a Python audit hook recording every judgments file the process
opens, in order: the test judgments must not be opened before the search is over.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient

import pipeline.app
from metrics.errors import InputError
from pipeline.common.names import OPTIMISATION_RESULTS, QUESTIONS_PREFIX
from pipeline.sweep.tuning import check_tuning, fixed_overrides
from tests.pipeline.helpers import cli_env, run_pipeline

HELPDESK = Path(pipeline.app.CONF_DIR).parent / "pipeline" / "data" / "helpdesk"
TRAIN = [f"q{i:02d}" for i in range(1, 8)]
TEST = [f"q{i:02d}" for i in range(8, 15)]
TRIALS = 3

pytestmark = pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None,
                                reason="hydra-optuna-sweeper not installed: pip install 'rankscope[tune]'")

# Runs `python -m pipeline ARGS` with an audit hook logging every file opened under WATCH (and the optimiser's
# results file, written when the search ends) to LOG, one path per line, in the order they were opened.
AUDITED = '''
import os, sys
log, watch = sys.argv.pop(1), sys.argv.pop(1)
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        path = os.fspath(args[0])
        if path.startswith(watch) or path.endswith("{results}"):
            os.write(fd, (path + "\\n").encode())
sys.addaudithook(hook)
sys.argv[0] = "pipeline"
from pipeline.app import main
main()
'''.replace("{results}", OPTIMISATION_RESULTS)


def two_split_corpus(folder: Path) -> Path:
    """The help-desk corpus with its judgments divided between a train and a test split."""
    folder.mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        shutil.copy(HELPDESK / name, folder / name)
    qrels = pd.read_csv(HELPDESK / "qrels" / "test.tsv", sep="\t", dtype=str)
    (folder / "qrels").mkdir()
    for split, questions in (("train", TRAIN), ("test", TEST)):
        qrels[qrels["query-id"].isin(questions)].to_csv(folder / "qrels" / f"{split}.tsv", sep="\t", index=False)
    return folder


def tuning_args(corpus: Path, *extra: str) -> list[str]:
    return ["-m", "experiment=tune_bm25_scifact", f"corpus.path={corpus}", f"hydra.sweeper.n_trials={TRIALS}",
            "metrics=default", "metrics.bootstrap.resamples=500", *extra]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, empty_store):
    """One tiny tuning sweep, audited: (launch folder, completed process, judgments files opened in order)."""
    tmp = tmp_path_factory.mktemp("tune")
    shutil.copy(empty_store, tmp / "mlflow.db")
    corpus = two_split_corpus(tmp / "hd2")
    script, log = tmp / "audited.py", tmp / "opened.txt"
    script.write_text(AUDITED, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(log), str(corpus), *tuning_args(corpus)], cwd=tmp,
                          env=cli_env(tmp), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    opened = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    return tmp, done, opened


def runs(folder: Path):
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    everything = client.search_runs([experiment.experiment_id])
    parent = next(r for r in everything if r.data.tags.get("rankscope.kind") == "sweep")
    children = [r for r in everything if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return client, parent, children


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_tiny_search_completes_and_logs_the_held_out_figure(tuned):
    tmp, done, _ = tuned
    _, parent, children = runs(tmp)
    assert parent.info.status == "FINISHED"
    kinds = sorted(r.data.tags["rankscope.kind"] for r in children)
    assert kinds == ["trial"] * TRIALS + ["tuned", "tuned", "untuned", "untuned"]
    held_out = next(r for r in children if r.data.tags["rankscope.tune.role"] == "tuned/holdout")
    assert held_out.info.status == "FINISHED"
    assert held_out.data.metrics[QUESTIONS_PREFIX + "evaluated"] == len(TEST)
    m = parent.data.metrics
    assert m["tuned/holdout/ndcg_at_5"] == pytest.approx(held_out.data.metrics["ndcg_at_5"])
    key = "tuned/holdout/ndcg_at_5"
    assert m[key + "_ci_lower"] <= m[key] <= m[key + "_ci_upper"]
    assert {"tuned/tuning/ndcg_at_5", "untuned/holdout/ndcg_at_5", "gain/holdout/ndcg_at_5"} <= set(m)
    # both figures printed side by side, tuning split first
    table = done.stdout[done.stdout.index("Tuned on train, evaluated once on test"):].splitlines()
    assert "train: tuned" in table[1] and table[1].index("train: tuned") < table[1].index("test: tuned (held out)")
    row = next(line for line in table if line.startswith("ndcg@5"))
    assert f"{m['tuned/tuning/ndcg_at_5']:.3f}" in row and f"{m['tuned/holdout/ndcg_at_5']:.3f}" in row
    assert "Report the test column" in done.stdout


@pytest.mark.slow  # they share a real tuning run (tens of seconds): CI runs them in make test-slow
def test_the_held_out_run_uses_the_optimisers_best_parameters(tuned):
    tmp, _, _ = tuned
    _, parent, children = runs(tmp)
    trials = [r for r in children if r.data.tags["rankscope.kind"] == "trial"]
    best = max(trials, key=lambda r: (r.data.metrics["ndcg_at_5"], -int(r.data.tags["rankscope.job"])))
    held_out = next(r for r in children if r.data.tags["rankscope.tune.role"] == "tuned/holdout")
    untuned = next(r for r in children if r.data.tags["rankscope.tune.role"] == "untuned/holdout")
    for key in ("retriever.k1", "retriever.b"):
        assert float(parent.data.params[f"tune.best.{key}"]) == pytest.approx(float(best.data.params[key]))
        assert float(held_out.data.params[key]) == pytest.approx(float(best.data.params[key]))
    assert (untuned.data.params["retriever.k1"], untuned.data.params["retriever.b"]) == ("1.2", "0.75")
    assert parent.data.metrics["tune/best_trial/ndcg_at_5"] == pytest.approx(best.data.metrics["ndcg_at_5"])


@pytest.mark.slow  # they share a real tuning run (tens of seconds): CI runs them in make test-slow
def test_tuning_on_train_never_reads_the_test_judgments(tuned):
    tmp, _, opened = tuned
    judgments = [Path(p).name for p in opened if p.endswith(".tsv")]
    end_of_search = next(i for i, p in enumerate(opened) if p.endswith(OPTIMISATION_RESULTS))
    during = [Path(p).name for p in opened[:end_of_search] if p.endswith(".tsv")]
    # the trials read the train judgments and nothing else (once: a process loads a corpus once, pipeline.job.reuse)
    assert set(during) == {"train.tsv"}
    assert judgments.count("test.tsv") >= 1 and "test.tsv" not in during  # test: only after the search
    # and as MLflow recorded it, run by run: trials scored train questions only
    client, _, children = runs(tmp)
    for run in children:
        role = run.data.tags.get("rankscope.tune.role", "trial")
        expected = "test.tsv" if role.endswith("/holdout") else "train.tsv"
        assert Path(run.data.tags["rankscope.judgments"]).name == expected, role
        local = client.download_artifacts(run.info.run_id, "per_question.csv", str(tmp))
        questions = set(pd.read_csv(local, dtype={"query_id": str})["query_id"])
        assert questions == set(TEST if expected == "test.tsv" else TRAIN), role


def test_tuning_and_reporting_on_the_same_split_is_refused_in_one_line(launch_dir):
    corpus = two_split_corpus(launch_dir / "hd2")
    done = run_pipeline(launch_dir, *tuning_args(corpus, "corpus.split=test"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("rankscope:")]
    assert len(lines) == 1 and "refusing to tune and report on the same split 'test'" in lines[0]
    assert "tune.allow_same_split=true" in lines[0]
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []  # nothing started


# --- the checks, through Hydra's compose API (no process, no data read) --------------------------------------


def tuning_config(*overrides: str):
    with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
        return compose("config", overrides=["experiment=tune_bm25_scifact", *overrides], return_hydra_config=True)


@pytest.fixture
def corpus(tmp_path) -> Path:
    return two_split_corpus(tmp_path / "hd2")


def test_different_splits_pass_the_checks(corpus, tmp_path):
    check_tuning(tuning_config(f"corpus.path={corpus}"), tmp_path, ["retriever.k1", "retriever.b"])


def test_the_same_split_passes_only_when_explicitly_allowed(corpus, tmp_path):
    with pytest.raises(InputError, match="refusing to tune and report on the same split 'train'"):
        check_tuning(tuning_config(f"corpus.path={corpus}", "tune.holdout=train"), tmp_path, [])
    check_tuning(tuning_config(f"corpus.path={corpus}", "tune.holdout=train", "tune.allow_same_split=true"),
                 tmp_path, [])


def test_the_help_desk_corpus_can_only_be_tuned_on_its_one_split_when_allowed(tmp_path):
    with pytest.raises(InputError, match=r"corpus.split: no judgments for split 'train' \(available: test\)"):
        check_tuning(tuning_config("corpus=helpdesk"), tmp_path, [])
    with pytest.raises(InputError, match="same split 'test'"):
        check_tuning(tuning_config("corpus=helpdesk", "corpus.split=test"), tmp_path, [])
    check_tuning(tuning_config("corpus=helpdesk", "corpus.split=test", "tune.allow_same_split=true"), tmp_path, [])


@pytest.mark.parametrize("overrides, varying, message", [
    (["hydra.sweeper.direction=minimize"], [], "direction must be maximize"),
    (["tune.holdout=dev"], [], r"tune.holdout: no judgments for split 'dev' \(available: test, train\)"),
    ([], ["corpus.split"], "cannot search over corpus.split"),
    ([], ["metrics.primary"], "cannot search over metrics.primary"),
    (["+retriever.dims=3"], [], r"unknown key\(s\) retriever.dims"),
])
def test_a_search_that_could_not_mean_anything_is_refused_before_it_starts(corpus, tmp_path, overrides, varying,
                                                                          message):
    with pytest.raises(InputError, match=message):
        check_tuning(tuning_config(f"corpus.path={corpus}", *overrides), tmp_path, varying)


def test_the_untuned_configuration_keeps_the_fixed_overrides_and_drops_the_search_space():
    everything = ["retriever.k1=interval(0.3, 2.5)", "retriever.b=choice(0.4,0.75)", "experiment=tune_bm25_scifact",
                  "corpus.path=/data/x", "retriever.name=mine"]
    assert fixed_overrides(everything) == ["experiment=tune_bm25_scifact", "corpus.path=/data/x", "retriever.name=mine"]


# --- trials that fail on bad input ------------------------------------------------------------------------------


@pytest.mark.slow
def test_failed_trials_are_listed_and_the_search_goes_on(launch_dir):
    corpus = two_split_corpus(launch_dir / "hd2")  # with seed 0 the three k1 drawn are about -0.13, 0.007, -0.44
    done = run_pipeline(launch_dir, *tuning_args(corpus, "retriever.k1=interval(-1.5, 1.0)"))
    assert done.returncode == 0, done.stderr[-3000:]
    _, parent, children = runs(launch_dir)
    assert parent.info.status == "FINISHED" and parent.data.metrics["system/jobs_failed"] == 2
    assert done.stdout.count("FAILED trial") == 2 and "BM25 k1 must be >= 0" in done.stdout
    held_out = next(r for r in children if r.data.tags.get("rankscope.tune.role") == "tuned/holdout")
    assert float(held_out.data.params["retriever.k1"]) >= 0


@pytest.mark.slow
def test_when_every_trial_fails_the_command_says_so_in_one_line(launch_dir):
    corpus = two_split_corpus(launch_dir / "hd2")
    done = run_pipeline(launch_dir, *tuning_args(corpus, "retriever.k1=interval(-2.0, -1.0)",
                                                 "hydra.sweeper.n_trials=2"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("rankscope: every trial of the tuning sweep failed (reasons "
                                                    "above): nothing to evaluate")
    _, parent, _ = runs(launch_dir)
    assert parent.info.status == "FAILED"
