"""One MLflow run: created, nested, logged (params and metrics in one batch each) and closed.

Everything written to MLflow passes through :mod:`pipeline.common.redact` first. Runs are created with
``MlflowClient`` rather than the fluent API, so a sweep's parent run can be opened in the Hydra driver and its
children in joblib worker processes, linked by the ``mlflow.parentRunId`` tag.
"""

from __future__ import annotations

import contextlib
import functools
import json
import posixpath
import random
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from pipeline.common.interrupts import deferred
from pipeline.common.names import DATASET_CONTEXT, TAG_ERROR
from pipeline.common.redact import redact_text, redact_texts, redact_value
from pipeline.tracking.client import (
    MLFLOW_PARENT_RUN_ID,
    Dataset,
    DatasetInput,
    InputTag,
    Metric,
    MlflowClient,
    MlflowException,
    Param,
    Run,
    RunStatus,
    RunTag,
    run_artifacts,
)
from pipeline.tracking.provenance import provenance_tags
from pipeline.tracking.store import writes_here

PARAM_LIMIT = 6000  # MLflow's longest param value
BATCH_PARAMS, BATCH_ENTITIES = 100, 1000  # what one log_batch takes: params, and metrics + params + tags
LOCKED_WAIT_S = 60.0  # how long closing a run waits for a locked SQLite store
DATASET_ATTEMPTS = 4


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return "null" if value is None else str(value)


def _while_locked(action: Callable[[], None], wait: float | None = None) -> None:
    """``action()``, tried again while a SQLite store answers "database is locked", for at most ``wait`` seconds."""
    deadline = time.monotonic() + (LOCKED_WAIT_S if wait is None else wait)
    while True:
        try:
            action()
            return
        except MlflowException as exc:
            if "database is locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


W = TypeVar("W", bound=Callable[..., Any])


