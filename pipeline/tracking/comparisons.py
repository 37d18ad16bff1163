"""Comparisons and baselines in MLflow: a comparison recorded as a run of its own, the baseline tag moved.

The statistics are computed elsewhere (``metrics.comparison``, ``pipeline.decisions``); this module only writes
what was decided where MLflow users look for it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

import pandas as pd

from metrics.comparison import Comparison, GateResult
from metrics.spec import parse_metric
from pipeline.common.names import (
    BASELINE_TAG,
    COMPARISON_TABLE,
    KIND_COMPARISON,
    ONE_SIDE_FILE,
    TAG_COMPARE_BASELINE,
    TAG_COMPARE_CANDIDATE,
    TAG_COMPARE_DIGEST,
    TAG_COMPARE_VERDICT,
    TAG_GATE,
    TAG_GATE_REASON,
    TAG_KIND,
)
from pipeline.tracking.client import MlflowClient, Run
from pipeline.tracking.runs import Tracker
from pipeline.tracking.search import first_run, search_runs
from pipeline.tracking.selectors import literal


class Side(Protocol):
    """One run of a comparison, with its per-question table (``pipeline.decisions.comparison.Side``)."""

    run: Run
    table: pd.DataFrame

    @property
    def run_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def corpus_digest(self) -> str | None: ...


def record_comparison(client: MlflowClient, baseline: Side, candidate: Side, comparison: Comparison, verdict: str,
                      resamples: int, permutations: int, seed: int, tags: Mapping[str, str] | None = None,
                      gate_result: GateResult | None = None) -> str:
    """The comparison as an MLflow run beside the candidate: both ids as tags, the table via ``log_table``.

    The same comparison (same runs, metrics, settings and gate decision) is recorded once: asked again (a
    resumed sweep, a repeated command) it returns the run that already holds it."""
    experiment_id = candidate.run.info.experiment_id
    digest = _digest([baseline.run_id, candidate.run_id, list(comparison.table.index), comparison.confidence,
                      resamples, permutations, seed, gate_result.reason if gate_result else None,
                      sorted((tags or {}).items())])
    done = first_run(client, [experiment_id], f"tags.`{TAG_COMPARE_DIGEST}` = '{digest}' and "
                                              f"attributes.status = 'FINISHED'")
    if done is not None:
        return done.info.run_id
    run_tags = {
        **(tags or {}),
        TAG_KIND: KIND_COMPARISON,
        TAG_COMPARE_BASELINE: baseline.run_id, TAG_COMPARE_CANDIDATE: candidate.run_id,
        f"{TAG_COMPARE_BASELINE}.name": baseline.name, f"{TAG_COMPARE_CANDIDATE}.name": candidate.name,
        f"{TAG_COMPARE_BASELINE}.corpus_digest": str(baseline.corpus_digest),
        f"{TAG_COMPARE_CANDIDATE}.corpus_digest": str(candidate.corpus_digest),
        TAG_COMPARE_VERDICT: verdict,
        TAG_COMPARE_DIGEST: digest,
    }
    if gate_result is not None:
        run_tags[TAG_GATE] = "pass" if gate_result.passed else "regression"
        run_tags[TAG_GATE_REASON] = gate_result.reason[:5000]
    tracker = Tracker.start(client, experiment_id, f"{candidate.name} vs {baseline.name}", run_tags)
    try:
        tracker.log_params({"confidence": comparison.confidence, "resamples": resamples,
                            "permutations": permutations, "seed": seed, "metrics": list(comparison.table.index)})
        values: dict[str, float] = {
            "questions/common": len(candidate.table.index.intersection(baseline.table.index)),
            "questions/only_in_baseline": len(comparison.only_in_baseline),
            "questions/only_in_candidate": len(comparison.only_in_candidate),
        }
        for metric, row in comparison.table.iterrows():
            key = parse_metric(str(metric)).mlflow_key
            for column in ("baseline", "candidate", "difference", "ci_low", "ci_high", "p_value", "p_holm"):
                values[f"{key}/{column}"] = float(row[column])
        tracker.log_metrics(values)
        tracker.log_table(comparison.table.reset_index(), COMPARISON_TABLE)
        if comparison.only_in_baseline or comparison.only_in_candidate:
            text = (f"only in the baseline ({baseline.run_id}):\n" + "\n".join(comparison.only_in_baseline)
                    + f"\n\nonly in the candidate ({candidate.run_id}):\n" + "\n".join(comparison.only_in_candidate))
            tracker.log_text(text, ONE_SIDE_FILE)
    except BaseException as exc:
        tracker.finish(error=f"{type(exc).__name__}: {exc}")
        raise
    tracker.finish()
    return tracker.run_id


def _digest(parts: list[object]) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def baseline_tag(selector: str) -> tuple[str, str]:
    """The tag that marks the baseline: the one a ``tag:KEY=VALUE`` selector names, else ``baseline=true``."""
    if selector.startswith("tag:") and "=" in selector:
        key, _, value = selector[4:].partition("=")
        return key, value
    return BASELINE_TAG


def promote(client: MlflowClient, candidate: Run, tag: tuple[str, str] = BASELINE_TAG) -> list[str]:
    """Make ``candidate`` the baseline of its experiment; returns the run ids that were the baseline before.

    The new baseline gets the tag (and ``KEY/since``, ``KEY/replaces``); each previous one loses it and keeps
    ``KEY/previous=true``, ``KEY/replaced_by`` and ``KEY/until``: the history stays searchable in MLflow.
    """
    key, value = tag
    experiment_id = candidate.info.experiment_id
    query = f"tags.`{key}` = {literal(value)}"
    previous = [r.info.run_id for r in search_runs(client, [experiment_id], query)
                if r.info.run_id != candidate.info.run_id]
    now = datetime.now(UTC).isoformat(timespec="seconds")
    client.set_tag(candidate.info.run_id, key, value)
    client.set_tag(candidate.info.run_id, f"{key}/since", now)
    if previous:
        client.set_tag(candidate.info.run_id, f"{key}/replaces", ",".join(previous))
    for run_id in previous:
        client.set_tag(run_id, f"{key}/previous", "true")
        client.set_tag(run_id, f"{key}/replaced_by", candidate.info.run_id)
        client.set_tag(run_id, f"{key}/until", now)
        client.delete_tag(run_id, key)
    return previous
