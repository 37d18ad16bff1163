"""retriever=traces, checked against a real traced application (tests.pipeline.traces.rag_app: MLflow Tracing, a
RETRIEVER span over tantivy): the rankings its traces hold score value for value what ``retriever=custom`` scores
running the same tantivy search; two versions of the application, told apart by a tag, are compared with the gate;
the run links to its traces; and bad input is one line each."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import (
    NOTES_PREFIX,
    PER_QUESTION_FILE,
    RESOURCE_PREFIXES,
    RUN_FILE,
    TAG_NOTES,
    TAG_OUTPUT_DIR,
    TAG_RANKINGS_FROM,
    TRACES_FILE,
)
from pipeline.compare import main as compare
from pipeline.gate import main as gate
from pipeline.job.recording import JobFailed
from tests.pipeline.helpers import job_runs, log_run, run_pipeline

TANTIVY = "tests.pipeline.config.engines.TantivySearch"
K = 10  # what the application retrieves: both routes rank to this depth
VARIES = (*RESOURCE_PREFIXES, NOTES_PREFIX)  # timings, reuse counts and notes; nothing else may differ


def store(folder: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")


def job(folder: Path, run_id: str) -> dict:
    """What a job left: its MLflow run and metrics (timings aside), its per-question table, its ranking, its folder."""
    run = store(folder).get_run(run_id)
    out = Path(run.data.tags[TAG_OUTPUT_DIR])
    ranking = [line.split()[:5] for line in (out / RUN_FILE).read_text(encoding="utf-8").splitlines()]
    return {"run": run, "metrics": {k: v for k, v in run.data.metrics.items() if not k.startswith(VARIES)},
            "table": pd.read_csv(out / PER_QUESTION_FILE, dtype={"query_id": str}), "ranking": ranking, "out": out}


def traces(folder: Path, experiment: str, *overrides: str) -> str:
    return log_run(folder, "retriever=traces", f"retriever.experiment={experiment}", f"depth={K}", *overrides)


def custom(folder: Path, *overrides: str) -> str:
    return log_run(folder, "retriever=custom", f"retriever._target_={TANTIVY}", f"depth={K}", *overrides)


def assert_same_figures(a: dict, b: dict) -> None:
    assert a["metrics"] == b["metrics"]
    pd.testing.assert_frame_equal(a["table"], b["table"])
    assert a["ranking"] == b["ranking"]


def test_the_traces_rankings_score_what_the_same_tantivy_search_scores_as_a_custom_retriever(folder):
    traced = job(folder, traces(folder, "rag-app", "+retriever.tags.app_version=v1", "retriever.score=score"))
    direct = job(folder, custom(folder))
    assert traced["run"].info.status == "FINISHED"
    assert traced["metrics"]["system/questions_evaluated"] == 14 and traced["metrics"]["ndcg_at_10"] > 0.5
    assert_same_figures(traced, direct)
    assert TAG_NOTES not in traced["run"].data.tags  # every trace used, every question answered


def test_without_a_score_the_ranking_is_the_spans_order(folder):
    """No score key: each document scores 1/rank, so the run keeps the order tantivy listed (ties included)."""
    from pipeline.data import helpdesk
    from tests.pipeline.config.engines import TantivySearch

    c = helpdesk()
    engine = TantivySearch()
    engine.index(list(c.doc_ids), list(c.doc_texts))
    listed = dict(zip(c.query_ids, engine.search(list(c.query_texts), K)))
    found = job(folder, traces(folder, "rag-app", "+retriever.tags.app_version=v1"))
    ranked: dict[str, list[str]] = {}
    for qid, _, doc, _, _ in found["ranking"]:
        ranked.setdefault(qid, []).append(doc)
    assert ranked == {qid: [doc for doc, _ in hits] for qid, hits in listed.items() if hits}


def test_the_run_links_to_its_traces_the_filter_and_the_window(folder):
    run_id = traces(folder, "rag-app", "+retriever.tags.app_version=v2", "retriever.since=2000-01-01")
    found = job(folder, run_id)
    run = found["run"]
    client = store(folder)
    experiment = client.get_experiment_by_name("rag-app")
    v2 = client.search_traces(locations=[experiment.experiment_id], filter_string="tag.app_version = 'v2'",
                              max_results=100)
    listed = list(csv.DictReader(io.StringIO((found["out"] / TRACES_FILE).read_text(encoding="utf-8"))))
    assert sorted(row["trace_id"] for row in listed) == sorted(t.info.trace_id for t in v2)
    assert {row["status"] for row in listed} == {"used"} and len({row["query_id"] for row in listed}) == 14
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert TRACES_FILE in artifacts
    params = run.data.params
    assert params["retriever._target_"] == "pipeline.traces.TracedRetriever"
    assert params["retriever.experiment"] == "rag-app"
    assert params["retriever.since"] == "2000-01-01" and params["retriever.tags.app_version"] == "v2"
    said = run.data.tags[TAG_RANKINGS_FROM]
    assert said.startswith("rankings from 14 MLflow trace(s) of 14 read: experiment 'rag-app' of sqlite:///")
    assert "from 2000-01-01 00:00:00 UTC to now, tagged app_version=v2" in said
    both = [experiment.experiment_id, run.info.experiment_id]  # MLflow searches a run's traces in its experiments
    linked = client.search_traces(locations=both, run_id=run_id, max_results=100)
    assert sorted(t.info.trace_id for t in linked) == sorted(t.info.trace_id for t in v2)
    # the application's experiment is only read: it keeps MLflow's GenAI mode (rankscope's own opens on its runs)
    assert "mlflow.experimentKind" not in client.get_experiment_by_name("rag-app").tags


def test_a_seeded_sample_of_the_matching_traces_is_read_and_said(folder):
    """``sample`` draws from the traces the window, name and tags select; the same seed draws the same traces."""
    overrides = ("+retriever.tags.app_version=v1", "retriever.trace_name=answer", "retriever.sample=5",
                 "retriever.seed=3")
    found, again = (job(folder, traces(folder, "rag-app", *overrides)) for _ in range(2))
    said = found["run"].data.tags[TAG_RANKINGS_FROM]
    assert said.startswith("rankings from 5 MLflow trace(s) of 5 read (a sample of 5 of 14, seed 3): experiment "
                           "'rag-app' of sqlite:///"), said
    assert "named 'answer', tagged app_version=v1" in said
    listed = list(csv.DictReader(io.StringIO((found["out"] / TRACES_FILE).read_text(encoding="utf-8"))))
    client = store(folder)
    v1 = client.search_traces(locations=[client.get_experiment_by_name("rag-app").experiment_id],
                              filter_string="tag.app_version = 'v1'", max_results=100)
    assert len(listed) == 5 and {row["trace_id"] for row in listed} <= {t.info.trace_id for t in v1}
    assert found["ranking"] == again["ranking"]
    assert found["metrics"]["system/questions_evaluated"] == 14  # the 9 questions no sampled trace answered score 0
    assert found["metrics"]["system/questions_no_results"] == 9


def test_two_versions_told_apart_by_a_tag_are_compared_with_the_gate(folder, capsys):
    v1 = traces(folder, "rag-app", "+retriever.tags.app_version=v1")
    v2 = traces(folder, "rag-app", "+retriever.tags.app_version=v2")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    first, second = job(folder, v1)["metrics"], job(folder, v2)["metrics"]
    assert first != second  # stemming changes what tantivy retrieves
    assert gate([v2, "--baseline", v1, "--tracking-uri", uri, "--metrics", "ndcg@10", "--tolerance", "0.01"]) in (0, 1)
    out = capsys.readouterr()
    line = (out.out + out.err).strip().splitlines()[-1]
    assert line.startswith(("rankscope gate: PASS", "rankscope gate: REGRESSION")), line
    assert compare([v1, v2, "--tracking-uri", uri, "--no-record"]) == 0
    report = capsys.readouterr().out
    assert "14 questions in common" in report
    assert report.count("rankings from 14 MLflow trace(s)") == 2 and "tagged app_version=v2" in report


def test_questions_no_trace_answered_score_zero_and_questions_outside_the_corpus_are_counted(folder):
    found = job(folder, traces(folder, "rag-outside"))
    metrics, notes = found["metrics"], found["run"].data.tags[TAG_NOTES]
    assert metrics["system/questions_evaluated"] == 14 and metrics["system/questions_no_results"] == 4
    missing = found["table"].set_index("query_id").loc[["q11", "q12", "q13", "q14"]]
    assert (missing["ndcg@10"] == 0).all() and (missing["retrieved"] == 0).all()
    assert "4 corpus question(s) no trace answered: q11, q12, q13, q14 (they rank nothing, and score 0)" in notes
    assert "1 trace(s) ask a question the corpus does not hold (matched by text)" in notes
    rows = list(csv.DictReader(io.StringIO((found["out"] / TRACES_FILE).read_text(encoding="utf-8"))))
    assert sorted(row["status"] for row in rows) == ["not_in_corpus"] + ["used"] * 10


def test_a_question_traced_by_both_versions_takes_the_latest_trace(folder):
    both = job(folder, traces(folder, "rag-app"))
    latest = job(folder, traces(folder, "rag-app", "+retriever.tags.app_version=v2"))
    assert both["ranking"] == latest["ranking"]
    notes = both["run"].data.tags[TAG_NOTES]
    assert "14 question(s) were answered by several traces: q01, q02, q03, q04, q05 and 9 more (the latest used)" \
        in notes
    earliest = job(folder, traces(folder, "rag-app", "retriever.repeated=first"))
    assert earliest["ranking"] == job(folder, traces(folder, "rag-app", "+retriever.tags.app_version=v1"))["ranking"]


def test_a_few_ids_not_in_the_corpus_are_kept_unjudged_and_said(folder):
    """Every third document of the application names an id the corpus does not hold: a third of the ranking is
    unjudged, the run finishes and says which."""
    found = job(folder, traces(folder, "rag-bad-unknown-ids"))
    run = found["run"]
    assert run.info.status == "FINISHED" and found["metrics"]["system/questions_evaluated"] == 14
    notes = run.data.tags[TAG_NOTES]
    assert re.search(r"the traces name \d+ document id\(s\) that are not in the corpus: missing-", notes)
    assert "(kept in the ranking: unjudged, so not relevant)" in notes
    unknown = [row[2] for row in found["ranking"] if row[2].startswith("missing-")]
    assert 0 < len(unknown) < len(found["ranking"]) / 2


def test_ids_read_from_the_wrong_place_stop_the_job_in_one_line_that_names_doc_id(folder, capsys):
    """Document.id is a chunk's id (chunk-12-0), metadata.doc_uri the corpus id: read by the default order, no id is
    the corpus's and every figure would be 0 with exit 0. The job stops, names retriever.doc_id and shows an id
    received beside the corpus id the same document holds; with the place it names, the run is the usual one."""
    capsys.readouterr()
    with pytest.raises(JobFailed):
        traces(folder, "rag-chunk-ids")
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rankscope:")]
    said = re.fullmatch(r"rankscope: error: (\d+) of the (\d+) document ids the traces retrieved are not in the "
                        r"corpus, as read by retriever\.doc_id=\[id, doc_uri\] \(the first of them a document has\); "
                        r"a trace names '(chunk-\d+-0)', and the same document's metadata\.doc_uri is '(\w+)', an id "
                        r"the corpus holds: retriever\.doc_id=\[doc_uri\]", line)
    assert said, line
    from pipeline.data import helpdesk

    c = helpdesk()
    assert said.group(1) == said.group(2) and said.group(4) in c.doc_ids
    assert said.group(3) == f"chunk-{c.doc_ids.index(said.group(4))}-0"  # the same document, as the app numbers it
    assert job_runs(folder)[-1].info.status == "FAILED"
    fixed = job(folder, traces(folder, "rag-chunk-ids", "retriever.doc_id=[doc_uri]", "retriever.score=score"))
    usual = job(folder, traces(folder, "rag-app", "+retriever.tags.app_version=v1", "retriever.score=score"))
    assert_same_figures(fixed, usual)


def test_a_span_that_raised_and_a_span_that_returned_nothing_are_said(folder):
    """The application catches its retriever's exception and answers without documents (the trace finishes OK): the
    trace is counted as one whose span raised, with the exception, not as a ranking. A span that returned [] is a
    ranking, empty, and said."""
    raised = job(folder, traces(folder, "rag-bad-raising"))
    notes = raised["run"].data.tags[TAG_NOTES]
    assert ("3 trace(s) have a span that raised, which the application caught (first: tr-"
            in notes)  # calls 4, 8 and 12
    assert "span 'retrieve' raised ConnectionError: the search index did not answer" in notes
    assert raised["run"].data.metrics["system/notes_traces_span_raised"] == 3
    assert raised["metrics"]["system/questions_no_results"] == 3
    rows = list(csv.DictReader(io.StringIO((raised["out"] / TRACES_FILE).read_text(encoding="utf-8"))))
    assert sorted(row["status"] for row in rows) == ["span_raised"] * 3 + ["used"] * 11
    empty = job(folder, traces(folder, "rag-bad-empty"))
    notes = empty["run"].data.tags[TAG_NOTES]
    assert re.search(r"2 trace\(s\) used have a RETRIEVER span that returned no document: tr-\w+, tr-\w+ \(their "
                     r"questions rank nothing, and score 0\)", notes), notes  # calls 5 and 10
    assert empty["run"].data.metrics["system/notes_traces_empty_ranking"] == 2
    assert empty["metrics"]["system/questions_no_results"] == 2


def test_failed_traces_are_counted_not_hidden(folder):
    found = job(folder, traces(folder, "rag-bad-failing"))
    notes = found["run"].data.tags[TAG_NOTES]
    assert "3 trace(s) did not finish OK (first: tr-" in notes and "state ERROR" in notes  # calls 4, 8 and 12
    assert found["run"].data.metrics["system/notes_traces_failed"] == 3
    assert found["metrics"]["system/questions_no_results"] == 3


# --- bad input: one line each, and a FAILED run --------------------------------------------------------------------


@pytest.mark.parametrize("overrides, says", [
    (["retriever.experiment=rag-app", "retriever.since=2099-01-01"],
     "no trace matches: experiment 'rag-app' of sqlite:///{db}, from 2099-01-01 00:00:00 UTC to now (retriever.since, "
     "until, trace_name, tags, filter): nothing to rank"),
    (["retriever.experiment=rag-app", "retriever.trace_name=chat"],
     "no trace matches: experiment 'rag-app' of sqlite:///{db}, named 'chat' (retriever.since, until, trace_name, "
     "tags, filter): nothing to rank"),
    (["retriever.experiment=rag-app", "retriever.since=2026-12-04", "retriever.until=2026-12-01"],
     "retriever.since=2026-12-04 is not before retriever.until=2026-12-01: the window is empty"),
    (["retriever.experiment=rag-bad-no-span"],
     "none of the 14 trace(s) of experiment 'rag-bad-no-span' of sqlite:///{db} gives a ranking: 14 have no span to "
     "rank with (answer (UNKNOWN), search (TOOL), generate (LLM))"),
    (["retriever.experiment=rag-app", "retriever.span=rerank"],
     "none of the 28 trace(s) of experiment 'rag-app' of sqlite:///{db} gives a ranking: 28 have no span to rank with "
     "(answer (UNKNOWN), retrieve (RETRIEVER), generate (LLM))"),
    (["retriever.experiment=rag-bad-not-documents"],
     "none of the 14 trace(s) of experiment 'rag-bad-not-documents' of sqlite:///{db} gives a ranking: 14 have a span "
     "whose outputs are not documents (span 'retrieve' returned [\"pricing1\", \"pricing2\", "),
    (["retriever.experiment=rag-app", "retriever.question=query"],
     "none of the 28 trace(s) of experiment 'rag-app' of sqlite:///{db} gives a ranking: 28 have no question where it "
     "was looked for (root inputs: question)"),
    (["retriever.experiment=rag-app", "retriever.since=yesterday"],
     "retriever.since='yesterday': expected an ISO date or time (2026-12-04, 2026-12-04T09:30) or a duration back from "
     "now (30m, 24h, 7d, 2w)"),
    (["retriever.experiment=rag-app", "retriever.filter=\"tag.app_version ~ 'v1'\""],
     "MLflow refused the trace filter \"tag.app_version ~ 'v1'\" (retriever.filter, or the window, name and tags asked "
     "for): Invalid comparator '~'"),
])
def test_bad_input_is_one_line_and_a_failed_run(folder, capsys, overrides, says):
    capsys.readouterr()
    with pytest.raises(JobFailed):
        log_run(folder, "retriever=traces", f"depth={K}", *overrides)
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rankscope:")]
    assert line.startswith("rankscope: error: " + says.format(db=folder / "mlflow.db")), line
    assert job_runs(folder)[-1].info.status == "FAILED"


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_an_experiment_that_does_not_exist_is_one_line_from_the_command(folder):
    done = run_pipeline(folder, "retriever=traces", "retriever.experiment=rag-ap")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line == (f"rankscope: error: experiment 'rag-ap' does not exist in sqlite:///{folder / 'mlflow.db'} "
                    f"(experiments there: Default, rag-app, rag-bad-empty, rag-bad-failing, rag-bad-no-span, "
                    f"rag-bad-not-documents, rag-bad-raising, rag-bad-unknown-ids, rag-chunk-ids, rag-outside, "
                    f"rag-uris, rankscope)")
    (run,) = job_runs(folder)
    assert run.info.status == "FAILED"


@pytest.mark.slow  # a process of its own: CI runs it in make test-slow
def test_the_command_whose_store_process_reads_the_traces_logs_what_the_job_in_process_logs(folder):
    """``python -m pipeline`` forks a store process, which reads the traces (tests/pipeline/traces/test_reading.py
    shares a larger reading between the two): the same figures, ranking and notes as a job that reads them itself."""
    overrides = ("retriever=traces", "retriever.experiment=rag-bad-raising", f"depth={K}")
    here = job(folder, log_run(folder, *overrides))
    done = run_pipeline(folder, *overrides, env={"RANKSCOPE_STORE_PROCESS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = re.search(r"MLflow: run (\w+)", done.stdout).group(1)
    there = job(folder, run_id)
    assert_same_figures(here, there)
    assert here["run"].data.tags[TAG_NOTES] == there["run"].data.tags[TAG_NOTES]
