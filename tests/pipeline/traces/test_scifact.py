"""The checks of docs/traces.md at SciFact's size: the traced application (MLflow Tracing, a RETRIEVER span over
tantivy) answers the 300 test claims as v1 (stemmed index) and as v2 (no stemming) into one experiment;
``retriever=traces`` gives, per question, the figures ``retriever=custom`` gives running the same tantivy search, and
the gate compares the two versions, told apart by their tag."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.gate import main as gate
from tests.pipeline.helpers import log_run
from tests.pipeline.traces.conftest import run_app
from tests.pipeline.traces.test_retriever import TANTIVY, K, assert_same_figures, job

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scifact_traces(tmp_path_factory, empty_store, scifact_folder) -> Path:
    folder = tmp_path_factory.mktemp("scifact-traces")
    shutil.copy(empty_store, folder / "mlflow.db")
    # 600 traces, each a few store transactions: a minute or two on a quiet machine, far more on a loaded one
    run_app(folder, "scifact-app:v1", "scifact-app:v2:nostem", "--corpus", str(scifact_folder), timeout=3600)
    return folder


def corpus(scifact_folder: Path) -> list[str]:
    return ["corpus=scifact", f"corpus.path={scifact_folder}", "metrics=beir", f"depth={K}"]


def test_the_300_claims_traced_score_what_the_same_tantivy_search_scores_directly(scifact_traces, scifact_folder):
    folder = scifact_traces
    traced = job(folder, log_run(folder, *corpus(scifact_folder), "retriever=traces",
                                 "retriever.experiment=scifact-app", "+retriever.tags.app_version=v1",
                                 "retriever.score=score"))
    direct = job(folder, log_run(folder, *corpus(scifact_folder), "retriever=custom", f"retriever._target_={TANTIVY}"))
    assert traced["metrics"]["system/questions_evaluated"] == 300
    assert_same_figures(traced, direct)
    m = traced["metrics"]
    print(f"\nSciFact test, 300 claims: traces ndcg@10 {m['ndcg_at_10']:.4f} [{m['ndcg_at_10_ci_lower']:.4f}, "
          f"{m['ndcg_at_10_ci_upper']:.4f}], recall@10 {m['recall_at_10']:.4f}, mrr {m['mrr']:.4f}; custom ndcg@10 "
          f"{direct['metrics']['ndcg_at_10']:.4f}; {len(traced['table'])} per-question rows equal")


def test_two_versions_of_the_application_are_gated_on_the_same_claims(scifact_traces, scifact_folder, capsys):
    folder = scifact_traces
    runs = {version: log_run(folder, *corpus(scifact_folder), "retriever=traces", "retriever.experiment=scifact-app",
                             f"+retriever.tags.app_version={version}") for version in ("v1", "v2")}
    capsys.readouterr()
    status = gate([runs["v2"], "--baseline", runs["v1"], "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
                   "--metrics", "ndcg@10"])
    out = capsys.readouterr()
    line = (out.out + out.err).strip().splitlines()[-1]
    figures = {v: job(folder, r)["metrics"]["ndcg_at_10"] for v, r in runs.items()}
    print(f"\nv1 ndcg@10 {figures['v1']:.4f}, v2 {figures['v2']:.4f}; exit {status}: {line}")
    assert status in (0, 1) and line.startswith(("rankscope gate: PASS", "rankscope gate: REGRESSION"))
    assert figures["v1"] != figures["v2"]
