"""A job's record: written before logging, logged exactly once however often it is published or synced."""

from __future__ import annotations

import json
import pickle
import shutil
import signal

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import PER_QUESTION_TABLE, TAG_CODE_VERSION, TAG_CONFIG_DIGEST, TAG_CORPUS_DIGEST, TAG_KIND
from pipeline.common.redact import redact_text
from pipeline.config.plan import config_digest
from pipeline.sync import main as sync_main
from pipeline.tracking.records import JobRecord, pending_records, publish, read_table, save_table, table_file
from pipeline.tracking.runs import Tracker, redacted_frame
from pipeline.tracking.store import Store, StoreUnavailable


@pytest.fixture
def store(tmp_path, empty_store):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, experiment_id = Store.open(uri, "rankscope").pair()
    return tmp_path, uri, client, experiment_id


def make_record(folder, uri, experiment_id, parent=None, digest="c1", name="BM25") -> JobRecord:
    folder.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame({"query_id": ["q1", "q2"], "question": ["a", "b"], "ndcg@5": [1.0, 0.5],
                          "first_relevant_rank": pd.array([1, None], dtype="Int64")})
    (folder / "run.trec").write_text("q1 Q0 d1 1 1.0 BM25\n")
    record = JobRecord.new(run_name=name, experiment_id=experiment_id, parent_run_id=parent, tracking_uri=uri,
                           tags={TAG_KIND: "job" if parent else "run", TAG_CONFIG_DIGEST: digest,
                                 TAG_CORPUS_DIGEST: "corpus", TAG_CODE_VERSION: "v1"},
                           params={"retriever.k1": 1.2, "metrics.k": [3, 5],
                                   "tracking.uri": "http://alice:s3cret@host:5000"},
                           metrics={"ndcg_at_5": 0.75}, table=PER_QUESTION_TABLE,
                           table_dtypes=save_table(table, folder / PER_QUESTION_TABLE), files=["run.trec"])
    record.save(folder)
    return record


def active(client, experiment_id) -> list:
    return client.search_runs([experiment_id])


def test_the_record_on_disk_holds_no_secret_and_reads_back_exactly(store):
    folder, uri, _, experiment_id = store
    record = make_record(folder / "job", uri, experiment_id)
    text = (folder / "job" / "record.json").read_text()
    assert "s3cret" not in text and json.loads(text)["params"]["metrics.k"] == [3, 5]
    assert JobRecord.load(folder / "job") == record and record.pending
    table = read_table(folder / "job" / PER_QUESTION_TABLE, record.table_dtypes)
    assert table["first_relevant_rank"].tolist()[0] == 1 and pd.isna(table["first_relevant_rank"][1])


def test_publishing_twice_logs_one_run(store):
    folder, uri, client, experiment_id = store
    record = make_record(folder / "job", uri, experiment_id)
    first = publish(client, record, folder / "job")
    again = JobRecord.load(folder / "job")
    assert again.run_id == first.run_id and not first.reused
    again.run_id = None  # as if the process died after logging, before marking the record
    assert publish(client, again, folder / "job").run_id == first.run_id
    (run,) = active(client, experiment_id)
    assert run.info.status == "FINISHED" and run.data.metrics == {"ndcg_at_5": 0.75}
    assert run.data.params["retriever.k1"] == "1.2" and "s3cret" not in run.data.params["tracking.uri"]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"run.trec", PER_QUESTION_TABLE}


def test_a_half_logged_attempt_is_replaced_and_kept_in_the_trash(store):
    folder, uri, client, experiment_id = store
    record = make_record(folder / "job", uri, experiment_id)
    half = Tracker.start(client, experiment_id, "BM25", {"rankscope.record": record.record_id})  # died mid-logging
    published = publish(client, record, folder / "job")
    assert [r.info.run_id for r in active(client, experiment_id)] == [published.run_id]
    trashed = client.get_run(half.run_id)
    assert trashed.info.lifecycle_stage == "deleted" and trashed.info.status == "FAILED"
    assert trashed.data.tags["rankscope.superseded_by"] == published.run_id


def test_under_a_sweep_the_same_config_corpus_and_code_is_logged_once(store):
    folder, uri, client, experiment_id = store
    parent = Tracker.start(client, experiment_id, "sweep", {TAG_KIND: "sweep"}).run_id
    first = publish(client, make_record(folder / "a", uri, experiment_id, parent), folder / "a")
    second = publish(client, make_record(folder / "b", uri, experiment_id, parent), folder / "b")
    assert second.reused and second.run_id == first.run_id  # another record of the same result
    other = publish(client, make_record(folder / "c", uri, experiment_id, parent, digest="c2"), folder / "c")
    assert not other.reused and len(active(client, experiment_id)) == 3  # parent + two configs