def whole(write: W) -> W:
    """A store write that a Ctrl-C or SIGTERM does not cut: the signal acts once it is over (milliseconds; see
    :func:`pipeline.common.interrupts.deferred`). Cut inside SQLite's transaction, it would leave the store locked
    by this very process, which could then close none of its runs. A write to a tracking server (or through the
    store process) is the server's transaction: a stop acts at once, even while MLflow retries a server that does
    not answer."""

    @functools.wraps(write)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        client = args[0].client if isinstance(args[0], Tracker) else args[1]  # a run's, or a class method's
        with deferred() if writes_here(client) else contextlib.nullcontext():
            return write(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


def find_run(client: MlflowClient, run_id: str) -> Run | None:
    """The run with this id, or None when the store has none."""
    try:
        return client.get_run(run_id)
    except MlflowException:
        return None


class Tracker:
    """One MLflow run. Params and metrics each go in one batch; every value is redacted on the way out."""

    def __init__(self, client: MlflowClient, run_id: str, artifact_uri: str | None = None):
        self.client = client
        self.run_id = run_id
        self.artifact_uri = artifact_uri  # the run's artifact root, when this process created the run
        self._artifacts: Any = None  # its artifact repository (see log_files)

    @classmethod
    @whole
    def reopen(cls, client: MlflowClient, run_id: str, experiment_id: str) -> Tracker | None:
        """The ended run ``run_id`` RUNNING again (a resumed sweep's parent), its old failure reason removed; None
        when it is gone (deleted, or not in ``experiment_id``)."""
        try:
            run = client.get_run(run_id)
        except MlflowException:
            return None
        if run.info.lifecycle_stage != "active" or run.info.experiment_id != experiment_id:
            return None
        client.update_run(run_id, status="RUNNING")
        if TAG_ERROR in run.data.tags:
            client.delete_tag(run_id, TAG_ERROR)
        return cls(client, run_id)

    def metric_steps(self, key: str) -> int:
        """How many values of ``key`` the run holds (a re-closed parent logs its counts at the next step)."""
        return len(self.client.get_metric_history(self.run_id, key))

    @classmethod
    @whole
    def start(cls, client: MlflowClient, experiment_id: str, name: str, tags: Mapping[str, str],
              parent_id: str | None = None, start_time: int | None = None) -> Tracker:
        """``start_time`` (ms): when the work began, for a run logged after its results were computed."""
        all_tags = {**provenance_tags(), **tags}
        if parent_id:
            all_tags[MLFLOW_PARENT_RUN_ID] = parent_id
        safe = {k: redact_value(k, str(v)) for k, v in all_tags.items()}
        run = client.create_run(experiment_id, start_time=start_time, tags=safe, run_name=redact_text(name))
        return cls(client, run.info.run_id, run.info.artifact_uri)

    @whole
    def log_params(self, params: Mapping[str, Any]) -> None:
        batch = [Param(k, redact_value(k, _text(v))[:PARAM_LIMIT]) for k, v in params.items()]
        self.client.log_batch(self.run_id, params=batch)

    @whole
    def log_metrics(self, metrics: Mapping[str, float], tags: Mapping[str, str] | None = None,
                    step: int = 0, params: Mapping[str, Any] | None = None) -> None:
        """All metrics (and any tags known only now, and ``params``) in one call: one transaction of the store, as
        long as MLflow takes them in one batch."""
        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if v == v]  # NaN: nothing to log
        extra = [RunTag(k, redact_value(k, str(v))) for k, v in (tags or {}).items()]
        values = [Param(k, redact_value(k, _text(v))[:PARAM_LIMIT]) for k, v in (params or {}).items()]
        if len(values) > BATCH_PARAMS or len(batch) + len(values) + len(extra) > BATCH_ENTITIES:
            if params:
                self.log_params(params)
            values = []
        self.client.log_batch(self.run_id, metrics=batch, params=values, tags=extra)

    @whole
    def log_dataset_fields(self, fields: Mapping[str, str], context: str) -> None:
        """A dataset input from :func:`dataset_fields` (saved with a job's results, so it can be logged later), with
        its input tags (the digests of its parts, its ir_datasets id)."""
        described = {k: v for k, v in fields.items() if k != INPUT_TAGS}
        tags = [InputTag(DATASET_CONTEXT, context),
                *(InputTag(k, redact_text(str(v))) for k, v in json.loads(fields.get(INPUT_TAGS) or "{}").items())]
        entity = DatasetInput(Dataset(**described), tags=tags)
        for attempt in range(DATASET_ATTEMPTS):
            try:
                self.client.log_inputs(self.run_id, datasets=[entity])
                return
            except MlflowException:
                # Parallel jobs registering the same new dataset race in the store (UNIQUE constraint); once
                # one has inserted it, the others find it and only link it to their run.
                if attempt == DATASET_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 + random.random() * 0.5)

    @whole
    def log_dataset(self, dataset: Dataset, context: str) -> None:
        """Another run's dataset (a comparison's sides' corpora), as this run's input in ``context``."""
        self.client.log_inputs(self.run_id, datasets=[DatasetInput(dataset, tags=[InputTag("mlflow.data.context",
                                                                                            context)])])

    @whole
    def rename(self, run_id: str, name: str) -> None:
        """Give another run of this store a new name (masked)."""
        self.client.update_run(run_id, name=redact_text(name))

    def params(self) -> dict[str, str]:
        """The params the run holds already."""
        return dict(self.client.get_run(self.run_id).data.params)

    @whole
    def copy_datasets(self, run_id: str) -> None:
        """The dataset inputs of another run (a sweep's parent shows its children's corpus)."""
        inputs = self.client.get_run(run_id).inputs
        entities = [DatasetInput(i.dataset, tags=list(i.tags)) for i in (inputs.dataset_inputs if inputs else [])]
        if entities:
            self.client.log_inputs(self.run_id, datasets=entities)

    @whole
    def log_table(self, frame: pd.DataFrame, artifact_file: str) -> None:
        """An MLflow table. Logged again (a resumed sweep's parent), it replaces the old one: MLflow would append."""
        safe = redacted_frame(frame)
        folder = posixpath.dirname(artifact_file) or None
        if artifact_file not in {f.path for f in self.client.list_artifacts(self.run_id, folder)}:
            self.client.log_table(self.run_id, data=safe, artifact_file=artifact_file)
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / Path(artifact_file).name
            safe.to_json(path, orient="split", index=False, date_format="iso")  # MLflow's own table format
            self.client.log_artifact(self.run_id, str(path), folder)

    @whole
    def log_text(self, text: str, artifact_file: str) -> None:
        """A text artifact, secrets masked."""
        self.client.log_text(self.run_id, redact_text(text) + "\n", artifact_file)

    @whole
    def log_image(self, path: Path, key: str) -> None:
        """A PNG as an MLflow image under ``key``: the chart view's image cards show it (a file under ``plots/``
        they do not)."""
        import numpy as np
        from PIL import Image

        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB"))  # an array crosses to the store process as it is
        self.client.log_image(self.run_id, pixels, key=key, step=0)

    @whole
    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Tags known only after the run was logged (a gate's verdict on a sweep's parent), masked."""
        self.client.log_batch(self.run_id, tags=[RunTag(k, redact_value(k, str(v))) for k, v in tags.items()])

    @whole
    def log_files(self, paths: Iterable[Path], folder: str | None = None) -> None:
        """Files already written with secrets masked (see ``pipeline.job.results.write_results``), optionally into an
        artifact ``folder``.

        A run this process created with its own client writes straight to the artifact root ``create_run`` gave it,
        through the repository MLflow's client would pick for it: the client first reads the whole run back (81
        metrics and 48 params for a job) to learn that root, half the time of logging a job's eight files."""
        if self._artifacts is None and self.artifact_uri and isinstance(self.client, MlflowClient):
            self._artifacts = run_artifacts(self.artifact_uri, self.client.tracking_uri)
        for path in paths:
            if self._artifacts is not None:
                self._artifacts.log_artifact(str(path), folder)
            else:
                self.client.log_artifact(self.run_id, str(path), folder)

    def run_later(self, function: Callable[..., Any], *args: Any) -> None:
        """``function(client, run_id, *args)``: made by the store process while this one goes on, when this run's
        client goes through it (:meth:`wait_later` raises what it raised); at once otherwise."""
        later = getattr(self.client, "run_later", None)
        if later is not None:
            later(function, self.run_id, *args)
        else:
            function(self.client, self.run_id, *args)

    def wait_later(self) -> None:
        """Until what :meth:`run_later` handed over is made; raises what it raised."""
        wait = getattr(self.client, "wait_later", None)
        if wait is not None:
            wait()

    @whole
    def finish(self, error: str | None = None, end_time: int | None = None) -> None:
        """End the run FINISHED, or FAILED with the reason as a tag: never leave it RUNNING.

        A SQLite store that another process (a UI polling it, a parallel job) holds locked is waited for, up to
        :data:`LOCKED_WAIT_S`: closing the runs is what an interrupted command must still do."""
        status = RunStatus.to_string(RunStatus.FAILED if error is not None else RunStatus.FINISHED)
        tags = [RunTag(TAG_ERROR, redact_text(error)[:5000])] if error is not None else []

        def close() -> None:
            if tags:
                self.client.log_batch(self.run_id, tags=tags)
            self.client.set_terminated(self.run_id, status=status, end_time=end_time)

        _while_locked(close)

    @contextlib.contextmanager
    def closing(self) -> Iterator[Tracker]:
        """Log inside the block; the run ends FINISHED after it, or FAILED with what it raised (raised again)."""
        try:
            yield self
        except BaseException as exc:
            self.finish(error=f"{type(exc).__name__}: {exc}")
            raise
        self.finish()


