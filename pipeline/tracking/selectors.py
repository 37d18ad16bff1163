"""Name a run the way people think of it: by id, by name, by tag, as the best or the latest of an experiment.

Selectors (see docs/compare-gate-schedule.md):

- a run id (32 hex digits), in any experiment;
- ``tag:KEY=VALUE``: the most recent finished run carrying that tag (``tag:baseline=true``);
- ``best:METRIC``: the finished run with the highest value of METRIC (``best:ndcg_at_10`` or ``best:ndcg@10``);
- ``latest``: the most recent finished run;
- ``name:NAME`` or just ``NAME``: the most recent finished run of that system (``BM25``, ``BM25 k1=0.9``) or run name
  (``BM25 k1=0.9 · scifact``).

Only evaluated runs count (a sweep's jobs and single runs): never a sweep's parent or a recorded comparison. A
``corpus`` narrows every selector but a run id to the runs measured on that corpus; without one, a selector whose
candidates were measured on several corpora is refused, naming them: a name or ``best:`` never picks a corpus for you.

A corpus is its data, not its name: runs whose corpus digests are equal (the same documents, questions and judgments
read from a BEIR folder, through ir_datasets or from your own files) are on the same corpus, whatever each called it.
``corpus`` may be a name (every digest runs of that name were measured on) or a digest.
"""

from __future__ import annotations

import re

from metrics.errors import InputError
from metrics.spec import parse_metric
from pipeline.common.names import EVALUATED_KINDS, TAG_CORPUS, TAG_CORPUS_DIGEST, TAG_KIND, TAG_SYSTEM
from pipeline.tracking.client import MlflowClient, Run
from pipeline.tracking.search import search_runs

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
NEWEST = ["attributes.start_time DESC"]
SHOWN = 6  # candidates an ambiguity error lists


class SelectorError(InputError):
    """The selector is malformed or matches no run."""


class NoMatch(SelectorError):
    """A well-formed selector that no run matches (yet)."""


def describe(run: Run) -> str:
    """``BM25 k1=0.9 · scifact (run 3f2a...)`` for messages."""
    return f"{run.info.run_name} (run {run.info.run_id})"


def metric_key(text: str) -> str:
    """``ndcg@10`` or ``ndcg_at_10`` -> the MLflow key ``ndcg_at_10``; other keys pass through as given."""
    try:
        return parse_metric(text.replace("_at_", "@")).mlflow_key
    except InputError:
        return text


def corpus_of(run: Run) -> str | None:
    """The name of the corpus a run was measured on (None for a run that does not say)."""
    return run.data.tags.get(TAG_CORPUS) or run.data.params.get("corpus.name") or None


def corpus_key(run: Run) -> str | None:
    """What tells a run's corpus from another: its digest (the data itself), else its name (an older run)."""
    return run.data.tags.get(TAG_CORPUS_DIGEST) or corpus_of(run)


def corpus_digests(client: MlflowClient, experiment_id: str, corpus: str) -> list[str]:
    """The digests ``corpus`` stands for: every digest the experiment's runs of that name were measured on, or the
    digest itself."""
    named = search_runs(client, [experiment_id], f"tags.`{TAG_CORPUS}` = {literal(corpus)}", NEWEST)
    found = dict.fromkeys(d for d in (r.data.tags.get(TAG_CORPUS_DIGEST) for r in named) if d)
    found[corpus] = None  # the digest itself, when it is one
    return list(found)


