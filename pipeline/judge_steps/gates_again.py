"""Every regression gate decided on a re-scored run (it was the candidate), decided again on the new qrels version
when its baseline is re-scored too: what the gate said on the old tables and what it says on the new ones."""

from __future__ import annotations

import pandas as pd

from metrics.comparison import compare, gate
from pipeline.common.names import TAG_COMPARE_BASELINE, TAG_COMPARE_CANDIDATE, TAG_GATE, TAG_GATE_REASON
from pipeline.decisions.gate_settings import load_settings as gate_settings
from pipeline.judge_steps.rescoring import GateAgain, Rescored
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.search import search_runs


def gate_again(before: pd.DataFrame, after: pd.DataFrame, base_before: pd.DataFrame, base_after: pd.DataFrame,
               metrics: list[str], tolerance: float, confidence: float, resamples: int, permutations: int,
               seed: int) -> tuple[str, str]:
    """The gate's line on the old tables and on the new ones (``metrics.comparison.gate``)."""
    said = []
    for candidate, baseline in ((before, base_before), (after, base_after)):
        comparison = compare(baseline.set_index("query_id"), candidate.set_index("query_id"), metrics, confidence,
                             resamples, permutations, seed)
        said.append(gate(comparison, metrics, tolerance).reason)
    return said[0], said[1]


def gates_again(client: MlflowClient, gate_name: str, rescored: list[Rescored]) -> list[GateAgain]:
    """Every gate decided on a selected run (it was the candidate), decided again on the new version when its
    baseline is selected too."""
    by_id = {r.ranked.run_id: r for r in rescored}
    experiment = client.get_experiment(rescored[0].ranked.run.info.experiment_id)
    found: list[GateAgain] = []
    recorded = client.get_experiment_by_name(f"{experiment.name} comparisons")  # pipeline.tracking.comparisons'
    if recorded is None:  # no comparison was ever recorded
        return found
    where = recorded.experiment_id
    settings = gate_settings(gate_name)
    for run in search_runs(client, [where], f"tags.`{TAG_GATE}` != ''"):
        tags = run.data.tags
        candidate, baseline = by_id.get(tags.get(TAG_COMPARE_CANDIDATE)), by_id.get(tags.get(TAG_COMPARE_BASELINE))
        if candidate is None or baseline is None:
            continue
        metrics = [m.strip(" '[]") for m in run.data.params.get("metrics", "").split(",") if m.strip(" '[]")]
        metrics = [m for m in metrics if m in candidate.after.table.columns] or [candidate.plan.primary.name]
        before, after = gate_again(candidate.before.table, candidate.after.table, baseline.before.table,
                                   baseline.after.table, metrics, float(settings.tolerance),
                                   float(run.data.params.get("confidence", settings.confidence)),
                                   int(run.data.params.get("resamples", settings.resamples)),
                                   int(run.data.params.get("permutations", settings.permutations)),
                                   int(run.data.params.get("seed", settings.seed)))
        was = tags.get(TAG_GATE_REASON, before)
        found.append(GateAgain(candidate.ranked.system, baseline.ranked.system, was, after))
    return found
