"""Name a run the way people think of it: by id, by name, by tag, as the best or the latest of an experiment.

Selectors (see README, "Comparing runs"):

- a run id (32 hex digits), in any experiment;
- ``tag:KEY=VALUE``: the most recent finished run carrying that tag (``tag:baseline=true``);
- ``best:METRIC``: the finished run with the highest value of METRIC (``best:ndcg_at_10`` or ``best:ndcg@10``);
- ``latest``: the most recent finished run;
- ``name:NAME`` or just ``NAME``: the most recent finished run of that name (``BM25``, ``BM25 k1=0.9``).

Only evaluated runs count (a sweep's jobs and single runs): never a sweep's parent or a recorded comparison.
"""

from __future__ import annotations

import re

from metrics.errors import InputError
from metrics.spec import parse_metric
from pipeline.common.names import EVALUATED_KINDS, TAG_KIND
from pipeline.tracking.client import MlflowClient, Run
from pipeline.tracking.search import first_run

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


class SelectorError(InputError):
    """The selector is malformed or matches no run."""


class NoMatch(SelectorError):
    """A well-formed selector that no run matches (yet)."""


def describe(run: Run) -> str:
    """``BM25 k1=0.9 (run 3f2a...)`` for messages."""
    return f"{run.info.run_name} (run {run.info.run_id})"


def metric_key(text: str) -> str:
    """``ndcg@10`` or ``ndcg_at_10`` -> the MLflow key ``ndcg_at_10``; other keys pass through as given."""
    try:
        return parse_metric(text.replace("_at_", "@")).mlflow_key
    except InputError:
        return text


def resolve(client: MlflowClient, experiment_id: str | None, selector: str) -> Run:
    """The one run ``selector`` names (a run id in any experiment; anything else within ``experiment_id``)."""
    selector = selector.strip()
    if not selector:
        raise SelectorError("empty run selector")
    if _RUN_ID.match(selector):
        try:
            return client.get_run(selector)
        except Exception:
            raise NoMatch(f"no run with id {selector}") from None
    if experiment_id is None:
        raise SelectorError(f"selector {selector!r} needs an experiment (--experiment NAME)")
    kind, _, value = selector.partition(":")
    if kind == "tag" and value:
        key, eq, wanted = value.partition("=")
        if not eq or not key:
            raise SelectorError(f"selector {selector!r}: expected tag:KEY=VALUE")
        return _first(client, experiment_id, f"tags.`{key}` = {literal(wanted)}", selector)
    if kind == "best" and value:
        key = metric_key(value)
        return _first(client, experiment_id, f"metrics.`{key}` >= -1e300", selector,
                      order=[f"metrics.`{key}` DESC", "attributes.start_time ASC"])
    if selector == "latest":
        return _first(client, experiment_id, "", selector)
    name = value if kind == "name" and value else selector
    return _first(client, experiment_id, f"attributes.run_name = {literal(name)}", selector)


def literal(text: str) -> str:
    """A string literal for MLflow's search syntax (which has no escapes: pick the quote the text lacks)."""
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    raise SelectorError(f"cannot search for {text!r}: it holds both kinds of quote")


def _first(client: MlflowClient, experiment_id: str, query: str, selector: str,
           order: list[str] | None = None) -> Run:
    clauses = [c for c in (query, "attributes.status = 'FINISHED'") if c]
    match = first_run(client, [experiment_id], " and ".join(clauses), order or ["attributes.start_time DESC"],
                      lambda run: run.data.tags.get(TAG_KIND, "run") in EVALUATED_KINDS)
    if match is None:
        where = f"experiment {_experiment_name(client, experiment_id)!r}"
        raise NoMatch(f"no finished run matches {selector!r} in {where}")
    return match


def _experiment_name(client: MlflowClient, experiment_id: str) -> str:
    try:
        return client.get_experiment(experiment_id).name
    except Exception:
        return experiment_id
