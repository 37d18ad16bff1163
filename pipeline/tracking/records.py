"""A job's results kept in its folder before anything is logged, and logged to MLflow exactly once.

Every job writes ``record.json`` (what its MLflow run will hold: name, tags, params, metrics, dataset input,
per-question table and files) into its output directory *before* talking to the tracking store. If the store
does not answer, nothing computed is lost: ``python -m pipeline.sync`` (or re-running the sweep) logs the record
later. :func:`publish` is idempotent: a record already logged, or a result MLflow already holds for the same
config, corpus and code under the same sweep, is never logged twice; failed or half-logged attempts it replaces
are soft-deleted (kept in MLflow's trash, tagged with the run that superseded them).
"""

from __future__ import annotations

import functools
import json
import posixpath
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import nullcontext, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.common.interrupts import deferred
from pipeline.common.jsonfile import read_json, write_json
from pipeline.common.names import RECORD_FILE, TAG_CONFIG_DIGEST, TAG_KIND, TAG_RECORD, TAG_SUPERSEDED_BY
from pipeline.common.redact import redact_text, redact_tree, redact_value
from pipeline.tracking.client import MLFLOW_LOGGED_ARTIFACTS, MLFLOW_PARENT_RUN_ID, MlflowClient, Run
from pipeline.tracking.identity import Identity
from pipeline.tracking.runs import Tracker, redacted_frame
from pipeline.tracking.search import search_runs
from pipeline.tracking.store import (
    StoreUnavailable,
    answers,
    did_not_answer,
    last_tries,
    still_not_answering,
    stopped_answering,
    store_error,
    writes_here,
)
from pipeline.tracking.traces import link_traces

FORMAT = 1


@dataclass
class JobRecord:
    """Everything one job's MLflow run holds, as plain JSON; ``run_id`` is set once it is logged."""

    record_id: str
    run_name: str
    experiment_id: str
    parent_run_id: str | None
    tracking_uri: str  # redacted: credentials come from the environment or --tracking-uri when syncing
    tags: dict[str, str]
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    dataset: dict[str, str] | None = None  # pipeline.tracking.runs.dataset_fields
    table: str | None = None  # the per-question table's file in the job folder (MLflow's table JSON)
    table_dtypes: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # artifacts, relative to the job folder
    trace_links: list[str] = field(default_factory=list)  # MLflow traces of the same store to link to the run
    started_ms: int = 0
    ended_ms: int = 0
    error: str | None = None  # the job failed: logged as a FAILED run with this reason
    run_id: str | None = None
    format: int = FORMAT

    @classmethod
    def new(cls, **values: Any) -> JobRecord:
        """A fresh record, secrets masked before anything reaches the disk (a URI's password, a token ...)."""
        values["run_name"] = redact_text(str(values.get("run_name", "")))
        values["tags"] = {str(k): redact_value(str(k), str(v)) for k, v in values.get("tags", {}).items()}
        values["params"] = redact_tree(values.get("params") or {})
        if values.get("error"):
            values["error"] = redact_text(str(values["error"]))
        return cls(record_id=uuid.uuid4().hex, **values)

    @property
    def pending(self) -> bool:
        return self.run_id is None

    @property
    def identity(self) -> Identity | None:
        return Identity.from_tags(self.tags)

    def save(self, folder: Path) -> Path:
        """Write atomically (a kill mid-write never leaves half a record)."""
        return write_json(folder / RECORD_FILE, asdict(self), indent=1)

    @classmethod
    def load(cls, folder: Path) -> JobRecord | None:
        data = read_json(folder / RECORD_FILE)
        if data is None or data.get("format") != FORMAT:
            return None
        return cls(**data)


def save_table(frame: pd.DataFrame, path: Path) -> dict[str, str]:
    """The per-question table in MLflow's table format; returns its column types, to read it back exactly."""
    maker, dtypes = table_file(frame)
    path.write_bytes(maker())
    return dtypes