def log_parent_summary(client: MlflowClient, run_id: str, counts_key: str, counts: Mapping[str, float],
                       table: pd.DataFrame | None, table_file: str, child_id: str | None, swept: Mapping[str, str],
                       best: Mapping[str, float], best_tags: Mapping[str, str]) -> None:
    """What a sweep's end logs to its parent run, from plain values: the job counts at the next step of
    ``counts_key``, the summary table, the corpus of child ``child_id`` as the parent's dataset input, the swept
    values it does not hold yet, the best system's metrics and tags. A module-level function, so that the store
    process can make it while the driver draws (:meth:`Tracker.run_later`)."""
    parent = Tracker(client, run_id)
    parent.log_metrics(counts, step=parent.metric_steps(counts_key))
    if table is not None:
        parent.log_table(table, table_file)
    if child_id is None:
        return
    parent.copy_datasets(child_id)
    if swept:
        known = parent.params()  # params never change: a resumed sweep's parent has them already
        parent.log_params({k: v for k, v in swept.items() if k not in known})
    if best or best_tags:
        parent.log_metrics(best, tags=best_tags)


_TEXTS = pd.Series(["text"]).dtype  # the type pandas gives a column built from a list of texts


def redacted_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with every text cell redacted (questions and ids could carry a token pasted by mistake).

    Each text column's cells go through :func:`redact_texts` together (one search for its literals over the column);
    a column is rebuilt from a list as before, so its type is what it always was, except one of texts already typed
    as a list of texts gets, with nothing to mask: it stays as copied, the same type and cells a rebuild would give
    (rebuilding each of a job's 17 text columns was half of this)."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            values = safe[column].to_numpy(dtype=object).tolist()  # the cells iterating gives, without a loop
            where = [i for i, v in enumerate(values) if isinstance(v, str)]
            texts = [values[i] for i in where]
            masked = redact_texts(texts)
            if texts and safe[column].dtype == _TEXTS and masked == texts:  # a rebuild would give the same
                continue
            for i, text in zip(where, masked):
                values[i] = text
            safe[column] = values
    return safe


_DATASET_FIELDS: dict[tuple[str, str, str], dict[str, str]] = {}
INPUT_TAGS = "input_tags"  # the key of a dataset description that holds its input tags (JSON), not a Dataset field


def dataset_fields(frame: pd.DataFrame | Callable[[], pd.DataFrame], name: str, digest: str, source: str,
                   tags: Mapping[str, str] | None = None, source_type: str | None = None) -> dict[str, str]:
    """An MLflow dataset's description (name, digest, source, schema, profile) as plain strings, and the input tags
    to log with it; made once per process for each corpus (every job of a sweep describes the same one).
    ``source_type`` replaces MLflow's guess (``local`` for any string) where the source is not a path."""
    key = (name, digest, source)
    if key not in _DATASET_FIELDS:
        _DATASET_FIELDS[key] = _describe_dataset(frame() if callable(frame) else frame, name, digest, source)
    fields = dict(_DATASET_FIELDS[key])
    if source_type:
        fields["source_type"] = source_type
    if tags:
        fields[INPUT_TAGS] = json.dumps(dict(tags), sort_keys=True)
    return fields


def _describe_dataset(frame: pd.DataFrame, name: str, digest: str, source: str) -> dict[str, str]:
    import mlflow.data

    with warnings.catch_warnings():  # a local path matches MLflow's two local source types alike
        warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
        dataset = mlflow.data.from_pandas(frame, source=redact_text(source), name=name, digest=digest)
    entity = dataset._to_mlflow_entity()
    return {"name": entity.name, "digest": entity.digest, "source_type": entity.source_type,
            "source": entity.source, "schema": entity.schema, "profile": entity.profile}
