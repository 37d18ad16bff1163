"""A re-scoring logged: a parent run and a run per system in the new qrels version's experiment (a run re-scored
before against the same version is not logged twice), and the report of what changed, kept under
``judging/rescored/<digest>``."""

from __future__ import annotations

from pathlib import Path

from metrics.qrels import combined_digest
from metrics.trec import write_trec_run
from pipeline.common.names import (
    PER_QUESTION_FILE,
    RUN_FILE,
    TAG_DOCUMENTS_DIGEST,
    TAG_QUESTIONS_DIGEST,
)
from pipeline.judge_steps.changes_report import keep_changes, write_changes
from pipeline.judge_steps.rescoring import Outcome
from pipeline.judge_steps.sources import QrelsVersion
from pipeline.judging_maths.versions import frame
from pipeline.tracking import judgments as tracked
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.store import run_location


def log_rescoring(client: MlflowClient, experiment: str, uri: str, outcome: Outcome, new: QrelsVersion, tmp: Path,
                  text: str) -> str:
    """A parent run for this re-scoring and a run per system in the version's experiment; runs re-scored before
    against the same version are not logged twice. Returns where they are, and the report."""
    experiment_id = tracked.rescored_experiment(client, experiment, new.digest, uri)
    dataset = tracked.qrels_dataset(frame(new.qrels), outcome.rescored[0].ranked.run.data.tags.get(
        "rankscope.corpus", "corpus"), new.digest, new.source or new.digest, outcome.parent)
    parent = tracked.start_rescore(client, experiment_id, f"re-scored with qrels {new.digest}",
                                   {"rankscope.qrels_digest": new.digest})
    with parent.closing():
        for r in outcome.rescored:
            done = tracked.rescored_run(client, experiment_id, r.ranked.run_id)
            if done is not None:
                r.run_id, r.reused = done.info.run_id, True
                continue
            folder = tmp / "out" / r.ranked.run_id
            folder.mkdir(parents=True, exist_ok=True)
            r.after.table.to_csv(folder / PER_QUESTION_FILE, index=False)
            write_trec_run(r.ranked.ranking, folder / RUN_FILE)
            tags = r.ranked.run.data.tags
            corpus_digest = combined_digest(tags.get(TAG_DOCUMENTS_DIGEST, ""), tags.get(TAG_QUESTIONS_DIGEST, ""),
                                            new.digest)
            r.run_id = tracked.log_rescored(client, experiment_id, parent, r.ranked.run, digest=new.digest,
                                            qrels_run=new.run_id, corpus_digest=corpus_digest,
                                            metrics=r.after.metrics(r.plan), table=r.after.table,
                                            files=[folder / PER_QUESTION_FILE, folder / RUN_FILE],
                                            qrels_dataset=dataset)
        made = write_changes(outcome, text, {"MLflow": f"experiment {experiment} qrels {new.digest}",
                                             "qrels version": new.digest}, tmp)
        parent.log_files(made)
        page = keep_changes(made, new.digest)
    return (f"re-scored runs in experiment {experiment} qrels {new.digest}: "
            f"{run_location(uri, experiment_id, parent.run_id)}\nReport (open in a browser): {page.resolve()}")
