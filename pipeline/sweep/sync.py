"""Logging what jobs computed while the tracking store was not answering (``python -m pipeline.sync FOLDER``).

Every ``record.json`` under FOLDER not yet logged becomes its MLflow run (never twice: see
``pipeline.tracking.records.publish``); a sweep's parent run is then summarised and closed again, and the sweep's
gate runs if it had one. Running it again, or on a folder whose results are all logged, changes nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from omegaconf import OmegaConf

from metrics.errors import InputError
from pipeline.common.names import JOBS_PREFIX, MULTIRUN_CONFIG, RECORD_FILE, SAYS_SYNC, TAG_OVERRIDES
from pipeline.common.redact import redact_text
from pipeline.job.context import SweepHandle
from pipeline.sweep.close import close_sweep
from pipeline.sweep.gating import run_sweep_gate
from pipeline.sweep.resume import lock_sweep, release_sweep, reopen_parent, sweep_state
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.records import JobRecord, pending_records, publish
from pipeline.tracking.runs import Tracker, find_run
from pipeline.tracking.store import StoreUnavailable, client_for

SAYS = SAYS_SYNC


def store_uri(option: str | None, records: list[JobRecord], folder: Path) -> str:
    """--tracking-uri, else the URI the jobs used (when it was saved whole), else $MLFLOW_TRACKING_URI."""
    if option:
        return option
    saved = [r.tracking_uri for r in records if r.tracking_uri]
    if not saved:
        config = folder / MULTIRUN_CONFIG
        if config.is_file():
            uri = OmegaConf.load(config).get("tracking", {}).get("uri")
            saved = [str(uri)] if uri else []
    if saved and "***" not in saved[0]:
        return saved[0]
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    if saved:
        raise InputError("the jobs' tracking URI carried credentials, which are never saved: give --tracking-uri "
                         "or set MLFLOW_TRACKING_URI")
    raise InputError(f"cannot tell which tracking store {folder} belongs to: give --tracking-uri")


def all_records(folder: Path) -> list[JobRecord]:
    paths = [folder / RECORD_FILE] if (folder / RECORD_FILE).is_file() else sorted(folder.rglob(RECORD_FILE))
    return [r for r in (JobRecord.load(p.parent) for p in paths) if r is not None]


def sync(folder: Path, uri_option: str | None = None) -> int:
    folder = folder.resolve()
    if not folder.is_dir():
        raise InputError("no such folder", folder)
    handle = SweepHandle.read(folder)
    records = all_records(folder)
    if handle is None and not records:
        raise InputError("neither a sweep folder (mlflow_sweep.json) nor a job folder (record.json)", folder)
    if handle is not None:
        lock_sweep(folder)
    try:
        uri = store_uri(uri_option, records, folder)
        client = client_for(uri)
        logged = 0
        for job_dir, record in pending_records(folder):
            try:
                published = publish(client, record, job_dir)
            except StoreUnavailable as exc:
                print(f"{SAYS}: {job_dir}: still not logged: the tracking store {redact_text(uri)} did not answer "
                      f"({exc})", file=sys.stderr)
                return 1
            logged += not published.reused
            verb = "was already in MLflow as" if published.reused else "logged as"
            print(f"{job_dir.relative_to(folder) if job_dir != folder else job_dir}: {record.run_name} {verb} run "
                  f"{published.run_id}", flush=True)
        if handle is None:
            print(f"{SAYS}: {logged} run(s) logged; nothing else to do", flush=True)
            return 0
        return _close(client, uri, handle, folder, logged)
    finally:
        release_sweep(folder)


def _close(client: MlflowClient, uri: str, handle: SweepHandle, folder: Path, logged: int) -> int:
    """Summarise and close the sweep's parent again (and gate it), unless it was already complete."""
    before = find_run(client, handle.parent_run_id)
    if before is None:
        raise InputError(f"the sweep's parent run {handle.parent_run_id} is not in {redact_text(uri)}: is this the "
                         f"store the sweep logged to? (--tracking-uri)")
    state = sweep_state(folder, handle)
    if state.missing:  # a partial sweep is never called complete, and never gated
        Tracker(client, handle.parent_run_id).finish(error=f"incomplete: {state.counts()}")
        print(f"{SAYS}: the sweep is not complete: {state.counts()}; complete it with: {handle.resume_command()}",
              file=sys.stderr, flush=True)
        return 1
    complete = before.info.status == "FINISHED" and not before.data.metrics.get(JOBS_PREFIX + "not_logged")
    if complete and not logged:
        print(f"{SAYS}: {state.counts()}: every result of {folder} is in MLflow; the sweep's parent run "
              f"{handle.parent_run_id} is complete", flush=True)
        return 0
    config = OmegaConf.load(folder / MULTIRUN_CONFIG) if (folder / MULTIRUN_CONFIG).is_file() else None
    if config is None:
        raise InputError(f"{MULTIRUN_CONFIG} is missing: cannot summarise the sweep", folder)
    parent = reopen_parent(client, handle.experiment_id, folder)
    if parent is None:
        raise InputError(f"the sweep's parent run {handle.parent_run_id} was deleted", folder)
    summary, error = close_sweep(parent, handle.experiment_id, folder, uri, config.metrics,
                                 f"Sweep {before.info.run_name}", config.diagnosis,
                                 before.data.tags.get(TAG_OVERRIDES) or "(none)")
    status = run_sweep_gate(config, summary, parent, handle.experiment_id, folder)
    if error:
        print(f"{SAYS}: {redact_text(error)}", file=sys.stderr)
        return 1
    return status
