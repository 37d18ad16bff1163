"""The saved view of a corpus's runs: written as an experiment tag, even when another sweep writes it too; one per
corpus and primary metric, which a later sweep extends and never cuts; what its page shows first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.tracking.client import MlflowClient, MlflowException
from pipeline.tracking.store import Store
from pipeline.tracking.views import (
    SYSTEM_COLUMN,
    TAG_PREFIX,
    WIDTHS,
    decode,
    newest_view,
    save_view,
    table_state,
    view_key,
)

RACE = ("(sqlite3.IntegrityError) UNIQUE constraint failed: experiment_tags.key, experiment_tags.experiment_id "
        "[SQL: INSERT INTO experiment_tags ...]")  # what MLflow raised in CI, two sweeps ending together


class RacedClient:
    """A real store's client whose first tag write loses the race MLflow's own write has (it looks for the tag, then
    inserts it): another sweep's write lands in between."""

    def __init__(self, client: MlflowClient, error: str) -> None:
        self.client, self.error, self.writes = client, error, 0

    def get_experiment(self, experiment_id: str):
        return self.client.get_experiment(experiment_id)

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
    key = save_view(raced, experiment_id, "helpdesk", "ndcg_at_5", "ndcg@5", ["retriever.k1"])
    assert raced.writes == 2
    saved = json.loads(client.get_experiment(experiment_id).tags[TAG_PREFIX + key])
    assert saved["name"] == "rankscope · helpdesk · ndcg@5"


def test_any_other_store_error_is_raised(store):
    client, experiment_id = store
    with pytest.raises(MlflowException, match="database is locked"):
        save_view(RacedClient(client, "(sqlite3.OperationalError) database is locked"), experiment_id, "helpdesk",
                  "ndcg_at_5", "ndcg@5", [])


def held_state(client: MlflowClient, experiment_id: str, key: str) -> dict:
    return decode(json.loads(client.get_experiment(experiment_id).tags[TAG_PREFIX + key])["state"])


def test_a_later_sweep_on_the_corpus_adds_its_settings_and_never_removes_the_system_column(store):
    """A grid after a systems sweep: the grid's k1 and b join the view; the retriever column (the system) stays."""
    client, experiment_id = store
    key = save_view(client, experiment_id, "scifact", "ndcg_at_10", "ndcg@10", ["retriever"])
    assert key == view_key("scifact", "ndcg_at_10") == "rankscope-scifact-ndcg_at_10"
    save_view(client, experiment_id, "scifact", "ndcg_at_10", "ndcg@10", ["retriever.k1", "retriever.b"])
    save_view(client, experiment_id, "helpdesk", "ndcg_at_5", "ndcg@5", [])  # another corpus: a view of its own
    columns = held_state(client, experiment_id, key)["selectedColumns"]
    assert [c for c in columns if c.startswith("params.")] == [
        f"params.`{SYSTEM_COLUMN}`", "params.`retriever.k1`", "params.`retriever.b`"]
    other = held_state(client, experiment_id, view_key("helpdesk", "ndcg_at_5"))
    assert other["searchFilter"] == "tags.`rankscope.corpus` = 'helpdesk'"
    assert [c for c in other["selectedColumns"] if c.startswith("params.")] == [f"params.`{SYSTEM_COLUMN}`"]
    assert newest_view(client.get_experiment(experiment_id).tags) == view_key("helpdesk", "ndcg_at_5")


def test_the_view_lists_the_corpus_runs_flat_with_the_rounded_metric_and_its_interval_first_within_1600_px():
    """Grouped by corpus, the group open: no run folded under a parent. The name, then the metric rounded with its
    interval, the metric and its bounds, the system and the swept settings: the widths add up to less than what a
    1600 px window leaves the table (the sidebar takes about 230 px)."""
    state = table_state("scifact", "ndcg_at_10", ["retriever.k1", "retriever.b"])
    assert state["searchFilter"] == "tags.`rankscope.corpus` = 'scifact'"
    assert state["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "rankscope.corpus"}]
    assert state["groupsExpanded"] == {"tag.rankscope.corpus.scifact": True}
    assert state["columnOrder"][:5] == ["attributes.`Run Name`", "tags.`rankscope.ndcg_at_10`", "metrics.`ndcg_at_10`",
                                        "metrics.`ndcg_at_10_ci_lower`", "metrics.`ndcg_at_10_ci_upper`"]
    assert state["columnOrder"][5:8] == ["params.`retriever`", "params.`retriever.k1`", "params.`retriever.b`"]
    shown = sum(state["columnWidths"].values()) + 40 + 2 * 120  # the checkbox, Created and Duration
    assert shown <= 1600 - 230 and state["columnWidths"]["attributes.`Run Name`"] == WIDTHS["name"]


def test_the_chart_view_starts_with_the_interval_figure_the_metric_and_the_swept_settings_the_rest_folded():
    state = table_state("scifact", "ndcg_at_10", ["retriever.k1", "retriever.b"])
    first, *others = state["compareRunSections"]
    assert first["display"] and [s["name"] for s in others] == ["Model metrics", "System metrics"]
    assert not any(s["display"] for s in others)  # folded, after the retrieval figures
    cards = state["compareRunCharts"]
    assert {c["metricSectionId"] for c in cards} == {first["uuid"]}
    assert [c["type"] for c in cards] == ["IMAGE", "BAR", "PARALLEL"]
    assert cards[0]["imageKeys"] == ["ndcg_at_10 with intervals"] and cards[1]["metricKey"] == "ndcg_at_10"
    assert cards[2]["selectedParams"] == ["retriever.k1", "retriever.b"]
    assert cards[2]["selectedMetrics"] == ["ndcg_at_10"]
    assert not state["useGroupedValuesInCharts"]  # one bar per run, not the group's
