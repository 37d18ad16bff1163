"""The loop on a team's own files with no judgment yet: sweep, pool to a sheet, grade it, pull a new qrels version,
re-score. The sample's own judgments file plays the assessor, so the known answer is a job run with the new version's
qrels: re-scoring the stored rankings must give its figures without ranking again."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from pipeline.common.names import (
    QRELS_BEIR,
    TAG_QRELS_DIGEST,
    TAG_QRELS_PARENT,
    TAG_RESCORED_FROM,
)
from tests.pipeline.helpers import REPO, cli_env, run_pipeline

OWN = REPO / "tests" / "pipeline" / "data" / "own_files"
FILES = (f"corpus.documents.path={OWN / 'chunks.parquet'}", f"corpus.questions.path={OWN / 'questions.csv'}")


def judge(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.judge", *args], cwd=folder, env=cli_env(folder),
                          capture_output=True, text=True, timeout=600)


def fill(sheet: Path, out: Path, grade_of, assessor: str = "spec") -> None:
    """The sheet with every row graded by ``grade_of(question, document)``."""
    lines = sheet.read_text(encoding="utf-8").splitlines(keepends=True)
    rows = list(csv.reader(io.StringIO("".join(line for line in lines if not line.startswith("#")))))
    for row in rows[1:]:
        row[3], row[4] = str(grade_of(row[1], row[2])), assessor
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    out.write_text("".join(line for line in lines if line.startswith("#")) + buffer.getvalue(), encoding="utf-8")


def sample_grades() -> dict[tuple[str, str], int]:
    with (OWN / "judgments.csv").open() as handle:
        return {(r["qid"], r["chunk_id"]): int(r["grade"]) for r in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    """An unjudged sweep (BM25, RRF) pooled to a sheet: (folder, the sweep's parent run id, pool output)."""
    folder = tmp_path_factory.mktemp("loop")
    done = run_pipeline(folder, "-m", "experiment=own_files", "corpus.judgments.path=null", *FILES)
    assert done.returncode == 0, done.stderr[-3000:]
    parent = re.search(r"pipeline\.judge pool ([0-9a-f]{32})", done.stdout).group(1)
    pool = judge(folder, "pool", parent, "--to", "sheet.csv")
    assert pool.returncode == 0, pool.stderr
    return folder, parent, pool.stdout


def test_the_pool_reports_each_order_and_writes_the_sheet_in_judging_order(pooled):
    folder, _, said = pooled
    assert "judged@10 by judgments made, depth order" in said and "rbp order (the order pushed)" in said
    assert re.search(r"pairs to judge for judged@10 >= 0.8 in every system: \d+ of the \d+ pairs", said)
    lines = (folder / "sheet.csv").read_text().splitlines()
    assert lines[0].startswith("# pool: ") and lines[2].startswith("order,query_id,doc_id,grade")
    pool = (folder / "judging" / "sheet" / "pool.csv").read_text().splitlines()
    assert len(lines) - 3 == len(pool) - 1


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_new_version_rescored_gives_what_a_job_with_its_qrels_gives(pooled):
    folder, parent, _ = pooled
    grades = sample_grades()
    fill(folder / "sheet.csv", folder / "graded.csv", lambda q, d: grades.get((q, d), 0))
    pulled = judge(folder, "pull", "--from", "graded.csv")
    assert pulled.returncode == 0, pulled.stderr
    version = re.search(r"qrels version ([0-9a-f]{16}) logged", pulled.stdout).group(1)
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    [logged] = client.search_runs([client.get_experiment_by_name("rankscope judgments").experiment_id],
                                  f"tags.`{TAG_QRELS_DIGEST}` = '{version}'")
    dataset = logged.inputs.dataset_inputs[0]
    assert dataset.dataset.digest == version and dataset.dataset.name == "helpdesk_chunks/qrels"
    assert logged.data.tags[TAG_QRELS_PARENT] and logged.data.tags["rankscope.assessors"] == "spec"

    rescored = judge(folder, "rescore", parent, "--qrels", version)
    assert rescored.returncode == 0, rescored.stderr
    assert "Judgments: re-scored against qrels version " + version in rescored.stdout
    page = (folder / "judging" / "rescored" / version / "report.html").read_text()
    assert 'id="judgments"' in page and "Judgments: re-scored against qrels version" in page
    experiment = client.get_experiment_by_name(f"rankscope qrels {version}")
    runs = {r.data.tags["rankscope.system"]: r for r in client.search_runs([experiment.experiment_id],
                                                                            "tags.`rankscope.kind` = 'job'")}
    assert set(runs) == {"BM25", "RRF"}
    assert all(r.data.tags[TAG_QRELS_DIGEST] == version and r.data.tags[TAG_RESCORED_FROM] for r in runs.values())

    qrels = next((folder / "judging" / "sheet" / "versions").glob(f"{version}/{QRELS_BEIR}"))
    job = run_pipeline(folder, "experiment=own_files", "retriever=rrf", *FILES, f"corpus.judgments.path={qrels}",
                       "corpus.judgments.format=qrels", "tracking.experiment=with_the_version")
    assert job.returncode == 0, job.stderr[-2000:]
    fresh = client.search_runs([client.get_experiment_by_name("with_the_version").experiment_id])[0]
    for key in ("ndcg_at_5", "mrr", "recall_at_5", "hit_rate_at_3"):
        assert runs["RRF"].data.metrics[key] == pytest.approx(fresh.data.metrics[key], abs=1e-12), key
    assert runs["RRF"].data.tags["rankscope.corpus_digest"] == fresh.data.tags["rankscope.corpus_digest"]


def test_bad_grades_and_strange_pairs_are_one_line_and_write_nothing(pooled):
    folder, _, _ = pooled
    versions = folder / "judging" / "sheet" / "versions"
    before = sorted(versions.iterdir()) if versions.is_dir() else []
    fill(folder / "sheet.csv", folder / "bad.csv", lambda q, d: 7)
    said = judge(folder, "pull", "--from", "bad.csv")
    assert said.returncode == 2 and said.stderr.count("\n") == 1
    assert "bad.csv:4: grade 7 is outside the scale 0-3" in said.stderr
    text = (folder / "sheet.csv").read_text() + "999,q01,nowhere,2,spec,,\n"
    (folder / "stray.csv").write_text(text)
    fill(folder / "stray.csv", folder / "stray.csv", lambda q, d: 1)
    said = judge(folder, "pull", "--from", "stray.csv")
    assert said.returncode == 2 and "'q01' and document 'nowhere' are not a pair of this pool" in said.stderr
    said = judge(folder, "rescore", "latest", "--qrels", "abcdef12")
    assert said.returncode == 2 and "no qrels version 'abcdef12'" in said.stderr
    assert (sorted(versions.iterdir()) if versions.is_dir() else []) == before


def test_a_budget_caps_the_pairs_saved_and_written_at_the_first_n_of_the_order(pooled):
    folder, parent, _ = pooled
    capped = judge(folder, "pool", parent, "--to", "capped.csv", "--budget", "25")
    assert capped.returncode == 0, capped.stderr
    assert re.search(r"system +now +after 25 ", capped.stdout)  # judged@10 after the budget
    assert "(the order pushed: its first 25 pairs, --budget 25)" in capped.stdout
    assert "(25 pairs: the first 25 of the " in capped.stdout
    whole = (folder / "judging" / "sheet" / "pool.csv").read_text().splitlines()
    assert (folder / "judging" / "capped" / "pool.csv").read_text().splitlines() == whole[:26]
    rows = [line for line in (folder / "capped.csv").read_text().splitlines() if not line.startswith("#")]
    assert len(rows) == 26  # the header and the first 25 pairs


@pytest.mark.parametrize("args, says", [
    (["--budget", "-5"], "rankscope judge: --budget -5: a budget is a number of judgments: 1 or more\n"),
    (["--budget", "0"], "rankscope judge: --budget 0: a budget is a number of judgments: 1 or more\n"),
    (["--depth", "0"], "rankscope judge: --depth 0: must be at least 1\n"),
])
def test_a_bad_flag_is_named_by_its_flag_not_by_the_settings_file(pooled, args, says):
    folder, parent, _ = pooled
    said = judge(folder, "pool", parent, "--to", "never.csv", *args)
    assert said.returncode == 2 and said.stderr == says
    assert not (folder / "never.csv").exists()


def test_assessors_who_disagree_on_every_pair_are_refused_with_their_count_unless_forced(pooled):
    """Two sheets graded in opposition: kappa far below 0.4, so the version the lower-grade rule would make (every
    pair 0) is refused in one line that counts the disagreements and says how to settle them; --force takes it."""
    from sklearn.metrics import cohen_kappa_score

    folder, parent, _ = pooled
    assert judge(folder, "pool", parent, "--to", "disputed.csv", "--budget", "30").returncode == 0
    grades = sample_grades()

    def ann(question: str, document: str) -> int:
        return 3 if grades.get((question, document), 0) else 0

    fill(folder / "disputed.csv", folder / "ann.csv", ann, "ann")
    fill(folder / "disputed.csv", folder / "bob.csv", lambda q, d: 3 - ann(q, d), "bob")
    with (folder / "judging" / "disputed" / "pool.csv").open() as handle:
        given = [ann(row["query_id"], row["doc_id"]) for row in csv.DictReader(handle)]
    kappa = cohen_kappa_score(given, [3 - g for g in given], labels=[0, 1, 2, 3])
    assert kappa < -0.3

    refused = judge(folder, "pull", "--from", "ann.csv", "--from", "bob.csv", "--no-log")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr == (
        f"rankscope judge: the assessors agree too little for a rule to merge their grades: Cohen's kappa {kappa:.3f} "
        f"is below 0.4 (agreement.minimum, --min-agreement) over 30 pairs graded by two or more, 30 of them graded "
        f"differently, 30 left tied by the majority rule (ties: lower): have a third assessor settle them (python -m "
        f"pipeline.judge adjudicate --from ann.csv --from bob.csv), or take the version anyway (--force); nothing "
        f"written\n")
    assert not (folder / "judging" / "disputed" / "versions").exists()
    lowered = judge(folder, "pull", "--from", "ann.csv", "--from", "bob.csv", "--no-log", "--min-agreement", "-1")
    assert lowered.returncode == 0, lowered.stderr  # the threshold is a setting
    forced = judge(folder, "pull", "--from", "ann.csv", "--from", "bob.csv", "--no-log", "--force", "--ties", "higher")
    assert forced.returncode == 0, forced.stderr
    assert "30 pair(s) left tied: 30 to the higher grade" in forced.stdout
    assert "taken although the assessors agree less than the minimum (--force)" in forced.stdout
    version = re.search(r"qrels version ([0-9a-f]{16})", forced.stdout).group(1)
    qrels = (folder / "judging" / "disputed" / "versions" / version / QRELS_BEIR).read_text().splitlines()[1:]
    assert {line.split("\t")[2] for line in qrels} == {"3"}  # ties: higher, a choice and not the only rule


def test_without_a_token_the_line_says_which_variable_to_set_unmasked(pooled, monkeypatch):
    folder, parent, _ = pooled
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    said = judge(folder, "pool", parent, "--to", "label-studio")
    assert said.returncode == 2 and said.stderr == (
        "rankscope judge: no Label Studio API token: set the environment variable LABEL_STUDIO_API_KEY (named by "
        "label_studio.token_env) to your token (Account & Settings in Label Studio)\n")


def test_every_label_studio_start_in_the_docs_and_the_tests_skips_the_version_check(tmp_path):
    """label-studio start asks pypi.org for a newer version unless LATEST_VERSION_CHECK=false: the docs' commands and
    the tests' server (CI's too: make test-slow starts it through the same module) say so."""
    from tests.pipeline.judge_steps import label_studio_server

    assert label_studio_server.server_env(tmp_path)["LATEST_VERSION_CHECK"] == "false"
    starts = 0
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        blocks = page.read_text(encoding="utf-8").split("```")[1::2]  # the fenced blocks: commands and their output
        for line in "\n".join(blocks).replace("\\\n", " ").splitlines():
            if "label-studio start" in line:
                starts += 1
                assert "LATEST_VERSION_CHECK=false" in line.split("label-studio start")[0], f"{page.name}: {line}"
    assert starts >= 1
