"""Comparisons and baselines in MLflow: a comparison recorded as a run of its own, the baseline tag moved.

The statistics are computed elsewhere (``metrics.comparison``, ``pipeline.decisions``); this module only writes
what was decided where MLflow users look for it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import pandas as pd

from metrics.comparison import Comparison, GateResult
from metrics.spec import parse_metric
from pipeline.common.interrupts import deferred
from pipeline.common.names import (
    BASELINE_TAG,
    COMPARISON_TABLE,
    KIND_COMPARISON,
    LOWER,
    ONE_SIDE_FILE,
    QUESTIONS_PREFIX,
    TAG_COMPARE_BASELINE,
    TAG_COMPARE_CANDIDATE,
    TAG_COMPARE_COMMAND,
    TAG_COMPARE_DIGEST,
    TAG_COMPARE_PRIMARY,
    TAG_COMPARE_VERDICT,
    TAG_COMPARED_IN,
    TAG_DESCRIPTION,
    TAG_GATE,
    TAG_GATE_REASON,
    TAG_KIND,
    UPPER,
)
from pipeline.tracking.client import MLFLOW_SOURCE_NAME, MlflowClient, MlflowException, Run
from pipeline.tracking.runs import Tracker
from pipeline.tracking.search import first_run, search_runs
from pipeline.tracking.selectors import corpus_key, corpus_of, literal
from pipeline.tracking.store import EXPERIMENT_TAGS
from pipeline.tracking.views import save_comparisons_view

LINKED = 10  # comparisons a compared run's description lists
COMPARED_HEADING = "\n\n**Compared in** (newest first):\n"
# per metric: the comparison table's column -> the suffix of its MLflow key (bounds next to the difference)
COLUMNS = {"baseline": "_baseline", "candidate": "_candidate", "difference": "_difference",
           "ci_low": "_difference" + LOWER, "ci_high": "_difference" + UPPER, "p_value": "_p_value",
           "p_holm": "_p_holm"}


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
                      gate_result: GateResult | None = None, source: str | None = None,
                      shown: Mapping[str, str] | None = None) -> str:
    """The comparison as an MLflow run of the comparisons experiment (``<experiment> comparisons``, apart from the
    evaluations, whose metric names it would otherwise reuse with another meaning): both ids as tags, per metric
    ``<metric>_baseline``, ``_candidate``, ``_difference`` (with ``_ci_lower``/``_ci_upper``), ``_p_value``,
    ``_p_holm``, and the table via ``log_table``. Named with the command that made it (``compare:`` or ``gate:``),
    both sides and the corpus; its source is ``source`` (the command line), its dataset inputs both sides' corpora.
    ``shown``: what the UI shows first, in words: ``description`` (the run's) and ``primary`` (the verdict on the
    primary metric, a column of the comparisons' saved view). Each compared run then links to it (its description
    and ``rankscope.compared_in``).

    The same comparison (same runs, metrics, settings and gate decision) is recorded once: asked again (a
    resumed sweep, a repeated command) it returns the run that already holds it."""
    experiment_id = comparisons_experiment(client, candidate.run.info.experiment_id)
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
        TAG_COMPARE_COMMAND: "gate" if gate_result is not None else "compare",
    }
    if source:
        run_tags[MLFLOW_SOURCE_NAME] = source
    if shown and shown.get("description"):
        run_tags[TAG_DESCRIPTION] = shown["description"]
    if shown and shown.get("primary"):
        run_tags[TAG_COMPARE_PRIMARY] = shown["primary"]
    if gate_result is not None:
        run_tags[TAG_GATE] = "pass" if gate_result.passed else "regression"
        run_tags[TAG_GATE_REASON] = gate_result.reason[:5000]
    corpora = list(dict.fromkeys(corpus_of(side.run) or "?" for side in (candidate, baseline)))
    name = f"{run_tags[TAG_COMPARE_COMMAND]}: {candidate.name} vs {baseline.name} · {' vs '.join(corpora)}"
    tracker = Tracker.start(client, experiment_id, name, run_tags)
    with tracker.closing():
        tracker.log_params({"confidence": comparison.confidence, "resamples": resamples,
                            "permutations": permutations, "seed": seed, "metrics": list(comparison.table.index)})
        values: dict[str, float] = {
            QUESTIONS_PREFIX + "common": len(candidate.table.index.intersection(baseline.table.index)),
            QUESTIONS_PREFIX + "only_in_baseline": len(comparison.only_in_baseline),
            QUESTIONS_PREFIX + "only_in_candidate": len(comparison.only_in_candidate),
        }
        for metric, row in comparison.table.iterrows():
            key = parse_metric(str(metric)).mlflow_key
            for column, logged in COLUMNS.items():
                values[key + logged] = float(row[column])
        tracker.log_metrics(values)
        tracker.log_table(comparison.table.reset_index(), COMPARISON_TABLE)
        log_sides(tracker, baseline, candidate)
        if comparison.only_in_baseline or comparison.only_in_candidate:
            text = (f"only in the baseline ({baseline.run_id}):\n" + "\n".join(comparison.only_in_baseline)
                    + f"\n\nonly in the candidate ({candidate.run_id}):\n" + "\n".join(comparison.only_in_candidate))
            tracker.log_text(text, ONE_SIDE_FILE)
    save_comparisons_view(client, experiment_id)
    for side in (baseline, candidate):
        link_back(client, side.run, experiment_id, tracker.run_id, name, shown.get("primary") if shown else None)
    return tracker.run_id


def log_sides(tracker: Tracker, baseline: Side, candidate: Side) -> None:
    """Both sides' corpora as the comparison's dataset inputs, in the context of the side that read them
    (``baseline``, ``candidate``, or both when they share one)."""
    contexts: dict[tuple[str, str], list[str]] = {}
    found: dict[tuple[str, str], Any] = {}
    for label, side in (("baseline", baseline), ("candidate", candidate)):
        for entry in (side.run.inputs.dataset_inputs if side.run.inputs else []):
            identity = (entry.dataset.name, entry.dataset.digest)
            found.setdefault(identity, entry.dataset)
            contexts.setdefault(identity, []).append(label)
    for identity, dataset in found.items():
        tracker.log_dataset(dataset, " and ".join(contexts[identity]))


def link_back(client: MlflowClient, run: Run, experiment_id: str, comparison_id: str, name: str,
              primary: str | None) -> None:
    """A compared run's description lists the comparisons that read it (the newest first, up to
    :data:`LINKED`), each linked; ``rankscope.compared_in`` holds the newest one's id."""
    held = client.get_run(run.info.run_id).data.tags.get(TAG_DESCRIPTION, "")
    own, _, listed = held.partition(COMPARED_HEADING)
    line = f"- [{name}](#/experiments/{experiment_id}/runs/{comparison_id}?workflowType=machine_learning)" + (
        f": {primary}" if primary else "")
    lines = [line, *(x for x in listed.strip().splitlines() if x.startswith("- ") and x != line)][:LINKED]
    Tracker(client, run.info.run_id).set_tags({TAG_DESCRIPTION: own.rstrip() + COMPARED_HEADING + "\n".join(lines),
                                              TAG_COMPARED_IN: comparison_id})


