"""A saved view of the MLflow UI's runs table, made by rankscope: the columns a retrieval study is read by.

MLflow 3's runs table shows no metric column until one is chosen; a saved view (what the UI's "Views > Save as new
view" writes: an experiment tag ``mlflow.sharedViewState.<key>`` holding the deflated table state) opens with the
primary metric, its interval and the swept parameters already shown. rankscope saves one per primary metric and
prints its link (``?viewStateShareKey=<key>``) after each sweep. The link also names the UI's "Model training"
mode (``workflowType=machine_learning``): MLflow 3.17 opens an experiment in its GenAI mode unless told, whatever the
experiment's kind, and that mode shows traces, not runs.
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from collections.abc import Sequence

from pipeline.common.names import LOWER, UPPER
from pipeline.tracking.client import MlflowClient, MlflowException

TAG_PREFIX = "mlflow.sharedViewState."


def view_key(primary_key: str) -> str:
    return f"rankscope-{primary_key}"


def table_state(primary_key: str, params: Sequence[str]) -> dict[str, object]:
    """The runs table's state, as the UI saves it: newest first, the corpus, the metric and its bounds, params."""
    metrics = [f"metrics.`{k}`" for k in (primary_key, primary_key + LOWER, primary_key + UPPER)]
    return {
        "searchFilter": "", "orderByKey": "attributes.start_time", "orderByAsc": False, "startTime": "ALL",
        "lifecycleFilter": "Active", "datasetsFilter": [], "modelVersionFilter": "All Runs",
        "selectedColumns": ["attributes.`Dataset`", *metrics, *(f"params.`{p}`" for p in params)],
        "columnOrder": [], "columnWidths": {}, "runsHiddenMode": "FIRST_10_RUNS", "viewMaximized": False,
        "runListHidden": False, "isAccordionReordered": False, "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True, "groupBy": None, "groupsExpanded": {},
        "globalLineChartConfig": {"xAxisKey": "step", "lineSmoothness": 0, "selectedXAxisMetricKey": ""},
    }


def encode(state: dict[str, object]) -> str:
    """``deflate;`` + base64 of the zlib-deflated JSON: the form the UI reads back."""
    return "deflate;" + base64.b64encode(zlib.compress(json.dumps(state).encode())).decode()


def save_view(client: MlflowClient, experiment_id: str, primary_key: str, primary_name: str,
              params: Sequence[str]) -> str:
    """Save (or update) the view of ``primary_key``; returns its key, for the ``?viewStateShareKey=`` link."""
    key = view_key(primary_key)
    now = int(time.time() * 1000)
    value = {"name": f"rankscope: {primary_name}", "createdAt": now, "updatedAt": now,
             "state": encode(table_state(primary_key, params))}
    try:
        client.set_experiment_tag(experiment_id, TAG_PREFIX + key, json.dumps(value))
    except MlflowException as exc:
        message = str(exc).lower()
        if "unique constraint" not in message and "duplicate entry" not in message:  # SQLite, PostgreSQL; MySQL
            raise
        # two sweeps ending together on a SQL store: MLflow looks for the tag, then inserts it; the other sweep
        # inserted it in between. It is there now: this write updates it.
        client.set_experiment_tag(experiment_id, TAG_PREFIX + key, json.dumps(value))
    return key


def view_url(uri: str, experiment_id: str, key: str) -> str:
    """The view's address on a tracking server (or on ``python -m pipeline.ui``'s default address for a local store)."""
    base = uri.rstrip("/") if uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={key}"
