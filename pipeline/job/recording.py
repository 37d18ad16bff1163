"""Where a job's run goes and what it records (:class:`JobRecorder`): the store opened before the job computes,
a resumed sweep's result found, the job's files written and its record saved in its folder before anything is
logged, then its MLflow run; a failure recorded the same way, as a FAILED run with its reason."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from metrics.errors import InputError
from pipeline.common import interrupts, progress
from pipeline.common.names import KIND_JOB, PER_QUESTION_TABLE, PROG, TAG_CONFIG_DIGEST, TAG_KIND
from pipeline.common.redact import redact_text
from pipeline.config.plan import JobPlan, run_params
from pipeline.job.context import JobContext, SweepHandle, configured_corpus, run_name
from pipeline.job.describe import data_identity, dataset_source_type, job_tags, result_tags
from pipeline.job.files import files_beside, write_results
from pipeline.job.results import JobResult, first_columns, nothing_judged_line
from pipeline.tracking.destination import Destination, JobRecord, StoreUnavailable

if TYPE_CHECKING:
    from pipeline.data.collection import Collection
    from pipeline.job.diagnose import JobDiagnosis


class JobFailed(Exception):
    """A single run ended on bad input; already reported (and logged, when the store answered)."""


@dataclass(frozen=True)
class JobOutcome:
    """A job: its MLflow run id (None when its results could not be logged yet), and its result (None when it
    failed on bad input inside a sweep, or was skipped because a resumed sweep already holds it)."""

    run_id: str | None
    result: JobResult | None


class JobRecorder:
    """What one job records, and where: its tags, its folder, its MLflow run."""

    def __init__(self, cfg: DictConfig, ctx: JobContext, tags: dict[str, str] | None) -> None:
        """Raises :class:`JobFailed` when there is no store to record in (said why)."""
        self.cfg, self.ctx = cfg, ctx
        self.handle = SweepHandle.read(ctx.sweep_dir) if ctx.sweep_dir is not None else None
        self.system, self.tags = job_tags(cfg, ctx, self.handle, tags)
        try:
            self.destination = Destination.open(cfg.tracking.uri, ctx.launch_dir, cfg.tracking.experiment,
                                                self.handle)
        except InputError as exc:  # no store: nothing can be recorded, say why and stop
            self.say_failed(str(exc))
            raise JobFailed(str(exc)) from None
        self.started_ms = int(time.time() * 1000)

    def checked(self, plan: JobPlan) -> None:
        """The config as checked (completed, or an equal one the sweep's driver checked ahead) is the one recorded."""
        self.cfg = plan.cfg
        self.tags[TAG_CONFIG_DIGEST] = plan.digest

    def identify(self, collection: Collection) -> None:
        """The job's identity in the store: its config, its data and the code, as tags."""
        self.identity = self.destination.identity(self.tags, collection.digest)
        self.tags.update(self.identity.tags())


    def already_logged(self, collection: Collection) -> str | None:
        """In a resumed sweep, the run that already holds this job's result (tuning trials and evaluations always
        run)."""
        if self.handle is None or self.tags[TAG_KIND] != KIND_JOB:
            return None
        here = JobRecord.load(self.ctx.output_dir) is not None  # logging it never removes it
        if not self.handle.resumed and not here:
            return None  # a new parent run holds no job's run, and this folder no earlier result
        run_id = self.destination.logged_earlier(self.ctx.output_dir, self.identity, self.ctx.job_num,
                                                 " ".join(self.ctx.overrides))
        if run_id is not None and not here:
            # logged from a folder elsewhere (a worker's own, before the driver resolved the sweep folder for its
            # jobs): this folder says so, so that the sweep counts the point as finished and logged
            self.destination.record(run_name(self.system, collection.label), self.tags, self.started_ms,
                                    run_id=run_id).save(self.ctx.output_dir)
        return run_id

    def waits(self, report: bool) -> bool:
        """Whether this job's record may wait for its plots until the next job has computed: in a sweep whose
        jobs run in this process (Hydra's basic launcher), which finishes the waiting job at its end. Tuning
        trials (``report=False``) give their result back at once."""
        return (report and self.handle is not None
                and self.ctx.choices.get("hydra/launcher") in progress.IN_PROCESS_LAUNCHERS)

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
        self.tags.update(result_tags(result, self.cfg.retriever))
        dataset = self.destination.dataset(c.doc_ids, c.doc_texts, c.dataset_name, c.digest, c.source or c.name,
                                           tags=data_identity(c), metadata=c.doc_metadata,
                                           source_type=dataset_source_type(c))
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
