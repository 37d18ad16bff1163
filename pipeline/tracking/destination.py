"""Where one job's results go: the store, its experiment and, in a sweep, the parent run; and everything a job asks
of it (its identity, whether a resumed sweep already holds its result, its record, the logging itself).

A job talks to MLflow only through a :class:`Destination`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.common import commands
from pipeline.common.names import PROG, TAG_CONFIG_DIGEST
from pipeline.common.redact import redact_text
from pipeline.tracking import background
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.identity import Identity
from pipeline.tracking.links import run_location
from pipeline.tracking.provenance import code_version
from pipeline.tracking.records import JobRecord, Published, finished_run, masked_table_file, now_ms, publish
from pipeline.tracking.runs import dataset_fields, redacted_frame
from pipeline.tracking.store import (
    STORE_ERRORS,
    Store,
    StoreUnavailable,
    check_reachable,
    client_for,
    stopped_answering,
    store_error,
    tracking_uri,
)

__all__ = ["Destination", "JobRecord", "StoreUnavailable"]


@dataclass
class Destination:
    """One job's place in the tracking store; a single run's store may be held by the store process
    (:mod:`pipeline.tracking.background`), which then logs for it."""

    uri: str
    client: MlflowClient | None  # None: not opened in this process (yet)
    experiment_id: str
    parent_run_id: str | None = None  # a sweep's parent run
    remote: background.StoreProcess | None = None

    @classmethod
    def open(cls, configured: str | None, launch_dir: Path, experiment: str, sweep: Any = None) -> Destination:
        """A single run opens (and if new, creates) the store ``tracking.uri`` names (:func:`tracking_uri`); a sweep's
        job joins the experiment and parent run its driver opened (``sweep``: the hand-off, with ``experiment_id``
        and ``parent_run_id``). InputError when the store cannot be opened."""
        uri = tracking_uri(configured, launch_dir)
        remote = background.current()
        if sweep is not None:  # the driver opened the store: through the store process if it has it
            if remote is not None and remote.serves(uri):
                return cls(uri, None, sweep.experiment_id, sweep.parent_run_id, remote=remote)
            return cls(uri, client_for(uri), sweep.experiment_id, sweep.parent_run_id)
        if remote is not None and remote.usable():
            check_reachable(uri)  # here, at once: the store process answers once its imports are done
            try:
                return cls(uri, None, remote.open(uri, experiment), remote=remote)
            except background.Gone:
                pass
        store = Store.open(uri, experiment)
        return cls(uri, store.client, store.experiment_id)

    def identity(self, tags: dict[str, str], corpus_digest: str) -> Identity:
        """What makes this computation the same as another: config digest, corpus digest, code version."""
        return Identity(tags[TAG_CONFIG_DIGEST], corpus_digest, code_version())

    def record(self, name: str, tags: dict[str, str], started_ms: int, **fields: Any) -> JobRecord:
        """The record of a job's run (secrets masked), not yet saved or logged."""
        return JobRecord.new(run_name=name, experiment_id=self.experiment_id, parent_run_id=self.parent_run_id,
                             tracking_uri=redact_text(self.uri), tags=tags, started_ms=started_ms,
                             ended_ms=now_ms(), **fields)

    @staticmethod
    def table_files(frame: pd.DataFrame) -> tuple[pd.DataFrame, Callable[[], bytes], dict[str, str]]:
        """The per-question table with its secrets masked, which each file of it holds (the CSV, MLflow's table
        format); the maker of the MLflow table file's bytes (for another process to write), and its column types."""
        safe = redacted_frame(frame)
        return (safe, *masked_table_file(safe))

    def dataset(self, doc_ids: list[str], texts: list[str], name: str, digest: str, source: str,
                tags: dict[str, str] | None = None, metadata: dict[str, list] | None = None,
                source_type: str | None = None) -> dict[str, str]:
        """The corpus as an MLflow dataset input (described once per process and corpus): its documents (and the
        metadata columns kept with them), and input tags naming the digests of its parts."""
        return dataset_fields(lambda: pd.DataFrame({"doc_id": doc_ids, "text": texts, **(metadata or {})}),
                              name=name, digest=digest, source=source, tags=tags,
                              source_type=source_type)  # the frame is made only for a corpus not described yet

    def logged_earlier(self, folder: Path, identity: Identity, job: int, what: str) -> str | None:
        """In a resumed sweep: the run that already holds this job's result, or the record computed earlier in
        ``folder`` (logged now). None when the job must run, or when the store does not answer (it runs, and saves
        its record)."""
        earlier = JobRecord.load(folder)
        try:
            client = self._client()
            if earlier is not None and earlier.pending and earlier.error is None:
                if earlier.identity == identity:
                    published = publish(client, earlier, folder)
                    print(f"{PROG}: job {job} ({earlier.run_name}): logged the results computed earlier in {folder} "
                          f"as run {published.run_id}", flush=True)
                    return published.run_id
                publish(client, earlier, folder)  # another config's result left here: never lose it
            run_id = finished_run(client, self.experiment_id, str(self.parent_run_id), identity)
        except (StoreUnavailable, *STORE_ERRORS):
            return None
        if run_id is not None:
            print(f"{PROG}: job {job} ({what}): already logged as run {run_id} (same config, corpus and code): "
                  f"skipped", flush=True)
        return run_id

    def publish(self, record: JobRecord, folder: Path) -> Published:
        """Log the record as the job's run, once. Raises :class:`StoreUnavailable`; the record then waits."""
        if self.remote is not None:
            try:
                published: Published = self.remote.publish(folder)
            except background.Gone:  # the store process is gone: log from here
                self.remote = None
            else:
                record.run_id = published.run_id
                return published
        return publish(self._client(), record, folder)

    def publish_later(self, record: JobRecord, folder: Path, refused: Callable[[str], None]) -> bool:
        """Hand the saved record to the store process, which logs it while this process goes on; False when there
        is no store process to take it (then :meth:`publish` it). ``refused(reason)`` is called when the answer,
        read at the process's next request or :func:`pipeline.tracking.background.settle`, is that the store did
        not answer; if the process failed, the record is logged from here then."""
        if self.remote is None or not self.remote.usable():
            return False

        def answered(answer: tuple[Any, ...]) -> None:
            if answer[0] == "published":
                record.run_id = str(answer[1])
                return
            try:
                if answer[0] == "unavailable":
                    stopped_answering(self.uri, str(answer[1]))  # this process's own requests fail at once too
                    raise StoreUnavailable(str(answer[1]))
                self.remote = None  # the process failed or is gone: log from here
                publish(self._client(), record, folder)
            except StoreUnavailable as exc:
                refused(str(exc))

        try:
            self.remote.publish_later(folder, answered)
        except background.Gone:
            self.remote = None
            return False
        return True

    def publish_failure(self, record: JobRecord, folder: Path) -> str | None:
        """A failed job's record logged as a FAILED run, if the store answers."""
        try:
            return self.publish(record, folder).run_id
        except StoreUnavailable:
            return None

    def _client(self) -> MlflowClient:
        """The store's client in this process, connected on first use. Raises :class:`StoreUnavailable`."""
        if self.client is None:
            try:
                self.client = client_for(self.uri)
            except STORE_ERRORS as exc:
                raise StoreUnavailable(store_error(exc)) from None
        return self.client

    def location(self, run_id: str) -> str:
        return run_location(self.uri, self.experiment_id, run_id)

    def not_logged(self, output_dir: Path, sweep_dir: Path | None, reason: str) -> str:
        """The line that says where the unlogged results wait, and the command that logs them."""
        folder = sweep_dir if sweep_dir is not None else output_dir
        return (f"results saved in {output_dir} but not logged: the tracking store {redact_text(self.uri)} did not "
                f"answer ({reason}); once it does, run: {commands.line(commands.module('pipeline.sync', str(folder)))}")

