"""MLflow edge: where runs go, how they are created, nested, logged (batched) and closed.

Everything written to MLflow passes through :mod:`pipeline.common.redact` first. Runs are created with
``MlflowClient`` rather than the fluent API, so a sweep's parent run can be opened in the Hydra driver and its
children in joblib worker processes, linked by the ``mlflow.parentRunId`` tag.
"""

from __future__ import annotations

import functools
import logging
import os
import posixpath
import random
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.errors import InputError
from pipeline.common.redact import redact_text, redact_value

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # its bars would flood non-TTY logs
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # it prints URIs with credentials
for _name in ("alembic", "mlflow"):  # store creation and migrations are chatty at INFO
    logging.getLogger(_name).setLevel(logging.WARNING)

from mlflow import MlflowClient  # noqa: E402  (after quieting its loggers)
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunStatus, RunTag  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_SOURCE_NAME, MLFLOW_SOURCE_TYPE  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DB_NAME = "mlflow.db"
ARTIFACT_DIR = "mlartifacts"
PARAM_LIMIT = 6000  # MLflow's longest param value
DATASET_ATTEMPTS = 4

TAG_KIND = "rankscope.kind"  # 'sweep', 'job' or 'run'; in tuning sweeps 'trial', 'tuned' or 'untuned'
TAG_SYSTEM = "rankscope.system"
TAG_ERROR = "rankscope.error"
TAG_SWEEP_DIR = "rankscope.sweep_dir"
TAG_OVERRIDES = "rankscope.overrides"
TAG_CORPUS_DIGEST = "rankscope.corpus_digest"
TAG_VERSION = "rankscope.version"
TAG_GIT_COMMIT = "mlflow.source.git.commit"


def tracking_uri(configured: str | None, launch_dir: Path) -> str:
    """``tracking.uri`` if set, else $MLFLOW_TRACKING_URI, else a SQLite file in the launch directory.

    The deprecated ``file:`` store (or a bare path) is refused: it is slow and MLflow is removing it.
    """
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{launch_dir.resolve() / DB_NAME}"
    if uri.startswith("file:") or ("://" not in uri and not uri.startswith("databricks")):
        raise InputError(f"tracking URI {redact_text(uri)!r}: use sqlite:///ABSOLUTE/PATH/mlflow.db or an "
                         f"http(s):// server (the file: store is deprecated)")
    return uri


def artifact_location(uri: str) -> str | None:
    """For a SQLite store, artifacts go beside the database file (not into whatever the cwd is)."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        return (db.parent / ARTIFACT_DIR).as_uri()
    return None


def open_experiment(uri: str, name: str) -> tuple[MlflowClient, str]:
    """Connect (creating the SQLite store and the experiment when new) and return the experiment id.

    Call it once, in one process, before parallel jobs start: concurrent first creation corrupts SQLite.
    """
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    try:
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(name)
    except Exception as exc:  # unreachable server, unreadable database: one line, not MLflow's traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InputError(f"cannot open the MLflow tracking store {redact_text(uri)}: {type(exc).__name__}: "
                         f"{redact_text(first)}") from None
    if experiment is not None:
        if experiment.lifecycle_stage == "deleted":
            client.restore_experiment(experiment.experiment_id)
        return client, experiment.experiment_id
    try:
        return client, client.create_experiment(name, artifact_location=artifact_location(uri))
    except Exception:  # created meanwhile by another process
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return client, experiment.experiment_id


def run_location(uri: str, experiment_id: str, run_id: str) -> str:
    """Where to look at a run: its UI page on a server, else the command that opens the UI on the store."""
    if uri.startswith(("http://", "https://")):
        return redact_text(f"{uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}")
    return redact_text(f"run {run_id} in {uri} (open the UI: mlflow ui --backend-store-uri {uri})")


@functools.lru_cache(maxsize=1)
def provenance_tags() -> dict[str, str]:
    """rankscope's version and, in a git checkout, the commit the code came from."""
    tags = {TAG_VERSION: _version(), MLFLOW_SOURCE_NAME: "python -m pipeline", MLFLOW_SOURCE_TYPE: "LOCAL"}
    commit = _git_commit()
    if commit:
        tags[TAG_GIT_COMMIT] = commit
    return tags


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("rankscope")
    except Exception:  # running from a checkout that is not installed
        try:
            import tomllib

            return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
        except Exception:
            return "dev"


