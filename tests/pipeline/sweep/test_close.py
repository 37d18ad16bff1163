"""A sweep's close: what the parent run holds once the summary is logged."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.common.names import JOBS_PREFIX, TAG_BEST, TAG_CORPUS, TAG_DESCRIPTION, TAG_KIND
from pipeline.job.context import SweepHandle
from pipeline.sweep.parent_summary import log_summary
from pipeline.tracking.runs import Tracker
from pipeline.tracking.store import Store
from tests.pipeline.sweep.test_report import A, B, C, summary_of


@pytest.mark.parametrize("points", [None, [["retriever.k1=0.6"], ["retriever.k1=0.9"]]])
def test_the_parent_holds_the_counts_the_best_system_and_the_swept_values(tmp_path, points):
    """``points`` None: an optimiser chose the jobs, so there are no swept values to list."""
    client, experiment_id = Store.open(f"sqlite:///{tmp_path / 'mlflow.db'}", "rankscope").pair()
    parent = Tracker.start(client, experiment_id, "sweep", {TAG_KIND: "sweep"})
    runs = [Tracker.start(client, experiment_id, s.name, {}, parent.run_id).run_id for s in (A, B)]
    summary = summary_of(*(dataclasses.replace(s, run_id=r) for s, r in zip((A, B), runs)))
    log_summary(parent, summary, SweepHandle(experiment_id, parent.run_id, ["retriever.k1"], points), 0)
    parent.wait_later()
    held = client.get_run(parent.run_id).data
    assert held.metrics[JOBS_PREFIX + "finished"] == 2 and held.metrics[JOBS_PREFIX + "failed"] == 0
    assert held.metrics["ndcg_at_5"] == pytest.approx(B.metrics["ndcg_at_5"])
    assert summary.tied == ["A"] and held.tags[TAG_BEST] == "tied: B, A (ndcg@5)"  # neither crowned
    assert held.params == ({} if points is None else {"retriever.k1": "0.6,0.9"})


def test_the_parent_leads_with_the_verdict_in_words_and_joins_its_corpus_group(tmp_path):
    """The description (what the run's page shows first): the top system's primary metric with its interval, the
    verdict, each system's row; one corpus: the parent carries its tag, so the corpus's saved view lists it."""
    client, experiment_id = Store.open(f"sqlite:///{tmp_path / 'mlflow.db'}", "rankscope").pair()
    parent = Tracker.start(client, experiment_id, "sweep", {TAG_KIND: "sweep"})
    systems = [dataclasses.replace(s, run_id=Tracker.start(client, experiment_id, s.name, {}, parent.run_id).run_id,
                                   tags={TAG_CORPUS: "helpdesk"}, params={"retriever.k1": k1})
               for s, k1 in ((B, "0.9"), (C, "1.2"))]
    summary = summary_of(*systems)
    log_summary(parent, summary, SweepHandle(experiment_id, parent.run_id, ["retriever.k1"], None), 0)
    parent.wait_later()
    tags = client.get_run(parent.run_id).data.tags
    assert summary.single_best and tags[TAG_BEST] == "B (ndcg@5)" and tags[TAG_CORPUS] == "helpdesk"
    lead, table = tags[TAG_DESCRIPTION].split("\n\n")[:2]
    mean, low, high = (B.metrics[f"ndcg_at_5{s}"] for s in ("", "_ci_lower", "_ci_upper"))
    assert lead.startswith(f"**B** has the highest ndcg@5 on helpdesk: **{mean:.3f} [{low:.3f}, {high:.3f}]** "
                           f"(90% bootstrap interval, 6 questions). Best by ndcg@5: B")
    assert table.splitlines()[0] == "| system | ndcg@5 | 90% interval | retriever.k1 |"
    assert table.splitlines()[2].startswith(f"| B | **{mean:.3f}** | [{low:.3f}, {high:.3f}] | 0.9 |")
