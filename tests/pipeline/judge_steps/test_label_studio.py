"""Judging in a real Label Studio: the project made with the graded scale, the pool pushed once, two assessors'
annotations posted through its API, pulled back into a qrels version with their agreement; bad input one line each."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from pipeline.annotation_tools.label_studio import LabelStudio
from pipeline.judging_maths.scale import Scale
from tests.pipeline.helpers import run_pipeline
from tests.pipeline.judge_steps import label_studio_server as server
from tests.pipeline.judge_steps.test_loop import FILES, judge, sample_grades

pytestmark = pytest.mark.slow
PROJECT = "helpdesk chunks"


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    if server.executable() is None:
        pytest.skip("label-studio is not installed: pip install -e '.[judge]' (make test-slow does)")
    with server.label_studio(tmp_path_factory.mktemp("label-studio")) as url:
        yield url


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ls-loop")
    done = run_pipeline(folder, "-m", "experiment=own_files", "corpus.judgments.path=null", *FILES)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, re.search(r"pipeline\.judge pool ([0-9a-f]{32})", done.stdout).group(1)


def with_token(monkeypatch, token: str = server.TOKEN) -> None:
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", token)


def test_the_loop_through_label_studio_with_two_assessors(studio, swept, monkeypatch):
    folder, parent = swept
    with_token(monkeypatch)
    pushed = judge(folder, "pool", parent, "--to", "label-studio", "--url", studio, "--project", PROJECT)
    assert pushed.returncode == 0, pushed.stderr
    size = int(re.search(r"Pool saved in .* \((\d+) pairs", pushed.stdout).group(1))
    assert f"{size} task(s) pushed, 0 already there" in pushed.stdout
    again = judge(folder, "pool", parent, "--to", "label-studio", "--url", studio, "--project", PROJECT)
    assert f"0 task(s) pushed, {size} already there" in again.stdout  # no pair pushed twice

    api = LabelStudio(studio, "LABEL_STUDIO_API_KEY")
    project = api.project(PROJECT)
    assert "<Choice value=\"3: highly relevant" in project["label_config"]
    tasks = api.tasks(project["id"])
    assert len(tasks) == size and [t["data"]["order"] for t in tasks] == list(range(1, size + 1))
    bob = api.request("POST", "/api/users/", {"email": "bob@example.com", "username": "bob"})["id"]
    grades = sample_grades()
    ann, bobs = {}, {}
    for i, task in enumerate(tasks):
        pair = (task["data"]["query_id"], task["data"]["doc_id"])
        ann[pair] = grades.get(pair, 0)
        bobs[pair] = min(ann[pair] + 1, 3) if i % 4 == 0 else ann[pair]  # bob grades one task in four higher
        api.annotate(task["id"], ann[pair])
        api.annotate(task["id"], bobs[pair], user_id=bob)

    pulled = judge(folder, "pull", "--project", PROJECT)
    assert pulled.returncode == 0, pulled.stderr
    from sklearn.metrics import cohen_kappa_score

    pairs = list(ann)
    kappa = cohen_kappa_score([ann[p] for p in pairs], [bobs[p] for p in pairs], labels=[0, 1, 2, 3])
    weighted = cohen_kappa_score([ann[p] for p in pairs], [bobs[p] for p in pairs], labels=[0, 1, 2, 3],
                                 weights="quadratic")
    assert f"Cohen's kappa {kappa:.3f} (quadratic-weighted {weighted:.3f})" in pulled.stdout
    assert f"{sum(ann[p] != bobs[p] for p in pairs)} pair(s) with different grades" in pulled.stdout
    version = re.search(r"qrels version ([0-9a-f]{16}) logged", pulled.stdout).group(1)
    qrels = pd.read_csv(folder / "judging" / PROJECT / "versions" / version / "qrels.tsv", sep="\t", dtype=str)
    merged = {(q, d): int(g) for q, d, g in qrels.itertuples(index=False)}
    assert merged == {p: min(ann[p], bobs[p]) for p in pairs}  # two assessors who differ: the lower grade


def test_bad_input_is_one_line_and_writes_nothing(studio, swept, monkeypatch):
    folder, parent = swept
    with_token(monkeypatch)
    versions = folder / "judging" / PROJECT / "versions"
    before = sorted(versions.iterdir()) if versions.is_dir() else []

    def one_line(done, text):
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and text in done.stderr, done.stderr

    one_line(judge(folder, "pull", "--project", "no such project", "--pool", str(folder / "judging" / PROJECT)),
             "has no project titled 'no such project'")
    with_token(monkeypatch, "wrong" * 8)
    one_line(judge(folder, "pull", "--project", PROJECT), "refused the token in LABEL_STUDIO_API_KEY (HTTP 401")
    one_line(judge(folder, "pool", parent, "--to", "label-studio", "--url", studio, "--project", "other"),
             "refused the token")
    assert not (folder / "judging" / "other").exists()
    with_token(monkeypatch)
    closed = f"http://127.0.0.1:{server.free_port()}"
    one_line(judge(folder, "pull", "--project", PROJECT, "--url", closed), f"Label Studio at {closed} cannot be "
                                                                          f"reached")
    api = LabelStudio(studio, "LABEL_STUDIO_API_KEY")
    project = api.project(PROJECT)
    first = api.tasks(project["id"])[0]
    api.annotate(first["id"], 9)
    one_line(judge(folder, "pull", "--project", PROJECT), f"Label Studio task {first['id']}: grade 9 is outside the "
                                                          f"scale 0-3")
    api.request("DELETE", f"/api/annotations/{api.tasks(project['id'])[0]['annotations'][-1]['id']}/")
    api.push(project["id"], [{"query_id": "q99", "doc_id": "nowhere", "question": "?", "document": "?"}])
    stray = next(t for t in api.tasks(project["id"]) if t["data"]["query_id"] == "q99")
    api.annotate(stray["id"], 2)
    one_line(judge(folder, "pull", "--project", PROJECT), "not a pair of this pool")
    assert (sorted(versions.iterdir()) if versions.is_dir() else []) == before
    assert Scale.of().high == 3
