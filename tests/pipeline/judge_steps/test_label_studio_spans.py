"""Judging evidence spans in a real Label Studio: a chunked sweep's pool pushed as tasks showing the question and the
whole document with the pooled chunks pre-annotated; two assessors highlight spans through Label Studio's API; pull
reads the highlights back with their offsets checked against the documents, measures the assessors' agreement on the
grades (kappa, checked against scikit-learn) and on the characters they highlighted (F1 and IoU, checked against
scikit-learn on the characters laid end to end), merges the highlights character by character, and sets aside, one
line each, a highlight whose text no longer matches and a task without a question."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.annotation_tools.label_studio import EVIDENCE, MARKED, VERDICT, LabelStudio
from pipeline.common.names import TAG_ASSESSORS, TAG_KIND, TAG_QRELS_DIGEST, TAG_QRELS_PARENT
from pipeline.judging_maths.scale import Scale
from pipeline.judging_maths.spans import text_digest
from tests.pipeline.judge_steps import label_studio_server as server
from tests.pipeline.judge_steps.span_pages import documents, spans_of, sweep, write_files
from tests.pipeline.judge_steps.test_loop import judge

pytestmark = pytest.mark.slow
PROJECT = "pages spans"
SCALE = Scale.of(None)


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    if server.executable() is None:
        pytest.skip("label-studio is not installed: pip install -e '.[judge]' (make test-slow does)")
    folder = tmp_path_factory.mktemp("label-studio-spans")
    with server.label_studio(folder) as url:
        yield url


@pytest.fixture(scope="module")
def swept(tmp_path_factory, empty_store):
    folder = tmp_path_factory.mktemp("ls-spans")
    shutil.copy(empty_store, folder / "mlflow.db")
    files = write_files(folder / "data")
    return folder, files, sweep(folder, files)


def evidence(length: int, ranges: list[tuple[int, int, int]]) -> np.ndarray:
    """A document's characters: 1 where a range of grade 1 or more covers them."""
    found = np.zeros(length, dtype=int)
    for s, e, g in ranges:
        if g >= 1:
            found[s:e] = 1
    return found


