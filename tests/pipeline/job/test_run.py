"""A job's stages end in a saved record and a logged run. In a sweep whose jobs run in this process, a job's record
waits for its plots (drawn by a forked copy) until the next job has computed, or the sweep ends."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_dir

import pipeline.app
from metrics.trec import write_trec_run
from pipeline.common.names import CONFIG_FILE, MEANS_FILE, PER_QUESTION_FILE, PER_QUESTION_TABLE, RUN_FILE
from pipeline.job.context import JobContext, SweepHandle
from pipeline.job.run import execute_job, finish_waiting
from pipeline.tracking.records import JobRecord, read_table
from pipeline.tracking.runs import Tracker, redacted_frame
from pipeline.tracking.store import Store


@pytest.fixture
def sweep(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, experiment_id = Store.open(uri, "rankscope").pair()
    parent = Tracker.start(client, experiment_id, "sweep", {"rankscope.kind": "sweep"})
    SweepHandle(experiment_id, parent.run_id, ["retriever.k1"]).write(tmp_path / "sweep")

    def job(number: int, launcher: str = "basic"):
        overrides = [f"retriever.k1={1.0 + number / 10}"]
        with initialize_config_dir(config_dir=str(pipeline.app.CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[f"tracking.uri={uri}", f"cache.dir={tmp_path / 'cache'}", *overrides])
        ctx = JobContext(launch_dir=tmp_path, output_dir=tmp_path / "sweep" / str(number),
                         sweep_dir=tmp_path / "sweep", job_num=number, overrides=overrides,
                         choices={"hydra/launcher": launcher})
        return execute_job(cfg, ctx)

    yield job, client, tmp_path / "sweep"
    finish_waiting()


def logged_with_plots(client, folder) -> bool:
    record = JobRecord.load(folder)
    if record is None or record.pending:
        return False
    plots = sorted(f for f in record.files if f.startswith("plots/"))
    logged = sorted(f.path for f in client.list_artifacts(record.run_id, "plots"))
    return len(plots) == 2 and plots == logged and all((folder / f).is_file() for f in plots)


def test_a_job_of_an_in_process_sweep_is_logged_once_the_next_one_has_computed(sweep):
    job, client, sweep_dir = sweep
    first = job(0)
    assert first.run_id is None and first.result is not None  # computed, its plots still being drawn
    assert JobRecord.load(sweep_dir / "0") is None  # no record lists files that may not exist yet
    assert job(1).run_id is None
    assert logged_with_plots(client, sweep_dir / "0")
    assert JobRecord.load(sweep_dir / "1") is None
    finish_waiting()  # the sweep's end
    assert logged_with_plots(client, sweep_dir / "1")
    runs = client.search_runs([client.get_experiment_by_name("rankscope").experiment_id],
                              "tags.`rankscope.kind` = 'job'")
    assert sorted(r.data.metrics["ndcg_at_5"] > 0 for r in runs) == [True, True]
    assert {r.info.status for r in runs} == {"FINISHED"}


def test_the_files_written_beside_a_job_are_the_files_of_its_result(sweep):
    """A job hands the files that take time to format to the process drawing its plots (the run file, the
    per-question CSV and MLflow table, the config, the means); they hold what the job computed, and are there,
    listed and logged, once it is logged."""
    job, client, sweep_dir = sweep
    result = job(0).result
    finish_waiting()
    folder = sweep_dir / "0"
    reference = write_trec_run(result.run, sweep_dir / "reference.trec", "_".join(result.system.split()))
    assert (folder / RUN_FILE).read_bytes() == reference.read_bytes()
    assert (folder / PER_QUESTION_FILE).read_text(encoding="utf-8") == result.table.to_csv(index=False)
    assert (folder / MEANS_FILE).read_text(encoding="utf-8") == result.means_frame().to_csv()
    config = yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["retriever"]["k1"] == 1.0 and config["corpus"]["name"] == result.collection.name
    record = JobRecord.load(folder)
    expected = redacted_frame(result.table).to_json(orient="split", index=False, date_format="iso")
    assert (folder / PER_QUESTION_TABLE).read_text(encoding="utf-8") == expected  # MLflow's table format
    assert list(read_table(folder / PER_QUESTION_TABLE, record.table_dtypes).columns) == list(result.table.columns)
    assert {RUN_FILE, PER_QUESTION_FILE, CONFIG_FILE, MEANS_FILE} <= set(record.files)
    assert {RUN_FILE, PER_QUESTION_FILE, CONFIG_FILE, MEANS_FILE, PER_QUESTION_TABLE} <= {
        f.path for f in client.list_artifacts(record.run_id)}


def test_jobs_in_worker_processes_are_logged_before_they_return(sweep):
    """joblib, submitit, Ray: nothing calls the worker back at the sweep's end, so nothing waits."""
    job, client, sweep_dir = sweep
    outcome = job(0, launcher="joblib")
    assert outcome.run_id is not None and logged_with_plots(client, sweep_dir / "0")


def test_the_per_question_csv_holds_the_table_with_its_secrets_masked(tmp_path):
    """A token pasted into a question by mistake is masked in the per-question CSV (logged with the run, read back
    by the sweep's end) as in MLflow's table: both are written from the one masked copy of the table."""
    from types import SimpleNamespace

    from pipeline.job.files import files_beside
    from pipeline.tracking.destination import Destination

    frame = pd.DataFrame({"query_id": ["q1", "q2"], "question": ["reset my password", "why is api_key=abc123 leaked"],
                          "ndcg@10": [0.5, 1.0]})
    safe, table, dtypes = Destination.table_files(frame)
    result = SimpleNamespace(table=frame, run=None, system="s", means_frame=pd.DataFrame, chunked=None)
    csv = files_beside(result, safe, {}, tmp_path)[tmp_path / PER_QUESTION_FILE]().decode("utf-8")
    assert "abc123" not in csv and "abc123" not in table().decode("utf-8")
    assert "reset my password" in csv and csv.count("\n") == 3 and dtypes["ndcg@10"] == "float64"


def test_a_job_run_shows_first_its_primary_metric_with_its_interval_and_what_its_retriever_resolved(tmp_path,
                                                                                                    empty_store):
    """The run's description (its page shows it first) and the saved views' column hold the primary metric rounded,
    with its interval, as the run's metrics hold it; LSA's dims (null: follow the corpus) is tagged with the value it
    took; the per-question table starts with what a reader looks for."""
    from mlflow import MlflowClient

    from tests.pipeline.helpers import log_run

    (tmp_path / "mlflow.db").write_bytes(empty_store.read_bytes())
    run_id = log_run(tmp_path, "retriever=lsa", "metrics.bootstrap.resamples=50")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(run_id)
    key = run.data.params["metrics.primary"].replace("@", "_at_")
    name = run.data.params["metrics.primary"]
    mean, low, high = (run.data.metrics[key + suffix] for suffix in ("", "_ci_lower", "_ci_upper"))
    shown = f"{mean:.3f} [{low:.3f}, {high:.3f}]"
    assert run.data.tags[f"rankscope.{key}"] == shown
    assert run.data.tags["mlflow.note.content"].startswith(f"**LSA** on helpdesk (test), 14 questions: **{name} "
                                                           f"{shown}** (95% bootstrap interval")
    assert run.data.params["retriever.dims"] == "null" and run.data.tags["rankscope.resolved"] == "retriever.dims=6"
    local = client.download_artifacts(run_id, PER_QUESTION_TABLE, str(tmp_path))
    columns = list(read_table(Path(local)).columns)
    assert columns[:5] == ["query_id", name, "first_relevant_rank", "failure_classes", "question"]
