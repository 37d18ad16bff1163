"""One job, stage by stage: check, load, index, rank, evaluate, diagnose, write, publish.

:func:`execute_job` reads top to bottom; each computing stage is a method of :class:`Job`, which keeps what the
stages share (the plan, what the process reuses, the stage timings) and hands the retriever's work to
:mod:`~pipeline.job.engine`; what the job records, and where, is its :class:`~pipeline.job.recording.JobRecorder`'s.

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

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from metrics.errors import InputError
from pipeline.common import interrupts, progress
from pipeline.config.plan import JobPlan
from pipeline.job.context import JobContext
from pipeline.job.diagnose import diagnose_job
from pipeline.job.indexed import Indexed
from pipeline.job.recording import JobOutcome, JobRecorder
from pipeline.job.results import JobResult, bootstrap, score
from pipeline.job.reuse import JobReuse

if TYPE_CHECKING:
    from metrics.run import Run
    from pipeline.data.collection import Collection
    from retrievers import Retriever

TIMED = ("load", "chunk", "index", "rank", "evaluate", "bootstrap")  # logged as time/<stage>_s (chunk: when it chunks)

# A sweep's job whose plots were still being drawn when it ended: completed, saved and logged by finish_waiting().
_WAITING: list[Callable[[], JobOutcome]] = []


def finish_waiting() -> None:
    """Complete, save and log the job left waiting for its plots, if any: called before the next job writes, and
    by the sweep at its end or when it is stopped (the plots are then drawn here if their copy was stopped too)."""
    while _WAITING:
        _WAITING.pop()()


def execute_job(cfg: DictConfig, ctx: JobContext, tags: dict[str, str] | None = None,
                report: bool = True) -> JobOutcome:
    """Run one job and log it; ``tags`` are added to its run's, ``report=False`` prints nothing (tuning trials).

    Raises :class:`~pipeline.job.recording.JobFailed` for a single run that fails on bad input (a sweep's job
    records it and goes on).
    """
    job = Job(cfg, ctx, tags)
    record = job.record
    try:
        plan = job.check()
        collection = job.load(plan)
        logged = record.already_logged(collection)
        if logged is not None:
            return JobOutcome(logged, None)
        retriever = job.index(plan, collection)
        run = job.rank(plan, retriever, collection)
        result = job.evaluate(plan, collection, retriever, run)
        diagnosis = diagnose_job(result, plan, job.reuse.documents(collection))
        finish_waiting()  # the previous job: its plots were drawn while this one computed
        complete, text = record.write(plan, result, diagnosis)
    except InputError as exc:
        interrupts.stop_if_interrupted(exc)
        finish_waiting()
        return record.failed(str(exc), details=getattr(exc, "details", None))
    except Exception as exc:  # a bug: record the failure, then let it show its traceback
        interrupts.stop_if_interrupted(exc)  # not a bug: a clean-up that failed as a Ctrl-C unwound it
        finish_waiting()
        record.failed(f"{type(exc).__name__}: {exc}", quiet=True)
        raise
    finally:
        job.close()

    def logged() -> JobOutcome:
        return record.publish(complete(), result, text, report)

    if not record.waits(report):
        return logged()
    _WAITING.append(logged)
    return JobOutcome(None, result)


class Job:
    """What the computing stages of one job share: its config and place, what it reuses, the stage timings; and
    its recorder."""

    def __init__(self, cfg: DictConfig, ctx: JobContext, tags: dict[str, str] | None) -> None:
        self.cfg, self.ctx = cfg, ctx
        self.record = JobRecorder(cfg, ctx, tags)  # where its run goes: no store, no job
        self.system = self.record.system
        self.seconds: dict[str, float] = {}
        self._bar = progress.bar(len(TIMED), self.system, "stage")

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
        self.record.checked(plan)
        if not plan.chunked:
            self._bar.total = len(TIMED) - 1
        self.reuse = JobReuse(self.cfg, plan.context.tokenizer, self.ctx.launch_dir)
        return plan

    def load(self, plan: JobPlan) -> Collection:
        with self.stage("load"):
            collection = self.reuse.collection(plan.corpus, self.cfg.corpus)
        self.record.identify(collection)
        return collection

    def index(self, plan: JobPlan, collection: Collection) -> Retriever:
        """Index the documents, or, when the job chunks, their chunks (cut once per corpus and chunker settings)."""
        self.indexed = Indexed(plan, self.reuse, self.cfg.retriever)
        self.indexed.index(plan.retriever, collection, self.stage)
        return plan.retriever

    def rank(self, plan: JobPlan, retriever: Retriever, collection: Collection) -> Run:
        with self.stage("rank"):
            return self.indexed.rank(retriever, collection, self.system)

    def evaluate(self, plan: JobPlan, collection: Collection, retriever: Retriever, run: Run) -> JobResult:
        """Every metric per question, then each mean's bootstrap interval."""
        with self.stage("evaluate"):
            chunked = self.indexed.scored(collection, run)
            evaluation = score(run, collection, plan.metrics, chunked)
        with self.stage("bootstrap"):
            intervals = bootstrap(evaluation, plan.metrics)
        result = JobResult.of(self.system, collection, retriever, run, evaluation, plan.metrics, intervals,
                              self.seconds, self.reuse.reused_metrics())
        result.add_chunks(chunked)
        result.add_index_size(retriever.index_bytes())
        if plan.metrics.judged_only and result.scored:  # condensed lists, beside and apart from the standard figures
            result.add_condensed()
        return result
