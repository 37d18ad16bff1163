"""A run's store is opened, and its record logged, by a second process: the same run as logging in-process, and the
job logs by itself when that process is gone. A sweep's driver makes its store calls through that process too."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from metrics.errors import InputError
from pipeline.common.forking import second_core
from pipeline.common.names import PER_QUESTION_TABLE, TAG_CONFIG_DIGEST, TAG_KIND
from pipeline.tracking import background
from pipeline.tracking.destination import Destination
from pipeline.tracking.records import JobRecord, save_table
from pipeline.tracking.runs import Tracker
from pipeline.tracking.store import Store, client_for, open_ahead
from tests.pipeline.helpers import cli_env, job_runs, run_pipeline

pytestmark = pytest.mark.skipif(not second_core(),
                                reason="the store process runs only where it can fork onto a second core")


@pytest.fixture
def store_process(monkeypatch):
    """A store process started by this test (as ``python -m pipeline`` starts one), stopped afterwards."""
    monkeypatch.delenv("RANKSCOPE_STORE_PROCESS", raising=False)
    monkeypatch.setattr(background, "_CURRENT", None)
    process = background.start()
    assert process is not None
    yield process
    process.stop(wait=True)


def saved_record(folder, destination: Destination) -> JobRecord:
    folder.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame({"query_id": ["q1", "q2"], "ndcg@5": [1.0, 0.5]})
    (folder / "run.trec").write_text("q1 Q0 d1 1 1.0 BM25\n")
    record = destination.record("BM25 · help-desk", {TAG_KIND: "run", TAG_CONFIG_DIGEST: "c1"}, 1_700_000_000_000,
                                params={"retriever.k1": 1.2}, metrics={"ndcg_at_5": 0.75}, table=PER_QUESTION_TABLE,
                                table_dtypes=save_table(table, folder / PER_QUESTION_TABLE), files=["run.trec"])
    record.save(folder)
    return record


def test_the_store_process_opens_the_store_and_logs_the_saved_record(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # a new store: the store process creates it
    destination = Destination.open(uri, tmp_path, "rankscope")
    assert destination.remote is store_process and destination.client is None
    record = saved_record(tmp_path / "job", destination)
    published = destination.publish(record, tmp_path / "job")
    assert destination.client is None  # this process never opened the store: the other one logged
    assert record.run_id == published.run_id == JobRecord.load(tmp_path / "job").run_id and not published.reused
    run = MlflowClient(uri).get_run(published.run_id)
    assert run.info.status == "FINISHED" and run.info.experiment_id == destination.experiment_id
    assert run.data.metrics == {"ndcg_at_5": 0.75} and run.data.params == {"retriever.k1": "1.2"}
    assert {f.path for f in MlflowClient(uri).list_artifacts(published.run_id)} == {PER_QUESTION_TABLE, "run.trec"}
    assert destination.publish(record, tmp_path / "job").reused  # logged once, however often it is published


def test_a_store_that_cannot_be_opened_is_the_same_one_line_error(tmp_path, store_process):
    (tmp_path / "a-file").write_text("")
    uri = f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"  # its folder cannot be made
    with pytest.raises(InputError, match=r"^cannot open the MLflow tracking store sqlite:///.*a-file"):
        Destination.open(uri, tmp_path, "rankscope")
    assert background.current() is store_process  # still there for the next request


def test_a_store_opened_ahead_is_the_store_open_then_finds(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    open_ahead(uri, "rankscope")  # the request is sent: this process goes on without its answer
    assert store_process.unanswered and not store_process.opening
    store = Store.open(uri, "rankscope")  # takes the answer: the store is not opened a second time
    assert not store_process.unanswered and not store_process.opening
    assert isinstance(store.client, background.RemoteClient) and store_process.serves(uri)
    assert MlflowClient(uri).get_experiment_by_name("rankscope").experiment_id == store.experiment_id


def test_a_store_opened_ahead_that_cannot_be_opened_is_the_same_one_line_error(tmp_path, store_process):
    (tmp_path / "a-file").write_text("")
    uri = f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"
    open_ahead(uri, "rankscope")
    with pytest.raises(InputError, match=r"^cannot open the MLflow tracking store sqlite:///.*a-file"):
        Store.open(uri, "rankscope")
    assert background.current() is store_process and not store_process.opening


def test_a_store_opened_ahead_by_a_process_that_is_gone_is_opened_here(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    os.kill(store_process.pid, signal.SIGKILL)
    os.waitpid(store_process.pid, 0)
    open_ahead(uri, "rankscope")  # sent to a dead process, or refused: either way this process opens it
    store = Store.open(uri, "rankscope")
    assert not isinstance(store.client, background.RemoteClient)
    assert MlflowClient(uri).get_experiment_by_name("rankscope").experiment_id == store.experiment_id


def test_when_the_store_process_is_gone_the_job_logs_by_itself(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    destination = Destination.open(uri, tmp_path, "rankscope")
    os.kill(store_process.pid, signal.SIGKILL)
    os.waitpid(store_process.pid, 0)
    record = saved_record(tmp_path / "job", destination)
    published = destination.publish(record, tmp_path / "job")
    assert destination.remote is None and destination.client is not None
    assert MlflowClient(uri).get_run(published.run_id).info.status == "FINISHED"
    assert JobRecord.load(tmp_path / "job").run_id == published.run_id


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_single_run_logs_the_same_run_with_or_without_the_store_process(tmp_path):
    runs = {}
    for mode in ("1", "0"):
        folder = tmp_path / f"store-process-{mode}"
        folder.mkdir()
        done = run_pipeline(folder, "quiet=true", env={"RANKSCOPE_STORE_PROCESS": mode})
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        (runs[mode],) = job_runs(folder)
        assert runs[mode].info.run_id in done.stdout
    with_process, in_process = runs["1"], runs["0"]
    def measured(run) -> dict[str, float]:  # stage timings differ from run to run
        return {k: v for k, v in run.data.metrics.items() if not k.startswith("system/time_")}

    assert measured(with_process) == measured(in_process) and len(measured(in_process)) > 40
    assert with_process.data.params == in_process.data.params
    ignored = ("mlflow.", "rankscope.output_dir", "rankscope.record")
    assert ({k: v for k, v in with_process.data.tags.items() if not k.startswith(ignored)}
            == {k: v for k, v in in_process.data.tags.items() if not k.startswith(ignored)})


def test_a_sweeps_store_calls_are_made_by_the_store_process(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = Store.open(uri, "rankscope")
    assert isinstance(store.client, background.RemoteClient) and store_process.serves(uri)
    parent = Tracker.start(store.client, store.experiment_id, "sweep", {TAG_KIND: "sweep"})
    parent.log_metrics({"jobs/finished": 4.0})
    parent.finish()
    theirs = MlflowClient(uri).get_run(parent.run_id)  # what an independent client reads
    assert theirs.info.status == "FINISHED" and theirs.data.metrics == {"jobs/finished": 4.0}
    (found,) = client_for(uri).search_runs([store.experiment_id])
    assert found.info.run_id == parent.run_id and found.data.tags[TAG_KIND] == "sweep"
    with pytest.raises(MlflowException) as refused:  # MLflow's own exception, as an in-process client raises it
        store.client.get_run("0" * 32)
    assert refused.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    sweep = type("Handoff", (), {"experiment_id": store.experiment_id, "parent_run_id": parent.run_id})()
    job = Destination.open(uri, tmp_path, "rankscope", sweep)
    assert job.remote is store_process and job.client is None  # a job of the sweep logs through it as well


def test_a_sweeps_job_hands_its_record_over_and_goes_on(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = Store.open(uri, "rankscope")
    sweep = type("Handoff", (), {"experiment_id": store.experiment_id, "parent_run_id": None})()
    refused: list[str] = []
    for name in ("job-0", "job-1"):
        destination = Destination.open(uri, tmp_path, "rankscope", sweep)
        record = saved_record(tmp_path / name, destination)
        assert destination.publish_later(record, tmp_path / name, refused.append)
    os.kill(store_process.pid, signal.SIGKILL)  # whatever it had not logged yet is logged from here
    os.waitpid(store_process.pid, 0)
    background.settle()
    runs = [JobRecord.load(tmp_path / name).run_id for name in ("job-0", "job-1")]
    assert all(runs) and refused == [] and record.run_id == runs[1]
    assert {MlflowClient(uri).get_run(r).info.status for r in runs} == {"FINISHED"}
    assert len(MlflowClient(uri).search_runs([store.experiment_id])) == 2  # each logged once


def log_pid_as_a_tag(client, run_id: str, key: str) -> None:
    """What run_later hands over (a module-level function): a tag saying which process made it."""
    client.set_tag(run_id, key, str(os.getpid()))


def test_a_call_run_later_is_made_by_the_store_process_while_this_one_goes_on(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = Store.open(uri, "rankscope")
    parent = Tracker.start(store.client, store.experiment_id, "sweep", {TAG_KIND: "sweep"})
    parent.run_later(log_pid_as_a_tag, "made_by")
    assert store_process.unanswered  # sent, its answer not read yet
    parent.wait_later()
    assert not store_process.unanswered
    assert MlflowClient(uri).get_run(parent.run_id).data.tags["made_by"] == str(store_process.pid)


def test_what_a_call_run_later_raises_is_raised_by_wait_later_not_by_the_next_call(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = Store.open(uri, "rankscope")
    parent = Tracker.start(store.client, store.experiment_id, "sweep", {TAG_KIND: "sweep"})
    gone = Tracker(store.client, "0" * 32)
    gone.run_later(log_pid_as_a_tag, "made_by")  # no such run: MLflow refuses
    parent.log_metrics({"jobs/finished": 4.0})  # an ordinary call meanwhile answers as usual
    with pytest.raises(MlflowException) as refused:
        gone.wait_later()
    assert refused.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    gone.wait_later()  # raised once


def test_a_call_run_later_when_the_store_process_dies_is_made_here(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = Store.open(uri, "rankscope")
    parent = Tracker.start(store.client, store.experiment_id, "sweep", {TAG_KIND: "sweep"})
    os.kill(store_process.pid, signal.SIGKILL)
    os.waitpid(store_process.pid, 0)
    parent.run_later(log_pid_as_a_tag, "made_by")
    parent.wait_later()
    assert MlflowClient(uri).get_run(parent.run_id).data.tags["made_by"] == str(os.getpid())
    in_process = Tracker(MlflowClient(uri), parent.run_id)  # a client of its own: made at once
    in_process.run_later(log_pid_as_a_tag, "again")
    assert MlflowClient(uri).get_run(parent.run_id).data.tags["again"] == str(os.getpid())


def test_once_the_store_process_is_gone_the_calls_are_made_here(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = Store.open(uri, "rankscope")
    os.kill(store_process.pid, signal.SIGKILL)
    os.waitpid(store_process.pid, 0)
    parent = Tracker.start(store.client, store.experiment_id, "sweep", {TAG_KIND: "sweep"})
    assert MlflowClient(uri).get_run(parent.run_id).data.tags[TAG_KIND] == "sweep"
    assert not store_process.serves(uri) and not isinstance(client_for(uri), background.RemoteClient)


def test_a_process_forked_from_the_command_leaves_the_store_process_alone(tmp_path, store_process):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    Store.open(uri, "rankscope")
    pid = os.fork()
    if pid == 0:  # e.g. a plot drawer: the pipe is not its to use
        os._exit(0 if not store_process.usable() and not isinstance(client_for(uri), background.RemoteClient)
                 else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert store_process.serves(uri)


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_sweeps_driver_never_imports_mlflows_sqlalchemy_store(tmp_path):
    """Opening it costs about 1.9 s; the store process imported it while the driver composed the jobs."""
    probe = ("import atexit, os, runpy, sys; me = os.getpid(); "
             "atexit.register(lambda: os.getpid() == me and print('STORE-IMPORTED', "
             "'mlflow.store.tracking.sqlalchemy_store' in sys.modules, file=sys.stderr)); "
             "sys.argv = ['pipeline', '-m', 'retriever.k1=0.9,1.2', 'quiet=true']; "
             "runpy.run_module('pipeline', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=cli_env(tmp_path), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "STORE-IMPORTED False" in done.stderr
    assert len(job_runs(tmp_path)) == 2


@pytest.mark.slow
def test_ctrl_c_from_the_terminal_while_a_single_run_logs_leaves_nothing_running(tmp_path):
    """The terminal sends Ctrl-C to both processes: the job stops, the store process finishes its write and closes a
    half-logged run FAILED; the command ends in one line, 130, and the results stay saved (logged, or pending)."""
    process = subprocess.Popen([sys.executable, "-m", "pipeline", "quiet=true"], cwd=tmp_path, env=cli_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob("outputs/*/*/record.json")) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGINT)  # as a terminal does: the whole foreground group
    _, err = process.communicate(timeout=300)
    if process.returncode == 0:
        pytest.skip("the run was logged before the Ctrl-C arrived")
    assert process.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert "rankscope: stopped by Ctrl-C" in err
    (folder,) = [p.parent for p in tmp_path.glob("outputs/*/*/record.json")]
    record = JobRecord.load(folder)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    assert all(r.info.status != "RUNNING" for r in runs)
    if record.pending:
        assert "log them with: " in err and "pipeline.sync" in err
    else:
        assert client.get_run(record.run_id).info.status == "FINISHED" and "was logged" in err


def test_a_store_nobody_listens_on_is_refused_without_waiting_for_the_store_process(tmp_path, store_process):
    """The store process answers once it has imported MLflow's store (seconds on a busy machine): a closed port is
    said before, by this process (here the store process is kept from answering at all)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    refused: list[BaseException] = []

    def open_store() -> None:
        try:
            Destination.open(f"http://127.0.0.1:{port}", tmp_path, "rankscope")
        except BaseException as exc:
            refused.append(exc)

    os.kill(store_process.pid, signal.SIGSTOP)
    try:
        opening = threading.Thread(target=open_store, daemon=True)
        opening.start()
        opening.join(timeout=60)
        assert not opening.is_alive(), "waited for the store process"
    finally:
        os.kill(store_process.pid, signal.SIGCONT)
    (error,) = refused
    assert isinstance(error, InputError)
    assert str(error) == f"cannot open the MLflow tracking store http://127.0.0.1:{port}: Connection refused"


