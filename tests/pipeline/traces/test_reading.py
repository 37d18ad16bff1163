"""Reading a traced application's traces (pipeline.tracking.traces), on the real application's store: a page's spans
read in one batch are the spans ``search_traces`` gives, and a reading shared with the store process (the copy that
``python -m pipeline`` forks) gives what reading in one process gives, each process reading part of it."""

from __future__ import annotations

import os
import signal
import time

import pytest
from mlflow import MlflowClient

from metrics.errors import InputError
from pipeline.common.forking import second_core
from pipeline.traces.calls import Reading, read_call
from pipeline.tracking import background
from pipeline.tracking.store import Store
from pipeline.tracking.traces import TraceQuery, _pages, _with_spans, read_calls, read_shared

TESTS = os.getpid()  # the process running the tests (the store process, forked from it, has another id)


def where_read(call, reading):
    """A trace's ranking and the process that read it (module-level: the store process gets it by name). This
    process reads slowly, so that the copy, however loaded the machine, answers a piece before this one has read
    them all (it would then read the copy's pieces too, and the test could not tell who read what)."""
    if os.getpid() == TESTS:
        time.sleep(0.05)
    return call.trace_id, os.getpid(), read_call(call, reading)


@pytest.fixture
def store_process(monkeypatch, folder):
    """A store process serving the traced store, as ``python -m pipeline`` starts one for a run logged there."""
    if not second_core():
        pytest.skip("the store process runs only where it can fork onto a second core")
    monkeypatch.delenv("RANKSCOPE_STORE_PROCESS", raising=False)
    monkeypatch.setattr(background, "_CURRENT", None)
    process = background.start()
    assert process is not None
    Store.open(uri_of(folder), "rankscope")
    yield process
    process.stop(wait=True)


def uri_of(folder) -> str:
    return f"sqlite:///{folder / 'mlflow.db'}"


def test_a_pages_spans_read_in_one_batch_are_the_spans_search_traces_gives(folder):
    uri = uri_of(folder)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("rag-app").experiment_id
    searched = {t.info.trace_id: t for t in client.search_traces(locations=[experiment], max_results=100)}
    (page,) = list(_pages(client, TraceQuery(uri, "rag-app"), experiment, ""))
    assert all(not t.data.spans for t in page)  # the page holds the traces' metadata only
    read = _with_spans(uri, page)
    assert [t.info.trace_id for t in read] == [t.info.trace_id for t in page] and len(read) == len(searched) == 28
    for trace in read:
        assert [s.to_dict() for s in trace.data.spans] == [s.to_dict() for s in searched[trace.info.trace_id]
                                                           .data.spans]
        assert trace.info.tags == searched[trace.info.trace_id].info.tags


def test_a_reading_shared_with_the_store_process_gives_what_one_process_reads(folder, store_process):
    query, reading = TraceQuery(uri_of(folder), "rag-app"), Reading()
    alone = [where_read(call, reading) for call in read_calls(query)]
    shared = read_shared(query, None, None, where_read, reading, small=5, shares=6)
    assert [(trace, answer) for trace, _, answer in shared] == [(trace, answer) for trace, _, answer in alone]
    assert len(shared) == 28
    assert {pid for _, pid, _ in shared} == {os.getpid(), store_process.pid}  # each read part of it


def test_a_small_reading_is_made_by_the_store_process_alone(folder, store_process):
    query, reading = TraceQuery(uri_of(folder), "rag-app", tags={"app_version": "v1"}), Reading()
    shared = read_shared(query, None, None, where_read, reading)
    assert [trace for trace, _, _ in shared] == [call.trace_id for call in read_calls(query)]
    assert {pid for _, pid, _ in shared} == {store_process.pid}
    named = [trace for trace, _, _ in shared][::3]  # a sample: the traces named
    assert [trace for trace, _, _ in read_shared(query, None, named, where_read, reading, small=2)] == named


def test_what_the_store_process_refuses_is_the_same_one_line_error(folder, store_process):
    uri = uri_of(folder)
    with pytest.raises(InputError, match=r"^experiment 'rag-ap' does not exist in sqlite:///"):
        read_shared(TraceQuery(uri, "rag-ap"), None, None, where_read, Reading())
    with pytest.raises(InputError, match=r"^MLflow refused the trace filter \"tag.app_version ~ 'v1'\""):
        read_shared(TraceQuery(uri, "rag-app", filter="tag.app_version ~ 'v1'"), None, None, where_read, Reading())
    assert background.current() is store_process and store_process.usable()  # still there for the job


def test_when_the_store_process_is_gone_this_process_reads_alone(folder, store_process):
    os.kill(store_process.pid, signal.SIGKILL)
    os.waitpid(store_process.pid, 0)
    query, reading = TraceQuery(uri_of(folder), "rag-app"), Reading()
    shared = read_shared(query, None, None, where_read, reading, small=5, shares=6)
    assert [trace for trace, _, _ in shared] == [call.trace_id for call in read_calls(query)]
    assert {pid for _, pid, _ in shared} == {os.getpid()}
