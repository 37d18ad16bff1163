"""metrics.judged_only=true: condensed-list figures (unjudged documents removed, trec_eval -J) logged under names of
their own, beside the standard ones and never mixed with them; they are what ``python -m metrics -J`` gives."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from metrics.cli import main as metrics_main
from pipeline.common.names import RUN_FILE
from pipeline.decisions.comparison import load_side
from tests.pipeline.helpers import REPO, log_run

QRELS = REPO / "pipeline" / "data" / "helpdesk" / "qrels" / "test.tsv"


def test_condensed_figures_are_trec_evals_minus_j_and_logged_apart(tmp_path, capsys):
    run_id = log_run(tmp_path, "metrics.judged_only=true", "metrics.measures=[ndcg,mrr,judged]")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(run_id)
    metrics = run.data.metrics
    assert {"ndcg_at_10", "condensed/ndcg_at_10", "condensed/ndcg_at_10_ci_lower", "condensed/mrr"} <= set(metrics)
    assert metrics["condensed/judged_at_10"] > metrics["judged_at_10"]  # unjudged documents are gone

    ranking = client.download_artifacts(run_id, RUN_FILE, str(tmp_path))
    capsys.readouterr()
    assert metrics_main([str(QRELS), ranking, "-J", "-c", "-m", "ndcg_cut.10", "-m", "recip_rank"]) == 0
    said = dict(line.split("\t")[0::2] for line in capsys.readouterr().out.splitlines())
    assert metrics["condensed/ndcg_at_10"] == pytest.approx(float(said["ndcg_cut_10           "]), abs=5e-5)
    assert metrics["condensed/mrr"] == pytest.approx(float(said["recip_rank            "]), abs=5e-5)

    side = load_side(client, run)  # a comparison or a gate sees only the standard metrics
    assert "ndcg@10" in side.metrics() and not any("condensed" in m for m in side.metrics())
    assert "ndcg@10 (condensed)" in side.table.columns
