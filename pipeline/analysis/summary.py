"""The end-of-sweep summary: every system side by side, from plain data (``pipeline.tracking.readback`` reads
the child runs back from MLflow into :class:`SystemRun` s)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from metrics.comparison import compare
from metrics.spec import MetricSpec

JUDGED = MetricSpec("judged", 10)
JUDGED_FLOOR = 0.8  # below it, too much of a system's top 10 was never judged: its nDCG undercounts


def thinly_judged(judged: float | None) -> bool:
    """True when a system's judged@10 (None: not measured) is below :data:`JUDGED_FLOOR`."""
    return judged is not None and not pd.isna(judged) and judged < JUDGED_FLOOR


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

    def thinly_judged(self) -> dict[str, float]:
        """Finished systems whose judged@10 is below :data:`JUDGED_FLOOR`, with it (systems that did not measure
        judged@10 are not listed)."""
        found = {s.name: s.metrics.get(JUDGED.mlflow_key) for s in self.finished}
        return {name: float(judged) for name, judged in found.items() if thinly_judged(judged)}


def unique_names(systems: list[SystemRun]) -> None:
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
