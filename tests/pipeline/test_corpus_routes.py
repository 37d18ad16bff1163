"""The same data by two routes is the same corpus: SciFact through ir_datasets (offline, its cache seeded) and as a
BEIR folder score the same, value for value, and compare, selectors and the gate treat them as one corpus. Data
that is not there, or an id that is not one, is one line from the command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import (
    PER_QUESTION_FILE,
    TAG_CORPUS_DIGEST,
    TAG_DOCUMENTS_DIGEST,
    TAG_IRDS_ID,
    TAG_OUTPUT_DIR,
    TAG_QRELS_DIGEST,
    TAG_QUESTIONS_DIGEST,
)
from pipeline.compare import main as compare
from pipeline.gate import main as gate
from pipeline.tracking.selectors import resolve
from tests.pipeline.helpers import REPO, cli_env, log_run

pytest.importorskip("ir_datasets")
IDENTITY = (TAG_CORPUS_DIGEST, TAG_DOCUMENTS_DIGEST, TAG_QUESTIONS_DIGEST, TAG_QRELS_DIGEST)


@pytest.fixture(scope="module")
def two_routes(tmp_path_factory, empty_store, irds_home, scifact_folder):
    """BM25 on SciFact test, once from the BEIR folder and once through ir_datasets, in one store."""
    folder = tmp_path_factory.mktemp("routes")
    shutil.copy(empty_store, folder / "mlflow.db")
    beir = log_run(folder, "corpus=beir", f"corpus.path={scifact_folder}", "metrics=beir")
    irds = log_run(folder, "corpus=irds", "corpus.id=beir/scifact/test", "metrics=beir")
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    return folder, client, client.get_run(beir), client.get_run(irds)


def per_question(run) -> pd.DataFrame:
    return pd.read_csv(Path(run.data.tags[TAG_OUTPUT_DIR]) / PER_QUESTION_FILE, dtype={"query_id": str})


def test_ir_datasets_gives_the_beir_folders_figures_value_for_value(two_routes):
    _, _, beir, irds = two_routes
    a, b = per_question(beir), per_question(irds)
    assert len(a) == 300
    pd.testing.assert_frame_equal(a, b)
    figures = {k: v for k, v in beir.data.metrics.items() if not k.startswith(("time/", "system/"))}
    assert figures == {k: irds.data.metrics[k] for k in figures}
    print(f"ndcg@10 BEIR folder {beir.data.metrics['ndcg_at_10']:.4f} "
          f"[{beir.data.metrics['ndcg_at_10_ci_lower']:.4f}, {beir.data.metrics['ndcg_at_10_ci_upper']:.4f}], "
          f"ir_datasets {irds.data.metrics['ndcg_at_10']:.4f}")


def test_each_run_records_its_datas_digests_and_the_ir_datasets_id(two_routes):
    _, _, beir, irds = two_routes
    assert all(beir.data.tags[t] == irds.data.tags[t] for t in IDENTITY)
    assert irds.data.tags[TAG_IRDS_ID] == "beir/scifact/test" and TAG_IRDS_ID not in beir.data.tags
    assert irds.info.run_name == "BM25 · beir/scifact/test"
    (dataset_input,) = irds.inputs.dataset_inputs
    assert dataset_input.dataset.name == "beir/scifact/test"
    assert dataset_input.dataset.source_type == "ir_datasets"
    assert dataset_input.dataset.digest == beir.inputs.dataset_inputs[0].dataset.digest
    tags = {t.key: t.value for t in dataset_input.tags}
    assert tags[TAG_IRDS_ID] == "beir/scifact/test"
    assert tags[TAG_DOCUMENTS_DIGEST] == beir.data.tags[TAG_DOCUMENTS_DIGEST]


def test_compare_selectors_and_the_gate_see_one_corpus(two_routes, capsys):
    folder, client, beir, irds = two_routes
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    assert compare([beir.info.run_id, irds.info.run_id, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "different corpus" not in out and "300 questions in common" in out
    experiment = beir.info.experiment_id
    by_name = resolve(client, experiment, "BM25", corpus="scifact")  # the newest BM25 on that data, whatever its name
    assert by_name.info.run_id == irds.info.run_id
    client.set_tag(beir.info.run_id, "baseline", "true")  # the BEIR folder's run is the baseline
    assert gate([irds.info.run_id, "--tracking-uri", uri, "--tolerance", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "no baseline yet" not in out and beir.info.run_id in out  # gated against that run


def command(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=cwd, capture_output=True, text=True,
                          env={**cli_env(cwd), **(env or {})}, timeout=300)


def test_data_that_is_not_here_and_cannot_be_downloaded_is_one_line(tmp_path):
    closed = "http://127.0.0.1:9"  # no network: every download fails at once, as on a machine without it
    done = command("corpus=irds", "corpus.id=vaswani", cwd=tmp_path,
                   env={"IR_DATASETS_HOME": str(tmp_path / "empty"), "HTTP_PROXY": closed, "HTTPS_PROXY": closed,
                        "http_proxy": closed, "https_proxy": closed, "NO_PROXY": "", "no_proxy": ""})
    assert done.returncode == 1  # the job failed, on bad input
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("rankscope: error: corpus.id=vaswani: the data is not on this machine and could not be "
                           "downloaded")
    assert f"at {tmp_path / 'empty' / 'vaswani' / 'npl.tar.gz'} (IR_DATASETS_HOME={tmp_path / 'empty'})" in line
    assert "run 'curl -L -o npl.tar.gz http" in line


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_bad_id_is_one_line_naming_a_close_match(tmp_path):
    done = command("corpus=irds", "corpus.id=vaswan", cwd=tmp_path)
    assert done.returncode == 1  # the job failed, on bad input
    (line,) = done.stderr.strip().splitlines()
    assert "corpus.id=vaswan: ir_datasets has no dataset of that id (did you mean vaswani" in line
