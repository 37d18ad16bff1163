"""A user's retriever cannot crash the job: the faults its engine can cause, each run as a user runs it.

- Rankings that are empty, for one question or for all (an engine that finds nothing; an HTTP service none of whose
  ids is in the corpus) score 0: the run finishes, and a note counts and names the questions.
- An engine that raises stops the job with one line naming the question it raised on; the run is FAILED and keeps
  the traceback in its log (``rankscope.log``), which the line names.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.common.names import JOB_LOG_FILE, NOTES_FILE, RECORD_FILE, TAG_ERROR, TAG_OUTPUT_DIR
from pipeline.data import helpdesk
from pipeline.job.recording import JobFailed
from tests.pipeline.config.engines import OtherIds
from tests.pipeline.helpers import job_runs, log_run, run_pipeline
from tests.retrievers.search_server import SearchServer

ENGINES = "tests.pipeline.config.engines"
NOTE = "system/notes_questions_without_results"


@pytest.fixture
def folder(tmp_path, empty_store) -> Path:
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    return tmp_path


def logged(folder: Path, run_id: str):
    run = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").get_run(run_id)
    return run, Path(run.data.tags[TAG_OUTPUT_DIR])


def test_an_engine_that_finds_nothing_for_any_question_gives_zeros_and_a_finished_run(folder):
    run, out = logged(folder, log_run(folder, "retriever=custom", f"retriever._target_={ENGINES}.EmptyFor"))
    metrics = run.data.metrics
    assert run.info.status == "FINISHED" and metrics["system/questions_evaluated"] == 14
    assert metrics["ndcg_at_5"] == 0 and metrics["mrr"] == 0 and metrics["hit_rate_at_3"] == 0
    assert metrics[NOTE] == 14 and metrics["system/questions_no_results"] == 14
    note = (out / NOTES_FILE).read_text(encoding="utf-8")
    assert "14 question(s) got no result and score 0 (14 with an empty answer): q01, q02" in note
    # nothing retrieved: one line for a question no qrels hold (an empty file, trec_eval and python -m metrics refuse)
    assert (out / "run.trec").read_text() == "rankscope-no-results Q0 none 1 0 custom\n"
    diagnosis = (out / "diagnosis.txt").read_text(encoding="utf-8")
    assert "empty ranking" in diagnosis and "(returned nothing 14, vocabulary gap 0," in diagnosis


def test_one_question_with_nothing_found_scores_zero_and_is_named(folder):
    # 'I lost my credentials' (q08) gets an empty answer; every other question its ranking
    run, out = logged(folder, log_run(folder, "retriever=custom", f"retriever._target_={ENGINES}.EmptyFor",
                                      "+retriever.word=credentials"))
    assert run.info.status == "FINISHED" and run.data.metrics[NOTE] == 1
    assert "1 question(s) got no result and score 0 (1 with an empty answer): q08" in run.data.tags["rankscope.notes"]
    table = json.loads((out / RECORD_FILE).read_text())["metrics"]
    assert table["ndcg_at_10"] > 0


def test_a_service_none_of_whose_ids_is_in_the_corpus_gives_zeros_and_a_finished_run(folder):
    engine = OtherIds()
    collection = helpdesk()
    engine.index(list(collection.doc_ids), list(collection.doc_texts))
    with SearchServer(engine) as server:
        run, out = logged(folder, log_run(folder, "retriever=http", f"retriever.url={server.url('/search')}"))
    metrics = run.data.metrics
    assert run.info.status == "FINISHED" and metrics["ndcg_at_10"] == 0 and metrics[NOTE] == 14
    note = (out / NOTES_FILE).read_text(encoding="utf-8")
    assert "document id(s) the corpus does not hold: doc-" in note
    assert "got no result and score 0 (14 with no id the corpus holds)" in note


def test_a_class_that_raises_on_one_question_is_one_line_naming_it_and_a_failed_run_with_the_traceback(launch_dir):
    done = run_pipeline(launch_dir, "retriever=custom", f"retriever._target_={ENGINES}.RaisesOn")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "Error executing job" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"rankscope: error: {ENGINES}.RaisesOn: search() raised on question q08 "
                           "('I lost my credentials'): KeyError: 'I lost my credentials' (traceback in ")
    (run,) = job_runs(launch_dir)
    out = Path(run.data.tags[TAG_OUTPUT_DIR])
    assert run.info.status == "FAILED" and run.data.tags[TAG_ERROR] == line.removeprefix("rankscope: error: ")
    assert line.endswith(f"(traceback in {out / JOB_LOG_FILE})")
    log = (out / JOB_LOG_FILE).read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in log and "lookup[question]" in log and "KeyError" in log
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    kept = Path(client.download_artifacts(run.info.run_id, JOB_LOG_FILE, str(launch_dir)))
    assert kept.read_text(encoding="utf-8") == log


def test_a_retriever_subclass_that_raises_is_named_with_the_question_too(folder, capsys):
    with pytest.raises(JobFailed):
        log_run(folder, "retriever=custom", f"retriever._target_={ENGINES}.Raising")
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"rankscope: error: {ENGINES}.Raising: rank() raised on question q08 ('I lost my "
                           "credentials'): ZeroDivisionError: division by zero in the user's scorer (traceback in ")
    (run,) = job_runs(folder)
    assert run.info.status == "FAILED"
    assert "ZeroDivisionError" in (Path(run.data.tags[TAG_OUTPUT_DIR]) / JOB_LOG_FILE).read_text(encoding="utf-8")


# --- secrets: masked whatever their key, in every file rankscope writes, and nothing refused is written ----------

KEY = "ZZZsecretValue123"  # a custom class's own setting: its name says it is a key
SHAPED = "sk-test-abc123xyz"  # an OpenAI-style key under a key that says nothing
BEARER = "sk-proj0123456789abcdef"


def leaks(folder: Path, *texts: str, secrets: tuple[str, ...]) -> list[str]:
    """Every file under ``folder`` (job folders, .hydra, the MLflow database and artifacts), and the texts given
    (the command's output), that holds one of ``secrets``."""
    found = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()
             and any(s.encode() in p.read_bytes() for s in secrets)]
    return found + [f"output {i}" for i, text in enumerate(texts) if any(s in text for s in secrets)]


