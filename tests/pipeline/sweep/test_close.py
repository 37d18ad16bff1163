"""A sweep's close: what the parent run holds once the summary is logged."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.common.names import JOBS_PREFIX, TAG_BEST, TAG_KIND
from pipeline.job.context import SweepHandle
from pipeline.sweep.close import log_summary
from pipeline.tracking.runs import Tracker
from pipeline.tracking.store import Store
from tests.pipeline.sweep.test_report import A, B, summary_of


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
    assert held.metrics["ndcg_at_5"] == pytest.approx(B.metrics["ndcg_at_5"]) and held.tags[TAG_BEST] == "B (ndcg@5)"
    assert held.params == ({} if points is None else {"retriever.k1": "0.6,0.9"})
