"""One MLflow run, as :class:`pipeline.tracking.runs.Tracker` writes it: its files land where MLflow lists them."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.tracking._tracking_service.client import TrackingServiceClient

from pipeline.common.names import TAG_ERROR
from pipeline.tracking.runs import Tracker


def test_a_run_created_here_logs_its_files_without_reading_the_run_back(tmp_path, monkeypatch):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("x", artifact_location=(tmp_path / "artifacts").as_uri())
    tracker = Tracker.start(client, experiment, "BM25", {"rankscope.kind": "job"})
    tracker.log_metrics({"ndcg_at_10": 0.5}, params={"retriever.k1": 1.2})
    read_back = []
    real = TrackingServiceClient.get_run
    monkeypatch.setattr(TrackingServiceClient, "get_run",  # MLflow's client reads the run back to find its root
                        lambda self, run_id: read_back.append(run_id) or real(self, run_id))
    files = [tmp_path / "run.trec", tmp_path / "histogram.png"]
    for path in files:
        path.write_text(path.name)
    tracker.log_files(files[:1])
    tracker.log_files(files[1:], "plots")
    assert read_back == []
    monkeypatch.undo()
    listed = {f.path for f in client.list_artifacts(tracker.run_id)}
    assert listed == {"run.trec", "plots"}
    assert [f.path for f in client.list_artifacts(tracker.run_id, "plots")] == ["plots/histogram.png"]
    local = client.download_artifacts(tracker.run_id, "plots/histogram.png", str(tmp_path / "back"))
    assert Path(local).read_text() == "histogram.png"


def test_a_run_opened_by_id_logs_its_files_as_mlflows_client_does(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("x", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    (tmp_path / "summary.txt").write_text("done")
    Tracker(client, run_id).log_files([tmp_path / "summary.txt"])  # no artifact root known: the client finds it
    assert [f.path for f in client.list_artifacts(run_id)] == ["summary.txt"]


def test_a_run_logged_in_a_closing_block_ends_finished_or_failed_with_what_the_block_raised(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("x", artifact_location=(tmp_path / "artifacts").as_uri())
    done, broken = (Tracker.start(client, experiment, name, {}) for name in ("done", "broken"))
    with done.closing():
        done.log_metrics({"ndcg_at_10": 0.5})
    with pytest.raises(KeyError), broken.closing():
        raise KeyError("no such metric")
    assert client.get_run(done.run_id).info.status == "FINISHED"
    failed = client.get_run(broken.run_id)
    assert failed.info.status == "FAILED" and failed.data.tags[TAG_ERROR] == "KeyError: 'no such metric'"