def _git_commit() -> str | None:
    if not (REPO / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{'retriever': {'k1': 1.2}}`` -> ``{'retriever.k1': 1.2}``; lists stay whole (``[3, 5, 10]``)."""
    if isinstance(tree, Mapping):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: tree}


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return "null" if value is None else str(value)


class Tracker:
    """One MLflow run. Params and metrics each go in one batch; every value is redacted on the way out."""

    def __init__(self, client: MlflowClient, run_id: str):
        self.client = client
        self.run_id = run_id

    @classmethod
    def start(cls, client: MlflowClient, experiment_id: str, name: str, tags: Mapping[str, str],
              parent_id: str | None = None, start_time: int | None = None) -> Tracker:
        """``start_time`` (ms): when the work began, for a run logged after its results were computed."""
        all_tags = {**provenance_tags(), **tags}
        if parent_id:
            all_tags[MLFLOW_PARENT_RUN_ID] = parent_id
        safe = {k: redact_value(k, str(v)) for k, v in all_tags.items()}
        run = client.create_run(experiment_id, start_time=start_time, tags=safe, run_name=redact_text(name))
        return cls(client, run.info.run_id)

    def log_params(self, params: Mapping[str, Any]) -> None:
        batch = [Param(k, redact_value(k, _text(v))[:PARAM_LIMIT]) for k, v in params.items()]
        self.client.log_batch(self.run_id, params=batch)

    def log_metrics(self, metrics: Mapping[str, float], tags: Mapping[str, str] | None = None,
                    step: int = 0) -> None:
        """All metrics (and any tags known only now) in one call."""
        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if v == v]  # NaN: nothing to log
        extra = [RunTag(k, redact_value(k, str(v))) for k, v in (tags or {}).items()]
        self.client.log_batch(self.run_id, metrics=batch, tags=extra)

    def log_dataset(self, frame: pd.DataFrame, name: str, digest: str, source: str, context: str) -> None:
        """The data the run was measured on, as an MLflow dataset input (name, digest, source)."""
        self.log_dataset_fields(dataset_fields(frame, name, digest, source), context)

    def log_dataset_fields(self, fields: Mapping[str, str], context: str) -> None:
        """A dataset input from :func:`dataset_fields` (saved with a job's results, so it can be logged later)."""
        entity = DatasetInput(Dataset(**fields), tags=[InputTag("mlflow.data.context", context)])
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

    def log_files(self, paths: Iterable[Path], folder: str | None = None) -> None:
        """Files already written with secrets masked (see ``pipeline.job.results.write_results``), optionally into an
        artifact ``folder``."""
        for path in paths:
            self.client.log_artifact(self.run_id, str(path), folder)

    def finish(self, error: str | None = None, end_time: int | None = None) -> None:
        """End the run FINISHED, or FAILED with the reason as a tag: never leave it RUNNING."""
        if error is not None:
            self.client.set_tag(self.run_id, TAG_ERROR, redact_text(error)[:5000])
        status = RunStatus.to_string(RunStatus.FAILED if error is not None else RunStatus.FINISHED)
        self.client.set_terminated(self.run_id, status=status, end_time=end_time)


def redacted_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with every text cell redacted (questions and ids could carry a token pasted by mistake)."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = [redact_text(v) if isinstance(v, str) else v for v in safe[column]]
    return safe


_DATASET_FIELDS: dict[tuple[str, str, str], dict[str, str]] = {}


def dataset_fields(frame: pd.DataFrame, name: str, digest: str, source: str) -> dict[str, str]:
    """An MLflow dataset's description (name, digest, source, schema, profile) as plain strings; made once per
    process for each corpus (every job of a sweep describes the same one)."""
    key = (name, digest, source)
    if key not in _DATASET_FIELDS:
        _DATASET_FIELDS[key] = _describe_dataset(frame, name, digest, source)
    return dict(_DATASET_FIELDS[key])


def _describe_dataset(frame: pd.DataFrame, name: str, digest: str, source: str) -> dict[str, str]:
    import mlflow.data

    with warnings.catch_warnings():  # a local path matches MLflow's two local source types alike
        warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
        dataset = mlflow.data.from_pandas(frame, source=redact_text(source), name=name, digest=digest)
    entity = dataset._to_mlflow_entity()
    return {"name": entity.name, "digest": entity.digest, "source_type": entity.source_type,
            "source": entity.source, "schema": entity.schema, "profile": entity.profile}
