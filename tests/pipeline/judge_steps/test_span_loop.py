"""The span judging loop through a sheet: a chunked sweep on pages with half their evidence hidden is pooled on the
pairs its top chunks point to (the chunks marked), the hidden evidence is highlighted in the sheet (offsets or the
text itself), pulled into a span judgment version checked against the documents, and re-scored from each run's
chunks.tsv. The known answer: a job scored with the version's qrels.tsv gives the re-scored figures, for every chunk
size; marks that cannot be used are one line each while the rest make the version."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.chunks import read_chunks
from metrics.spans import judgments_digest, read_beir_spans
from pipeline.common.names import CHUNKS_FILE, TAG_OUTPUT_DIR, TAG_QRELS_DIGEST, TAG_RESCORED_FROM
from pipeline.judging_maths.spans import text_digest
from tests.pipeline.helpers import job_runs, run_pipeline
from tests.pipeline.judge_steps.span_pages import (
    MEASURES,
    corpus_args,
    documents,
    sheet_rows,
    spans_of,
    sweep,
    write_files,
    write_sheet,
)
from tests.pipeline.judge_steps.test_loop import judge

DEPTH = 10


@pytest.fixture(scope="module")
def pooled(tmp_path_factory, empty_store):
    """(folder, files, the sweep's parent run id, pool's output): a chunked sweep pooled to a sheet."""
    import shutil

    folder = tmp_path_factory.mktemp("span-loop")
    shutil.copy(empty_store, folder / "mlflow.db")
    files = write_files(folder / "data")
    parent = sweep(folder, files)
    said = judge(folder, "pool", parent, "--to", "sheet.csv")
    assert said.returncode == 0, said.stderr
    return folder, files, parent, said.stdout


def top_chunks(folder) -> dict[str, pd.DataFrame]:
    """Each job's top chunks per question (its chunks.tsv), by system."""
    found = {}
    for run in job_runs(folder):
        chunks = read_chunks(f"{run.data.tags[TAG_OUTPUT_DIR]}/{CHUNKS_FILE}")
        rows = [(q, chunks.chunks.doc_ids[c], int(chunks.chunks.starts[c]), int(chunks.chunks.ends[c]))
                for i, q in enumerate(chunks.run.query_ids) for c in chunks.run.docs[i, :DEPTH] if c >= 0]
        found[run.data.tags["rankscope.system"]] = pd.DataFrame(rows, columns=["query_id", "doc_id", "start", "end"])
    return found


def test_a_chunked_sweep_pools_the_pairs_its_top_chunks_point_to_with_those_chunks_marked(pooled):
    folder, files, _, said = pooled
    tops = pd.concat(top_chunks(folder).values(), ignore_index=True)
    judged = {(q, d) for q, d, *_ in spans_of(files["half"])}
    expected = {(q, d) for q, d in zip(tops["query_id"], tops["doc_id"])} - judged
    pool = pd.read_csv(folder / "judging" / "sheet" / "pool.csv", dtype=str)
    assert set(zip(pool["query_id"], pool["doc_id"])) == expected
    texts = documents(files)
    assert pool["doc_digest"].tolist() == [text_digest(texts[d]) for d in pool["doc_id"]]
    marked = pd.read_csv(folder / "judging" / "sheet" / "pool_chunks.csv", dtype={"query_id": str, "doc_id": str})
    behind = tops[[p in expected for p in zip(tops["query_id"], tops["doc_id"])]].drop_duplicates()
    assert set(map(tuple, marked[["query_id", "doc_id", "start", "end"]].values.tolist())) == set(
        map(tuple, behind.values.tolist()))
    header, rows, _ = sheet_rows(folder / "sheet.csv")
    assert header[:7] == ["order", "query_id", "doc_id", "grade", "start", "end", "text"]
    first = rows[0]
    assert first[header.index("pooled_chunks")] == " ".join(
        f"{s}:{e}" for q, d, s, e in marked.values[:, :4].tolist() if (q, d) == (first[1], first[2]))
    assert f"{len(expected)} unjudged pairs in their top {DEPTH} chunks" in said


def highlighted(folder, files, out, by_text: bool = True) -> dict[tuple[str, str], list[tuple[int, int, int]]]:
    """The sheet filled from the hidden half: every hidden span of a pooled pair a row (every other one given by its
    text, when ``by_text`` and the text occurs once), every other pair 0; what was highlighted."""
    header, rows, comments = sheet_rows(folder / "sheet.csv")
    hidden: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for q, d, g, s, e in spans_of(files["hidden"]):
        hidden.setdefault((q, d), []).append((s, e, g))
    texts = documents(files)
    filled, given = [], {}
    at = {name: header.index(name) for name in ("grade", "start", "end", "text", "assessor")}
    for row in rows:
        pair = (row[1], row[2])
        if pair not in hidden:
            filled.append([*row[:at["grade"]], "0", *row[at["grade"] + 1:]])
            continue
        for i, (s, e, g) in enumerate(hidden[pair]):
            new = list(row)
            new[at["grade"]] = str(g)
            text = texts[pair[1]][s:e]
            if by_text and i % 2 == 0 and texts[pair[1]].count(text) == 1:
                new[at["text"]] = text
            else:
                new[at["start"]], new[at["end"]] = str(s), str(e)
            filled.append(new)
        given[pair] = hidden[pair]
    write_sheet(out, header, filled, comments)
    return given


