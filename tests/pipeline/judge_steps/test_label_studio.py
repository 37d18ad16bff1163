"""Judging in a real Label Studio: the project made with the graded scale, the pool pushed once, two assessors'
annotations posted through its API, pulled back into a qrels version with their agreement; assessors who disagree
refused, then settled by an adjudication round; a budget caps what is pushed; bad input one line each."""

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
def studio_folder(tmp_path_factory):
    """The running server's data and log folder, and its URL."""
    if server.executable() is None:
        pytest.skip("label-studio is not installed: pip install -e '.[judge]' (make test-slow does)")
    folder = tmp_path_factory.mktemp("label-studio")
    with server.label_studio(folder) as url:
        yield folder, url


@pytest.fixture(scope="module")
def studio(studio_folder):
    return studio_folder[1]


def test_label_studio_starts_without_asking_the_package_index(studio_folder):
    """LATEST_VERSION_CHECK=false: Label Studio otherwise asks pypi.org for a newer version as it starts (logged as
    an HTTPS connection to pypi.org, or as "Can't get latest version" offline)."""
    log = server.log_of(studio_folder[0]).read_text()
    assert "Starting development server" in log, log[-2000:]
    assert "pypi.org" not in log and "Can't get latest version" not in log


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
        bobs[pair] = min(ann[pair] + 1, 3) if i % 8 == 0 else ann[pair]  # bob grades one task in eight higher
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


DISPUTED = "disputed"
BUDGET = 40


