"""``pipeline.compare --slice`` and the gate's ``slice_tolerance`` on the constructed example (experiment=
slices_example: the candidate better overall, worse on every billing question), each figure recomputed from the
runs' per_question.csv with pandas; bad input one line."""

from __future__ import annotations

import pandas as pd
import pytest
from mlflow import MlflowClient

from pipeline.common.names import PER_QUESTION_FILE, TAG_COMPARE_SLICE
from pipeline.compare import main as compare_main
from pipeline.gate import main as gate_main
from tests.pipeline.helpers import job_runs


@pytest.fixture(scope="module")
def runs(slices_example):
    """The example's store, its two runs by system name and their per-question tables."""
    folder, _ = slices_example
    found = {r.data.tags["rankscope.system"]: r for r in job_runs(folder)}
    tables = {name: pd.read_csv(f"{r.data.tags['rankscope.output_dir']}/{PER_QUESTION_FILE}", dtype={"query_id": str},
                                keep_default_na=False).set_index("query_id") for name, r in found.items()}
    return folder, {name: r.info.run_id for name, r in found.items()}, tables


def store(folder) -> list[str]:
    return ["--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}"]


def test_a_comparison_of_one_slice_compares_only_its_questions_and_says_so(runs, capsys):
    folder, ids, tables = runs
    assert compare_main([ids["current"], ids["candidate"], "--slice", "team=billing", "--metrics", "ndcg@5,mrr",
                         *store(folder)]) == 0
    out = capsys.readouterr().out
    billing = tables["current"].index[tables["current"]["slice:team"] == "billing"]
    assert out.splitlines()[0] == f"Slice team=billing: {len(billing)} of the 72 questions the runs share"
    row = next(line for line in out.splitlines() if line.startswith("ndcg@5 ")).split()
    a, b = (tables[s].loc[billing, "ndcg@5"].mean() for s in ("current", "candidate"))
    assert [float(x) for x in row[1:4]] == pytest.approx([a, b, b - a], abs=5e-5) and row[-1] == "worse"
    assert f"What these {len(billing)} questions can tell on ndcg@5" in out
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    recorded = client.search_runs([client.get_experiment_by_name("rankscope comparisons").experiment_id],
                                  f"tags.`{TAG_COMPARE_SLICE}` = 'team=billing'")
    assert len(recorded) == 1


def test_a_comparison_by_every_slice_holds_the_table_and_the_reversal(runs, capsys):
    folder, ids, _ = runs
    assert compare_main([ids["current"], ids["candidate"], "--slice", "team", "--no-record", *store(folder)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("By slice: ndcg@5"):]
    assert "candidate (candidate)" in table and "against current (baseline)" in table
    reversal = [line for line in table.splitlines() if line.startswith("REVERSAL")]
    assert reversal == [line for line in reversal if "candidate (candidate) is better than current (baseline) "
                        "overall on ndcg@5 (+0.154" in line and "but worse on team=billing: -0.719" in line]
    assert len(reversal) == 1


@pytest.mark.parametrize("given, said", [
    ("team=legal", "--slice team=legal: no question the two runs share is in that slice (slices of team: billing "
                   "(12), data (60))"),
    ("teem=billing", "--slice teem: neither run's per-question table has that slice column (they are sliced by: "
                     "team, question_length; a job slices its questions with metrics.slices=[FIELD,...])"),
    ("team=", "--slice 'team=': expected FIELD=VALUE (a slice: team=billing) or FIELD (every slice of it: team)"),
])
def test_a_slice_that_is_not_there_is_one_line(runs, capsys, given, said):
    folder, ids, _ = runs
    assert compare_main([ids["current"], ids["candidate"], "--slice", given, "--no-record", *store(folder)]) == 2
    assert capsys.readouterr().err.strip() == f"rankscope compare: {said}"


def test_a_slice_never_makes_a_baseline(runs, capsys):
    folder, ids, _ = runs
    assert compare_main([ids["current"], ids["candidate"], "--slice", "team=data", "--promote", *store(folder)]) == 2
    assert "--promote with --slice FIELD=VALUE: a slice's comparison never makes a baseline" in capsys.readouterr().err


def test_the_gate_fails_a_candidate_worse_on_a_slice_beyond_the_slice_tolerance_naming_it(runs, capsys):
    folder, ids, tables = runs
    gate = [ids["candidate"], "--baseline", ids["current"], "--metrics", "ndcg@5", *store(folder)]
    assert gate_main(gate) == 0  # better overall: the plain gate passes
    assert capsys.readouterr().out.startswith("rankscope gate: PASS: ndcg@5 better")
    assert gate_main([*gate, "--slice-tolerance", "0.05"]) == 1
    line = capsys.readouterr().err.strip()
    billing = tables["current"]["slice:team"] == "billing"
    drop = tables["current"].loc[billing, "ndcg@5"].mean() - tables["candidate"].loc[billing, "ndcg@5"].mean()
    assert line.startswith(f"rankscope gate: REGRESSION: slice team=billing: ndcg@5 dropped by {drop:.4f} [")
    assert "(12 questions), beyond the slice tolerance 0.0500 at 95% confidence (Holm p=" in line
    assert "\n" not in line
    assert gate_main([*gate, "--slice-tolerance", "0.8"]) == 0
    assert "slices: no slice worse by more than 0.8000 (5 tested, Holm-adjusted over them)" in capsys.readouterr().out


def test_a_negative_slice_tolerance_is_refused(runs, capsys):
    folder, ids, _ = runs
    assert gate_main([ids["candidate"], "--baseline", ids["current"], "--slice-tolerance", "-1", *store(folder)]) == 2
    assert "gate.slice_tolerance is the largest acceptable drop of a slice: it must be >= 0" in capsys.readouterr().err
