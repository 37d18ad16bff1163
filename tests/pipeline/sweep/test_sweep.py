"""The command line users type, run for real against a SQLite store in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from mlflow import MlflowClient

from pipeline.common.names import QUESTIONS_PREFIX, TAG_SWEEP_DIR
from pipeline.tracking.readback import child_runs, logged_tables
from tests.pipeline.helpers import run_pipeline
from tests.retrievers.test_helpdesk_study import EXPECTED, NOT_FIRST  # docs/helpdesk-reference.md's tables, held once

# EXPECTED: hit@3, recall@5, MRR, nDCG@5 at the help-desk reference's precision; NOT_FIRST: the questions whose
# first relevant document is not at rank 1 (0 = not retrieved)


def store(tmp_path: Path) -> tuple[MlflowClient, str]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    assert experiment is not None, "the default experiment 'rankscope' was not created in the launch folder"
    return client, experiment.experiment_id


def parent_and_children(client: MlflowClient, experiment_id: str):
    runs = client.search_runs([experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1, f"expected one parent run, found {len(parents)}"
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return parent, {r.data.tags["rankscope.system"]: r for r in children}


def test_the_sweep_finds_spec_numbers_in_the_child_runs(four_systems):
    tmp, _ = four_systems
    client, experiment_id = store(tmp)
    parent, children = parent_and_children(client, experiment_id)
    assert parent.info.status == "FINISHED"
    assert sorted(children) == sorted(EXPECTED)
    for system, (hit, recall, mrr, ndcg) in EXPECTED.items():
        run = children[system]
        assert run.info.status == "FINISHED"
        m = run.data.metrics
        assert (round(m["hit_rate_at_3"], 2), round(m["recall_at_5"], 2), round(m["mrr"], 2),
                round(m["ndcg_at_5"], 3)) == (hit, recall, mrr, ndcg), system
        assert m["ndcg_at_5_ci_lower"] < m["ndcg_at_5"] < m["ndcg_at_5_ci_upper"]
        assert m[QUESTIONS_PREFIX + "evaluated"] == 14 and m[QUESTIONS_PREFIX + "without_judgments"] == 0


def test_the_child_runs_hold_spec_ranks_of_the_first_relevant_document(four_systems):
    tmp, _ = four_systems
    client, experiment_id = store(tmp)
    _, children = parent_and_children(client, experiment_id)
    for system, exceptions in NOT_FIRST.items():
        local = client.download_artifacts(children[system].info.run_id, "per_question.csv", str(tmp))
        table = pd.read_csv(local, dtype={"query_id": str}).set_index("query_id")
        ranks = {q: (0 if pd.isna(r) else int(r)) for q, r in table["first_relevant_rank"].items()}
        assert ranks == {q: exceptions.get(q, 1) for q in ranks}, system
        assert len(ranks) == 14


def test_the_tables_read_from_the_job_folders_are_the_ones_the_runs_hold(four_systems):
    tmp, _ = four_systems
    client, experiment_id = store(tmp)
    parent, children = parent_and_children(client, experiment_id)
    known = logged_tables(Path(parent.data.tags[TAG_SWEEP_DIR]))  # what the driver reads while the last job logs
    assert sorted(known) == sorted(run.info.run_id for run in children.values())
    downloaded = child_runs(client, experiment_id, parent.info.run_id)
    taken = child_runs(client, experiment_id, parent.info.run_id, known)
    assert [s.name for s in taken] == [s.name for s in downloaded]
    for ours, theirs in zip(taken, downloaded, strict=True):
        assert ours.per_question is known[ours.run_id]
        pd.testing.assert_frame_equal(ours.per_question, theirs.per_question)


def test_the_terminal_shows_spec_tables(four_systems):
    _, done = four_systems
    out = done.stdout
    table = out[out.index("Mean over questions"):]
    for system, (_, _, _, ndcg) in EXPECTED.items():
        assert any(line.split()[0] == system and f"{ndcg:.3f}" in line for line in table.splitlines()), system
    ranks = out[out.index("Rank of the first relevant document"):].splitlines()
    # q10: BM25 and RRF end without a relevant document (--); the weighted fusion's top 10 is full (>10: beyond
    # depth 10, as its diagnosis says)
    assert any(line.split() == ["q10", "--", "13", ">10", "--"] for line in ranks)
    assert any(line.split() == ["q12", "2", "1", "1", "1"] for line in ranks)
    assert "Paired differences against the top system, RRF" in out


def test_a_single_run_is_a_plain_run_with_its_files_table_and_dataset(launch_dir):
    tmp_path = launch_dir
    done = run_pipeline(tmp_path, "retriever=lsa", "retriever.dims=10")
    assert done.returncode == 0, done.stderr[-3000:]
    client, experiment_id = store(tmp_path)
    (run,) = client.search_runs([experiment_id])
    assert run.info.status == "FINISHED" and "mlflow.parentRunId" not in run.data.tags
    assert run.data.params["retriever.dims"] == "10" and run.data.params["retriever"] == "lsa"
    assert run.data.params["corpus.name"] == "helpdesk" and run.data.params["metrics.k"] == "[3, 5, 10]"
    (dataset,) = run.inputs.dataset_inputs
    assert dataset.dataset.name == "helpdesk/test"
    assert dataset.dataset.digest == run.data.tags["rankscope.corpus_digest"]
    assert run.data.tags["rankscope.version"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert artifacts == {"config.yaml", "per_question.csv", "per_question.json", "run.trec", "metrics.csv",
                         "diagnosis.txt", "plots"}
    output = Path(run.data.tags["rankscope.output_dir"])
    assert output.is_relative_to(tmp_path / "outputs")
    assert {"config.yaml", "per_question.csv", "run.trec", "metrics.csv", "diagnosis.txt", "plots"} <= {
        p.name for p in output.iterdir()}
    assert "dims: 10" in (output / "config.yaml").read_text()
    assert "ndcg@5" in done.stdout and "pipeline.ui --backend-store-uri" in done.stdout


def test_an_error_inside_a_sweep_hook_ends_the_command_with_status_1(capsys):
    """Hydra would turn it into a warning and exit 0: a sweep whose summary failed must not look like a success."""
    import pytest

    from pipeline.sweep.callback import hook

    class Broken:
        @hook
        def on_multirun_end(self) -> None:
            raise ValueError("boom")

    with pytest.raises(SystemExit) as stopped:
        Broken().on_multirun_end()
    assert stopped.value.code == 1
    assert "the sweep's on_multirun_end failed (above): a bug" in capsys.readouterr().err


def test_a_sweep_run_in_this_process_imports_what_its_end_uses_once_its_first_job_has_run():
    """scipy.special (the question set's sensitivity), threadpoolctl and PIL's image plugins are imported on a
    thread while the jobs run, started by the first job's end and only once; a sweep whose jobs run elsewhere
    starts nothing. In a fresh interpreter, so that nothing else imported them first."""
    import subprocess
    import sys

    script = """
import sys, threading
from pipeline.sweep.callback import MlflowSweep
from pipeline.sweep.pace import END_MODULES, _import_the_ends_modules
sweep = MlflowSweep()
sweep.on_job_end(None, None)  # no sweep run in this process: nothing starts
assert threading.active_count() == 1
before = [name for name in END_MODULES if name in sys.modules]
sweep.importer = threading.Thread(target=_import_the_ends_modules, daemon=True)
sweep.on_job_end(None, None)
sweep.on_job_end(None, None)  # the next job's end: started once
sweep.importer.join(120)
from PIL import Image
print(before, [name for name in END_MODULES if name not in sys.modules], Image._initialized)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "[]", "1"]  # PIL preinitialised: its plugins loaded
