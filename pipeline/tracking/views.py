"""Saved views of the MLflow UI's runs page, made by rankscope: the runs of one corpus as a retrieval study reads them.

MLflow 3's runs table shows no metric column until one is chosen, and nests a sweep's runs under its collapsed
parent. A saved view (an experiment tag ``mlflow.sharedViewState.<key>`` holding the deflated page state, what the
UI's "Views > Save view" writes; listed in that menu) opens with what rankscope chose. rankscope keeps one per corpus
and primary metric (``rankscope-<corpus>-<metric>``), and every sweep prints its link (``?viewStateShareKey=``):

- the corpus's runs only (a filter on its tag), grouped under it, the group open: the runs of every sweep on that
  corpus are listed flat, none folded under a parent (a shared view cannot open a parent, but it can group);
- the columns: the run's name (system and corpus), its primary metric rounded with its interval
  (``rankscope.<metric>`` = ``0.668 [0.622, 0.713]``), the metric and its bounds, the retriever (the system's
  config entry), then every setting a sweep on that corpus varied; each wide enough to read, all within 1600 px;
- the chart view: a first section with the sweep's figure of the metric with its intervals (MLflow draws no error
  bars), the metric per run and the swept settings against it (parallel coordinates); "Model metrics" and
  "System metrics" after it, folded.

A later sweep on the same corpus adds its swept settings to the view and never removes a column: an earlier sweep's
runs keep theirs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import time
import zlib
from collections.abc import Sequence

from pipeline.common.names import (
    INTERVAL_FIGURE,
    LOWER,
    TAG_COMPARE_COMMAND,
    TAG_COMPARE_PRIMARY,
    TAG_COMPARE_VERDICT,
    TAG_CORPUS,
    TAG_GATE,
    UPPER,
    interval_tag,
)
from pipeline.tracking.client import MlflowClient, MlflowException

TAG_PREFIX = "mlflow.sharedViewState."
KEY_PREFIX = "rankscope-"
SYSTEM_COLUMN = "retriever"  # the config entry each run used (bm25, rrf ...): a column of every view
RUN_NAME, CREATED, DURATION = "attributes.`Run Name`", "attributes.`Created`", "attributes.`Duration`"
WIDTHS = {"name": 280, "interval": 160, "metric": 100, "param": 95}  # px: 1600 px hold them with 3 swept settings


def view_key(corpus: str, primary_key: str) -> str:
    """``rankscope-scifact-ndcg_at_10``: one view per corpus and primary metric."""
    return f"{KEY_PREFIX}{re.sub(r'[^A-Za-z0-9_.-]+', '_', corpus)}-{primary_key}"


def _metric(key: str) -> str:
    return f"metrics.`{key}`"


def _param(key: str) -> str:
    return f"params.`{key}`"


def _tag(key: str) -> str:
    return f"tags.`{key}`"


def table_state(corpus: str, primary_key: str, params: Sequence[str]) -> dict[str, object]:
    """The runs page's state, as the UI saves it (MLflow 3.17's names): see the module's docstring."""
    metrics = [_metric(k) for k in (primary_key, primary_key + LOWER, primary_key + UPPER)]
    shown = [_param(p) for p in dict.fromkeys([SYSTEM_COLUMN, *params])]
    interval = _tag(interval_tag(primary_key))
    widths = {RUN_NAME: WIDTHS["name"], interval: WIDTHS["interval"],
              **{m: WIDTHS["metric"] for m in metrics}, **{p: WIDTHS["param"] for p in shown}}
    return {
        "searchFilter": f"{_tag(TAG_CORPUS)} = '{corpus}'", "orderByKey": "attributes.start_time",
        "orderByAsc": False, "startTime": "ALL", "lifecycleFilter": "Active", "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": [interval, *metrics, *shown],
        "columnOrder": [RUN_NAME, interval, *metrics, *shown, CREATED, DURATION], "columnWidths": widths,
        "runsHiddenMode": "FIRST_20_RUNS", "viewMaximized": False, "runListHidden": False,
        "groupBy": {"aggregateFunction": "max", "groupByKeys": [{"mode": "tag", "groupByData": TAG_CORPUS}]},
        "groupsExpanded": {f"tag.{TAG_CORPUS}.{corpus}": True},
        "useGroupedValuesInCharts": False, "hideEmptyCharts": True, "isAccordionReordered": True,
        **charts(corpus, primary_key, params),
        "globalLineChartConfig": {"xAxisKey": "step", "lineSmoothness": 0, "selectedXAxisMetricKey": ""},
    }


def charts(corpus: str, primary_key: str, params: Sequence[str]) -> dict[str, object]:
    """The chart view's layout: a first section on the primary metric, two cards a row (the figure wide enough to
    read), then MLflow's own sections, folded."""
    first = f"rankscope-{corpus}-{primary_key}"

    def card(uuid: str, kind: str, **fields: object) -> dict[str, object]:
        return {"uuid": f"{first}-{uuid}", "type": kind, "runsCountToCompare": 20, "metricSectionId": first,
                "deleted": False, "isGenerated": False, **fields}

    cards = [card("figure", "IMAGE", imageKeys=[INTERVAL_FIGURE.format(key=primary_key)], step=0,
                  showRunParams=False),
             card("bar", "BAR", metricKey=primary_key, displayName=primary_key)]
    if params:
        cards.append(card("parallel", "PARALLEL", selectedParams=list(params), selectedMetrics=[primary_key],
                          showAllRuns=False))
    sections = [{"uuid": first, "name": f"{corpus}: {primary_key} with its interval", "display": True,
                 "isReordered": False, "deleted": False, "isGenerated": False, "columns": 2, "cardHeight": 400}]
    sections += [{"uuid": f"{first}-{name.split()[0].lower()}", "name": name, "display": False,
                  "isReordered": False, "deleted": False, "isGenerated": True}
                 for name in ("Model metrics", "System metrics")]
    return {"compareRunCharts": cards, "compareRunSections": sections}


