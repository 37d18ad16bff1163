"""``python -m pipeline.compare``: two logged runs, aligned question by question, judged, recorded, promoted."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.evaluation import evaluate
from metrics.power import minimum_detectable_effect, questions_needed
from pipeline.compare import main
from pipeline.tracking.views import decode
from retrievers import BM25, LSA
from tests.pipeline.helpers import log_run


@pytest.fixture(scope="module")
def helpdesk_store(tmp_path_factory, empty_store):
    """Two runs of the same BM25 and one of LSA on the help-desk corpus, in one SQLite store."""
    folder = tmp_path_factory.mktemp("compare")
    shutil.copy(empty_store, folder / "mlflow.db")
    runs = {"first": log_run(folder), "second": log_run(folder), "lsa": log_run(folder, "retriever=lsa")}
    return folder, runs


def compare(folder, *args: str) -> int:
    return main([*args, "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}"])


def comparisons(client: MlflowClient) -> list:
    """Comparisons live in an experiment of their own, apart from the evaluations."""
    experiment = client.get_experiment_by_name("rankscope comparisons")
    if experiment is None:
        return []
    return client.search_runs([experiment.experiment_id], "tags.`rankscope.kind` = 'comparison'")


def test_two_runs_of_the_same_system_are_indistinguishable_with_an_interval_around_zero(helpdesk_store, capsys):
    folder, runs = helpdesk_store
    assert compare(folder, runs["first"], runs["second"]) == 0
    out = capsys.readouterr().out
    assert "14 questions in common; only in the baseline: none; only in the candidate: none" in out
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    (recorded,) = [r for r in comparisons(client)
                   if r.data.tags["rankscope.compare.candidate"] == runs["second"]]
    assert recorded.data.tags["rankscope.compare.baseline"] == runs["first"]
    local = client.download_artifacts(recorded.info.run_id, "comparison.json", str(folder))
    table = pd.read_json(local, orient="split")
    assert len(table) == 10 and set(table["verdict"]) == {"indistinguishable"}
    assert (table["ci_low"] <= 0).all() and (table["ci_high"] >= 0).all() and (table["difference"] == 0).all()
    assert recorded.data.metrics["ndcg_at_5_difference"] == 0
    assert recorded.data.metrics["system/questions_common"] == 14
    assert recorded.info.run_name == "compare: BM25 vs BM25 · helpdesk"


def test_a_comparison_run_carries_its_command_both_datasets_its_verdict_and_a_link_from_each_side(helpdesk_store,
                                                                                                    capsys):
    """What the MLflow UI shows of it: the command as its source, both sides' corpus as its datasets, the verdict in
    words first (its description) and as a column (a tag of the comparisons' saved view, whose printed link names
    the comparisons experiment); each compared run's description links back to it."""
    folder, runs = helpdesk_store
    assert compare(folder, runs["first"], runs["lsa"]) == 0
    out = capsys.readouterr().out
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    (recorded,) = [r for r in comparisons(client) if r.data.tags["rankscope.compare.candidate"] == runs["lsa"]]
    tags, experiment = recorded.data.tags, recorded.info.experiment_id
    assert recorded.info.run_name == "compare: LSA vs BM25 · helpdesk"
    assert tags["mlflow.source.name"].endswith(f"-m pipeline.compare {runs['first']} {runs['lsa']} "
                                               f"--tracking-uri sqlite:///{folder / 'mlflow.db'}")
    assert tags["rankscope.compare.by"] == "compare"
    assert re.fullmatch(r"ndcg@5: (worse|better|indistinguishable), [-+]\d\.\d{3} \[[-+]\d\.\d{3}, [-+]\d\.\d{3}\]",
                        tags["rankscope.compare.primary"])
    assert tags["mlflow.note.content"].startswith("**LSA** (candidate) is ")
    (dataset,) = recorded.inputs.dataset_inputs
    assert dataset.dataset.name == "helpdesk/test" and [t.value for t in dataset.tags] == ["baseline and candidate"]
    assert f"/#/experiments/{experiment}/runs/{recorded.info.run_id}?workflowType=machine_learning" in out
    assert (f"/#/experiments/{experiment}/runs?workflowType=machine_learning&viewStateShareKey=rankscope-comparisons"
            in out)
    view = client.get_experiment(experiment).tags["mlflow.sharedViewState.rankscope-comparisons"]
    assert "rankscope.compare.primary" in json.dumps(decode(json.loads(view)["state"]))
    for side in (runs["first"], runs["lsa"]):
        held = client.get_run(side).data.tags
        assert held["rankscope.compared_in"] == recorded.info.run_id
        assert f"[compare: LSA vs BM25 · helpdesk](#/experiments/{experiment}/runs/{recorded.info.run_id}" in (
            held["mlflow.note.content"])
    evaluations = client.get_experiment_by_name("rankscope").experiment_id
    assert client.search_runs([evaluations], "tags.`rankscope.kind` = 'comparison'") == []


