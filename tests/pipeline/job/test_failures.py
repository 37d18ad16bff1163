"""Bad input stops with a one-line reason and no traceback; a failed sweep point spares the other jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.job.recording import JobFailed
from tests.pipeline.helpers import log_run, run_pipeline


def runs_by_status(folder):
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    return client, client.search_runs([experiment.experiment_id])


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_failed_sweep_point_leaves_the_other_runs_intact_and_fails_the_parent(launch_dir, helpdesk_folder):
    tmp_path = launch_dir
    helpdesk = helpdesk_folder
    missing = tmp_path / "no-such-corpus"
    done = run_pipeline(tmp_path, "-m", "corpus=beir", f"corpus.path={helpdesk},{missing}", "retriever=bm25",
                        "hydra/launcher=joblib")  # jobs in worker processes: nothing comes back but MLflow
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    reasons = [line for line in done.stderr.splitlines() if str(missing) in line]
    assert reasons and all("corpus folder does not exist" in line for line in reasons)
    client, runs = runs_by_status(tmp_path)
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = {r.data.params["corpus.path"]: r for r in runs if r is not parent}
    assert parent.info.status == "FAILED" and "1 of 2 jobs failed" in parent.data.tags["rankscope.error"]
    assert children[str(helpdesk)].info.status == "FINISHED"
    assert round(children[str(helpdesk)].data.metrics["ndcg_at_5"], 3) == 0.691
    failed = children[str(missing)]
    assert failed.info.status == "FAILED" and "corpus folder does not exist" in failed.data.tags["rankscope.error"]
    assert "FAILED job 1" in done.stdout and "Mean over questions" in done.stdout
    sweep_dir = Path(parent.data.tags["rankscope.sweep_dir"])  # every worker resolved the same folder
    assert {Path(r.data.tags["rankscope.output_dir"]).parent for r in children.values()} == {sweep_dir}
    assert (sweep_dir / "summary.txt").is_file() and (sweep_dir / "0" / "per_question.csv").is_file()
    # the report and plots are built from MLflow in the driver: the finished system, and the failed one named
    logged = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"report.html", "plots"} <= logged
    report = (sweep_dir / "report.html").read_text(encoding="utf-8")
    assert "<summary>BM25 corpus.path=.../helpdesk: " in report and "vocabulary gap" in report
    assert "failed job 1" in report and "corpus folder does not exist" in report


def test_a_single_run_on_a_missing_corpus_fails_its_run_in_one_line(launch_dir):
    tmp_path = launch_dir
    done = run_pipeline(tmp_path, "corpus=beir", "corpus.path=nowhere")
    assert done.returncode == 1
    reason = f"rankscope: error: {tmp_path / 'nowhere'}: corpus folder does not exist"
    assert done.stderr.strip().splitlines() == [reason]
    _, (run,) = runs_by_status(tmp_path)
    assert run.info.status == "FAILED"


def test_an_unknown_key_is_one_line_and_nothing_is_logged(tmp_path):
    done = run_pipeline(tmp_path, "retriever.kl=0.9")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rankscope: config: ") and "Key 'kl' is not in struct" in line
    assert not (tmp_path / "mlflow.db").exists()


def test_a_bad_sweep_point_stops_the_sweep_before_any_job_or_run(tmp_path):
    done = run_pipeline(tmp_path, "-m", "retriever=lsa,bm25", "++retriever.dims=3")  # fine for LSA only
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rankscope: job 1 (retriever=bm25 ++retriever.dims=3): unknown key(s) retriever.dims")
    assert not (tmp_path / "mlflow.db").exists()


def test_a_corpus_byte_that_is_not_utf8_is_one_line_naming_file_line_and_offset(launch_dir, capsys):
    corpus = launch_dir / "corpus"
    (corpus / "qrels").mkdir(parents=True)
    (corpus / "corpus.jsonl").write_bytes(b'{"_id": "d1", "text": "apple pie"}\n{"_id": "d2", "text": "ban\xe9na"}\n')
    (corpus / "queries.jsonl").write_text('{"_id": "q1", "text": "apple"}\n')
    (corpus / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(JobFailed):
        log_run(launch_dir, "corpus=beir", f"corpus.path={corpus}")
    assert capsys.readouterr().err.strip().splitlines() == [
        f"rankscope: error: {corpus / 'corpus.jsonl'}:2: byte 0xe9 at byte offset 61 is not UTF-8 (save the file as "
        f"UTF-8)"]
