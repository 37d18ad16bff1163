"""One job, stage by stage: check, load, index, rank, evaluate, diagnose, write, publish.

:func:`execute_job` reads top to bottom; each stage is a method of :class:`Job`, which keeps what the stages share
(the plan, where the run will be logged, the stage timings).

- The results are written to the job's folder (``record.json`` and its files) before anything is logged, so a
  tracking store that stops answering loses nothing: the job fails saying so, and ``python -m pipeline.sync`` logs
  it later. The MLflow run is created once the results exist, with the job's start time.
- In a resumed sweep, a job whose result the parent run already holds (same config, corpus and code) is skipped.
- A job that fails on bad input (a missing corpus folder, an unknown key added with ``+``, a value out of range)
  logs a FAILED run with the reason as a tag and prints that reason on one line; in a sweep the other jobs go on.
  So does a user's retriever that raises (``retrievers.external.EngineFailed``: the line names the question it
  raised on), its traceback added to the job's log, which the FAILED run keeps. Any other exception also logs a
  FAILED run, then propagates (it is a bug of rankscope's, and deserves its traceback).
- A job's two plots take a forked copy about 0.35 s to draw, longer than the rest of a small job's files. In a
  sweep whose jobs run in this process, a job therefore ends once its other files are written, and its record is
  completed (plots listed), saved and logged when the next job has computed its results (by then the plots are
  drawn), or at the sweep's end or interruption (:func:`finish_waiting`), whichever comes first.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from metrics.errors import InputError
from pipeline.common import interrupts, progress
from pipeline.common.names import (
    CACHE_PREFIX,
    KIND_JOB,
    KIND_RUN,
    PER_QUESTION_TABLE,
    PROG,
    TAG_CONFIG_DIGEST,
    TAG_CORPUS,
    TAG_CORPUS_DIGEST,
    TAG_CORPUS_SOURCE,
    TAG_DESCRIPTION,
    TAG_DOCUMENTS_DIGEST,
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
from pipeline.common.progress import IN_PROCESS_LAUNCHERS
from pipeline.common.redact import redact_text
from pipeline.config.paths import entry_defaults
from pipeline.config.plan import JobPlan, config_digest, run_params
from pipeline.data.irds import ROUTE as IRDS_ROUTE
from pipeline.job.chunked import rank_in_chunks
from pipeline.job.context import (
    JobContext,
    SweepHandle,
    config_tags,
    configured_corpus,
    run_name,
    system_name,
)
from pipeline.job.diagnose import JobDiagnosis, diagnose_job
from pipeline.job.results import (
    JobResult,
    bootstrap,
    condensed_column,
    files_beside,
    first_columns,
    nothing_judged_line,
    score,
    score_condensed,
    write_results,
)
from pipeline.job.reuse import JobReuse
from pipeline.reports.text import interval_text, job_description
from pipeline.tracking.destination import Destination, JobRecord, StoreUnavailable
from retrievers.external import engine_failed

if TYPE_CHECKING:
    from metrics.run import Run
    from pipeline.data.collection import Collection
    from retrievers import Retriever

TIMED = ("load", "index", "rank", "evaluate", "bootstrap")  # logged as time/<stage>_s
MAX_TAG = 8000  # characters MLflow keeps in a tag's value (notes.txt holds the notes in full)

# A sweep's job whose plots were still being drawn when it ended: completed, saved and logged by finish_waiting().
_WAITING: list[Callable[[], JobOutcome]] = []


def finish_waiting() -> None:
    """Complete, save and log the job left waiting for its plots, if any: called before the next job writes, and
    by the sweep at its end or when it is stopped (the plots are then drawn here if their copy was stopped too)."""
    while _WAITING:
        _WAITING.pop()()


OURS = ("retrievers", "pipeline", "metrics")  # packages whose exceptions are rankscope's bugs


def users(retriever: Retriever) -> bool:
    """Whether ``retriever`` is a user's own ``Retriever`` subclass (a user's ``search`` engine is behind
    ``retrievers.external.ExternalSearch``, which reports its failures itself)."""
    return type(retriever).__module__.partition(".")[0] not in OURS


def engine_name(retriever: Retriever) -> str:
    return f"{type(retriever).__module__}.{type(retriever).__qualname__}"


class JobFailed(Exception):
    """A single run ended on bad input; already reported (and logged, when the store answered)."""


@dataclass(frozen=True)
class JobOutcome:
    """A job: its MLflow run id (None when its results could not be logged yet), and its result (None when it
    failed on bad input inside a sweep, or was skipped because a resumed sweep already holds it)."""

    run_id: str | None
    result: JobResult | None


def execute_job(cfg: DictConfig, ctx: JobContext, tags: dict[str, str] | None = None,
                report: bool = True) -> JobOutcome:
    """Run one job and log it; ``tags`` are added to its run's, ``report=False`` prints nothing (tuning trials).

    Raises :class:`JobFailed` for a single run that fails on bad input (a sweep's job records it and goes on).
    """
    job = Job(cfg, ctx, tags)
    try:
        plan = job.check()
        collection = job.load(plan)
        logged = job.already_logged(collection)
        if logged is not None:
            return JobOutcome(logged, None)
        retriever = job.index(plan, collection)
        run = job.rank(plan, retriever, collection)
        result = job.evaluate(plan, collection, retriever, run)
        diagnosis = diagnose_job(result, plan, job.reuse.documents(collection))
        finish_waiting()  # the previous job: its plots were drawn while this one computed
        complete, text = job.write(plan, result, diagnosis)
    except InputError as exc:
        interrupts.stop_if_interrupted(exc)
        finish_waiting()
        return job.failed(str(exc), details=getattr(exc, "details", None))
    except Exception as exc:  # a bug: record the failure, then let it show its traceback
        interrupts.stop_if_interrupted(exc)  # not a bug: a clean-up that failed as a Ctrl-C unwound it
        finish_waiting()
        job.failed(f"{type(exc).__name__}: {exc}", quiet=True)
        raise
    finally:
        job.close()

    def logged() -> JobOutcome:
        return job.publish(complete(), result, text, report)

    if not job.waits(report):
        return logged()
    _WAITING.append(logged)
    return JobOutcome(None, result)


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


class Job:
    """What the stages of one job share: its config and place, where its run goes, and the stage timings."""

    def __init__(self, cfg: DictConfig, ctx: JobContext, tags: dict[str, str] | None) -> None:
        self.cfg, self.ctx = cfg, ctx
        self.handle = SweepHandle.read(ctx.sweep_dir) if ctx.sweep_dir is not None else None
        varying = self.handle.varying if self.handle else []
        # masked once here, the system's name is masked in every file and line made of it (run.trec's tag, the
        # diagnosis's heading, the run's name, the plots): a setting of a user's class may be a key
        self.system = redact_text(system_name(str(cfg.retriever.get("name", "retriever")), ctx.overrides, varying,
                                              entry_defaults("retriever", ctx.choices.get("retriever"))))
        self.tags = {**config_tags(cfg), TAG_SYSTEM: self.system, TAG_OVERRIDES: " ".join(ctx.overrides),
                     TAG_OUTPUT_DIR: str(ctx.output_dir), TAG_KIND: KIND_JOB if self.handle else KIND_RUN,
                     TAG_JOB: str(ctx.job_num), **(tags or {})}
        self.seconds: dict[str, float] = {}
        self._bar = progress.bar(len(TIMED), self.system, "stage")
        try:
            self.destination = Destination.open(cfg.tracking.uri, ctx.launch_dir, cfg.tracking.experiment,
                                                self.handle)
        except InputError as exc:  # no store: nothing can be recorded, say why and stop
            self.close()
            self.say_failed(str(exc))
            raise JobFailed(str(exc)) from None
        self.started_ms = int(time.time() * 1000)
        self.tags[TAG_CONFIG_DIGEST] = config_digest(self.cfg)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage (``time/<name>_s``); a progress bar shows only on a terminal, after 2 seconds."""
        self._bar.set_postfix_str(name, refresh=False)
        start = time.perf_counter()
        yield
        self.seconds[name] = time.perf_counter() - start
        self._bar.update()

    def close(self) -> None:
        self._bar.close()

    # -- the stages, in order -----------------------------------------------------------------------------------

    def check(self) -> JobPlan:
        """The config, checked once and turned into objects, before any data is read."""
        plan = JobPlan.check(self.cfg, self.ctx.launch_dir)
        self.cfg = plan.cfg  # this config completed, or an equal one the sweep's driver checked ahead
        self.tags[TAG_CONFIG_DIGEST] = plan.digest
        self.reuse = JobReuse(self.cfg, plan.context.tokenizer, self.ctx.launch_dir)
        return plan

    def load(self, plan: JobPlan) -> Collection:
        with self.stage("load"):
            collection = self.reuse.collection(plan.corpus, self.cfg.corpus)
        self.identity = self.destination.identity(self.tags, collection.digest)
        self.tags.update(self.identity.tags())
        return collection

    def already_logged(self, collection: Collection) -> str | None:
        """In a resumed sweep, the run that already holds this job's result (tuning trials and evaluations always
        run)."""
        if self.handle is None or self.tags[TAG_KIND] != KIND_JOB:
            return None
        if not self.handle.resumed and JobRecord.load(self.ctx.output_dir) is None:
            return None  # a new parent run holds no job's run, and this folder no earlier result
        return self.destination.logged_earlier(self.ctx.output_dir, self.identity, self.ctx.job_num,
                                               " ".join(self.ctx.overrides))

    def index(self, plan: JobPlan, collection: Collection) -> Retriever:
        retriever = plan.retriever
        with self.stage("index"):
            try:
                self.reuse.share_components(retriever, self.cfg.retriever, collection)
                retriever.index(self.reuse.documents(collection))
            except ValueError as exc:  # e.g. LSA dims beyond what the corpus allows
                if isinstance(exc, InputError):
                    raise
                raise InputError(f"retriever {retriever.name}: {exc}") from None
            except Exception as exc:
                if not users(retriever):
                    raise
                raise engine_failed(engine_name(retriever), exc, "index()", [], []) from None
        return retriever

    def rank(self, plan: JobPlan, retriever: Retriever, collection: Collection) -> Run:
        ids, texts = collection.query_ids, collection.query_texts
        with self.stage("rank"):
            try:
                return rank_in_chunks(self.reuse.ranking(retriever, self.cfg.retriever, collection), ids, texts,
                                      plan.depth, len(collection.doc_ids), f"ranking ({self.system})")
            except InputError:
                raise
            except Exception as exc:
                if not users(retriever):
                    raise
                raise engine_failed(engine_name(retriever), exc, "rank()", ids, texts,
                                    lambda i: retriever.rank(ids[i : i + 1], texts[i : i + 1], plan.depth)) from None

    def evaluate(self, plan: JobPlan, collection: Collection, retriever: Retriever, run: Run) -> JobResult:
        """Every metric per question, then each mean's bootstrap interval."""
        with self.stage("evaluate"):
            evaluation = score(run, collection, plan.metrics)
        with self.stage("bootstrap"):
            intervals = bootstrap(evaluation, plan.metrics)
        reused = {CACHE_PREFIX + name: count for name, count in self.reuse.counters().items()}
        result = JobResult.of(self.system, collection, retriever, run, evaluation, plan.metrics, intervals,
                              self.seconds, reused)
        if plan.metrics.judged_only and result.scored:  # condensed lists, beside and apart from the standard figures
            condensed = score_condensed(run, collection, plan.metrics)
            result.condensed = bootstrap(condensed, plan.metrics)
            for name in condensed.per_question.columns:
                result.table[condensed_column(name)] = condensed.per_question[name].reindex(
                    result.table["query_id"]).to_numpy()
        return result

    def waits(self, report: bool) -> bool:
        """Whether this job's record may wait for its plots until the next job has computed: in a sweep whose
        jobs run in this process (Hydra's basic launcher), which finishes the waiting job at its end. Tuning
        trials (``report=False``) give their result back at once."""
        return report and self.handle is not None and self.ctx.choices.get("hydra/launcher") in IN_PROCESS_LAUNCHERS

    def write(self, plan: JobPlan, result: JobResult,
              diagnosis: JobDiagnosis) -> tuple[Callable[[], JobRecord], str]:
        """The job's files, its plots started; and the text it prints. The function returned waits for the plots,
        then saves ``record.json`` (what the MLflow run will hold, every file listed) before anything is logged."""
        out, c = self.ctx.output_dir, result.collection
        result.table = first_columns(result.table, result.plan.primary.name)
        # the plots and the files that take time to format are written on the other core while this one goes on
        safe, table, dtypes = self.destination.table_files(result.table)  # masked once, for the CSV and MLflow's table
        plots = diagnosis.start_writing(out, {**files_beside(result, safe, plan.tree, out),
                                              out / PER_QUESTION_TABLE: table})
        files = write_results(result, out)  # the table is logged as the record's table, not as a file
        identity = data_identity(c)
        self.tags.update({TAG_CORPUS_DIGEST: c.digest, TAG_CORPUS: c.name,
                          TAG_JUDGMENTS: c.judgments or f"{c.name}/{c.split}", **identity})
        if notes := result.note_lines():
            self.tags[TAG_NOTES] = "\n".join(notes)[:MAX_TAG]
        self.tags.update(shown_first(result))
        if used := resolved_settings(result.retriever, self.cfg.retriever):
            self.tags[TAG_RESOLVED] = "; ".join(f"{key}={value}" for key, value in used.items())
        if result.rankings_from:
            self.tags[TAG_RANKINGS_FROM] = result.rankings_from[:MAX_TAG]
        dataset = self.destination.dataset(c.doc_ids, c.doc_texts, c.dataset_name, c.digest, c.source or c.name,
                                           tags=identity, metadata=c.doc_metadata,
                                           source_type=IRDS_ROUTE if c.origin.get("route") == IRDS_ROUTE else None)
        name = run_name(self.system, c.label)
        store, traced = result.retriever.traces()  # read from MLflow traces of this store: linked to the run
        record = self.destination.record(name, self.tags, self.started_ms, params=plan.params(self.ctx.choices),
                                         metrics=result.metrics(), dataset=dataset, table=PER_QUESTION_TABLE,
                                         table_dtypes=dtypes, trace_links=traced if store == self.destination.uri
                                         else [])

        def complete() -> JobRecord:
            record.files = [str(p.relative_to(out)) for p in files + plots()]  # every file exists before the
            record.save(out)  # record that lists them is saved
            return record

        return complete, result.text() + "\n\n" + diagnosis.terminal_text()

    def publish(self, record: JobRecord, result: JobResult, text: str, report: bool) -> JobOutcome:
        """Log the record as the job's MLflow run; if the store does not answer, the record waits for sync. A
        waiting job of a sweep hands it to the store process and goes on: what it answers is read at its next
        request or the sweep's end."""
        if self.waits(report) and self.destination.publish_later(record, self.ctx.output_dir, self.not_logged):
            print(text + "\n", flush=True)
            return JobOutcome(None, result)
        try:
            published = self.destination.publish(record, self.ctx.output_dir)
        except StoreUnavailable as exc:
            if report:
                print(text + "\n", flush=True)
            self.not_logged(str(exc))
            if self.handle is None:
                raise JobFailed(str(exc)) from None
            return JobOutcome(None, result)
        if report:
            where = "" if self.handle else (f"\nFiles: {self.ctx.output_dir}"
                                            f"\nMLflow: {self.destination.location(published.run_id)}")
            if not result.scored and self.handle is None:  # a sweep says it once, at its end
                where += "\n" + nothing_judged_line(result, published.run_id)
            print(text + where + "\n", flush=True)
        return JobOutcome(published.run_id, result)

    # -- when it fails ------------------------------------------------------------------------------------------

    def failed(self, reason: str, quiet: bool = False, details: str | None = None) -> JobOutcome:
        """A FAILED run (saved first, like any result) and, unless ``quiet``, its reason on one line; a single run
        then raises :class:`JobFailed`. ``details`` (a user's engine's traceback) go into the job's log, which the
        run keeps, and the line says where."""
        params = run_params(self.cfg, self.ctx.choices)
        name = run_name(self.system, configured_corpus(self.cfg.corpus))
        files = []
        if details:
            log = self.ctx.log
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a", encoding="utf-8") as f:
                f.write(f"{PROG}: {redact_text(reason)}\n{redact_text(details)}")
            reason = f"{reason} (traceback in {log})"
            files = [str(log.relative_to(self.ctx.output_dir))] if log.is_relative_to(self.ctx.output_dir) else []
        record = self.destination.record(name, self.tags, self.started_ms, params=params, error=reason, files=files)
        record.save(self.ctx.output_dir)
        run_id = self.destination.publish_failure(record, self.ctx.output_dir)
        if not quiet:
            self.say_failed(str(record.error))
            if self.handle is None:
                raise JobFailed(str(record.error))
        return JobOutcome(run_id, None)

    def not_logged(self, reason: str) -> None:
        """Say that the results wait in the job's folder, and the command that logs them (unless the command is
        stopping: its one line counts what waits, and says how to go on)."""
        if not interrupts.stopping():
            self.say_failed(self.destination.not_logged(self.ctx.output_dir, self.ctx.sweep_dir, reason))

    def say_failed(self, reason: str) -> None:
        ctx = self.ctx
        where = f"job {ctx.job_num} ({' '.join(ctx.overrides)})" if ctx.sweep_dir is not None else "error"
        print(f"{PROG}: {where}: {redact_text(reason)}".replace("\n", " "), file=sys.stderr, flush=True)


def data_identity(c: Collection) -> dict[str, str]:
    """What a result records of its data: the digests of its documents, questions and judgments (each on its own,
    so the same data reached by two routes is seen to be the same), where it was read, its ir_datasets id."""
    found = {TAG_DOCUMENTS_DIGEST: c.corpus_digest, TAG_QUESTIONS_DIGEST: c.queries_digest,
             TAG_QRELS_DIGEST: c.qrels.digest(), TAG_CORPUS_SOURCE: c.source or c.name}
    if c.origin.get("route") == IRDS_ROUTE:
        found[TAG_IRDS_ID] = c.origin["id"]
    return found
