"""Every measure of trec_eval's all_trec can be a job's metric: logged with its interval, each question's value the one
`python -m metrics` prints from the job's run.trec, trec_eval's own code (pytrec_eval) agreeing where it has the
measure; gm_map's figure is the geometric mean."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.cli import main as metrics_cli
from pipeline.common.names import PER_QUESTION_FILE, RUN_FILE, TAG_OUTPUT_DIR
from tests.pipeline.helpers import REPO, log_run

MEASURES = ("[ndcg,infap,rbp,rbp_resid,gm_map,gm_bpref,iprec_at_recall,11pt_avg,rprec_mult,map_cut,relative_p,unj,"
            "set_p,set_recall,set_f,set_map,set_relative_p,bing,g,ndcg_rel,rndcg,utility,num_nonrel_judged_ret,"
            "judged]")
GEOMETRIC = ("gm_map", "gm_bpref")
QRELS = REPO / "pipeline" / "data" / "helpdesk" / "qrels" / "test.tsv"


@pytest.fixture(scope="module")
def job(tmp_path_factory, empty_store) -> tuple[Path, dict[str, float], pd.DataFrame]:
    import shutil

    place = tmp_path_factory.mktemp("trec-measures")
    shutil.copy(empty_store, place / "mlflow.db")
    run_id = log_run(place, f"metrics.measures={MEASURES}", "metrics.k=[5,10]", "metrics.bootstrap.resamples=50",
                     "metrics.show=[ndcg@10,rbp@0.8,infap]")
    run = MlflowClient(f"sqlite:///{place / 'mlflow.db'}").get_run(run_id)
    folder = Path(run.data.tags[TAG_OUTPUT_DIR])
    table = pd.read_csv(folder / PER_QUESTION_FILE, dtype={"query_id": str}).set_index("query_id")
    return folder, run.data.metrics, table


def test_each_measure_is_logged_with_its_interval(job):
    _, logged, table = job
    names = [c for c in table.columns if c.split("@")[0] in MEASURES or c.startswith("rbp")]
    assert {"infap", "rbp", "rbp@0.80", "rbp_resid", "gm_map", "iprec_at_recall@0.50", "rprec_mult@1.20",
            "map_cut@10", "unj@5", "num_nonrel_judged_ret"} <= set(names)
    for name in names:
        key = name.replace("@", "_at_")
        assert logged[f"{key}_ci_lower"] <= logged[key] <= logged[f"{key}_ci_upper"], name


def test_a_geometric_mean_is_the_exponential_of_the_mean_log(job):
    _, logged, table = job
    for name in GEOMETRIC:
        assert logged[name] == pytest.approx(math.exp(math.fsum(table[name]) / len(table)), rel=1e-12)
        assert 0 < logged[name] < 1


def test_each_question_value_is_what_python_m_metrics_prints_from_the_run_file(job, capsys):
    folder, logged, table = job
    names = [c for c in table.columns if "@" in c or c in MEASURES.strip("[]").split(",")]
    capsys.readouterr()
    assert metrics_cli(["-c", "-q", *[a for n in names for a in ("-m", n)], str(QRELS), str(folder / RUN_FILE)]) == 0
    printed = {}
    for line in capsys.readouterr().out.splitlines():
        name, query, value = line.split("\t")
        printed[name.strip(), query] = value
    for name in names:
        if name in GEOMETRIC:  # trec_eval prints their mean only
            assert printed[name, "all"] == f"{logged[name]:.4f}", name
            continue
        for query, value in table[name].items():
            shown = str(int(value)) if name == "num_nonrel_judged_ret" else f"{value:.4f}"
            assert printed[name, query] == shown, (name, query)


def test_trec_evals_code_agrees_on_the_measures_it_has(job):
    """pytrec_eval (trec_eval 9's code) on the job's run file: the same per-question values, to the last bit."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    folder, _, table = job
    judgments: dict[str, dict[str, int]] = {}
    for line in QRELS.read_text(encoding="utf-8").splitlines()[1:]:
        q, d, g = line.split("\t")
        judgments.setdefault(q, {})[d] = int(g)
    run: dict[str, dict[str, float]] = {q: {} for q in judgments}
    for fields in (line.split() for line in (folder / RUN_FILE).read_text(encoding="utf-8").splitlines()):
        run.setdefault(fields[0], {})[fields[2]] = float(fields[4])
    theirs = pytrec_eval.RelevanceEvaluator(judgments, {"infAP", "gm_map", "Rprec_mult", "map_cut.5,10",
                                                        "relative_P.5,10", "set_F", "binG", "G", "ndcg_rel",
                                                        "Rndcg", "utility"}).evaluate(run)
    names = {"infap": "infAP", "gm_map": "gm_map", "rprec_mult@1.20": "Rprec_mult_1.20", "map_cut@10": "map_cut_10",
             "relative_p@5": "relative_P_5", "set_f": "set_F", "bing": "binG", "g": "G", "ndcg_rel": "ndcg_rel",
             "rndcg": "Rndcg", "utility": "utility"}
    for ours, trec in names.items():
        for query, value in table[ours].items():
            if run[query]:  # trec_eval scores only questions that retrieved something (-c adds the others as 0)
                assert value == theirs[query][trec], (ours, query)
