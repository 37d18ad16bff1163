"""The end-of-sweep summary, built from what MLflow holds about the parent's child runs.

Under the joblib launcher the jobs run in worker processes whose results never come back to the driver, so the
summary reads the children's metrics, tags and per-question CSV artifacts back from the tracking store. The
same code therefore serves the basic launcher, joblib, and a sweep re-summarised later from its parent run id.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from mlflow import MlflowClient

from metrics.comparison import compare
from metrics.spec import MetricSpec
from pipeline.common import progress
from pipeline.job.results import PER_QUESTION_FILE
from pipeline.tracking.runs import TAG_CORPUS_DIGEST, TAG_ERROR, TAG_SYSTEM

TAG_JOB = "rankscope.job"


@dataclass
class SystemRun:
    """One child run as MLflow has it."""

    run_id: str
    name: str
    status: str
    job: int
    metrics: dict[str, float]
    error: str | None = None
    corpus_digest: str | None = None
    per_question: pd.DataFrame | None = None  # index: question id

    @property
    def finished(self) -> bool:
        return self.status == "FINISHED" and self.per_question is not None


@dataclass
class SweepSummary:
    """All systems of a sweep side by side: means, first-relevant ranks, paired differences against the best."""

    parent_run_id: str
    systems: list[SystemRun]
    show: list[MetricSpec]
    primary: MetricSpec
    confidence: float = 0.95
    best: str | None = None
    means: pd.DataFrame = field(default_factory=pd.DataFrame)  # system x (metric, metric/ci_low, metric/ci_high)
    first_rank: pd.DataFrame = field(default_factory=pd.DataFrame)  # question x system, <NA> = not retrieved
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)  # (system, metric) x difference, bounds, p
    same_data: bool = True  # False: systems were measured on different collections, so not compared per question

    @property
    def finished(self) -> list[SystemRun]:
        return [s for s in self.systems if s.finished]

    @property
    def failed(self) -> list[SystemRun]:
        return [s for s in self.systems if not s.finished]


def child_runs(client: MlflowClient, experiment_id: str, parent_run_id: str) -> list[SystemRun]:
    """The parent's children in job order, with their per-question tables (finished runs only)."""
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent_run_id}'",
                                  max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            break
    systems = []
    for run in runs:
        tags = run.data.tags
        job = int(tags[TAG_JOB]) if tags.get(TAG_JOB, "").isdigit() else len(systems)
        systems.append(SystemRun(run.info.run_id, tags.get(TAG_SYSTEM, run.info.run_name), run.info.status, job,
                                 dict(run.data.metrics), tags.get(TAG_ERROR), tags.get(TAG_CORPUS_DIGEST)))
    systems.sort(key=lambda s: s.job)
    _unique_names(systems)
    done = [s for s in systems if s.status == "FINISHED"]
    with tempfile.TemporaryDirectory() as tmp:
        for system in progress.iterate(done, len(done), "reading runs", "run"):
            try:
                local = client.download_artifacts(system.run_id, PER_QUESTION_FILE, tmp)
            except Exception as exc:  # a finished run without its table cannot be compared: report, go on
                system.error = f"per-question table unreadable: {exc}"
                continue
            frame = pd.read_csv(local, dtype={"query_id": str}, keep_default_na=False, na_values=[""])
            system.per_question = frame.set_index("query_id")
            Path(local).unlink(missing_ok=True)
    return systems


def _unique_names(systems: list[SystemRun]) -> None:
    seen: dict[str, int] = {}
    for s in systems:
        seen[s.name] = seen.get(s.name, 0) + 1
    for s in systems:
        if seen[s.name] > 1:
            s.name = f"{s.name} #{s.job}"


def summarize(systems: list[SystemRun], parent_run_id: str, show: list[MetricSpec], primary: MetricSpec,
              confidence: float = 0.95, resamples: int = 5000, seed: int = 0) -> SweepSummary:
    """Means from the runs' metrics; ranks and paired differences from their per-question tables."""
    summary = SweepSummary(parent_run_id, systems, show, primary, confidence)
    done = summary.finished
    if not done:
        return summary
    columns = {}
    for spec in show:
        for suffix in ("", "/ci_low", "/ci_high"):
            columns[spec.name + suffix] = [s.metrics.get(spec.mlflow_key + suffix, float("nan")) for s in done]
    summary.means = pd.DataFrame(columns, index=pd.Index([s.name for s in done], name="system"))
    key = primary.mlflow_key
    best = max(done, key=lambda s: (s.metrics.get(key, float("-inf")), -s.job))
    summary.best = best.name
    summary.same_data = len({s.corpus_digest for s in done}) == 1
    if not summary.same_data:
        return summary
    summary.first_rank = pd.DataFrame(
        {s.name: s.per_question["first_relevant_rank"].astype("Int64") for s in done}
    ).rename_axis("query_id")
    names = [spec.name for spec in show if all(spec.name in s.per_question.columns for s in done)]
    frames = []
    for system in done:
        if system is best or not names:
            continue
        table = compare(best.per_question[names], system.per_question[names], names, confidence, resamples,
                        seed=seed).table
        frames.append(table.assign(system=system.name).reset_index().set_index(["system", "metric"]))
    if frames:
        summary.differences = pd.concat(frames)
    return summary
