"""What a job went on with is seen: every note of the loader and the retriever is printed once, one line per kind
(how many, the first ids), kept in record.json and logged to MLflow (the count as ``system/notes_<kind>``, the
text as the tag ``rankscope.notes`` and the artifact ``notes.txt``)."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow import MlflowClient

from pipeline.common.names import NOTES_FILE, NOTES_PREFIX, RECORD_FILE, TAG_NOTES, TAG_OUTPUT_DIR
from pipeline.tracking.readback import data_notes
from tests.pipeline.helpers import log_run


def messy_corpus(folder: Path) -> Path:
    """Two judgments of a document the corpus lacks, one of a question it lacks, an empty document, an empty
    question, and a question judged only non-relevant."""
    (folder / "qrels").mkdir(parents=True)
    docs = {"d1": "apple pie", "d2": "banana bread", "d3": "cherry tart", "d4": ""}
    queries = {"q1": "apple", "q2": "banana", "q3": "", "q4": "cherry"}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    judgments = "q1\td1\t1\nq1\tghost\t1\nq2\tghost\t1\nq2\td2\t2\nq3\td3\t1\nq4\td3\t0\nq9\td1\t1\n"
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + judgments)
    return folder


KINDS = {"judgments_unknown_document": 2, "judgments_unknown_question": 1, "documents_empty_text": 1,
         "questions_empty_text": 1, "questions_without_relevant": 1}


def job(folder: Path, capsys, *overrides: str) -> tuple[list[str], dict, object, Path]:
    """Run one job; its printed lines, its record, its MLflow run and its folder."""
    capsys.readouterr()
    run_id = log_run(folder, *overrides, "metrics.bootstrap.resamples=20")
    printed = capsys.readouterr().out.splitlines()
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    run = client.get_run(run_id)
    out = Path(run.data.tags[TAG_OUTPUT_DIR])
    return printed, json.loads((out / RECORD_FILE).read_text()), run, out


def test_every_loader_note_is_printed_once_per_kind_kept_and_logged(launch_dir, capsys):
    corpus = messy_corpus(launch_dir / "messy")
    printed, record, run, out = job(launch_dir, capsys, "corpus=beir", f"corpus.path={corpus}")
    notes = [line for line in printed if line.startswith("note: ")]
    assert len(notes) == len(KINDS)
    assert any("2 judgment(s) name 1 documents missing from the corpus: ghost (dropped)" in n for n in notes)
    assert any("1 judgment(s) name 1 questions missing from the questions file: q9 (dropped)" in n for n in notes)
    assert any("1 document(s) with empty text: d4" in n for n in notes)
    assert any("1 question(s) with empty text: q3" in n for n in notes)
    assert any("1 question(s) have no relevant judgment in split 'test': q4" in n for n in notes)
    counts = {k.removeprefix(NOTES_PREFIX): v for k, v in record["metrics"].items() if k.startswith(NOTES_PREFIX)}
    assert counts == KINDS
    assert {k: v for k, v in run.data.metrics.items() if k.startswith(NOTES_PREFIX)} == {
        f"{NOTES_PREFIX}{k}": v for k, v in KINDS.items()}
    text = [n.removeprefix("note: ") for n in notes]
    assert record["tags"][TAG_NOTES].splitlines() == run.data.tags[TAG_NOTES].splitlines() == text
    assert (out / NOTES_FILE).read_text().splitlines() == text and NOTES_FILE in record["files"]
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    assert NOTES_FILE in {a.path for a in client.list_artifacts(run.info.run_id)}
    assert data_notes(run) == text  # what a sweep's report.html shows in its header


def test_notes_of_one_kind_from_several_components_are_one_line(launch_dir, capsys, helpdesk_collection):
    """RRF over two run files that each name documents the corpus lacks: one line, the counts added."""
    files = []
    for name, ghosts in (("a", ["ghost1", "ghost2"]), ("b", ["ghost3"])):
        path = launch_dir / f"{name}.trec"
        path.write_text("".join(f"q01 Q0 {d} {i + 1} {9 - i} {name}\n" for i, d in enumerate(["pricing1", *ghosts])))
        files.append(path)
    printed, record, _, _ = job(launch_dir, capsys, "retriever=rrf",
                                "retriever@retriever.components.first=run_file",
                                f"retriever.components.first.path={files[0]}",
                                "retriever@retriever.components.second=run_file",
                                f"retriever.components.second.path={files[1]}")
    (line,) = [line for line in printed if line.startswith("note: ")]
    assert f"{files[0]}: 2 document id(s)" in line and f"; {files[1]}: 1 document id(s)" in line
    assert record["metrics"][f"{NOTES_PREFIX}run_unknown_document"] == 3


def test_a_clean_job_has_no_notes(launch_dir, capsys):
    printed, record, run, out = job(launch_dir, capsys)
    assert not [line for line in printed if line.startswith("note: ")]
    assert TAG_NOTES not in record["tags"] and TAG_NOTES not in run.data.tags
    assert not any(k.startswith(NOTES_PREFIX) for k in record["metrics"])
    assert not (out / NOTES_FILE).exists()