def table_file(frame: pd.DataFrame) -> tuple[Callable[[], bytes], dict[str, str]]:
    """:func:`save_table`'s file as a picklable maker of its bytes (another process may format and write it: 8 ms
    of a SciFact job), and its column types. Secrets are masked here, before the table leaves this process."""
    return masked_table_file(redacted_frame(frame))


def masked_table_file(safe: pd.DataFrame) -> tuple[Callable[[], bytes], dict[str, str]]:
    """:func:`table_file` of a table whose secrets are masked already (:func:`redacted_frame`)."""
    return functools.partial(_table_bytes, safe), {str(k): str(v) for k, v in safe.dtypes.items()}


def _table_bytes(safe: pd.DataFrame) -> bytes:
    return safe.to_json(orient="split", index=False, date_format="iso").encode("utf-8")


def read_table(path: Path, dtypes: dict[str, str] | None = None) -> pd.DataFrame:
    """An MLflow table file (``{"columns": [...], "data": [[...]]}``) as a DataFrame, values untouched."""
    data = json.loads(path.read_text(encoding="utf-8"))
    frame = pd.DataFrame(data["data"], columns=data["columns"])
    return frame.astype(dtypes) if dtypes else frame


def now_ms() -> int:
    return int(time.time() * 1000)


# -- finding earlier attempts ---------------------------------------------------------------------------------


def runs_of_config(client: MlflowClient, experiment_id: str, parent_run_id: str, digest: str) -> list[Run]:
    """Active runs under ``parent_run_id`` made from the same config (any status, corpus or code)."""
    return list(search_runs(client, [experiment_id], f"tags.`{MLFLOW_PARENT_RUN_ID}` = '{parent_run_id}' and "
                                                     f"tags.`{TAG_CONFIG_DIGEST}` = '{digest}'"))


def finished_run(client: MlflowClient, experiment_id: str, parent_run_id: str, identity: Identity) -> str | None:
    """The FINISHED run under the parent with this config digest, corpus digest and code version, if any."""
    for run in runs_of_config(client, experiment_id, parent_run_id, identity.config_digest):
        if run.info.status == "FINISHED" and Identity.from_tags(run.data.tags) == identity:
            return run.info.run_id
    return None


def supersede(client: MlflowClient, runs: Iterable[Run], by: str) -> None:
    """Soft-delete earlier attempts (FAILED, interrupted, half-logged, older code), saying which run replaced them."""
    for run in runs:
        if run.info.run_id == by:
            continue
        if run.info.status == "RUNNING":
            client.set_terminated(run.info.run_id, status="FAILED")
        client.set_tag(run.info.run_id, TAG_SUPERSEDED_BY, by)
        client.delete_run(run.info.run_id)


# -- logging --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    run_id: str
    reused: bool  # True: MLflow already held this result; nothing new was logged


def publish(client: MlflowClient, record: JobRecord, folder: Path) -> Published:
    """Log the record as one MLflow run, once; mark it logged in ``folder``. Raises :class:`StoreUnavailable`: at
    once while a store that did not answer this process still does not (:func:`still_not_answering`)."""
    uri = str(client.tracking_uri)
    reason = still_not_answering(uri)
    if reason is not None:
        raise StoreUnavailable(reason)
    try:
        published = _publish(client, record, folder)
    except StoreUnavailable:
        raise
    except Exception as exc:  # unreachable server, locked database, refused request: the record stays pending
        reason = store_error(exc)
        if did_not_answer(exc):
            stopped_answering(uri, reason)
        raise StoreUnavailable(reason) from None
    record.run_id = published.run_id
    record.save(folder)
    return published


