"""The help-desk topic pages as a team's own files with half their span judgments hidden (every span of every other
judged (question, page) pair), for the span judging tests: a chunked sweep over them, its pool, and the hidden half
as the known answer an assessor highlights."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from tests.pipeline.helpers import REPO, run_pipeline

PAGES = REPO / "pipeline" / "data" / "helpdesk_pages"
MEASURES = ("metrics.measures=[recall,ndcg,span_recall,span_precision,span_precision_omega]", "metrics.k=[3,5]",
            "metrics.budgets=[64]", "metrics.primary=span_recall@64tok",
            "metrics.show=[recall@5,span_recall@5,span_recall@64tok]", "metrics.bootstrap.resamples=200")


def spans_of(path: Path) -> list[tuple[str, str, int, int, int]]:
    """(question, document, grade, start, end) of a BEIR qrels file with start and end columns."""
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    return [(q, d, int(g), int(s), int(e)) for q, d, g, s, e in rows]


def write_files(folder: Path) -> dict[str, Path]:
    """The pages, the questions, the visible half and the hidden half of the span judgments, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = spans_of(PAGES / "qrels" / "test.tsv")
    pairs = list(dict.fromkeys((q, d) for q, d, *_ in rows))
    hidden = set(pairs[1::2])
    header = "query-id\tcorpus-id\tscore\tstart\tend\n"
    files = {"documents": folder / "pages.jsonl", "questions": folder / "questions.jsonl",
             "half": folder / "half.tsv", "hidden": folder / "hidden.tsv", "full": folder / "full.tsv"}
    files["documents"].write_text((PAGES / "corpus.jsonl").read_text())
    files["questions"].write_text((PAGES / "queries.jsonl").read_text())
    for name, keep in (("half", lambda p: p not in hidden), ("hidden", lambda p: p in hidden),
                       ("full", lambda p: True)):
        files[name].write_text(header + "".join(f"{q}\t{d}\t{g}\t{s}\t{e}\n" for q, d, g, s, e in rows
                                                if keep((q, d))))
    return files


def corpus_args(files: dict[str, Path], judgments: Path | None = None) -> tuple[str, ...]:
    return ("corpus=files", "corpus.name=pages", f"corpus.documents.path={files['documents']}",
            "corpus.documents.id=_id", "corpus.documents.text=[text]", f"corpus.questions.path={files['questions']}",
            "corpus.questions.id=_id", "corpus.questions.text=[text]",
            f"corpus.judgments.path={judgments or files['half']}", "corpus.judgments.format=qrels")


def sweep(folder: Path, files: dict[str, Path], sizes: str = "16,64") -> str:
    """A chunked sweep (BM25 at each chunk size) on the visible half; its parent run's id."""
    done = run_pipeline(folder, "-m", *corpus_args(files), "chunker=recursive", f"chunker.size={sizes}",
                        "retriever=bm25", *MEASURES)
    assert done.returncode == 0, done.stderr[-3000:]
    return re.findall(r"parent run ([0-9a-f]{32})", done.stdout)[-1]


def documents(files: dict[str, Path]) -> dict[str, str]:
    return {r["_id"]: r["text"] for r in map(json.loads, files["documents"].read_text().splitlines())}


def sheet_rows(sheet: Path) -> tuple[list[str], list[list[str]], list[str]]:
    """A sheet's header, rows and comment lines (those above the header: a document's own lines may start with #)."""
    lines = sheet.read_text(encoding="utf-8").splitlines(keepends=True)
    comments = []
    while lines and lines[0].startswith("#"):
        comments.append(lines.pop(0))
    rows = list(csv.reader(io.StringIO("".join(lines))))
    return rows[0], rows[1:], comments


def write_sheet(path: Path, header: list[str], rows: list[list[str]], comments: list[str]) -> None:
    buffer = io.StringIO()
    csv.writer(buffer).writerows([header, *rows])
    path.write_text("".join(comments) + buffer.getvalue(), encoding="utf-8")