def test_the_same_comparison_is_recorded_once(helpdesk_store):
    folder, runs = helpdesk_store
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    assert compare(folder, runs["first"], runs["lsa"], "--metrics", "ndcg@5,mrr") == 0
    before = len(comparisons(client))
    assert compare(folder, runs["first"], runs["lsa"], "--metrics", "ndcg@5,mrr") == 0
    assert len(comparisons(client)) == before
    assert compare(folder, runs["first"], runs["lsa"], "--metrics", "ndcg@5,mrr", "--seed", "1") == 0
    assert len(comparisons(client)) == before + 1  # other settings: another comparison


def test_selectors_name_runs_by_name_tag_best_and_latest(helpdesk_store, capsys):
    folder, runs = helpdesk_store
    assert compare(folder, "best:ndcg_at_5", "latest", "--no-record") == 0
    out = capsys.readouterr().out
    baseline_line, candidate_line = out.splitlines()[:2]
    assert runs["first"] in baseline_line  # BM25 ties with itself; the earlier run wins the tie
    assert runs["lsa"] in candidate_line and "LSA" in candidate_line
    assert compare(folder, "name:BM25", "LSA", "--no-record") == 0
    assert runs["second"] in capsys.readouterr().out.splitlines()[0]  # the most recent run of that name
    assert compare(folder, "tag:nobody=here", "LSA") == 2
    err = capsys.readouterr().err.strip()
    assert err == "rankscope compare: no finished run matches 'tag:nobody=here' in experiment 'rankscope'"


def test_promote_moves_the_baseline_tag_and_keeps_the_history(helpdesk_store, capsys):
    folder, runs = helpdesk_store
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    client.set_tag(runs["first"], "baseline", "true")
    assert compare(folder, "tag:baseline=true", runs["second"], "--promote") == 0
    promoted = f"Promoted BM25 · helpdesk (run {runs['second']}) to baseline (baseline=true)"
    assert f"{promoted}; previous baseline: {runs['first']}" in capsys.readouterr().out
    old, new = client.get_run(runs["first"]).data.tags, client.get_run(runs["second"]).data.tags
    assert "baseline" not in old and old["baseline/previous"] == "true"
    assert old["baseline/replaced_by"] == runs["second"] and old["baseline/until"]
    assert new["baseline"] == "true" and new["baseline/replaces"] == runs["first"] and new["baseline/since"]
    promoted = [r for r in comparisons(client) if r.data.tags.get("rankscope.compare.promoted") == "true"]
    assert [r.data.tags["rankscope.compare.candidate"] for r in promoted] == [runs["second"]]


def test_a_candidate_worse_on_some_metric_is_not_promoted_unless_forced(tmp_path, empty_store, capsys):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    good = log_run(tmp_path)
    bad = log_run(tmp_path, "text.pattern='[xz]+'")  # hardly a term left: nothing relevant is found
    capsys.readouterr()
    assert compare(tmp_path, good, bad, "--promote", "--metrics", "recall@5") == 1
    assert "not promoted: the candidate is worse on recall@5" in capsys.readouterr().err
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert "baseline" not in client.get_run(bad).data.tags
    assert compare(tmp_path, good, bad, "--promote", "--force", "--metrics", "recall@5") == 0
    assert client.get_run(bad).data.tags["baseline"] == "true"


