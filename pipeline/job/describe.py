"""What a job's run says of itself, as tags: who it is (the system's name, the config, where it ran) before it runs;
once it has results, what MLflow shows first (a description, the primary metric with its interval), the settings
the retriever resolved, where its data came from and the digests that tell the same data reached two ways."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from pipeline.common.names import (
    KIND_JOB,
    KIND_RUN,
    TAG_CONFIG_DIGEST,
    TAG_CORPUS,
    TAG_CORPUS_DIGEST,
    TAG_CORPUS_SOURCE,
    TAG_DESCRIPTION,
    TAG_DOCUMENTS_DIGEST,
    TAG_GRADES,
    TAG_IRDS_ID,
    TAG_JOB,
    TAG_JUDGMENTS,
    TAG_KIND,
    TAG_NOTES,
    TAG_OUTPUT_DIR,
    TAG_OVERRIDES,
    TAG_QRELS_DIGEST,
    TAG_QUESTIONS_DIGEST,
    TAG_RANKINGS_FROM,
    TAG_RESOLVED,
    TAG_SYSTEM,
    interval_tag,
)
from pipeline.common.redact import redact_text
from pipeline.config.paths import entry_defaults
from pipeline.config.plan import config_digest
from pipeline.data.grades import recorded
from pipeline.data.irds import ROUTE as IRDS_ROUTE
from pipeline.job.context import JobContext, SweepHandle, config_tags, system_name
from pipeline.reports.text import interval_text, job_description

if TYPE_CHECKING:
    from pipeline.data.collection import Collection
    from pipeline.job.results import JobResult

MAX_TAG = 8000  # characters MLflow keeps in a tag's value (notes.txt holds the notes in full)


def job_tags(cfg: DictConfig, ctx: JobContext, handle: SweepHandle | None,
             tags: dict[str, str] | None) -> tuple[str, dict[str, str]]:
    """The system's name and the job's tags before it runs (``tags`` added)."""
    varying = handle.varying if handle else []
    # masked once here, the system's name is masked in every file and line made of it (run.trec's tag, the
    # diagnosis's heading, the run's name, the plots): a setting of a user's class may be a key
    system = redact_text(system_name(str(cfg.retriever.get("name", "retriever")), ctx.overrides, varying,
                                     entry_defaults("retriever", ctx.choices.get("retriever"))))
    found = {**config_tags(cfg), TAG_SYSTEM: system, TAG_OVERRIDES: " ".join(ctx.overrides),
             TAG_OUTPUT_DIR: str(ctx.output_dir), TAG_KIND: KIND_JOB if handle else KIND_RUN,
             TAG_JOB: str(ctx.job_num), **(tags or {})}
    found[TAG_CONFIG_DIGEST] = config_digest(cfg)
    return system, found


def result_tags(result: JobResult, node: DictConfig) -> dict[str, str]:
    """The tags a job's results add: its data, notes, what MLflow shows first, the settings its retriever (configured
    by ``node``) resolved and where its rankings came from."""
    c = result.collection
    tags = {TAG_CORPUS_DIGEST: c.digest, TAG_CORPUS: c.name, TAG_JUDGMENTS: c.judgments or f"{c.name}/{c.split}",
            **data_identity(c)}
    if notes := result.note_lines():
        tags[TAG_NOTES] = "\n".join(notes)[:MAX_TAG]
    tags.update(shown_first(result))
    if used := resolved_settings(result.retriever, node):
        tags[TAG_RESOLVED] = "; ".join(f"{key}={value}" for key, value in used.items())
    if result.rankings_from:
        tags[TAG_RANKINGS_FROM] = result.rankings_from[:MAX_TAG]
    return tags


def dataset_source_type(c: Collection) -> str | None:
    """The source type of the run's dataset input: ir_datasets' when the corpus came through it."""
    return IRDS_ROUTE if c.origin.get("route") == IRDS_ROUTE else None


def shown_first(result: JobResult) -> dict[str, str]:
    """What MLflow shows first of a job's run: its description (the system, the corpus and each shown metric with
    its interval, the primary one first) and its primary metric rounded with its interval, as the tag the saved
    views show as a column."""
    primary = result.plan.primary
    found = result.intervals.get(primary.name)
    tags = {TAG_DESCRIPTION: job_description(result)}
    if found is not None:
        tags[interval_tag(primary.mlflow_key)] = interval_text(found.mean, found.low, found.high)
    return tags


def resolved_settings(retriever: object, node: DictConfig, prefix: str = "retriever.") -> dict[str, str]:
    """The settings a retriever resolved when it indexed, by their param name: a key configured as null that the
    retriever holds as ``used_<key>`` (LSA's dimensions, which follow the corpus), fusion components included. A
    component whose ranking came from an earlier job was not indexed here, and tells nothing."""
    found = {}
    for key, value in node.items():
        if value is None:
            used = getattr(retriever, f"used_{key}", None)
            if used is not None:
                found[f"{prefix}{key}"] = str(used)
    children = node.get("components")
    objects = getattr(retriever, "components", None)
    if isinstance(children, DictConfig) and isinstance(objects, list | tuple):
        for (name, child), component in zip(children.items(), objects):
            if isinstance(child, DictConfig):
                found.update(resolved_settings(component, child, f"{prefix}components.{name}."))
    return found


def data_identity(c: Collection) -> dict[str, str]:
    """What a result records of its data: the digests of its documents, questions and judgments (each on its own,
    so the same data reached by two routes is seen to be the same), where it was read, its ir_datasets id, and how
    its grades became gains when they did (the judgments' digest is of the gains measured)."""
    found = {TAG_DOCUMENTS_DIGEST: c.corpus_digest, TAG_QUESTIONS_DIGEST: c.queries_digest,
             TAG_QRELS_DIGEST: c.judgments_digest, TAG_CORPUS_SOURCE: c.source or c.name}
    if c.origin.get("route") == IRDS_ROUTE:
        found[TAG_IRDS_ID] = c.origin["id"]
    if grading := recorded(c.origin):
        found[TAG_GRADES] = grading
    return found
