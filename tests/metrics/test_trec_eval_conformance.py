"""rankscope agrees with NIST trec_eval 10.0 on trec_eval's own test suite, per query and for `all`, at 4 decimals.

The expected files are trec_eval's outputs (shipped in tests/metrics/trec_eval/, see its README.md):
  out.test.aq   trec_eval -m all_trec -q      qrels.test      results.test
  out.test.aqc  trec_eval -m all_trec -q -c   qrels.test      results.trunc   (query 302 missing; junk columns)
  out.test.aql  trec_eval -m all_trec -q -l2  qrels.rel_level results.test    (grades -1..4)
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
MEASURES = [
    "map", "recip_rank", "Rprec", "bpref", "P_5", "P_10", "P_20", "recall_5", "recall_10", "recall_100", "recall_1000",
    "ndcg", "ndcg_cut_5", "ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_100", "success_1", "success_5", "success_10",
]
COUNTS = ["num_ret", "num_rel", "num_rel_ret"]


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
    specs = [parse_trec_measure(m)[0] for m in MEASURES]
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


@pytest.mark.parametrize("case", CASES)
def test_document_counts_agree_per_question_and_summed(case):
    counts = ours(case).counts
    for name in COUNTS:
        assert {q: str(int(v)) for q, v in counts[name].items()} == {
            q: expected(case)[name, q] for q in expected_queries(case)
        }, name
        assert str(int(counts[name].sum())) == expected(case)[name, "all"], name
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


def flags(case: str) -> list[str]:
    qrels, run, complete, level = CASES[case]
    return [*(["-c"] if complete else []), f"-l{level}", str(TREC / qrels), str(TREC / run)]


@pytest.mark.parametrize("case", CASES)
def test_the_command_line_prints_trec_eval_lines_verbatim_and_in_order(case):
    """Every line `python -m metrics -q -m all_trec` prints is a line of trec_eval's output, in trec_eval's order
    (trec_eval prints more measures; none of ours is missing)."""
    done = run_cli("-q", "-m", "all_trec", *flags(case))
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    reference = (TREC / f"out.test.{case}").read_text().splitlines()
    positions = [reference.index(line) if line in reference else -1 for line in printed]
    assert -1 not in positions, [line for line, p in zip(printed, positions) if p < 0][:5]
    assert positions == sorted(positions)
    n_queries = len(expected_queries(case))
    lines = 3 + 1 + 1 + 1 + 1 + 9 + 9 + 1 + 9 + 3  # counts, map, Rprec, bpref, recip_rank, P, recall, ndcg,
    # ndcg_cut, success
    assert len(printed) == n_queries * lines + lines + 2  # + runid and num_q in the summary


def test_the_default_output_is_trec_eval_default_output_less_what_rankscope_does_not_compute():
    done = run_cli(str(TREC / "qrels.test"), str(TREC / "results.test"))
    assert done.returncode == 0, done.stderr
    reference = [line for line in (TREC / "out.test").read_text().splitlines()
                 if not line.startswith(("gm_map", "iprec_at_recall"))]
    assert done.stdout.splitlines() == reference


def test_every_measure_form_prints_trec_eval_lines(capsys):
    """trec_eval's own forms print trec_eval's lines; a rankscope name prints the same value under its name."""
    forms = ["map", "recip_rank", "P_5", "P.5,10", "recall_5", "recall.5,100", "ndcg_cut_10", "ndcg_cut",
             "success_1", "success.1,5,10", "Rprec", "ndcg", "ndcg@5", "hit_rate@10", "mrr"]
    assert main(["-q", *[f"-m{form}" for form in forms], str(TREC / "qrels.test"), str(TREC / "results.test")]) == 0
    printed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    aq = expected("aq")
    trec_names = {"ndcg@5": "ndcg_cut_5", "hit_rate@10": "success_10", "mrr": "recip_rank"}
    for name, query, value in printed:
        assert aq[trec_names.get(name.strip(), name.strip()), query] == value, (name, query)
    names = {name.strip() for name, _, _ in printed}
    assert {"P_5", "P_10", "recall_100", "ndcg_cut_1000", "success_5", "ndcg@5", "hit_rate@10", "mrr"} <= names