def test_assessors_who_disagree_are_refused_until_a_third_settles_their_ties(studio, swept, monkeypatch):
    """A budget caps what is pushed; two assessors who give opposite grades to every pair are refused with the count
    of their disagreements; an adjudication round pushes those pairs to a project of their own, and once a third
    assessor has graded them all, pull takes the version with the third assessor's grades."""
    folder, parent = swept
    with_token(monkeypatch)
    pushed = judge(folder, "pool", parent, "--to", "label-studio", "--url", studio, "--project", DISPUTED,
                   "--budget", str(BUDGET))
    assert pushed.returncode == 0, pushed.stderr
    assert f"Pool saved in {folder / 'judging' / DISPUTED} ({BUDGET} pairs: the first {BUDGET} of the " in pushed.stdout
    assert f"{BUDGET} task(s) pushed, 0 already there" in pushed.stdout
    assert re.search(rf"system +now +after {BUDGET} ", pushed.stdout)  # judged@k after the budget is reported
    pool = pd.read_csv(folder / "judging" / DISPUTED / "pool.csv", dtype=str)
    api = LabelStudio(studio, "LABEL_STUDIO_API_KEY")
    tasks = api.tasks(api.project(DISPUTED)["id"])
    assert len(pool) == BUDGET and [(t["data"]["query_id"], t["data"]["doc_id"]) for t in tasks] == list(
        zip(pool["query_id"], pool["doc_id"]))

    users = {email: user for user, email in api.users().items()}
    dan = users.get("dan@example.com") or api.request("POST", "/api/users/", {"email": "dan@example.com",
                                                                              "username": "dan"})["id"]
    ann = {}
    for i, task in enumerate(tasks):
        ann[(task["data"]["query_id"], task["data"]["doc_id"])] = grade = 3 * (i % 2)
        api.annotate(task["id"], grade)
        api.annotate(task["id"], 3 - grade, user_id=dan)  # dan says the opposite, every time
    from sklearn.metrics import cohen_kappa_score

    kappa = cohen_kappa_score(list(ann.values()), [3 - g for g in ann.values()], labels=[0, 1, 2, 3])
    versions = folder / "judging" / DISPUTED / "versions"
    refused = judge(folder, "pull", "--project", DISPUTED)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert (f"Cohen's kappa {kappa:.3f} is below 0.4 (agreement.minimum, --min-agreement) over {BUDGET} pairs graded "
            f"by two or more, {BUDGET} of them graded differently, {BUDGET} left tied by the majority rule (ties: "
            f"lower): have a third assessor settle them (python -m pipeline.judge adjudicate --project "
            f"'{DISPUTED}'), or take the version anyway (--force); nothing written") in refused.stderr
    assert not versions.exists()
    forced = judge(folder, "pull", "--project", DISPUTED, "--force", "--no-log")
    assert forced.returncode == 0 and "taken although the assessors agree less than the minimum (--force)" in (
        forced.stdout)

    adjudicated = judge(folder, "adjudicate", "--project", DISPUTED)
    assert adjudicated.returncode == 0, adjudicated.stderr
    round_title = f"{DISPUTED} adjudication"
    assert (f"Adjudication round: project '{round_title}' (created, id " in adjudicated.stdout
            and f"{BUDGET} pair(s) left tied by the majority rule, {BUDGET} task(s) pushed, 0 already there"
            in adjudicated.stdout)
    again = judge(folder, "adjudicate", "--project", DISPUTED)
    assert f"0 task(s) pushed, {BUDGET} already there" in again.stdout
    project = api.project(round_title)
    assert "Grades given so far" in project["label_config"]
    round_tasks = api.tasks(project["id"])
    assert len(round_tasks) == BUDGET
    first = round_tasks[0]["data"]
    said = ann[(first["query_id"], first["doc_id"])]
    assert first["earlier"].startswith(f"{server.USER} gave {said}: ") and f"dan@example.com gave {3 - said}: " in (
        first["earlier"])

    carol = users.get("carol@example.com") or api.request("POST", "/api/users/", {"email": "carol@example.com",
                                                                                  "username": "carol"})["id"]
    carols = {}
    for i, task in enumerate(round_tasks[:BUDGET // 2]):
        carols[(task["data"]["query_id"], task["data"]["doc_id"])] = grade = 1 + i % 2
        api.annotate(task["id"], grade, user_id=carol)
    half = judge(folder, "pull", "--project", DISPUTED)  # half settled: the other half is still left to the rule
    assert half.returncode == 2 and f"{BUDGET // 2} left tied by the majority rule" in half.stderr
    waiting = judge(folder, "pull", "--project", DISPUTED, "--ties", "adjudicated")
    assert waiting.returncode == 2 and f"{BUDGET // 2} pair(s) left tied by the majority rule have no adjudicated " \
        "grade yet (ties: adjudicated)" in waiting.stderr
    for i, task in enumerate(round_tasks[BUDGET // 2:]):
        carols[(task["data"]["query_id"], task["data"]["doc_id"])] = grade = i % 4
        api.annotate(task["id"], grade, user_id=carol)

    pulled = judge(folder, "pull", "--project", DISPUTED)
    assert pulled.returncode == 0, pulled.stderr
    assert f"{BUDGET} pair(s) left tied: {BUDGET} settled by adjudication" in pulled.stdout
    version = re.search(r"qrels version ([0-9a-f]{16}) logged", pulled.stdout).group(1)
    qrels = pd.read_csv(versions / version / "qrels.tsv", sep="\t", dtype=str)
    assert {(q, d): int(g) for q, d, g in qrels.itertuples(index=False)} == carols  # the third assessor decided
    rounds = pd.read_csv(versions / version / "adjudications.csv", dtype={"grade": int})
    assert set(rounds["assessor"]) == {"carol@example.com"} and len(rounds) == BUDGET
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    [logged] = client.search_runs([client.get_experiment_by_name("rankscope judgments").experiment_id],
                                  f"tags.`rankscope.qrels_digest` = '{version}'")
    metrics = logged.data.metrics
    assert metrics["qrels/adjudicated"] == BUDGET and metrics["qrels/agreement_kappa"] == pytest.approx(kappa)


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
    wrong = judge(folder, "pull", "--project", PROJECT)
    one_line(wrong, "refused the token in LABEL_STUDIO_API_KEY (HTTP 401")
    assert wrong.stderr.endswith("accepts legacy tokens (LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true)\n")  # unmasked
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