def encode(state: dict[str, object]) -> str:
    """``deflate;`` + base64 of the zlib-deflated JSON: the form the UI reads back."""
    return "deflate;" + base64.b64encode(zlib.compress(json.dumps(state).encode())).decode()


def decode(value: str) -> dict[str, object]:
    """The state a saved view holds (:func:`encode`'s inverse; a plain JSON state as well)."""
    if value.startswith("deflate;"):
        return json.loads(zlib.decompress(base64.b64decode(value[len("deflate;"):])))
    return json.loads(value)


def saved_params(client: MlflowClient, experiment_id: str, key: str) -> list[str]:
    """The settings the view ``key`` shows already (none when it is new or unreadable)."""
    held = client.get_experiment(experiment_id).tags.get(TAG_PREFIX + key)
    try:
        state = decode(json.loads(held)["state"]) if held else {}
    except (ValueError, KeyError, TypeError, zlib.error):
        return []
    return [c[len("params.`"):-1] for c in state.get("selectedColumns", []) if str(c).startswith("params.`")]


def save_view(client: MlflowClient, experiment_id: str, corpus: str, primary_key: str, primary_name: str,
              params: Sequence[str]) -> str:
    """Save the view of ``corpus`` and ``primary_key``, keeping the settings it showed and adding ``params``;
    returns its key, for the ``?viewStateShareKey=`` link."""
    key = view_key(corpus, primary_key)
    earlier = [p for p in saved_params(client, experiment_id, key) if p != SYSTEM_COLUMN]
    shown = list(dict.fromkeys([*params, *earlier]))  # this sweep's settings first
    now = int(time.time() * 1000)
    value = json.dumps({"name": f"rankscope · {corpus} · {primary_name}", "createdAt": now, "updatedAt": now,
                        "state": encode(table_state(corpus, primary_key, shown))})
    try:
        client.set_experiment_tag(experiment_id, TAG_PREFIX + key, value)
    except MlflowException as exc:
        message = str(exc).lower()
        if "unique constraint" not in message and "duplicate entry" not in message:  # SQLite, PostgreSQL; MySQL
            raise
        # two sweeps ending together on a SQL store: MLflow looks for the tag, then inserts it; the other sweep
        # inserted it in between. It is there now: this write updates it.
        client.set_experiment_tag(experiment_id, TAG_PREFIX + key, value)
    return key


COMPARISONS_VIEW = "rankscope-comparisons"


def comparisons_state() -> dict[str, object]:
    """The comparisons experiment's runs page: newest first, the verdicts as columns (the gate's, the primary
    metric's, every metric's count), the command that recorded each."""
    verdicts = [_tag(k) for k in (TAG_GATE, TAG_COMPARE_PRIMARY, TAG_COMPARE_VERDICT, TAG_COMPARE_COMMAND)]
    widths = {RUN_NAME: 330, verdicts[0]: 110, verdicts[1]: 350, verdicts[2]: 330, verdicts[3]: 110}
    return {
        "searchFilter": "", "orderByKey": "attributes.start_time", "orderByAsc": False, "startTime": "ALL",
        "lifecycleFilter": "Active", "datasetsFilter": [], "modelVersionFilter": "All Runs",
        "selectedColumns": verdicts, "columnOrder": [RUN_NAME, *verdicts, CREATED, DURATION], "columnWidths": widths,
        "runsHiddenMode": "FIRST_20_RUNS", "viewMaximized": False, "runListHidden": False, "groupBy": None,
        "groupsExpanded": {}, "useGroupedValuesInCharts": True, "hideEmptyCharts": True,
        "isAccordionReordered": False,
        "globalLineChartConfig": {"xAxisKey": "step", "lineSmoothness": 0, "selectedXAxisMetricKey": ""},
    }


def save_comparisons_view(client: MlflowClient, experiment_id: str) -> str:
    """The comparisons experiment's saved view (written once: it names no run); returns its key."""
    if TAG_PREFIX + COMPARISONS_VIEW not in client.get_experiment(experiment_id).tags:
        now = int(time.time() * 1000)
        value = json.dumps({"name": "rankscope · comparisons and gates", "createdAt": now, "updatedAt": now,
                            "state": encode(comparisons_state())})
        with contextlib.suppress(MlflowException):  # written meanwhile by another comparison
            client.set_experiment_tag(experiment_id, TAG_PREFIX + COMPARISONS_VIEW, value)
    return COMPARISONS_VIEW


def newest_view(tags: dict[str, str]) -> str | None:
    """The key of the rankscope view saved last among an experiment's tags (what ``pipeline.ui`` opens)."""
    found: list[tuple[int, str]] = []
    for name, value in tags.items():
        if name.startswith(TAG_PREFIX + KEY_PREFIX):
            try:
                found.append((int(json.loads(value).get("updatedAt", 0)), name[len(TAG_PREFIX):]))
            except (ValueError, TypeError, AttributeError):
                continue
    return max(found)[1] if found else None