@pytest.mark.slow  # several processes and jobs, about a minute
def test_hidden_evidence_highlighted_in_the_sheet_makes_a_version_a_job_reads_back_and_rescore_gives_its_figures(
        pooled):
    folder, files, parent, _ = pooled
    given = highlighted(folder, files, folder / "filled.csv")
    assert given, "the pool holds no hidden evidence: the test would prove nothing"
    pulled = judge(folder, "pull", "--from", "filled.csv")
    assert pulled.returncode == 0, pulled.stderr
    version = re.search(r"span judgment version ([0-9a-f]{16}) logged", pulled.stdout).group(1)
    assert "mark(s) set aside" not in pulled.stdout
    target = folder / "judging" / "sheet" / "versions" / version
    qrels, spans, _ = read_beir_spans(target / "qrels.tsv")
    assert judgments_digest(qrels, spans) == version
    expected = {(q, d, s, e, g) for q, d, g, s, e in spans_of(files["half"])} | {
        (q, d, s, e, g) for (q, d), found in given.items() for s, e, g in found}
    assert set(zip(spans.query_ids, spans.doc_ids, spans.starts.tolist(), spans.ends.tolist(),
                   spans.grades.tolist())) == expected

    rescored = judge(folder, "rescore", parent, "--qrels", version)
    assert rescored.returncode == 0, rescored.stderr
    assert "Kendall's tau" in rescored.stdout and "span_recall@64tok before" in rescored.stdout
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    originals = {r.info.run_id: r for r in job_runs(folder)}
    again = client.search_runs([client.get_experiment_by_name(f"rankscope qrels {version}").experiment_id],
                               f"tags.`{TAG_RESCORED_FROM}` != ''")
    assert len(again) == len(originals) == 2
    for run in again:
        size = originals[run.data.tags[TAG_RESCORED_FROM]].data.params["chunker.size"]
        job = run_pipeline(folder, *corpus_args(files, target / "qrels.tsv"), "chunker=recursive",
                           f"chunker.size={size}", "retriever=bm25", *MEASURES, "tracking.experiment=known")
        assert job.returncode == 0, job.stderr[-2000:]
        [known] = client.search_runs([client.get_experiment_by_name("known").experiment_id],
                                     f"params.`chunker.size` = '{size}'")
        assert known.data.tags[TAG_QRELS_DIGEST] == version
        for key in ("span_recall_at_64tok", "span_recall_at_5", "span_precision_omega", "recall_at_5"):
            assert run.data.metrics[key] == pytest.approx(known.data.metrics[key], abs=1e-12), (size, key)


def test_marks_that_cannot_be_used_are_one_line_each_and_the_rest_make_the_version(pooled):
    folder, files, _, _ = pooled
    header, rows, comments = sheet_rows(folder / "sheet.csv")
    texts = documents(files)
    at = {name: header.index(name) for name in ("grade", "start", "end", "text", "assessor")}

    def row(base: list[str], **values: str) -> list[str]:
        new = list(base)
        for name, value in values.items():
            new[at[name]] = value
        return new

    first = rows[0]
    second = next(r for r in rows if r[2] != first[2])
    third = next(r for r in rows if r[2] not in (first[2], second[2]))
    doc = texts[first[2]]
    twice = next(w for w in ("the", "a", "is") if doc.count(w) > 1)
    rest = [row(r, grade="0") for r in rows if r not in (first, second, third)]
    bad = [row(first, grade="2", text=twice), row(first, grade="2", text="no such words anywhere"),
           row(first, grade="2", start="5", end="5"), row(second, grade="2", start="0", end="9"),
           row(second, grade="3", start="4", end="12"), row(third, grade="0"), *rest]
    write_sheet(folder / "bad.csv", header, bad, comments)
    pages = files["documents"]
    original = pages.read_text()
    records = [json.loads(line) for line in original.splitlines()]
    for record in records:
        if record["_id"] == third[2]:
            record["text"] = "Changed! " + record["text"]
    try:
        pages.write_text("".join(json.dumps(r) + "\n" for r in records))
        pulled = judge(folder, "pull", "--from", "bad.csv", "--no-log")
    finally:
        pages.write_text(original)
    assert pulled.returncode == 0, pulled.stderr
    out = pulled.stdout
    where = "bad.csv"  # as given
    lines = {int(m.group(3) or m.group(2)): m.group(4)  # by the row a spreadsheet shows
             for m in re.finditer(rf"{where}:((\d+)(?: \(row (\d+)\))?): (.*)", out)}
    assert lines[5].startswith(f"the text {twice!r} occurs") and f"in document {first[2]!r}" in lines[5]
    assert lines[6].startswith(f"the text 'no such words anywhere' does not occur in document {first[2]!r}")
    assert lines[7] == f"the highlight 5:5 of document {first[2]!r} is empty; not used"
    assert lines[8].startswith(f"bad's highlights 0:9 (grade 2) and 4:12 (grade 3) of document {second[2]!r} overlap")
    changed = f"document {third[2]!r} changed since it was pooled"
    assert lines[10].startswith(changed) and lines[10].endswith("not used")
    version = re.search(r"span judgment version ([0-9a-f]{16})", out).group(1)
    spans = pd.read_csv(folder / "judging" / "sheet" / "versions" / version / "spans.tsv", sep="\t", dtype=str)
    mine = spans[(spans["query_id"] == second[1]) & (spans["doc_id"] == second[2])]
    assert mine[["start", "end", "grade"]].values.tolist() == [["0", "4", "2"], ["4", "12", "3"]]
