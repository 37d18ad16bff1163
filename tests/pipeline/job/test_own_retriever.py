"""Your own retriever, measured for real: tantivy (a search engine installed from the package index) three ways.

(a) ``retriever=custom``: a Python class wrapping tantivy (``tests.pipeline.config.engines.TantivySearch``);
(b) ``retriever=http``: a real HTTP server on 127.0.0.1 answering with tantivy's rankings;
(c) ``retriever=run_file``: tantivy's own TREC run, written by the test.

The three jobs must agree to the last digit: every mean in MLflow, every per-question row, the ranking written.
Then the bad answers a service can give, each through ``python -m pipeline`` as a user runs it: one line, exit 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import (
    CONFIG_FILE,
    PER_QUESTION_FILE,
    RECORD_FILE,
    RESOURCE_PREFIXES,
    RUN_FILE,
    TAG_OUTPUT_DIR,
)
from pipeline.data import helpdesk, load_beir
from tests.pipeline.helpers import job_runs, log_run, run_pipeline
from tests.retrievers.search_server import SearchServer, closed_port

tantivy = pytest.importorskip("tantivy")

from tests.pipeline.config.engines import TantivySearch  # noqa: E402

TANTIVY = "tests.pipeline.config.engines.TantivySearch"
DEPTH = 100  # conf/config.yaml's depth: what a job asks every engine for
VARIES = RESOURCE_PREFIXES  # timings and reuse counts; nothing else may differ


def tantivy_engine(collection) -> TantivySearch:
    engine = TantivySearch()
    engine.index(list(collection.doc_ids), list(collection.doc_texts))
    return engine


def write_run(engine: TantivySearch, collection, path: Path) -> Path:
    """tantivy's rankings of every question as a TREC run, scores written exactly (repr)."""
    answers = engine.search(list(collection.query_texts), DEPTH)
    lines = [f"{qid} Q0 {doc} {rank} {score!r} tantivy\n"
             for qid, hits in zip(collection.query_ids, answers) for rank, (doc, score) in enumerate(hits, 1)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def job(folder: Path, run_id: str) -> dict:
    """What a job left: its MLflow metrics (timings aside), its per-question table and its ranking."""
    run = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").get_run(run_id)
    out = Path(run.data.tags[TAG_OUTPUT_DIR])
    ranking = [line.split()[:5] for line in (out / RUN_FILE).read_text(encoding="utf-8").splitlines()]
    return {"metrics": {k: v for k, v in run.data.metrics.items() if not k.startswith(VARIES)},
            "table": pd.read_csv(out / PER_QUESTION_FILE, dtype={"query_id": str}), "ranking": ranking,
            "run": run, "out": out}


def three_routes(folder: Path, collection, corpus: list[str]) -> dict[str, dict]:
    """The same tantivy rankings as (a) a Python class, (b) an HTTP service, (c) a run file."""
    engine = tantivy_engine(collection)
    run_file = write_run(engine, collection, folder / "tantivy.trec")
    with SearchServer(engine) as server:
        ids = {"custom": log_run(folder, *corpus, "retriever=custom", f"retriever._target_={TANTIVY}"),
               "http": log_run(folder, *corpus, "retriever=http", f"retriever.url={server.url('/search')}"),
               "run_file": log_run(folder, *corpus, "retriever=run_file", f"retriever.path={run_file}")}
        assert len(server.requests) == len(collection.query_ids)  # one request per question
    return {route: job(folder, run_id) for route, run_id in ids.items()}


def assert_same_figures(found: dict[str, dict], questions: int) -> None:
    reference = found["run_file"]
    metrics = reference["metrics"]
    assert metrics["system/questions_evaluated"] == questions and metrics["ndcg_at_10"] > 0
    for route in ("custom", "http"):
        assert found[route]["metrics"] == reference["metrics"], route
        pd.testing.assert_frame_equal(found[route]["table"], reference["table"])
        assert found[route]["ranking"] == reference["ranking"], route
        assert found[route]["run"].info.status == "FINISHED"


@pytest.fixture
def folder(tmp_path, empty_store) -> Path:
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    return tmp_path


def test_tantivy_as_a_class_as_a_service_and_as_a_run_file_scores_the_same_on_the_help_desk(folder):
    collection = helpdesk()
    found = three_routes(folder, collection, [])
    assert_same_figures(found, len(collection.query_ids))
    # tantivy ties invoice1 and pwd2 for q02 and lists invoice1 first; scored in trec_eval's order, pwd2 first, and
    # written one float32 unit apart so that trec_eval reads that order back (metrics.trec)
    q02 = [row for row in found["custom"]["ranking"] if row[0] == "q02"][:2]
    first, second = (np.float32(float(row[4])) for row in q02)
    assert [doc for _, _, doc, _, _ in q02] == ["pwd2", "invoice1"]
    assert first == np.nextafter(second, np.float32(np.inf))


@pytest.mark.slow
def test_tantivy_three_ways_scores_the_same_on_scifact(folder, scifact_folder):
    collection = load_beir(scifact_folder, "test", None, False)
    found = three_routes(folder, collection, ["corpus=scifact", f"corpus.path={scifact_folder}"])
    assert_same_figures(found, len(collection.query_ids))


def test_your_engine_is_a_fusion_component_like_any_other(folder):
    collection = helpdesk()
    run_file = write_run(tantivy_engine(collection), collection, folder / "tantivy.trec")
    fused = {"custom": log_run(folder, "retriever=rrf", "retriever@retriever.components.second=custom",
                               f"retriever.components.second._target_={TANTIVY}"),
             "run_file": log_run(folder, "retriever=rrf", "retriever@retriever.components.second=run_file",
                                 f"retriever.components.second.path={run_file}")}
    found = {route: job(folder, run_id) for route, run_id in fused.items()}
    assert found["custom"]["metrics"] == found["run_file"]["metrics"]
    assert found["custom"]["ranking"] == found["run_file"]["ranking"]
    assert found["custom"]["run"].data.params["retriever.components.second._target_"] == TANTIVY


def test_an_api_key_reaches_the_service_and_nothing_that_is_logged(folder, monkeypatch):
    secret = "Bearer 9f8e7d6c5b4a-rankscope-test-key"
    monkeypatch.setenv("RANKSCOPE_TEST_SEARCH_KEY", secret)
    engine = tantivy_engine(helpdesk())
    with SearchServer(engine, secret=secret) as server:
        run_id = log_run(folder, "retriever=http", f"retriever.url={server.url('/auth')}",
                         "+retriever.headers.Authorization=RANKSCOPE_TEST_SEARCH_KEY")
        assert {headers["Authorization"] for _, headers, _ in server.requests} == {secret}
    found = job(folder, run_id)
    run = found["run"]
    assert run.info.status == "FINISHED" and found["metrics"]["system/questions_evaluated"] == 14
    assert run.data.params["retriever.headers.Authorization"] == "RANKSCOPE_TEST_SEARCH_KEY"
    logged = json.dumps([run.data.params, run.data.tags, found["metrics"]])
    assert "9f8e7d6c5b4a" not in logged
    for name in (CONFIG_FILE, RECORD_FILE, PER_QUESTION_FILE, RUN_FILE):
        assert "9f8e7d6c5b4a" not in (found["out"] / name).read_text(encoding="utf-8"), name


# --- bad answers, as a user meets them: python -m pipeline, one line, exit status 1 ---------------------------------


@pytest.fixture(scope="module")
def service():
    with SearchServer(tantivy_engine(helpdesk()), failures=3) as server:
        yield server


# A process each (seconds of start-up): the NaN in the default suite, the other two with the slow ones; each
# message is also checked in-process by tests/retrievers/test_http.py.
@pytest.mark.parametrize("path, reason", [
    ("/nan", "hit 3: the score NaN is not a finite number: [{\"id\": "),
    pytest.param("/text", "the answer is not JSON (Expecting value: line 1 column 1 (char 0)): <html><body>Service "
                          "temporarily unavailable</body></html>", marks=pytest.mark.slow),
    pytest.param("/shape", "expected the answer to be a list of hits, got dict: {\"results\": [{\"id\": ",
                 marks=pytest.mark.slow),
])
def test_a_bad_answer_stops_the_job_in_one_line(launch_dir, service, path, reason):
    url = service.url(path)
    done = run_pipeline(launch_dir, "retriever=http", f"retriever.url={url}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"rankscope: error: {url}: question q01 ('how much does the Pro plan cost'): {reason}")
    assert len(line.split(f"{reason[:30]}", 1)[1]) < 260  # the answer's first 200 characters, not all of it
    (run,) = job_runs(launch_dir)
    assert run.info.status == "FAILED" and run.data.tags["rankscope.error"] == line.removeprefix("rankscope: error: ")


def test_an_unreachable_service_stops_the_job_in_one_line_after_the_retries(launch_dir):
    url = f"http://user:pa55word@127.0.0.1:{closed_port()}/search"
    done = run_pipeline(launch_dir, "retriever=http", f"retriever.url={url}", "retriever.retries=2",
                        "retriever.backoff=0.05")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "pa55word" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    masked = url.replace("pa55word", "***")
    assert line.startswith(f"rankscope: error: {masked}: question q01 (") and "no answer after 3 attempt(s)" in line
    assert "refused" in line.lower()


@pytest.mark.slow
def test_a_service_that_fails_then_recovers_is_measured_after_the_retries(launch_dir, service):
    done = run_pipeline(launch_dir, "retriever=http", f"retriever.url={service.url('/flaky')}",
                        "retriever.backoff=0.05", "retriever.concurrency=1")
    assert done.returncode == 0, done.stderr[-3000:]
    flaky = [path for path, _, _ in service.requests if path == "/flaky"]
    assert len(flaky) == service.failures + 14  # three 503s, then one answer per question
    (run,) = job_runs(launch_dir)
    assert run.info.status == "FINISHED" and run.data.metrics["system/questions_evaluated"] == 14


# --- a vector engine: faiss over rankscope's own embeddings -------------------------------------------------------


@pytest.mark.slow
def test_faiss_exact_search_over_the_dense_embeddings_scores_as_retriever_dense_does(folder):
    pytest.importorskip("faiss")
    pytest.importorskip("onnxruntime")
    engine = "tests.pipeline.config.faiss_engine.FaissSearch"
    dense = job(folder, log_run(folder, "retriever=dense"))
    exact = job(folder, log_run(folder, "retriever=custom", f"retriever._target_={engine}", "+retriever.kind=flat"))
    assert exact["metrics"] == dense["metrics"]
    # dense drops documents whose cosine is not above 1e-9 (faiss keeps all 28) and orders ties by id ascending
    columns = [c for c in dense["table"].columns if c not in ("top_10", "retrieved")]
    pd.testing.assert_frame_equal(exact["table"][columns], dense["table"][columns])
    approximate = job(folder, log_run(folder, "retriever=custom", f"retriever._target_={engine}",
                                      "+retriever.kind=ivf", "+retriever.nlist=4"))
    assert approximate["run"].info.status == "FINISHED"
    assert approximate["metrics"]["system/questions_evaluated"] == 14
