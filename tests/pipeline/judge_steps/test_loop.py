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
