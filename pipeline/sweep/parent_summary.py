"""What the parent run shows of a finished sweep: its ``jobs/*`` counts, the summary table, the corpus, the swept
settings and their values, the best system's primary metric with its interval and its name; and each corpus's
saved view in MLflow's UI."""

from __future__ import annotations

from metrics.spec import MetricSpec
from pipeline.analysis.summary import SweepSummary
from pipeline.common.names import JOBS_PREFIX, LOWER, SUMMARY_TABLE, TAG_BEST, TAG_CORPUS, TAG_DESCRIPTION, UPPER
from pipeline.common.redact import redact_text
from pipeline.job.context import SweepHandle
from pipeline.reports.text import best_tag, sweep_description
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.links import experiment_url
from pipeline.tracking.runs import Tracker, log_parent_summary
from pipeline.tracking.views import save_view


def log_summary(parent: Tracker, summary: SweepSummary, handle: SweepHandle | None, unlogged: int) -> None:
    """The parent's ``jobs/*`` counts, the summary table and what a collapsed runs list shows of a sweep: the corpus
    (dataset input), the swept keys and their values (params), the best system's primary metric with its interval
    (metrics) and its name (tag).

    Handed to the store process without waiting (:meth:`Tracker.run_later`): its eight round trips (about 0.1 s)
    overlap the plots and the report; a store error is raised after them (:meth:`Tracker.wait_later`)."""
    counts = {JOBS_PREFIX + "finished": len(summary.finished), JOBS_PREFIX + "failed": len(summary.failed),
              JOBS_PREFIX + "not_logged": unlogged}
    table = None if summary.means.empty else summary.means.reset_index()
    finished = summary.finished
    swept: dict[str, list[str]] = {}
    for point in (handle.points or []) if handle is not None and finished else []:
        for override in point:
            key, _, value = override.lstrip("+~").partition("=")
            if key in handle.varying:
                swept.setdefault(key, []).append(value)
    best = next((s for s in finished if s.name == summary.best), None)
    key = summary.primary.mlflow_key
    metrics = {k: best.metrics[k] for k in (key, key + LOWER, key + UPPER) if k in best.metrics} if best else {}
    corpora = corpora_of(summary)
    tags = {TAG_DESCRIPTION: sweep_description(summary, ", ".join(corpora) or None, swept_settings(summary, handle))}
    named = best_tag(summary)
    if named:
        tags[TAG_BEST] = named
    if len(corpora) == 1:  # the parent joins its children's group in the corpus's saved view
        tags[TAG_CORPUS] = corpora[0]
    parent.run_later(log_parent_summary, JOBS_PREFIX + "finished", counts, table, SUMMARY_TABLE,
                     finished[0].run_id if finished else None,
                     {k: ",".join(dict.fromkeys(v)) for k, v in swept.items()}, metrics, tags)


def corpora_of(summary: SweepSummary) -> list[str]:
    """The corpora the sweep's finished systems were measured on (their ``rankscope.corpus`` tags), in job order."""
    return list(dict.fromkeys(s.tags[TAG_CORPUS] for s in summary.finished if s.tags.get(TAG_CORPUS)))


def swept_settings(summary: SweepSummary, handle: SweepHandle | None) -> list[str]:
    """The settings the sweep varied that its runs hold as params (``retriever``, ``retriever.k1`` ...), in the
    order they were given; the corpus is not one (views and descriptions are per corpus)."""
    held = {k for s in summary.finished for k in s.params}
    return [k for k in (handle.varying if handle else []) if k in held and k != "corpus"]


def save_views(client: MlflowClient, experiment_id: str, summary: SweepSummary, primary: MetricSpec,
               handle: SweepHandle | None) -> list[tuple[str, str]]:
    """The saved view of each corpus the sweep measured, its swept settings added: ``(corpus, view key)``."""
    settings = swept_settings(summary, handle)
    return [(corpus, save_view(client, experiment_id, corpus, primary.mlflow_key, primary.name, settings))
            for corpus in corpora_of(summary)]


def view_lines(client: MlflowClient, uri: str, experiment_id: str, summary: SweepSummary, primary: MetricSpec,
               handle: SweepHandle | None) -> list[str]:
    """Each corpus's saved view, saved, and the line that links to it."""
    return [f"MLflow view of {corpus} ({primary.name} with its interval, the swept settings; every run on "
            f"{corpus}): {redact_text(experiment_url(uri, experiment_id, view))}"
            for corpus, view in save_views(client, experiment_id, summary, primary, handle)]