def resolve(client: MlflowClient, experiment_id: str | None, selector: str, corpus: str | None = None) -> Run:
    """The one run ``selector`` names (a run id in any experiment; anything else within ``experiment_id``, and
    within ``corpus`` when given)."""
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
        return _one(client, experiment_id, [f"tags.`{key}` = {literal(wanted)}"], selector, corpus)
    if kind == "best" and value:
        key = metric_key(value)
        return _one(client, experiment_id, [f"metrics.`{key}` >= -1e300"], selector, corpus,
                    order=[f"metrics.`{key}` DESC", "attributes.start_time ASC"])
    if selector == "latest":  # defined by time alone: the newest run, whatever its corpus
        return _one(client, experiment_id, [], selector, corpus, any_corpus=True)
    name = value if kind == "name" and value else selector
    by_system = _matches(client, experiment_id, [f"tags.`{TAG_SYSTEM}` = {literal(name)}"], NEWEST, corpus)
    by_name = _matches(client, experiment_id, [f"attributes.run_name = {literal(name)}"], NEWEST, corpus)
    seen = {r.info.run_id for r in by_system}
    found = sorted([*by_system, *(r for r in by_name if r.info.run_id not in seen)],
                   key=lambda r: -r.info.start_time)
    return _pick(found, selector, client, experiment_id, corpus)


def _matches(client: MlflowClient, experiment_id: str, clauses: list[str], order: list[str],
             corpus: str | None) -> list[Run]:
    """Every finished evaluated run matching ``clauses`` (and ``corpus``: any of its digests, or its name for
    runs that record no digest), in ``order``."""
    query = [*clauses, "attributes.status = 'FINISHED'"]
    if not corpus:
        wheres = [query]
    else:
        wheres = [[*query, f"tags.`{TAG_CORPUS_DIGEST}` = {literal(d)}"]
                  for d in corpus_digests(client, experiment_id, corpus)]
        wheres.append([*query, f"tags.`{TAG_CORPUS}` = {literal(corpus)}"])
    found: dict[str, Run] = {}
    for where in wheres:
        for r in search_runs(client, [experiment_id], " and ".join(where), order):
            if r.data.tags.get(TAG_KIND, "run") in EVALUATED_KINDS:
                found.setdefault(r.info.run_id, r)
    runs = list(found.values())
    return _ordered(runs, order) if len(wheres) > 1 else runs


def _ordered(runs: list[Run], order: list[str]) -> list[Run]:
    """Runs from several searches in one ``order`` (``attributes.start_time DESC``, ``metrics.`KEY` DESC`` ...)."""
    for clause in reversed(order):
        field, _, direction = clause.rpartition(" ")
        kind, _, name = field.partition(".")
        name = name.strip("`")

        def value(run: Run, kind: str = kind, name: str = name) -> float:
            if kind == "metrics":
                return run.data.metrics.get(name, float("-inf"))
            return float(getattr(run.info, name, 0) or 0)

        runs.sort(key=value, reverse=direction.upper() == "DESC")
    return runs


def _one(client: MlflowClient, experiment_id: str, clauses: list[str], selector: str, corpus: str | None,
         order: list[str] | None = None, any_corpus: bool = False) -> Run:
    found = _matches(client, experiment_id, clauses, order or NEWEST, corpus)
    return _pick(found[:1] if any_corpus else found, selector, client, experiment_id, corpus)


def _pick(found: list[Run], selector: str, client: MlflowClient, experiment_id: str, corpus: str | None) -> Run:
    """The first of ``found``, unless they span several corpora and no corpus was named."""
    if not found:
        where = f"experiment {_experiment_name(client, experiment_id)!r}" + (f", corpus {corpus!r}" if corpus else "")
        raise NoMatch(f"no finished run matches {selector!r} in {where}")
    corpora = list(dict.fromkeys(corpus_key(r) or "?" for r in found))
    if corpus is None and len(corpora) > 1:
        firsts = [next(r for r in found if (corpus_key(r) or "?") == c) for c in corpora]
        listed = "; ".join(f"{corpus_of(r) or '?'}: {describe(r)}" for r in firsts[:SHOWN])
        raise SelectorError(f"{selector!r} matches runs on {len(corpora)} corpora ({listed}): name one with "
                            f"--corpus NAME")
    return found[0]


def literal(text: str) -> str:
    """A string literal for MLflow's search syntax (which has no escapes: pick the quote the text lacks)."""
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    raise SelectorError(f"cannot search for {text!r}: it holds both kinds of quote")


def _experiment_name(client: MlflowClient, experiment_id: str) -> str:
    try:
        return client.get_experiment(experiment_id).name
    except Exception:
        return experiment_id