@pytest.fixture
def other_judgments(tmp_path, helpdesk_folder):
    """The help-desk corpus with one judgment removed: same documents, different judgments."""
    folder = tmp_path / "helpdesk-edited"
    shutil.copytree(helpdesk_folder, folder)
    qrels = folder / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines()
    qrels.write_text("\n".join(lines[:-1]) + "\n")
    return folder


def test_runs_on_different_judgments_are_refused_unless_allowed(tmp_path, empty_store, other_judgments, capsys):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    a = log_run(tmp_path, "corpus=beir", f"corpus.path={other_judgments}")
    b = log_run(tmp_path)
    capsys.readouterr()
    assert compare(tmp_path, a, b) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("rankscope compare: refusing to compare BM25 with BM25: different corpus or judgments")
    assert "--allow-different-corpus" in line
    assert compare(tmp_path, a, b, "--allow-different-corpus", "--no-record") == 0
    assert "WARNING: different corpus or judgments" in capsys.readouterr().out


def test_runs_with_different_evaluation_settings_are_refused(tmp_path, empty_store, capsys):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    a, b = log_run(tmp_path), log_run(tmp_path, "metrics.gain=exponential")
    capsys.readouterr()
    assert compare(tmp_path, a, b) == 2
    assert "different metrics.gain: baseline linear, candidate exponential" in capsys.readouterr().err


def test_a_missing_store_or_run_is_a_usage_error(tmp_path, capsys):
    assert main(["a", "b", "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"]) == 2
    assert "no MLflow store at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def test_bm25_against_a_degraded_bm25_on_scifact_is_worse(tmp_path, empty_store, scifact_folder, capsys):
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    scifact = ["corpus=scifact", f"corpus.path={scifact_folder}", "metrics=beir"]
    bm25 = log_run(tmp_path, *scifact)
    degraded = log_run(tmp_path, *scifact, "retriever.k1=0", "retriever.b=0")
    capsys.readouterr()
    assert compare(tmp_path, bm25, degraded) == 0
    out = capsys.readouterr().out
    print(out)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("ndcg@10 ", "mrr "))}
    assert rows["ndcg@10"][-1] == "worse" and rows["mrr"][-1] == "worse"
    difference, high = float(rows["ndcg@10"][3]), float(rows["ndcg@10"][5].rstrip("]"))
    assert difference < high < 0
    assert "300 questions in common" in out


def test_comparing_a_run_with_itself_is_one_line_and_records_nothing(helpdesk_store, capsys):
    folder, runs = helpdesk_store
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    before = len(comparisons(client))
    assert compare(folder, runs["lsa"], "LSA") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("rankscope compare: warning: ") and "name the same run" in line
    assert len(comparisons(client)) == before


def test_the_report_says_what_difference_the_questions_can_detect(helpdesk_store, helpdesk_collection, capsys):
    folder, runs = helpdesk_store
    assert compare(folder, runs["first"], runs["lsa"], "--no-record", "--detect", "0.05", "--detect", "0.2") == 0
    out = capsys.readouterr().out
    c = helpdesk_collection
    ndcg = {name: evaluate(engine.index(c).rank(c.query_ids, c.query_texts, 100), c.qrels, ["ndcg@5"])
            .per_question["ndcg@5"] for name, engine in (("bm25", BM25()), ("lsa", LSA()))}
    d = (ndcg["lsa"] - ndcg["bm25"]).to_numpy()  # the job's primary metric, candidate minus baseline
    sd = d.std(ddof=1)
    assert (f"What these 14 questions can tell on ndcg@5 (paired t approximation, two-sided alpha 0.05, 80% power): "
            f"a difference of {minimum_detectable_effect(sd, 14):.4f} (standard deviation of the per-question "
            f"differences {sd:.4f}).") in out
    assert (f"With the same spread: the observed {d.mean():+.4f} would need {questions_needed(abs(d.mean()), sd):,} "
            f"questions; 0.05 would need {questions_needed(0.05, sd):,} questions; 0.2 would need "
            f"{questions_needed(0.2, sd):,} questions.") in out


def test_two_runs_that_agree_everywhere_have_no_spread_to_size_a_difference_from(helpdesk_store, capsys):
    folder, runs = helpdesk_store
    assert compare(folder, runs["first"], runs["second"], "--no-record") == 0
    assert "the two runs agree on every question (no spread of differences to size one from)" in \
        capsys.readouterr().out
