"""rankscope agrees with NIST trec_eval 10.0 on trec_eval's own test suite: `python -m metrics` prints trec_eval's
output files byte for byte (every measure of all_trec, per query and for `all`), and the Python API gives each
measure's value per query and its mean at trec_eval's 4 decimals.

The expected files are trec_eval's outputs (shipped in tests/metrics/trec_eval/, see its README.md):
  out.test      trec_eval                                  qrels.test      results.test
  out.test.a    trec_eval -m all_trec                      qrels.test      results.test
  out.test.aq   trec_eval -m all_trec -q                   qrels.test      results.test
  out.test.aqc  trec_eval -m all_trec -q -c                qrels.test      results.trunc   (query 302 missing; junk)
  out.test.aql  trec_eval -m all_trec -mrelstring.20 -q -l2 qrels.rel_level results.test  (grades -1..4)
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache

import pytest

from metrics.cli import main
from metrics.evaluation import EvalSettings, Evaluation, evaluate
from metrics.spec import parse_trec_measure
from metrics.trec import read_trec_qrels, read_trec_run
from tests.datasets import REPO
from tests.datasets import TREC_EVAL_SUITE as TREC

# expected file -> (qrels, run, -c, -l)
CASES = {
    "aq": ("qrels.test", "results.test", False, 1),
    "aqc": ("qrels.test", "results.trunc", True, 1),
    "aql": ("qrels.rel_level", "results.test", False, 2),
}
MEASURES = [  # every per-query measure of trec_eval 10.0's all_trec
    "map", "recip_rank", "Rprec", "bpref", *[f"P_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)],
    *[f"recall_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)], "ndcg",
    *[f"ndcg_cut_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)], "success_1", "success_5", "success_10",
    *[f"iprec_at_recall_{level / 10:.2f}" for level in range(11)], "infAP",
    *[f"Rprec_mult_{m / 10:.2f}" for m in range(2, 21, 2)], "utility", "11pt_avg", "binG", "G", "ndcg_rel", "Rndcg",
    *[f"map_cut_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)],
    *[f"relative_P_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)],
    "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "rbp", "rbp_resid", "unj_5", "unj_10", "unj_20",
]
GEOMETRIC = ["gm_map", "gm_bpref"]  # trec_eval prints their mean only
COUNTS = ["num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"]


@cache
def expected(case: str) -> dict[tuple[str, str], str]:
    """``(measure, query) -> printed value`` from a trec_eval output file."""
    out = {}
    for line in (TREC / f"out.test.{case}").read_text().splitlines():
        name, query, value = line.split("\t")
        out[name.strip(), query] = value
    return out


def expected_queries(case: str) -> list[str]:
    return sorted({q for (name, q) in expected(case) if name == "map" and q != "all"})


@cache
def ours(case: str) -> Evaluation:
    qrels, run, complete, level = CASES[case]
    specs = [parse_trec_measure(m)[0] for m in MEASURES + GEOMETRIC + COUNTS]
    settings = EvalSettings(level=level, missing="zero" if complete else "skip")
    return evaluate(read_trec_run(TREC / run), read_trec_qrels(TREC / qrels), specs, settings)


def spec_name(measure: str) -> str:
    return parse_trec_measure(measure)[0].name


def test_the_data_is_there():
    assert (TREC / "out.test.aq").is_file(), f"trec_eval test data not found at {TREC.resolve()}"


@pytest.mark.parametrize("case", CASES)
def test_the_same_queries_are_scored(case):
    assert sorted(ours(case).per_question.index) == expected_queries(case)


@pytest.mark.parametrize("measure", MEASURES)
@pytest.mark.parametrize("case", CASES)
def test_each_query_agrees_to_four_decimals(case, measure):
    per_question = ours(case).per_question[spec_name(measure)]
    got = {q: f"{v:.4f}" for q, v in per_question.items()}
    want = {q: expected(case)[measure, q] for q in expected_queries(case)}
    assert got == want


@pytest.mark.parametrize("measure", MEASURES)
@pytest.mark.parametrize("case", CASES)
def test_the_mean_over_queries_agrees_to_four_decimals(case, measure):
    assert f"{ours(case).means()[spec_name(measure)]:.4f}" == expected(case)[measure, "all"]


@pytest.mark.parametrize("measure", GEOMETRIC)
@pytest.mark.parametrize("case", CASES)
def test_a_geometric_mean_is_trec_evals(case, measure):
    """gm_map and gm_bpref: per query log(max(value, 1e-5)), the mean exp of their mean (-c: with log(1e-5) for the
    query missing from the run)."""
    assert f"{ours(case).means()[spec_name(measure)]:.4f}" == expected(case)[measure, "all"]


@pytest.mark.parametrize("case", CASES)
def test_document_counts_agree_per_question_and_summed(case):
    counts, per_question = ours(case).counts, ours(case).per_question
    for name in COUNTS:
        values = per_question[name] if name not in counts else counts[name]
        assert {q: str(int(v)) for q, v in values.items()} == {
            q: expected(case)[name, q] for q in expected_queries(case)
        }, name
        assert str(int(values.sum())) == expected(case)[name, "all"], name
    assert str(len(counts)) == expected(case)["num_q", "all"]


@pytest.mark.parametrize("case", ["aq", "aql"])
def test_rankings_are_ordered_as_trec_eval_orders_them(case):
    """trec_eval's relstring shows the grade at each rank (score desc, ties by docno desc; results.test has
    tied scores and shuffled rank columns): '-' not judged, '.' judged -1."""
    qrels_file, run_file, _, _ = CASES[case]
    run, judgments = read_trec_run(TREC / run_file), read_trec_qrels(TREC / qrels_file).to_dict()
    name, depth = ("relstring", 10) if case == "aq" else ("relstring_20", 20)
    for query in expected_queries(case):
        grades = [judgments[query].get(doc) for doc in run.top(query, depth)]
        shown = "".join("-" if g is None else "." if g < 0 else str(g) for g in grades)
        assert f"'{shown}'" == expected(case)[name, query], query


@pytest.mark.parametrize("case", CASES)
def test_judged_at_k_is_one_minus_trec_eval_unjudged_share_where_k_documents_were_retrieved(case):
    """trec_eval 10's unj_k counts unjudged documents (not in the qrels, or judged -1) in the top k over k; with
    k documents retrieved, judged@k is its complement. (With fewer, judged@k divides by what was retrieved, as
    ir_measures' Judged@k does, and unj_k by k.)"""
    qrels, run_file, _, level = CASES[case]
    specs = [parse_trec_measure(f"judged@{k}")[0] for k in (5, 10, 20)]
    run = read_trec_run(TREC / run_file)
    ev = evaluate(run, read_trec_qrels(TREC / qrels), specs, EvalSettings(level=level, missing="skip"))
    checked = 0
    for query in expected_queries(case):
        for spec in specs:
            if query in ev.per_question.index and run.lengths[list(run.query_ids).index(query)] >= spec.k:
                unjudged = float(expected(case)[f"unj_{spec.k}", query])
                assert f"{ev.per_question.loc[query, spec.name]:.4f}" == f"{1 - unjudged:.4f}", (query, spec)
                checked += 1
    assert checked >= 6


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "metrics", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


# expected file -> the command line that made it (tests/metrics/trec_eval/README.md)
COMMANDS = {
    "": ["qrels.test", "results.test"],
    ".a": ["-m", "all_trec", "qrels.test", "results.test"],
    ".aq": ["-m", "all_trec", "-q", "qrels.test", "results.test"],
    ".aqc": ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"],
    ".aql": ["-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test"],
}


@pytest.mark.parametrize("suffix", COMMANDS)
def test_the_command_line_prints_trec_evals_output_files_byte_for_byte(suffix):
    """Every line of trec_eval 10.0's output, all_trec's 99 summary lines included, in its order and layout."""
    args = [str(TREC / a) if (TREC / a).is_file() else a for a in COMMANDS[suffix]]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (TREC / f"out.test{suffix}").read_text()


def test_all_trec_is_the_99_lines_trec_eval_10_prints():
    assert len((TREC / "out.test.a").read_text().splitlines()) == 99
    printed = run_cli("-m", "all_trec", str(TREC / "qrels.test"), str(TREC / "results.test")).stdout
    assert len(printed.splitlines()) == 99


def test_every_measure_form_prints_trec_eval_lines(capsys):
    """trec_eval's own forms print trec_eval's lines; a rankscope name prints the same value under its name (ndcg_cut
    named bare and at 10 prints at 10 only, as in trec_eval)."""
    forms = ["map", "recip_rank", "P_5", "P.5,10", "recall_5", "recall.5,100", "ndcg_cut_10", "ndcg_cut",
             "success_1", "success.1,5,10", "Rprec", "ndcg", "ndcg@5", "hit_rate@10", "mrr", "infap", "rbp@0.9",
             "iprec_at_recall@0.5", "map_cut.10", "unj.5", "relative_P_5", "11pt_avg", "set_f", "bing"]
    assert main(["-q", *[f"-m{form}" for form in forms], str(TREC / "qrels.test"), str(TREC / "results.test")]) == 0
    printed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    aq = expected("aq")
    trec_names = {"ndcg@5": "ndcg_cut_5", "hit_rate@10": "success_10", "mrr": "recip_rank", "infap": "infAP",
                  "rbp": "rbp", "iprec_at_recall@0.50": "iprec_at_recall_0.50", "set_f": "set_F", "bing": "binG"}
    for name, query, value in printed:
        assert aq[trec_names.get(name.strip(), name.strip()), query] == value, (name, query)
    names = {name.strip() for name, _, _ in printed}
    assert {"P_5", "P_10", "recall_100", "ndcg_cut_10", "success_5", "ndcg@5", "hit_rate@10", "mrr", "infap",
            "iprec_at_recall@0.50", "map_cut_10", "unj_5", "relative_P_5", "11pt_avg"} <= names


def test_a_family_named_with_values_prints_at_those_only_as_trec_eval_does(capsys):
    assert main(["-m", "all_trec", "-m", "P.7", "-m", "rbp.p=0.8", str(TREC / "qrels.test"),
                 str(TREC / "results.test")]) == 0
    names = [line.split("\t")[0].strip() for line in capsys.readouterr().out.splitlines()]
    assert [n for n in names if n.startswith("P_")] == ["P_7"]
    assert "rbp_p=0.8" in names and "rbp" not in names and "rbp_resid" in names
