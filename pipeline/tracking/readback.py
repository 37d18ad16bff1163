"""Results read back from MLflow: a sweep's child runs with their per-question tables, one run's table.

Under the joblib launcher the jobs run in worker processes whose results never come back to the driver, so the
end-of-sweep summary reads the children from the tracking store; the same code serves the basic launcher, joblib,
a sweep summarised again by ``python -m pipeline.sync``, and ``compare``/``gate``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from pipeline.analysis.summary import SystemRun, unique_names
from pipeline.common import interrupts, progress
from pipeline.common.names import (
    PER_QUESTION_FILE,
    PER_QUESTION_TABLE,
    TAG_CORPUS_DIGEST,
    TAG_ERROR,
    TAG_JOB,
    TAG_NOTES,
    TAG_SYSTEM,
)
from pipeline.tracking.client import MLFLOW_PARENT_RUN_ID, MlflowClient, Run, download_artifacts
from pipeline.tracking.records import job_records, read_table
from pipeline.tracking.search import search_runs


def child_runs(client: MlflowClient, experiment_id: str, parent_run_id: str,
               known: Mapping[str, pd.DataFrame] | None = None, tables: bool = True) -> list[SystemRun]:
    """The parent's children in job order, with their per-question tables (finished runs only; none without
    ``tables``). ``known``: tables already read from the files these runs were logged from, by run id
    (:func:`logged_tables`)."""
    systems, roots = [], {}
    for run in search_runs(client, [experiment_id], f"tags.`{MLFLOW_PARENT_RUN_ID}` = '{parent_run_id}'"):
        tags = run.data.tags
        job = int(tags[TAG_JOB]) if tags.get(TAG_JOB, "").isdigit() else len(systems)
        systems.append(SystemRun(run.info.run_id, tags.get(TAG_SYSTEM, run.info.run_name), run.info.status, job,
                                 dict(run.data.metrics), tags.get(TAG_ERROR), tags.get(TAG_CORPUS_DIGEST),
                                 params=dict(run.data.params), tags=dict(tags), started_ms=run.info.start_time,
                                 notes=data_notes(run)))
        roots[run.info.run_id] = run.info.artifact_uri
    systems.sort(key=lambda s: s.job)
    unique_names(systems)
    done = [s for s in systems if s.status == "FINISHED"]
    for system in done:
        if known and system.run_id in known:
            system.per_question = known[system.run_id]
    unread = [s for s in done if s.per_question is None] if tables else []
    with tempfile.TemporaryDirectory() as tmp:
        for system in progress.iterate(unread, len(unread), "reading runs", "run"):
            try:
                local = _download(client, system.run_id, roots.get(system.run_id), PER_QUESTION_FILE, tmp)
            except Exception as exc:  # a finished run without its table cannot be compared: report, go on
                interrupts.stop_if_interrupted(exc)
                system.error = f"per-question table unreadable: {exc}"
                continue
            system.per_question = read_per_question(Path(local))
            Path(local).unlink(missing_ok=True)
    return systems


def read_per_question(path: Path) -> pd.DataFrame:
    """A run's per-question CSV as the summary reads it: indexed by question id, an empty cell missing."""
    frame = pd.read_csv(path, dtype={"query_id": str}, keep_default_na=False, na_values=[""])
    return frame.set_index("query_id")


def logged_tables(sweep_dir: Path) -> dict[str, pd.DataFrame]:
    """The per-question tables of a sweep's jobs already logged, by run id, read from the job folders their runs
    were logged from (the same bytes as the runs' artifacts). A sweep's driver reads them while the store process
    logs the last job, instead of downloading each after it (:func:`child_runs`)."""
    tables = {}
    for folder, record in job_records(sweep_dir) if sweep_dir.is_dir() else []:
        if record.run_id is None or record.error or PER_QUESTION_FILE not in record.files:
            continue
        try:
            tables[record.run_id] = read_per_question(folder / PER_QUESTION_FILE)
        except (OSError, ValueError):  # unreadable here: child_runs downloads the run's own copy
            continue
    return tables


def _download(client: MlflowClient, run_id: str, root: str | None, path: str, folder: str) -> str:
    """One artifact of a run, straight from the run's artifact root: by run id, MLflow looks the run up again and
    searches its logged models for the path (about 80 ms a run, most of reading a sweep back). A root that does
    not answer is left to the run-id route, which says why the artifact cannot be read."""
    if root:
        try:
            return download_artifacts(artifact_uri=f"{root.rstrip('/')}/{path}", dst_path=folder,
                                      tracking_uri=client.tracking_uri)
        except Exception:  # the run-id route below reports it
            pass
    return client.download_artifacts(run_id, path, folder)


def data_notes(run: Run) -> list[str]:
    """What validating the run's data found (dropped judgments, empty texts ...), one line each, for the report's
    header: the job's ``rankscope.notes`` tag (one line per kind of note; ``notes.txt`` holds them uncut)."""
    return [line for line in run.data.tags.get(TAG_NOTES, "").splitlines() if line.strip()]


def per_question_table(client: MlflowClient, run: Run) -> pd.DataFrame | None:
    """The run's per-question table (``per_question.json``, as logged), or None when it has none."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(run.info.run_id, PER_QUESTION_TABLE, tmp)
        except Exception:
            return None
        return read_table(Path(local))
