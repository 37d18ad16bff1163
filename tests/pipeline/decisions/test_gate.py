"""The regression gate's exit status: 0 pass, 1 regression beyond the tolerance, 2 cannot decide.

The constructed cases are real MLflow runs (SQLite store) whose per-question tables are made up, logged through
the same code path as a job's results (``pipeline.tracking.records``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import PER_QUESTION_TABLE, TAG_CORPUS_DIGEST, TAG_KIND, TAG_SYSTEM
from pipeline.gate import main
from pipeline.tracking.records import JobRecord, publish, save_table
from pipeline.tracking.store import Store as TrackingStore
from tests.pipeline.helpers import log_run, run_pipeline

N = 200
SETTINGS = {"metrics.level": 1, "metrics.gain": "linear", "metrics.missing": "zero"}


class Store:
    def __init__(self, folder: Path):
        self.folder = folder
        self.uri = f"sqlite:///{folder / 'mlflow.db'}"
        self.client, self.experiment_id = TrackingStore.open(self.uri, "rankscope").pair()

    def run(self, name: str, ndcg: np.ndarray, digest: str = "corpus-a") -> str:
        """A finished run whose per-question table holds ``ndcg`` as ndcg@10."""
        table = pd.DataFrame({"query_id": [f"q{i}" for i in range(len(ndcg))], "ndcg@10": ndcg})
        out = self.folder / name
        out.mkdir()
        tags = {TAG_SYSTEM: name, TAG_KIND: "run", TAG_CORPUS_DIGEST: digest}
        record = JobRecord.new(run_name=name, experiment_id=self.experiment_id, parent_run_id=None,
                               tracking_uri=self.uri, tags=tags,
                               params=SETTINGS, metrics={"ndcg_at_10": float(ndcg.mean())}, table=PER_QUESTION_TABLE,
                               table_dtypes=save_table(table, out / PER_QUESTION_TABLE))
        return publish(self.client, record, out).run_id

    def gate(self, candidate: str, *args: str) -> int:
        return main([candidate, "--tracking-uri", self.uri, "--tolerance", "0.01", *args])


@pytest.fixture(scope="module")
def store(tmp_path_factory, empty_store):
    folder = tmp_path_factory.mktemp("gate")
    shutil.copy(empty_store, folder / "mlflow.db")
    s = Store(folder)
    rng = np.random.default_rng(3)
    s.base = rng.random(N)
    s.noise = rng.normal(0, 0.05, N)
    baseline = s.run("baseline", s.base)
    s.client.set_tag(baseline, "baseline", "true")
    return s


def one_line(captured) -> str:
    (line,) = captured.strip().splitlines()
    return line


def test_a_candidate_that_is_the_same_passes_as_indistinguishable(store, capsys):
    assert store.gate(store.run("same", store.base.copy())) == 0
    line = one_line(capsys.readouterr().out)
    assert line.startswith("rankscope gate: PASS: ndcg@10 indistinguishable from the baseline: +0.0000")


def test_a_drop_beyond_the_tolerance_fails_with_one_line(store, capsys):
    assert store.gate(store.run("dropped", store.base - 0.05 + store.noise * 0.1)) == 1
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith("rankscope gate: REGRESSION: ndcg@10 dropped by 0.0499, -0.0499 [-0.05")
    assert "beyond the tolerance 0.0100 at 95% confidence" in line and "vs baseline baseline" in line
    assert captured.out == ""


def test_a_drop_within_the_tolerance_passes(store, capsys):
    assert store.gate(store.run("slightly", store.base - 0.005)) == 0
    assert "ndcg@10 worse but within the tolerance 0.0100" in one_line(capsys.readouterr().out)


def test_an_interval_holding_the_tolerance_boundary_passes_as_indistinguishable(store, capsys):
    candidate = store.run("boundary", store.base - 0.01 + store.noise)
    assert store.gate(candidate) == 0
    line = one_line(capsys.readouterr().out)
    assert "ndcg@10 indistinguishable from the tolerance boundary -0.0100" in line
    low, high = (float(x) for x in line.split("[")[1].split("]")[0].split(","))
    assert low < -0.01 < high < 0


def test_the_tolerance_decides_between_pass_and_regression(store, capsys):
    candidate = store.run("minus-0.05", store.base - 0.05)
    assert store.gate(candidate, "--tolerance", "0.1") == 0
    assert store.gate(candidate, "--tolerance", "0.0") == 1


def test_a_candidate_on_other_data_is_a_data_error(store, capsys):
    assert store.gate(store.run("other-corpus", store.base, digest="corpus-b")) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("rankscope gate: ERROR: refusing to compare baseline with other-corpus: different corpus")


def test_usage_errors_exit_2(store, capsys):
    same = store.run("for-usage", store.base.copy())
    assert store.gate(same, "--metrics", "recall@5") == 2
    assert "metric(s) recall@5 not in both runs' tables" in one_line(capsys.readouterr().err)
    assert store.gate("no-such-run") == 2
    assert "no finished run matches 'no-such-run'" in one_line(capsys.readouterr().err)
    assert store.gate(same, "--tolerance", "-0.1") == 2
    assert "must be >= 0" in one_line(capsys.readouterr().err)
    assert store.gate(same, "--gate", "nonexistent") == 2
    assert "no gate settings 'nonexistent'" in one_line(capsys.readouterr().err)


def test_without_a_baseline_the_first_candidate_is_adopted_or_refused(tmp_path, empty_store, capsys):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    s = Store(tmp_path)
    first = s.run("first", np.linspace(0, 1, N))
    strict = tmp_path / "strict.yaml"
    strict.write_text("adopt_first: false\n")
    assert s.gate(first, "--gate", str(strict)) == 2
    assert "no finished run matches 'tag:baseline=true'" in one_line(capsys.readouterr().err)
    assert s.gate(first) == 0
    assert "no baseline yet (no run has baseline=true)" in one_line(capsys.readouterr().out)
    assert MlflowClient(s.uri).get_run(first).data.tags["baseline"] == "true"


def test_a_sweep_with_gate_default_exits_1_on_a_regression(launch_dir):
    baseline = log_run(launch_dir)
    MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}").set_tag(baseline, "baseline", "true")
    done = run_pipeline(launch_dir, "-m", "text.pattern='[xz]+'", "gate=default", "gate.metrics=[mrr]")
    assert done.returncode == 1, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("rankscope gate:")]
    assert line.startswith("rankscope gate: REGRESSION: mrr dropped by 0.8214")
    sweep_dir = next((launch_dir / "multirun").glob("*/*"))
    assert (sweep_dir / "gate.txt").read_text().startswith("REGRESSION: mrr dropped")
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    experiment = [client.get_experiment_by_name("rankscope").experiment_id]
    (parent,) = client.search_runs(experiment, "tags.`rankscope.kind` = 'sweep'")
    assert parent.info.status == "FINISHED" and parent.data.tags["rankscope.gate"] == "regression"
    comparisons = [client.get_experiment_by_name("rankscope comparisons").experiment_id]
    (recorded,) = client.search_runs(comparisons, "tags.`rankscope.kind` = 'comparison'")
    assert recorded.data.tags["rankscope.compare.baseline"] == baseline
    assert recorded.data.tags["rankscope.sweep_parent"] == parent.info.run_id


def test_gating_the_baseline_against_itself_passes_with_a_warning_and_records_nothing(store, capsys):
    experiment = store.client.get_experiment_by_name("rankscope comparisons").experiment_id
    before = store.client.search_runs([experiment], "tags.`rankscope.kind` = 'comparison'")
    assert store.gate("tag:baseline=true") == 0
    line = one_line(capsys.readouterr().out)
    assert line.startswith("rankscope gate: PASS (warning: the candidate is the baseline itself")
    assert len(store.client.search_runs([experiment], "tags.`rankscope.kind` = 'comparison'")) == len(before)