STOPPED_WHILE_THE_COPY_WORKS = textwrap.dedent("""
    import os, signal, sys, threading, time
    from pipeline.common import interrupts
    from pipeline.tracking import background
    from pipeline.tracking.store import Store

    interrupts.install()
    process = background.start()
    store = Store.open(sys.argv[1], "rankscope")
    print("opened", flush=True)
    os.kill(process.pid, signal.SIGSTOP)  # a store process that does not answer (waiting out MLflow's retries)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), getattr(signal, sys.argv[2])))
    timer.daemon = True
    timer.start()
    try:
        store.client.search_experiments()  # made by the store process: no answer comes
    except KeyboardInterrupt as stop:
        print("stopped", type(stop).__name__, flush=True)
    print("store process ended:", background.current().connection is None, flush=True)
    try:
        os.kill(process.pid, signal.SIGCONT)
    except ProcessLookupError:
        print("and reaped", flush=True)
""")


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_stop_while_the_store_process_does_not_answer_acts_at_once_and_ends_it(tmp_path, name):
    """Before, the stop waited for the call's answer: the length of MLflow's retries, minutes per request."""
    process = subprocess.Popen([sys.executable, "-c", STOPPED_WHILE_THE_COPY_WORKS,
                                f"sqlite:///{tmp_path / 'mlflow.db'}", name], cwd=tmp_path, env=cli_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # a store process left stopped, were the test to fail
    assert process.returncode == 0, err[-3000:]
    stop = "Terminated" if name == "SIGTERM" else "KeyboardInterrupt"
    assert out.split("\n")[:4] == ["opened", f"stopped {stop}", "store process ended: True", "and reaped"], out