def test_two_assessors_highlight_evidence_in_label_studio_and_pull_checks_offsets_and_agreement(studio, swept,
                                                                                               monkeypatch):
    folder, files, parent = swept
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", server.TOKEN)
    pushed = judge(folder, "pool", parent, "--to", "label-studio", "--url", studio, "--project", PROJECT)
    assert pushed.returncode == 0, pushed.stderr
    api = LabelStudio(studio, "LABEL_STUDIO_API_KEY")
    project = api.project(PROJECT)
    config = project["label_config"]
    assert f'<Labels name="{EVIDENCE}" toName="document">' in config and f'<Labels name="{MARKED}"' in config
    assert f'<Choices name="{VERDICT}"' in config and '<Label value="3: highly relevant' in config
    pool = pd.read_csv(folder / "judging" / PROJECT / "pool.csv", dtype=str)
    marked = pd.read_csv(folder / "judging" / PROJECT / "pool_chunks.csv", dtype={"query_id": str, "doc_id": str})
    tasks = api.tasks(project["id"])
    assert len(tasks) == len(pool) and f"{len(pool)} task(s) pushed, 0 already there" in pushed.stdout
    texts = documents(files)
    for task in tasks:
        data = task["data"]
        pair = (data["query_id"], data["doc_id"])
        predicted = api.request("GET", f"/api/tasks/{task['id']}/")["predictions"][0]["result"]
        expected = marked[(marked["query_id"] == pair[0]) & (marked["doc_id"] == pair[1])]
        assert sorted((r["value"]["start"], r["value"]["end"]) for r in predicted) == sorted(
            zip(expected["start"].tolist(), expected["end"].tolist()))
        assert all(r["value"]["text"] == texts[pair[1]][r["value"]["start"]:r["value"]["end"]] for r in predicted)
        assert data["document"] == texts[pair[1]] and data["doc_digest"] == text_digest(texts[pair[1]])

    hidden: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for q, d, g, s, e in spans_of(files["hidden"]):
        hidden.setdefault((q, d), []).append((s, e, g))
    bob = api.request("POST", "/api/users/", {"email": "bob@example.com", "username": "bob"})["id"]
    ann_spans, bob_spans, stale = {}, {}, None
    for i, task in enumerate(tasks):
        pair = (task["data"]["query_id"], task["data"]["doc_id"])
        text = texts[pair[1]]
        if pair in hidden:
            ann_spans[pair] = list(hidden[pair])
            bob_spans[pair] = [(min(s + 3, e - 1), e, g) for s, e, g in hidden[pair][i % 2:]]  # bob starts later
        elif i % 5 == 0:
            ann_spans[pair], bob_spans[pair] = [], [(0, 20, 1)]  # bob sees evidence where ann sees none
        else:
            ann_spans[pair] = bob_spans[pair] = []
        extra = []
        if stale is None and pair in hidden:  # a highlight whose text no longer matches the document
            stale = (task["id"], pair)
            extra = [(0, 12, 2, "not the text")]
        api.highlight(task["id"], SCALE, [(s, e, g, text[s:e]) for s, e, g in ann_spans[pair]] + extra,
                      not_relevant=not ann_spans[pair])
        api.highlight(task["id"], SCALE, [(s, e, g, text[s:e]) for s, e, g in bob_spans[pair]],
                      not_relevant=not bob_spans[pair], user_id=bob)
    assert stale is not None and hidden, "no hidden evidence in the pool: the test would prove nothing"
    stray = api.request("POST", f"/api/projects/{project['id']}/import", [
        {"data": {"question": "", "doc_id": pool["doc_id"][0], "document": texts[pool["doc_id"][0]]}}])
    lonely = next(t for t in api.tasks(project["id"]) if not t["data"].get("query_id"))
    api.highlight(lonely["id"], SCALE, [(0, 5, 2, texts[pool["doc_id"][0]][:5])])
    assert stray

    pulled = judge(folder, "pull", "--project", PROJECT)
    assert pulled.returncode == 0, pulled.stderr
    out = pulled.stdout
    assert (f"Label Studio task {stale[0]}: the highlighted text 'not the text' no longer matches document "
            f"{stale[1][1]!r} at 0:12") in out
    assert (f"Label Studio task {lonely['id']}: a task without a question (no query_id or question in its data): "
            f"its 1 annotation(s) not used") in out

    from sklearn.metrics import cohen_kappa_score, f1_score, jaccard_score

    pairs = list(ann_spans)
    grade = {who: [max((g for _, _, g in spans[p]), default=0) for p in pairs]
             for who, spans in (("ann", ann_spans), ("bob", bob_spans))}
    kappa = cohen_kappa_score(grade["ann"], grade["bob"], labels=SCALE.grades)
    assert f"Cohen's kappa {kappa:.3f}" in out
    ya = np.concatenate([evidence(len(texts[p[1]]), ann_spans[p]) for p in pairs])
    yb = np.concatenate([evidence(len(texts[p[1]]), bob_spans[p]) for p in pairs])
    assert f"character-level F1 {f1_score(ya, yb):.3f}, IoU {jaccard_score(ya, yb):.3f}" in out
    differing = sum(ann_spans[p] != bob_spans[p] for p in pairs)
    assert f"{differing} document(s) graded or highlighted differently" in out

    version = re.search(r"span judgment version ([0-9a-f]{16}) logged", out).group(1)
    target = folder / "judging" / PROJECT / "versions" / version
    highlights = pd.read_csv(target / "highlights.csv", dtype={"query_id": str, "doc_id": str})
    ann = highlights[highlights["assessor"] == server.USER]
    assert sorted(zip(ann["query_id"], ann["doc_id"], ann["start"], ann["end"], ann["grade"])) == sorted(
        (q, d, s, e, g) for (q, d), spans in ann_spans.items() for s, e, g in spans)  # offsets as highlighted
    spans = pd.read_csv(target / "spans.tsv", sep="\t", dtype={"query_id": str, "doc_id": str})
    for pair in hidden:
        if pair not in ann_spans:
            continue
        both = evidence(len(texts[pair[1]]), ann_spans[pair]) & evidence(len(texts[pair[1]]), bob_spans[pair])
        mine = spans[(spans["query_id"] == pair[0]) & (spans["doc_id"] == pair[1])]
        assert evidence(len(texts[pair[1]]), list(zip(mine["start"], mine["end"], mine["grade"]))).tolist() == \
            both.tolist()  # two assessors, ties to the lower grade: the characters both highlighted

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    [run] = [r for r in client.search_runs([client.get_experiment_by_name("rankscope judgments").experiment_id])
             if r.data.tags.get(TAG_QRELS_DIGEST) == version]
    assert run.data.tags[TAG_KIND] == "qrels" and run.data.tags[TAG_ASSESSORS] == f"{server.USER}, bob@example.com"
    assert run.data.tags[TAG_QRELS_PARENT] and run.data.metrics["qrels/agreement_span_f1"] == pytest.approx(
        f1_score(ya, yb))
    [dataset] = run.inputs.dataset_inputs
    assert dataset.dataset.digest == version and "start" in dataset.dataset.schema

    # an adjudication round: the pairs whose characters the two leave tied, marked with their highlights
    rounds = judge(folder, "adjudicate", "--project", PROJECT)
    assert rounds.returncode == 0, rounds.stderr
    tied = {p for p in pairs if ann_spans[p] != bob_spans[p]}
    assert f"{len(tied)} pair(s) whose highlights the majority rule leaves tied, {len(tied)} task(s) pushed" \
        in rounds.stdout
    round_tasks = api.tasks(api.project(f"{PROJECT} adjudication")["id"])
    carol = api.request("POST", "/api/users/", {"email": "carol@example.com", "username": "carol"})["id"]
    settled = {}
    for task in round_tasks:
        pair = (task["data"]["query_id"], task["data"]["doc_id"])
        text = texts[pair[1]]
        predicted = api.request("GET", f"/api/tasks/{task['id']}/")["predictions"][0]["result"]
        shown = evidence(len(text), [(r["value"]["start"], r["value"]["end"], 1) for r in predicted])
        assert shown.tolist() == (evidence(len(text), ann_spans[pair]) | evidence(len(text), bob_spans[pair])).tolist()
        assert "graded" in task["data"]["earlier"]
        settled[pair] = hidden.get(pair, [])
        api.highlight(task["id"], SCALE, [(s, e, g, text[s:e]) for s, e, g in settled[pair]],
                      not_relevant=not settled[pair], user_id=carol)
    assert set(settled) == tied
    again = judge(folder, "pull", "--project", PROJECT)
    assert again.returncode == 0, again.stderr
    assert f"{len(tied)} settled by adjudication" in again.stdout
    version = re.search(r"span judgment version ([0-9a-f]{16}) logged", again.stdout).group(1)
    spans = pd.read_csv(folder / "judging" / PROJECT / "versions" / version / "spans.tsv", sep="\t",
                        dtype={"query_id": str, "doc_id": str})
    for pair, found in settled.items():
        mine = spans[(spans["query_id"] == pair[0]) & (spans["doc_id"] == pair[1])]
        assert sorted(zip(mine["start"], mine["end"], mine["grade"])) == sorted(found)  # the third assessor's