def _publish(client: MlflowClient, record: JobRecord, folder: Path) -> Published:
    earlier = list(search_runs(client, [record.experiment_id], f"tags.`{TAG_RECORD}` = '{record.record_id}'"))
    done = [r for r in earlier if r.info.status == "FINISHED"]
    if done:  # logged before (a sync run twice, or the process died after logging)
        return Published(done[0].info.run_id, reused=True)
    digest = record.tags.get(TAG_CONFIG_DIGEST)
    if record.parent_run_id and digest and record.tags.get(TAG_KIND) == "job":  # not tuning trials: they repeat
        siblings = runs_of_config(client, record.experiment_id, record.parent_run_id, digest)
        identity = record.identity
        same = [r for r in siblings if r.info.status == "FINISHED" and identity is not None
                and Identity.from_tags(r.data.tags) == identity]
        if same:  # the same result is already in the sweep: log nothing
            supersede(client, earlier, same[0].info.run_id)
            return Published(same[0].info.run_id, reused=True)
        known = {e.info.run_id for e in earlier}
        earlier += [r for r in siblings if r.info.run_id not in known]
    run_id = _log(client, record, folder)
    supersede(client, earlier, run_id)
    return Published(run_id, reused=False)


def _log(client: MlflowClient, record: JobRecord, folder: Path) -> str:
    tags = {**record.tags, TAG_RECORD: record.record_id}
    if record.table:  # the saved file is already an MLflow table (save_table): logged as is, and marked as one
        tags[MLFLOW_LOGGED_ARTIFACTS] = json.dumps([{"path": record.table, "type": "table"}])
    tracker: Tracker | None = None
    try:  # each of the Tracker's writes is whole (runs.whole): a Ctrl-C waits for it, then stops the rest
        # ... and for the run's id to be kept here, so that the run can be closed (a server's run, created as the
        # stop came, is closed by the next sync or resume: it carries the record's id)
        with deferred() if writes_here(client) else nullcontext():
            tracker = Tracker.start(client, record.experiment_id, record.run_name, tags, record.parent_run_id,
                                    start_time=record.started_ms or None)
        if record.params or record.metrics:
            tracker.log_metrics(record.metrics, params=record.params)
        if record.dataset:
            tracker.log_dataset_fields(record.dataset, context="evaluation")
        for name in [record.table] if record.table else []:
            tracker.log_files([folder / name], posixpath.dirname(name) or None)
        for name in record.files:  # 'plots/x.png' goes to the run's plots/ folder
            tracker.log_files([folder / name], posixpath.dirname(name) or None)
        if record.trace_links:  # the traces its rankings were read from (retriever=traces): MLflow shows the link
            link_traces(client, tracker.run_id, record.trace_links)
    except BaseException as exc:  # interrupted or refused half-way: the half-logged run is closed, never RUNNING;
        if tracker is None:
            raise
        if isinstance(exc, KeyboardInterrupt):  # stopped: one try, not MLflow's retries
            last_tries()
        if not did_not_answer(exc) or answers(str(client.tracking_uri)):  # (a store that is gone: sync closes it)
            with suppress(Exception):  # the record stays pending, and logging it again supersedes this run
                tracker.finish(error=f"logging was interrupted ({type(exc).__name__}): the record in {folder} is "
                                     f"logged again by the next sync or resume")
        raise
    # stopped after this, the run is whole and FINISHED: a resume finds it by its record id
    tracker.finish(error=record.error, end_time=record.ended_ms or None)
    return tracker.run_id


def pending_records(folder: Path) -> list[tuple[Path, JobRecord]]:
    """Records under ``folder`` (a job folder or a sweep folder) not logged yet, in folder order."""
    return [(where, record) for where, record in job_records(folder) if record.pending]


def job_records(folder: Path) -> list[tuple[Path, JobRecord]]:
    """Every readable record under ``folder`` (a job folder or a sweep folder), with its folder, in folder order."""
    found = []
    paths = [folder / RECORD_FILE] if (folder / RECORD_FILE).is_file() else sorted(
        folder.rglob(RECORD_FILE), key=lambda p: [int(x) if x.isdigit() else x for x in p.parent.parts])
    for path in paths:
        try:
            record = JobRecord.load(path.parent)
        except (OSError, ValueError, TypeError):
            continue
        if record is not None:
            found.append((path.parent, record))
    return found
