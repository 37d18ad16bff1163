"""The judging loop in MLflow: the runs a pool or a re-scoring takes (a sweep, runs, selectors) and their stored
files, qrels versions logged as MLflow datasets, and re-scored runs.

- A qrels version is a run of the experiment ``<experiment> judgments`` whose dataset input (context
  ``judgments``) is the qrels themselves (name ``<corpus>/qrels``, digest = the qrels' digest); its tags name the
  parent version, who judged and when, its metrics count what changed, its artifacts hold the TREC and BEIR files.
- A re-scored run is a new run per (system, qrels version), in the experiment ``<experiment> qrels <digest>``: the
  standard metric names keep their meaning (compare, gate and the UI work on them as on any run), and since each
  version has its own experiment, no chart of the UI ever mixes figures scored against two versions. Each one links
  to the run it re-scored (``rankscope.rescored_from``) and to its qrels version (``rankscope.qrels_run``), and
  records the version's digest (``rankscope.qrels_digest``) as every job does.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.errors import InputError
from pipeline.common.names import (
    CONFIG_FILE,
    EVALUATED_KINDS,
    JUDGMENTS_EXPERIMENT,
    KIND_JOB,
    KIND_QRELS,
    KIND_RESCORE,
    KIND_SWEEP,
    PER_QUESTION_FILE,
    QRELS_DATASET_CONTEXT,
    QRELS_TREC,
    RESCORED_EXPERIMENT,
    RUN_FILE,
    TAG_ASSESSORS,
    TAG_CORPUS,
    TAG_CORPUS_DIGEST,
    TAG_JUDGED_AT,
    TAG_KIND,
    TAG_QRELS_DIGEST,
    TAG_QRELS_PARENT,
    TAG_QRELS_RUN,
    TAG_RESCORED_FROM,
    TAG_SYSTEM,
)
from pipeline.tracking.client import MLFLOW_PARENT_RUN_ID, MlflowClient, MlflowException, Run
from pipeline.tracking.readback import _download, read_per_question
from pipeline.tracking.runs import Tracker, dataset_fields
from pipeline.tracking.search import first_run, search_runs
from pipeline.tracking.selectors import describe, literal, resolve
from pipeline.tracking.store import EXPERIMENT_TAGS, artifact_location

# -- the runs a pool or a re-scoring takes ----------------------------------------------------------------------


def selected_runs(client: MlflowClient, experiment_id: str | None, selectors: Sequence[str],
                  corpus: str | None = None) -> list[Run]:
    """The finished evaluated runs ``selectors`` name, each once, in order: a sweep's parent run (by id) stands for
    its finished jobs; anything else is a run selector (``pipeline.tracking.selectors``)."""
    found: dict[str, Run] = {}
    for selector in selectors:
        run = resolve_any(client, experiment_id, selector, corpus)
        if run.data.tags.get(TAG_KIND) in (KIND_SWEEP, KIND_RESCORE):
            children = [r for r in search_runs(client, [run.info.experiment_id],
                                               f"tags.`{MLFLOW_PARENT_RUN_ID}` = '{run.info.run_id}'")
                        if r.info.status == "FINISHED" and r.data.tags.get(TAG_KIND, KIND_JOB) in EVALUATED_KINDS]
            if not children:
                raise InputError(f"sweep {describe(run)} has no finished job")
            children.sort(key=lambda r: int(r.data.tags.get("rankscope.job", "0") or 0))
            for child in children:
                found.setdefault(child.info.run_id, child)
        else:
            found.setdefault(run.info.run_id, run)
    return list(found.values())


def resolve_any(client: MlflowClient, experiment_id: str | None, selector: str, corpus: str | None) -> Run:
    """A run id (any run: a sweep's parent too) or a selector of evaluated runs."""
    selector = selector.strip()
    if len(selector) == 32 and all(c in "0123456789abcdef" for c in selector):
        try:
            return client.get_run(selector)
        except MlflowException:
            raise InputError(f"no run with id {selector}") from None
    return resolve(client, experiment_id, selector, corpus)


def system_of(run: Run) -> str:
    return run.data.tags.get(TAG_SYSTEM) or run.info.run_name or run.info.run_id


def stored_file(client: MlflowClient, run: Run, name: str, folder: Path) -> Path:
    """One of the run's artifacts (``run.trec``, ``config.yaml`` ...) downloaded into ``folder``."""
    target = folder / run.info.run_id
    target.mkdir(parents=True, exist_ok=True)
    try:
        return Path(_download(client, run.info.run_id, run.info.artifact_uri, name, str(target)))
    except Exception as exc:
        raise InputError(f"{describe(run)} has no stored {name} ({type(exc).__name__}): only runs of rankscope jobs "
                         f"keep their ranking") from None


def stored_file_if_any(client: MlflowClient, run: Run, name: str, folder: Path) -> Path | None:
    """One of the run's artifacts when it has it (a chunked job's ``chunks.tsv``, a version's ``spans.tsv``), else
    None."""
    try:
        return stored_file(client, run, name, folder)
    except InputError:
        return None


def run_file(client: MlflowClient, run: Run, folder: Path) -> Path:
    return stored_file(client, run, RUN_FILE, folder)


def config_file(client: MlflowClient, run: Run, folder: Path) -> Path:
    return stored_file(client, run, CONFIG_FILE, folder)


def per_question(client: MlflowClient, run: Run, folder: Path) -> pd.DataFrame:
    """The run's per-question CSV (indexed by question id)."""
    return read_per_question(stored_file(client, run, PER_QUESTION_FILE, folder))


# -- qrels versions -------------------------------------------------------------------------------------------


def judgments_experiment(client: MlflowClient, experiment: str, uri: str) -> str:
    """The experiment qrels versions are logged in (made when first needed)."""
    return _experiment(client, JUDGMENTS_EXPERIMENT.format(experiment=experiment), uri)


def _experiment(client: MlflowClient, name: str, uri: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        return found.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_location(uri), tags=EXPERIMENT_TAGS)
    except MlflowException:  # made meanwhile by another process
        return client.get_experiment_by_name(name).experiment_id


def version_run(client: MlflowClient, experiment_id: str, digest: str) -> Run | None:
    """The finished run of the qrels version ``digest`` (a unique prefix of it will do)."""
    found = [r for r in search_runs(client, [experiment_id], f"tags.`{TAG_KIND}` = '{KIND_QRELS}' and "
                                                             f"tags.`{TAG_QRELS_DIGEST}` LIKE {literal(digest + '%')}")
             if r.info.status == "FINISHED"]
    digests = {r.data.tags[TAG_QRELS_DIGEST] for r in found}
    if len(digests) > 1:
        raise InputError(f"qrels version {digest!r} is ambiguous: {', '.join(sorted(digests))}")
    return found[0] if found else None


def log_version(client: MlflowClient, experiment_id: str, qrels: pd.DataFrame, *, digest: str, parent: str,
                corpus: str, tags: Mapping[str, str], counts: Mapping[str, float], assessors: Sequence[str],
                judged_at: str, files: Sequence[Path], source: str) -> str:
    """Log a qrels version (``qrels``: query_id, doc_id, grade) once: the run holding it already is returned."""
    done = first_run(client, [experiment_id], f"tags.`{TAG_KIND}` = '{KIND_QRELS}' and "
                                              f"tags.`{TAG_QRELS_DIGEST}` = '{digest}' and "
                                              f"attributes.status = 'FINISHED'")
    if done is not None:
        return done.info.run_id
    run_tags = {**tags, TAG_KIND: KIND_QRELS, TAG_QRELS_DIGEST: digest, TAG_QRELS_PARENT: parent,
                TAG_CORPUS: corpus, TAG_ASSESSORS: ", ".join(assessors), TAG_JUDGED_AT: judged_at}
    tracker = Tracker.start(client, experiment_id, f"qrels {digest} · {corpus}", run_tags)
    with tracker.closing():
        tracker.log_metrics({f"qrels/{k}": float(v) for k, v in counts.items()})
        fields = qrels_dataset(qrels, corpus, digest, source, parent, {TAG_ASSESSORS: ", ".join(assessors)})
        tracker.log_dataset_fields(fields, context=QRELS_DATASET_CONTEXT)
        tracker.log_files(files)
    return tracker.run_id


def version_files(client: MlflowClient, run: Run, folder: Path) -> Path:
    """The version's TREC qrels, downloaded into ``folder``."""
    return stored_file(client, run, QRELS_TREC, folder)


# -- re-scored runs --------------------------------------------------------------------------------------------


def rescored_experiment(client: MlflowClient, experiment: str, digest: str, uri: str) -> str:
    return _experiment(client, RESCORED_EXPERIMENT.format(experiment=experiment, digest=digest), uri)


def rescored_run(client: MlflowClient, experiment_id: str, original: str) -> Run | None:
    """The finished run that already re-scored ``original`` in this version's experiment."""
    return first_run(client, [experiment_id], f"tags.`{TAG_RESCORED_FROM}` = '{original}' and "
                                              f"attributes.status = 'FINISHED'")


def start_rescore(client: MlflowClient, experiment_id: str, name: str, tags: Mapping[str, str]) -> Tracker:
    return Tracker.start(client, experiment_id, name, {**tags, TAG_KIND: KIND_RESCORE})


def log_rescored(client: MlflowClient, experiment_id: str, parent: Tracker, original: Run, *, digest: str,
                 qrels_run: str | None, corpus_digest: str, metrics: Mapping[str, float], table: pd.DataFrame,
                 files: Sequence[Path], qrels_dataset: Mapping[str, str] | None) -> str:
    """One re-scored run: the original's params and tags (system, corpus, config), its new figures and table, the
    qrels version's dataset input, a copy of its run.trec."""
    keep = {k: v for k, v in original.data.tags.items() if k.startswith("rankscope.") and k != "rankscope.record"}
    tags = {**keep, TAG_KIND: KIND_JOB, TAG_RESCORED_FROM: original.info.run_id, TAG_QRELS_DIGEST: digest,
            TAG_CORPUS_DIGEST: corpus_digest, **({TAG_QRELS_RUN: qrels_run} if qrels_run else {})}
    tracker = Tracker.start(client, experiment_id, original.info.run_name or system_of(original), tags,
                            parent.run_id)
    with tracker.closing():
        tracker.log_metrics(metrics, params=dict(original.data.params))
        if qrels_dataset:
            tracker.log_dataset_fields(qrels_dataset, context=QRELS_DATASET_CONTEXT)
        tracker.copy_datasets(original.info.run_id)
        tracker.log_table(table, "per_question.json")
        tracker.log_files(files)
    return tracker.run_id


def qrels_dataset(qrels: pd.DataFrame, corpus: str, digest: str, source: str, parent: str,
                  tags: Mapping[str, str] | None = None) -> dict[str, str]:
    """The qrels version as a dataset input's description (query_id, doc_id, grade)."""
    with warnings.catch_warnings():  # MLflow's hint that integer columns cannot hold missing values: grades never miss
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer column")
        return dataset_fields(qrels, name=f"{corpus}/qrels", digest=digest, source=source,
                              tags={TAG_QRELS_PARENT: parent, **(tags or {})})


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