def test_an_unreachable_store_leaves_the_record_pending(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's default retries for minutes
    folder, uri, _, experiment_id = store
    record = make_record(folder / "job", uri, experiment_id)
    with pytest.raises(StoreUnavailable, match="Connection refused"):
        publish(MlflowClient("http://127.0.0.1:9"), record, folder / "job")  # the discard port: refused
    assert JobRecord.load(folder / "job").pending and pending_records(folder) == [(folder / "job", record)]


def test_sync_logs_a_single_runs_folder_once(store, capsys):
    folder, uri, client, experiment_id = store
    make_record(folder / "outputs" / "run", uri, experiment_id)
    assert sync_main([str(folder / "outputs" / "run")]) == 0
    assert "BM25 logged as run" in capsys.readouterr().out
    assert sync_main([str(folder / "outputs" / "run")]) == 0
    assert len(active(client, experiment_id)) == 1
    assert sync_main([str(folder / "nothing-here")]) == 2


def test_the_config_digest_ignores_where_results_go():
    base = {"retriever": {"k1": 1.2}, "corpus": {"name": "x"}, "tracking": {"uri": "a"}, "study": "s"}
    moved = {**base, "tracking": {"uri": "b"}, "study": "t", "tags": {"schedule": "nightly"}, "gate": {"x": 1}}
    assert config_digest(base) == config_digest(moved)
    assert config_digest(base) != config_digest({**base, "retriever": {"k1": 0.9}})


def test_a_ctrl_c_during_a_store_write_acts_once_the_write_is_whole(store, monkeypatch):
    """Every write of a run (a job's or a sweep's parent's) is whole: cut inside SQLite's transaction it would leave
    the store locked by the process itself, which could then close none of its runs."""
    _, _, client, experiment_id = store
    tracker = Tracker.start(client, experiment_id, "parent", {})
    write = client.log_batch

    def interrupted(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # Ctrl-C arrives as the write begins
        return write(*args, **kwargs)

    monkeypatch.setattr(client, "log_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tracker.log_metrics({"jobs/finished": 3.0})
    monkeypatch.setattr(client, "log_batch", write)
    assert client.get_run(tracker.run_id).data.metrics == {"jobs/finished": 3.0}
    tracker.finish()
    assert client.get_run(tracker.run_id).info.status == "FINISHED"


def reference_redacted(frame: pd.DataFrame) -> pd.DataFrame:
    """redacted_frame as it was: redact_text on each text cell, one at a time."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = [redact_text(v) if isinstance(v, str) else v for v in safe[column]]
    return safe


def test_the_saved_table_is_byte_for_byte_what_redacting_cell_by_cell_saved(tmp_path):
    """Secrets in any cell of any kind of text column (object, str, string, category; missing values of each
    kind), next to cells that need nothing, text columns with nothing to mask (their type changes all the same),
    and columns redaction never reads."""
    cells = ["plain", "api_key=abc123", None, "tok", "en=abc123", "http://u:pw@h/x", "high through",
             "line\npassword: hunter2", "", "ghp_0123456789abcdefghijABCDEFGHIJ"]
    frame = pd.DataFrame({
        "object": pd.Series(cells, dtype=object),
        "str": pd.Series(cells, dtype="str"),
        "string": pd.Series(cells, dtype="string"),
        "category": pd.Series(cells, dtype="category"),
        "mixed": pd.Series([1, "token=abc123", 2.5, None, np.nan, True, "x", pd.NA, "y", "z"], dtype=object),
        "plain object": pd.Series(["a", "b"] * 5, dtype=object),  # nothing to mask: still rebuilt, as str
        "plain category": pd.Series(["a", "b"] * 5, dtype="category"),
        "plain str": pd.Series(["a", None] * 5, dtype="str"),  # nothing to mask: kept as it is, as a rebuild types it
        "missing str": pd.Series([None] * 10, dtype="str"),  # no text at all: rebuilt (as numbers), as always
        "number": np.arange(10.0),
        "rank": pd.array([1, None] * 5, dtype="Int64"),
    })
    new, old = redacted_frame(frame), reference_redacted(frame)
    assert (new.dtypes == old.dtypes).all() and new.equals(old)
    assert "hunter2" not in new.to_json() and "api_key=***" in new.to_json() and "token=***" in new.to_json()
    dtypes = save_table(frame, tmp_path / "new.json")
    old.to_json(tmp_path / "old.json", orient="split", index=False, date_format="iso")
    assert (tmp_path / "new.json").read_bytes() == (tmp_path / "old.json").read_bytes()
    assert dtypes == {str(k): str(v) for k, v in old.dtypes.items()}
    maker, types = table_file(frame)  # as a job hands it to the process drawing its plots: pickled
    assert pickle.loads(pickle.dumps(maker))() == (tmp_path / "old.json").read_bytes() and types == dtypes
