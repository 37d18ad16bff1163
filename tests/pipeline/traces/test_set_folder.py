"""``python -m pipeline.questions``, for real: production traces -> a question set with the judgments people left on
the traces (mlflow.log_feedback, mlflow.log_expectation) -> corpus=files measures the production retriever as traced
and an offline candidate on the same questions; judgments written back as assessments read back the same."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import (
    JUDGMENTS_FILE,
    KIND_QUESTIONS,
    PER_QUESTION_FILE,
    QUESTION_SET_FILE,
    QUESTION_TRACES_FILE,
    QUESTIONS_FILE,
    TAG_KIND,
    TAG_OUTPUT_DIR,
    TAG_QUESTIONS_DIGEST,
)
from pipeline.compare import main as compare
from pipeline.data import helpdesk
from pipeline.questions import main as questions
from tests.pipeline.helpers import REPO, cli_env, log_run

pytestmark = pytest.mark.slow  # a real traced application writes its store first (about 20 s): make test-slow

CHUNKS = REPO / "tests" / "pipeline" / "data" / "own_files" / "chunks.parquet"  # the help-desk corpus as chunks
JUDGED = ("q01", "q02", "q03", "q04", "q05")  # the questions the test's people judge on the traces


@pytest.fixture
def judged_store(folder: Path):
    """The traced store, with the help-desk judgments of five questions left on their v1 traces as a person (and
    MLflow's own judge) would: per document on the retriever span, and one as an expected_retrieved_context."""
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("rag-app").experiment_id
    c = helpdesk()
    texts = dict(zip(c.query_ids, c.query_texts))
    truth = c.qrels.to_dict()
    mlflow.set_tracking_uri(uri)
    try:
        for trace in client.search_traces(locations=[experiment], filter_string="tag.app_version = 'v1'",
                                          max_results=100):
            qid = next(q for q, t in texts.items() if json.loads(trace.info.trace_metadata["mlflow.traceInputs"])
                       ["question"] == t)
            if qid not in JUDGED:
                continue
            (span,) = trace.search_spans(span_type="RETRIEVER")
            listed = [d["metadata"]["doc_uri"] for d in span.outputs]
            if qid == "q05":  # a list of the relevant documents, as MLflow's evaluation datasets hold them
                mlflow.log_expectation(trace_id=trace.info.trace_id, name="expected_retrieved_context",
                                       value=[{"doc_uri": d} for d, g in truth[qid].items() if g > 0])
                continue
            for doc, grade in truth[qid].items():
                if doc in listed and qid == "q01":  # MLflow's own judge names the document by its place
                    mlflow.log_feedback(trace_id=trace.info.trace_id, name="retrieval_relevance",
                                        value="yes" if grade else "no", span_id=span.span_id,
                                        metadata={"chunk_index": listed.index(doc)})
                else:
                    mlflow.log_feedback(trace_id=trace.info.trace_id, name="relevance", value=grade,
                                        span_id=span.span_id, metadata={"doc_uri": doc})
    finally:
        mlflow.set_tracking_uri(None)
    return folder


def made(folder: Path, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = questions(["from-traces", str(folder / "set"), "--experiment", "rag-app", "--tracking-uri",
                        f"sqlite:///{folder / 'mlflow.db'}", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


def rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_question_set_from_traces_with_the_judgments_people_left_on_them(judged_store, capsys):
    folder = judged_store
    status, out, err = made(folder, capsys)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"rankscope questions: 28 trace(s) of experiment 'rag-app' of sqlite:///{folder / 'mlflow.db'}"
    assert lines[1] == ("14 distinct question(s) (14 exact and 0 near duplicate(s) folded, similarity >= 0.8); all 14 "
                        "kept")
    assert lines[2] == "masked: nothing"
    c = helpdesk()
    truth = {(q, d): g for q, docs in c.qrels.to_dict().items() if q in JUDGED for d, g in docs.items()}
    listed = [json.loads(line) for line in (folder / "set" / QUESTIONS_FILE).read_text(encoding="utf-8").splitlines()]
    assert [q["text"] for q in listed] == c.query_texts and {q["asked"] for q in listed} == {2}
    ids = {q["text"]: q["id"] for q in listed}
    ours = {ids[t]: qid for qid, t in zip(c.query_ids, c.query_texts)}
    found = {(ours[r["query_id"]], r["doc_id"]): int(r["grade"]) for r in rows(folder / "set" / JUDGMENTS_FILE)}
    # q01's documents the application did not retrieve could not be named by place: the rest are all there
    not_listed = {("q01", d) for (q, d) in truth if q == "q01"} - set(found)
    # yes/no (q01) and a list of relevant documents (q05) say relevant or not: grade 1 or 0
    expected = {k: (int(v > 0) if k[0] in ("q01", "q05") else v) for k, v in truth.items()
                if k not in not_listed and (k[0] != "q05" or v > 0)}
    assert found == expected
    assert lines[3].startswith(f"judgments on the traces: {len(expected)} for 5 of 14 question(s) (sources: ")
    traces = rows(folder / "set" / QUESTION_TRACES_FILE)
    assert len(traces) == 28 and {r["duplicate"] for r in traces} == {"exact"}

    # the set is an MLflow dataset, recorded in "rankscope questions", with the digest a job on it records
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    (recorded,) = client.search_runs([client.get_experiment_by_name("rankscope questions").experiment_id])
    assert recorded.data.tags[TAG_KIND] == KIND_QUESTIONS
    (dataset,) = recorded.inputs.dataset_inputs
    assert dataset.dataset.name == "rag-app-questions" and dataset.dataset.source_type == "mlflow_traces"
    assert recorded.data.params["experiment"] == "rag-app" and recorded.data.metrics["duplicates_exact"] == 14
    described = json.loads((folder / "set" / QUESTION_SET_FILE).read_text(encoding="utf-8"))
    assert dataset.dataset.digest == described["digest"] == recorded.data.tags[TAG_QUESTIONS_DIGEST]

    # the loop: the production retriever as traced, and BM25 offline, on the same questions, compared
    files = ["corpus=files", "corpus.name=rag-app-questions", f"corpus.documents.path={CHUNKS}",
             "corpus.documents.id=chunk_id", "corpus.documents.text=[title,body]",
             f"corpus.questions.path={folder / 'set' / QUESTIONS_FILE}",
             f"corpus.judgments.path={folder / 'set' / JUDGMENTS_FILE}", "depth=10"]
    production = log_run(folder, *files, "retriever=traces", "retriever.experiment=rag-app",
                         "+retriever.tags.app_version=v1")
    candidate = log_run(folder, *files, "retriever=bm25")
    run = client.get_run(production)
    metrics = run.data.metrics
    assert metrics["system/questions_evaluated"] == 5 and metrics["system/notes_questions_unjudged"] == 9
    assert run.data.tags[TAG_QUESTIONS_DIGEST] == described["digest"]
    mine = pd.read_csv(Path(run.data.tags[TAG_OUTPUT_DIR]) / PER_QUESTION_FILE).set_index("question")
    whole = client.get_run(log_run(folder, "retriever=traces", "retriever.experiment=rag-app",
                                   "+retriever.tags.app_version=v1", "depth=10"))
    reference = pd.read_csv(Path(whole.data.tags[TAG_OUTPUT_DIR]) / PER_QUESTION_FILE).set_index("question")
    for qid in ("q02", "q03", "q04"):  # judged in full: the same figures as on the help-desk corpus itself
        text = c.query_texts[c.query_ids.index(qid)]
        assert mine.loc[text, "ndcg@10"] == reference.loc[text, "ndcg@10"]
    capsys.readouterr()
    assert compare([production, candidate, "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}", "--no-record"]) == 0
    report = capsys.readouterr().out
    assert "5 questions in common" in report and "rankings from 14 MLflow trace(s)" in report


def test_judgments_written_back_as_assessments_read_back_the_same(folder, capsys, tmp_path):
    status, _, err = made(folder, capsys, "--no-record")
    assert status == 0, err
    assert not (folder / "set" / JUDGMENTS_FILE).exists()  # no judgment on the traces yet
    listed = [json.loads(line) for line in (folder / "set" / QUESTIONS_FILE).read_text(encoding="utf-8").splitlines()]
    c = helpdesk()
    ours = {q["text"]: q["id"] for q in listed}
    ids = dict(zip(c.query_ids, (ours[t] for t in c.query_texts)))
    written = tmp_path / "judged.csv"
    with written.open("w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["query_id", "doc_id", "grade"])
        for q, d, g in zip(c.qrels.query_ids, c.qrels.doc_ids, c.qrels.grades):
            out.writerow([ids[q], d, int(g)])
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    assert questions(["to-assessments", str(folder / "set"), "--judgments", str(written), "--tracking-uri", uri]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"rankscope questions: wrote {2 * len(c.qrels)} expectation(s) named 'relevance' (source "
                           f"HUMAN, 'rankscope') on the traces of 14 question(s)")
    assert questions(["judgments", str(folder / "set"), "--tracking-uri", uri]) == 0
    read = {(r["query_id"], r["doc_id"]): int(r["grade"]) for r in rows(folder / "set" / JUDGMENTS_FILE)}
    assert read == {(ids[q], d): int(g) for q, d, g in zip(c.qrels.query_ids, c.qrels.doc_ids, c.qrels.grades)}
    # the trace view shows them on the retriever span
    trace = MlflowClient(uri).search_traces(locations=[MlflowClient(uri).get_experiment_by_name("rag-app")
                                                       .experiment_id], max_results=1)[0]
    (span,) = trace.search_spans(span_type="RETRIEVER")
    shown = [a for a in trace.info.assessments if a.name == "relevance"]
    assert shown and {a.span_id for a in shown} == {span.span_id} and all(a.source.source_type == "HUMAN"
                                                                          for a in shown)


def asked_and_set(folder: Path, capsys, experiment: str, asked: list[str], *args: str) -> tuple[list[str], str]:
    """The application asked ``asked`` in ``experiment``; a set made from its traces in ``folder/experiment``: its
    questions' texts and what the command printed."""
    from tests.pipeline.traces.rag_app import RagApp

    c = helpdesk()
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.set_experiment(experiment)
        RagApp(c.doc_ids, c.doc_texts, "v3").run(asked)
        mlflow.flush_trace_async_logging()
    finally:
        mlflow.set_tracking_uri(None)
    capsys.readouterr()
    status = questions(["from-traces", str(folder / experiment), "--experiment", experiment, "--tracking-uri", uri,
                        *args])
    out = capsys.readouterr()
    assert status == 0, out.err
    return [json.loads(line)["text"] for line in (folder / experiment / QUESTIONS_FILE).read_text().splitlines()], \
        out.out


def test_personal_data_is_masked_and_near_duplicates_folded(folder, capsys):
    asked = ["my card 4111 1111 1111 1111 was charged twice, why?", "My card 5555 5555 5555 4444 was charged twice why",
             "please email me at jane.doe@example.com about my invoice", "how do I export all my notes",
             "How do I export all my notes?", "how do i export all of my notes"]
    texts, out = asked_and_set(folder, capsys, "rag-private", asked, "--no-record")
    assert texts == ["my card <card> was charged twice, why?", "please email me at <email> about my invoice",
                     "how do I export all my notes"]  # in order of first asking; the most asked of each group
    assert "masked: 1 email, 2 card" in out
    assert "3 distinct question(s) (2 exact and 1 near duplicate(s) folded" in out
    assert "4111" not in (folder / "rag-private" / QUESTION_SET_FILE).read_text() + out


SECRETS_ASKED = {  # keys users paste into questions, in shapes masking once let through
    "sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN": "a letters-only OpenAI key",
    "sk_live_51HabcdEFGHijklMNOPqrstUVWXyz0123456789abcdefGHIJ": "a Stripe secret key",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLW9mLWJvYg": "a JSON Web Token",
}


def test_keys_pasted_into_questions_reach_neither_the_set_nor_its_mlflow_record(folder, capsys, tmp_path):
    texts, out = asked_and_set(folder, capsys, "rag-keys", [f"why does my key {key} fail?" for key in SECRETS_ASKED])
    assert texts == ["why does my key *** fail?"] and "masked: 3 secret" in out
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    (recorded,) = client.search_runs([client.get_experiment_by_name("rankscope questions").experiment_id],
                                     "params.experiment = 'rag-keys'")
    artifacts = Path(client.download_artifacts(recorded.info.run_id, "", str(tmp_path / "artifacts")))
    written = [*(folder / "rag-keys").rglob("*"), *artifacts.rglob("*")]
    assert any(p.name == QUESTIONS_FILE for p in artifacts.rglob("*"))
    for path in (p for p in written if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        leaked = [what for key, what in SECRETS_ASKED.items() if key in text or key[8:30] in text]
        assert not leaked, f"{path}: {leaked}"


@pytest.mark.parametrize("args, says", [
    (["--experiment", "nope"], "rankscope questions: experiment 'nope' does not exist in sqlite:///"),
    (["--experiment", "rag-app", "--since", "2099-01-01"],
     "rankscope questions: no trace matches: experiment 'rag-app' of sqlite:///{db}, from 2099-01-01 00:00:00 UTC to "
     "now (--since, --until, --trace-name, --tag, --filter): no question"),
    (["--experiment", "rag-app", "--sampling", "stratified", "--sample", "3"],
     "rankscope questions: --sampling stratified needs --stratify TAG: the trace tag whose values are the strata"),
    (["--experiment", "rag-app", "--question", "query"],
     "rankscope questions: none of the 28 trace(s) of experiment 'rag-app' of sqlite:///{db} has a question (root "
     "inputs: question; --question names its path in the root span's inputs)"),
    (["--experiment", "rag-app", "--tag", "app_version"],
     "rankscope questions: --tag 'app_version': expected KEY=VALUE"),
])
def test_bad_input_is_one_line_and_status_2(folder, capsys, args, says):
    capsys.readouterr()
    status = questions(["from-traces", str(folder / "set"), "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
                        *args, "--no-record"])
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()
    assert status == 2 and line.startswith(says.format(db=folder / "mlflow.db")), line


def test_the_command_as_a_user_runs_it(folder):
    import subprocess
    import sys

    shutil.rmtree(folder / "set", ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "pipeline.questions", "from-traces", "set", "--experiment", "rag-app",
                           "--sample", "4", "--seed", "3"], cwd=folder, env=cli_env(folder), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 sampled (uniform, seed 3)" in done.stdout
    assert "recorded as MLflow dataset 'rag-app-questions'" in done.stdout
    assert len((folder / "set" / QUESTIONS_FILE).read_text().splitlines()) == 4


def test_the_docs_judging_script_on_an_application_that_keeps_mlflows_convention(folder, capsys):
    """rag-uris keeps MLflow's Document convention: Document.id is the corpus id, metadata.doc_uri the article's URL.
    The judging script of docs/traces.md names each judged document by its doc_uri, as MLflow's judges do; the
    judgments read back are on the corpus's ids (as retriever=traces reads the same documents), and a job on the set
    keeps every one (they were all dropped as unknown documents, after being reported as read)."""
    from mlflow.entities import AssessmentSource, SpanType

    from tests.pipeline.traces.rag_app import SITE

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    assert questions(["from-traces", str(folder / "set"), "--experiment", "rag-uris", "--tracking-uri", uri,
                      "--no-record"]) == 0
    c = helpdesk()
    ids = dict(zip(c.query_texts, c.query_ids))
    grades = c.qrels.to_dict()
    latest = {r["query_id"]: r["trace_id"] for r in sorted(rows(folder / "set" / QUESTION_TRACES_FILE),
                                                            key=lambda r: r["time"])}
    judge = AssessmentSource(source_type="HUMAN", source_id="judge@example.com")
    mlflow.set_tracking_uri(uri)
    try:  # the script, as the guide gives it
        for line in (folder / "set" / QUESTIONS_FILE).read_text(encoding="utf-8").splitlines():
            question = json.loads(line)
            trace = mlflow.get_trace(latest[question["id"]])
            (span,) = trace.search_spans(span_type=SpanType.RETRIEVER)
            for document in span.outputs[:5]:
                doc = document["metadata"]["doc_uri"]
                mlflow.log_feedback(trace_id=trace.info.trace_id, name="relevance", source=judge, span_id=span.span_id,
                                    value=grades[ids[question["text"]]].get(doc.removeprefix(SITE), 0),
                                    metadata={"doc_uri": doc})
    finally:
        mlflow.set_tracking_uri(None)
    capsys.readouterr()
    assert questions(["judgments", str(folder / "set"), "--tracking-uri", uri]) == 0
    said = capsys.readouterr().out
    read = rows(folder / "set" / JUDGMENTS_FILE)
    assert said.startswith(f"judgments on the traces: {len(read)} for 14 of 14 question(s) (sources: {len(read)} "
                           f"HUMAN)") and len(read) > 40
    assert {r["doc_id"] for r in read} <= set(c.doc_ids)  # the corpus's ids, not the URLs
    assert any(int(r["grade"]) > 0 for r in read)
    run = MlflowClient(uri).get_run(log_run(
        folder, "corpus=files", "corpus.name=rag-uris-questions", f"corpus.documents.path={CHUNKS}",
        "corpus.documents.id=chunk_id", "corpus.documents.text=[title,body]",
        f"corpus.questions.path={folder / 'set' / QUESTIONS_FILE}",
        f"corpus.judgments.path={folder / 'set' / JUDGMENTS_FILE}", "retriever=traces", "retriever.experiment=rag-uris",
        "depth=10"))
    assert run.info.status == "FINISHED"
    assert not any(k.startswith("system/notes_judgments_unknown") for k in run.data.metrics)
    assert run.data.metrics["system/questions_evaluated"] > 0 and run.data.metrics["ndcg_at_10"] > 0.5