def test_a_classs_own_key_and_a_key_shaped_tag_are_masked_in_every_file_and_line(launch_dir):
    done = run_pipeline(launch_dir, "retriever=custom", f"retriever._target_={ENGINES}.KeyedSearch",
                        f"+retriever.api_key={KEY}", f"+tags.note={SHAPED}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert leaks(launch_dir, done.stdout, done.stderr, secrets=(KEY, SHAPED)) == []
    (run,) = job_runs(launch_dir)
    out = Path(run.data.tags[TAG_OUTPUT_DIR])
    assert run.data.tags["note"] == "***" and run.data.params["retriever.api_key"] == "***"
    assert (out / "run.trec").read_text().split("\n")[0].split()[-1] == "custom_api_key=***"  # the run tag
    assert (out / "diagnosis.txt").read_text().startswith("Diagnosis of custom api_key=***: ")
    assert json.loads((out / RECORD_FILE).read_text())["run_name"].startswith("custom api_key=*** ")
    assert f"Files: {out}" in done.stdout  # a single run says where its files are


def test_a_refused_header_value_is_written_nowhere(launch_dir):
    done = run_pipeline(launch_dir, "retriever=http", "retriever.url=http://127.0.0.1:9/search",
                        f"+retriever.headers.Authorization=Bearer {BEARER}")
    assert done.returncode == 1 and "must name the environment variable" in done.stderr
    assert leaks(launch_dir, done.stdout, done.stderr, secrets=(BEARER,)) == []


# --- a service's URL with a query string, as typed ----------------------------------------------------------------


@pytest.fixture(scope="module")
def listing_service():
    engine = OtherIds()  # any engine: the test looks at what was asked, and at the names
    collection = helpdesk()
    engine.index(list(collection.doc_ids), list(collection.doc_texts))
    with SearchServer(engine) as server:
        yield server


@pytest.mark.parametrize("quote", ["", "'"])
def test_a_url_with_a_query_string_works_unquoted_and_quoted_and_names_the_system_without_quotes(
        launch_dir, listing_service, quote):
    url = listing_service.url("/search?ms=20&size=5")
    before = len(listing_service.requests)
    done = run_pipeline(launch_dir, "retriever=http", f"retriever.url={quote}{url}{quote}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert {path for path, _, _ in listing_service.requests[before:]} == {"/search?ms=20&size=5"}
    (run,) = job_runs(launch_dir)
    assert run.data.params["retriever.url"] == url
    assert run.data.tags["rankscope.system"] == "http url=.../search?ms=20&size=5" and "'" not in run.info.run_name


def test_an_override_that_cannot_be_read_is_refused_in_one_line_naming_it(launch_dir):
    done = run_pipeline(launch_dir, "retriever=http", "+tags.x=a'b\"c=d")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rankscope: config: cannot read the override '+tags.x=a\\'b\"c=d' (quote its value")