def comparisons_experiment(client: MlflowClient, evaluations: str) -> str:
    """The experiment comparisons of ``evaluations``' runs are recorded in (made when first needed)."""
    source = client.get_experiment(evaluations)
    name = f"{source.name} comparisons"
    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        return found.experiment_id
    local = source.artifact_location if str(source.artifact_location).startswith("file:") else None
    try:
        return client.create_experiment(name, artifact_location=local, tags=EXPERIMENT_TAGS)
    except MlflowException:  # made meanwhile by another process
        return client.get_experiment_by_name(name).experiment_id


def _digest(parts: list[object]) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def baseline_tag(selector: str) -> tuple[str, str]:
    """The tag that marks the baseline: the one a ``tag:KEY=VALUE`` selector names, else ``baseline=true``."""
    if selector.startswith("tag:") and "=" in selector:
        key, _, value = selector[4:].partition("=")
        return key, value
    return BASELINE_TAG


def promote(client: MlflowClient, candidate: Run, tag: tuple[str, str] = BASELINE_TAG) -> list[str]:
    """Make ``candidate`` the baseline of its corpus in its experiment; returns the runs that were the baseline of
    that corpus before (a baseline of another corpus keeps its tag).

    The new baseline gets the tag (and ``KEY/since``, ``KEY/replaces``); each previous one loses it and keeps
    ``KEY/previous=true``, ``KEY/replaced_by`` and ``KEY/until``: the history stays searchable in MLflow.
    """
    key, value = tag
    experiment_id = candidate.info.experiment_id
    corpus = corpus_key(candidate)
    previous = [r.info.run_id for r in search_runs(client, [experiment_id], f"tags.`{key}` = {literal(value)}")
                if r.info.run_id != candidate.info.run_id and (corpus is None or corpus_key(r) == corpus)]
    now = datetime.now(UTC).isoformat(timespec="seconds")
    with deferred():  # whole: a Ctrl-C half-way would leave two baselines of the corpus, or none
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
