"""A sweep's saved view of its runs table: written as an experiment tag, even when another sweep writes it too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.tracking.client import MlflowClient, MlflowException
from pipeline.tracking.store import Store
from pipeline.tracking.views import TAG_PREFIX, save_view

RACE = ("(sqlite3.IntegrityError) UNIQUE constraint failed: experiment_tags.key, experiment_tags.experiment_id "
        "[SQL: INSERT INTO experiment_tags ...]")  # what MLflow raised in CI, two sweeps ending together


class RacedClient:
    """A real store's client whose first tag write loses the race MLflow's own write has (it looks for the tag, then
    inserts it): another sweep's write lands in between."""

    def __init__(self, client: MlflowClient, error: str) -> None:
        self.client, self.error, self.writes = client, error, 0

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        self.writes += 1
        if self.writes == 1:
            self.client.set_experiment_tag(experiment_id, key, "the other sweep's")
            raise MlflowException(self.error)
        self.client.set_experiment_tag(experiment_id, key, value)


@pytest.fixture
def store(tmp_path: Path, empty_store: Path) -> tuple[MlflowClient, str]:
    (tmp_path / "mlflow.db").write_bytes(empty_store.read_bytes())
    return Store.open(f"sqlite:///{tmp_path / 'mlflow.db'}", "t").pair()


def test_a_view_another_sweep_wrote_in_between_is_written_over(store):
    client, experiment_id = store
    raced = RacedClient(client, RACE)
    key = save_view(raced, experiment_id, "ndcg_at_5", "ndcg@5", ["retriever.k1"])
    assert raced.writes == 2
    saved = json.loads(client.get_experiment(experiment_id).tags[TAG_PREFIX + key])
    assert saved["name"] == "rankscope: ndcg@5"


def test_any_other_store_error_is_raised(store):
    client, experiment_id = store
    with pytest.raises(MlflowException, match="database is locked"):
        save_view(RacedClient(client, "(sqlite3.OperationalError) database is locked"), experiment_id, "ndcg_at_5",
                  "ndcg@5", [])
