"""A question set made from traces, versioned in MLflow: a run of the experiment ``<experiment> questions`` (apart
from the evaluations) whose dataset input is the set (name, digest: the digest a job on it records as
``rankscope.questions_digest``), with where it came from as params, its counts as metrics and its files."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.common.names import KIND_QUESTIONS, TAG_KIND, TAG_QUESTIONS_DIGEST
from pipeline.tracking.runs import Tracker, dataset_fields
from pipeline.tracking.store import Store

SOURCE_TYPE = "mlflow_traces"  # the dataset's source type: read from a traced application's experiment (its source: the
# folder the set was written to; the experiment, store and window are the run's params)
CONTEXT = "questions"  # what the dataset was to the run (mlflow.data.context)


def record_question_set(uri: str, experiment: str, name: str, frame: pd.DataFrame, digest: str, source: str,
                        params: Mapping[str, Any], metrics: Mapping[str, float], files: Sequence[Path]) -> str:
    """Log the set as a run of ``<experiment> questions`` (made when first needed); returns where to look at it."""
    store = Store.open(uri, f"{experiment} questions")
    tags = {TAG_KIND: KIND_QUESTIONS, TAG_QUESTIONS_DIGEST: digest}
    tracker = Tracker.start(store.client, store.experiment_id, f"questions · {name}", tags)
    error = None
    try:
        tracker.log_metrics(metrics, params=params)
        with warnings.catch_warnings():  # MLflow's hint that integer columns cannot hold missing values: they hold none
            warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer column")
            fields = dataset_fields(frame, name=name, digest=digest, source=source, tags={TAG_QUESTIONS_DIGEST: digest},
                                    source_type=SOURCE_TYPE)
        tracker.log_dataset_fields(fields, context=CONTEXT)
        tracker.log_files(files)
    except BaseException as exc:
        error = f"recording the question set was interrupted ({type(exc).__name__})"
        raise
    finally:
        tracker.finish(error=error)
    return store.location(tracker.run_id)
