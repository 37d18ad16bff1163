"""Questions without any judgment (own files not judged yet): a job ranks, writes its files and logs a FINISHED run
without retrieval metrics, saying in one line how to pool it; a sweep of such jobs ends saying the same once."""

from __future__ import annotations

from pathlib import Path

from mlflow import MlflowClient

from pipeline.common.names import RUN_FILE
from tests.pipeline.helpers import REPO, job_runs, run_pipeline

OWN = REPO / "tests" / "pipeline" / "data" / "own_files"
NO_JUDGMENTS = ("experiment=own_files", "corpus.judgments.path=null", f"corpus.documents.path={OWN / 'chunks.parquet'}",
                f"corpus.questions.path={OWN / 'questions.csv'}")


def test_a_job_with_no_judgment_finishes_ranked_and_unscored(launch_dir: Path):
    done = run_pipeline(launch_dir, *NO_JUDGMENTS, "hydra.run.dir=outputs/one")
    assert done.returncode == 0, done.stderr[-3000:]
    [run] = job_runs(launch_dir)
    assert run.info.status == "FINISHED"
    assert not any(k.startswith(("ndcg", "mrr", "recall", "hit_rate")) for k in run.data.metrics)
    assert run.data.metrics["system/notes_questions_unjudged"] == 16
    said = [line for line in done.stdout.splitlines() if line.startswith("nothing is judged yet")]
    assert len(said) == 1 and f"pipeline.judge pool {run.info.run_id} --to" in said[0]
    ranking = (launch_dir / "outputs" / "one" / RUN_FILE).read_text().splitlines()
    ranked = len({line.split()[0] for line in ranking})
    assert ranked == 16 - run.data.metrics["system/questions_no_results"] and ranked >= 15  # every question ranked
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    assert RUN_FILE in {f.path for f in client.list_artifacts(run.info.run_id)}


def test_a_sweep_of_unjudged_jobs_ends_saying_so_once(launch_dir: Path):
    done = run_pipeline(launch_dir, "-m", *NO_JUDGMENTS)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = job_runs(launch_dir)
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    lines = [line for line in done.stdout.splitlines() if "Nothing is judged yet" in line]
    assert len(lines) == 1 and "pipeline.judge pool" in lines[0]
    assert "identical per question" not in done.stdout and "Traceback" not in done.stderr
    parent = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}").get_run(runs[0].data.tags["mlflow.parentRunId"])
    assert parent.info.status == "FINISHED"
