"""`python -m metrics QRELS RUN`: trec_eval's command line, layout and flags; bad input is one line and status 2."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metrics.cli import main

REPO = Path(__file__).resolve().parents[2]

QRELS = """\
# judgments: q1 has two relevant documents, q2 one, q3 none, q4 is missing from the run
q1 0 a 2
q1 0 b 1
q1 0 c 0

q2 0 d 1
q3 0 a 0
q4 0 e 1
"""
RUN = """\
q1 Q0 c 1 3.0 sys
q1 Q0 a 2 2.0 sys
q1 Q0 x 3 1.0 sys
q2 Q0 x 1 2.0 sys
q2 Q0 d 2 1.0 sys
q3 Q0 a 1 1.0 sys
q9 Q0 a 1 1.0 sys
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


def cli(capsys, *args: str) -> tuple[int, list[str], list[str]]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def test_lines_are_name_padded_to_22_then_query_then_value(capsys, files):
    status, out, _ = cli(capsys, "-m", "recip_rank", "-m", "num_q", *files)
    assert status == 0
    assert out == ["num_q                 \tall\t2", "recip_rank            \tall\t0.5000"]


def test_per_question_lines_come_first_in_query_order_then_all(capsys, files):
    _, out, _ = cli(capsys, "-q", "-m", "P.1,2", *files)
    assert [line.split("\t") for line in out] == [
        ["P_1" + " " * 19, "q1", "0.0000"], ["P_2" + " " * 19, "q1", "0.5000"],
        ["P_1" + " " * 19, "q2", "0.0000"], ["P_2" + " " * 19, "q2", "0.5000"],
        ["P_1" + " " * 19, "all", "0.0000"], ["P_2" + " " * 19, "all", "0.5000"],
    ]


def test_measures_print_in_trec_eval_order_under_the_name_they_were_asked_by(capsys, files):
    _, out, _ = cli(capsys, "-m", "ndcg@5", "-m", "success_1", "-m", "mrr", "-m", "P_5", "-m", "runid", *files)
    assert [line.split("\t")[0].strip() for line in out] == ["runid", "mrr", "P_5", "ndcg@5", "success_1"]
    assert out[0].endswith("\tall\tsys")


def test_without_c_only_queries_in_both_files_count(capsys, files):
    _, out, err = cli(capsys, "-q", "-m", "recip_rank", "-m", "num_q", *files)
    assert [line.split("\t")[1] for line in out] == ["q1", "q2", "all", "all"]
    assert out[-1].endswith("\t0.5000")  # (1/2 + 1/2) / 2
    assert len(err) == 1 and "q3" in err[0] and "no relevant judgment" in err[0]


def test_with_c_a_judged_query_missing_from_the_run_scores_zero(capsys, files):
    _, out, _ = cli(capsys, "-q", "-c", "-m", "recip_rank", "-m", "num_q", *files)
    assert "recip_rank            \tq4\t0.0000" in out
    assert out[-2:] == ["num_q                 \tall\t3", "recip_rank            \tall\t0.3333"]


def test_the_relevance_level_counts_only_higher_grades(capsys, files):
    _, out, _ = cli(capsys, "-q", "-l2", "-m", "recip_rank", "-m", "num_rel", *files)
    assert out == ["num_rel               \tq1\t1", "recip_rank            \tq1\t0.5000",
                   "num_rel               \tall\t1", "recip_rank            \tall\t0.5000"]  # a (2) at rank 2


def test_level_zero_makes_every_judged_document_relevant(capsys, files):
    _, out, _ = cli(capsys, "-q", "-l0", "-m", "num_rel", "-m", "num_rel_ret", *files)
    assert "num_rel               \tq1\t3" in out
    assert "num_rel_ret           \tq3\t1" in out


def test_max_docs_keeps_the_top_of_each_ranking(capsys, files):
    _, out, _ = cli(capsys, "-q", "-M1", "-m", "num_ret", "-m", "recip_rank", *files)
    assert "num_ret               \tq1\t1" in out
    assert "recip_rank            \tq1\t0.0000" in out


def test_judged_only_drops_unjudged_documents_before_ranking(capsys, files):
    _, out, _ = cli(capsys, "-q", "-J", "-m", "recip_rank", *files)
    assert "recip_rank            \tq2\t1.0000" in out  # x (unjudged) removed, d moves to rank 1


def test_the_default_measures_are_trec_eval_official_ones(capsys, files):
    _, out, _ = cli(capsys, *files)
    names = [line.split("\t")[0].strip() for line in out]
    assert names[:10] == ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                          "recip_rank"]
    assert names[10:21] == [f"iprec_at_recall_{level / 10:.2f}" for level in range(11)]
    assert names[21:] == [f"P_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing.qrels", "{run}"], "missing.qrels: no such file"),
        (["{qrels}", "missing.run"], "missing.run: no such file"),
        (["-m", "bleu", "{qrels}", "{run}"], "-m bleu: unknown metric"),
        (["-m", "prefs_simp", "{qrels}", "{run}"], "-m prefs_simp: trec_eval's prefs_simp is not computed"),
        (["-m", "dcg.1=2", "{qrels}", "{run}"], "-m dcg.1=2: trec_eval's dcg is not computed by rankscope"),
        (["-m", "rbp.q=2", "{qrels}", "{run}"], "rbp's persistence only"),
        (["-m", "iprec_at_recall.0.123", "{qrels}", "{run}"], "cannot read the values"),
        (["-m", "relstring.x", "{qrels}", "{run}"], "relstring's depth"),
        (["-m", "P.5,x", "{qrels}", "{run}"], "cutoffs"),
        (["-l-1", "{qrels}", "{run}"], "relevance level"),
        (["-M0", "{qrels}", "{run}"], "-M"),
        (["-l", "two", "{qrels}", "{run}"], "invalid int value"),
        (["{qrels}"], "required"),
        (["--frobnicate", "{qrels}", "{run}"], "unrecognized"),
    ],
)
def test_bad_arguments_are_one_line_on_stderr_and_status_2(capsys, files, args, says):
    qrels, run = files
    status = None
    try:
        status = main([a.format(qrels=qrels, run=run) for a in args])
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert says in err


@pytest.mark.parametrize(
    ("which", "content", "line"),
    [
        ("qrels", "q1 0 a 1\nq1 0 b\n", 2),
        ("qrels", "q1 0 a 1\n\nq1 0 b high\n", 3),
        ("qrels", "q1 0 a 1\nq1 0 a 2\n", 2),
        ("run", "q1 Q0 a 1 1.0 s\nq1 Q0 b 2 s\n", 2),
        ("run", "q1 Q0 a 1 one s\n", 1),
        ("run", "q1 Q0 a 1 1.0 s\nq1 Q0 a 2 0.5 s\n", 2),
    ],
)
def test_a_malformed_file_is_named_with_its_line(capsys, files, tmp_path, which, content, line):
    bad = tmp_path / f"bad.{which}"
    bad.write_text(content)
    qrels, run = files
    status, out, err = cli(capsys, *((str(bad), run) if which == "qrels" else (qrels, str(bad))))
    assert status == 2 and out == []
    assert len(err) == 1 and f"{bad}:{line}:" in err[0]


def test_no_query_to_score_is_an_error_not_an_empty_table(capsys, files, tmp_path):
    other = tmp_path / "other.run"
    other.write_text("q9 Q0 a 1 1.0 s\n")
    status, _, err = cli(capsys, files[0], str(other))
    assert status == 2 and "no query" in err[0]


def test_as_a_process_bad_input_gives_no_traceback(files, tmp_path):
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 a 1 1.0 s\nq1 Q0 b nan\n")
    done = subprocess.run([sys.executable, "-m", "metrics", files[0], str(bad)], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and f"{bad}:2:" in done.stderr
    assert "Traceback" not in done.stderr


BEIR = "query-id\tcorpus-id\tscore\nq1\ta\t2\nq1\tb\t1\nq1\tc\t0\nq2\td\t1\nq3\ta\t0\nq4\te\t1\n"


@pytest.mark.parametrize("header", [True, False], ids=["with-header", "without-header"])
def test_beir_qrels_read_as_the_same_judgments_in_trec_form(capsys, files, tmp_path, header):
    beir = tmp_path / "test.tsv"
    beir.write_text(BEIR if header else BEIR.split("\n", 1)[1])
    qrels, run = files
    trec = cli(capsys, "-q", "-c", "-m", "all_trec", qrels, run)
    assert cli(capsys, "-q", "-c", "-m", "all_trec", str(beir), run) == trec
    assert trec[0] == 0 and len(trec[1]) > 40


def test_the_project_beir_qrels_score_a_run(capsys, tmp_path):
    helpdesk = REPO / "pipeline" / "data" / "helpdesk" / "qrels" / "test.tsv"
    run = tmp_path / "run"
    run.write_text("q01 Q0 pricing1 1 2.0 s\nq01 Q0 sso1 2 1.0 s\n")
    status, out, err = cli(capsys, "-m", "num_q", "-m", "num_rel", "-c", str(helpdesk), str(run))
    assert status == 0, err
    assert out == ["num_q                 \tall\t14", "num_rel               \tall\t27"]


@pytest.mark.parametrize("which", ["qrels", "run"])
def test_a_folder_is_one_plain_line(capsys, files, tmp_path, which):
    qrels, run = files
    status, out, err = cli(capsys, *((str(tmp_path), run) if which == "qrels" else (qrels, str(tmp_path))))
    assert status == 2 and out == []
    assert err == [f"python -m metrics: {tmp_path}: is a folder, not a file"]


BINARY = bytes(range(256)) * 4  # a NUL first, then every byte value, none of it text


@pytest.mark.parametrize("content", [BINARY, b"q1 0 a 1\nq1 0 \xff\xfe 1\n", b"q1 Q0 a 1 1.0 s\n\x89PNG\r\n\x1a\n\0\0"],
                         ids=["binary", "latin-1 byte", "png"])
@pytest.mark.parametrize("which", ["qrels", "run"])
def test_a_file_that_is_not_text_is_one_plain_line_without_its_bytes(capsys, files, tmp_path, which, content):
    bad = tmp_path / "bad"
    bad.write_bytes(content)
    qrels, run = files
    status, out, err = cli(capsys, *((str(bad), run) if which == "qrels" else (qrels, str(bad))))
    assert status == 2 and out == []
    assert len(err) == 1 and err[0].startswith(f"python -m metrics: {bad}:")
    assert err[0].isascii() and err[0].isprintable(), err[0]
    if content == BINARY:
        assert err[0].endswith(":1: a NUL byte at byte offset 0: this looks like a binary file, not text")


def test_ctrl_c_is_one_line_and_status_130(capsys, files, monkeypatch):
    import metrics.trec

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(metrics.trec, "read_trec_run", stopped)  # a large run being read when Ctrl-C comes
    qrels, run = files
    assert main([qrels, run]) == 130
    assert capsys.readouterr().err == "python -m metrics: stopped by Ctrl-C\n"


@pytest.mark.parametrize("content", ["", "# a comment, then nothing\n\n"])
@pytest.mark.parametrize("complete", [[], ["-c"]])
def test_an_empty_run_is_refused_in_one_line_as_trec_eval_refuses_it(capsys, files, tmp_path, content, complete):
    """With -c every judged query would score 0 and the command say nothing was wrong: nothing was retrieved."""
    empty = tmp_path / "empty.run"
    empty.write_text(content)
    status, out, err = cli(capsys, *complete, files[0], str(empty))
    assert status == 2 and out == []
    assert err == [f"python -m metrics: {empty}: the run holds no result line: nothing to evaluate (trec_eval refuses "
                   "it too)"]


def test_a_mean_is_summed_as_trec_eval_sums_it_one_query_after_another(capsys, tmp_path):
    """P_20 of eight queries retrieving 3, 10, 17, 13, 15, 11, 2 and 10 relevant documents: the mean is 81/160 =
    0.50625, an exact half at the 4th decimal. trec_eval adds each query's value to a running double in query order,
    then divides (meas_acc.c, meas_avg.c), which lands above the half: 0.5063. The exactly rounded sum lands below
    (0.5062): printed that way, the two outputs would not diff clean."""
    hits = [3, 10, 17, 13, 15, 11, 2, 10]
    qrels = "".join(f"q{q} 0 d{q}_{i} 1\n" for q in range(1, 9) for i in range(20))
    run = "".join(f"q{q} Q0 {f'd{q}_{i}' if i < n else f'x{q}_{i}'} {i + 1} {100 - i} t\n"
                  for q, n in zip(range(8, 0, -1), hits[::-1]) for i in range(20))  # the file's order: reversed
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    _, out, _ = cli(capsys, "-q", "-m", "P.20", str(tmp_path / "qrels"), str(tmp_path / "run"))
    assert out[:-1] == [f"P_20                  \tq{q}\t{n / 20:.4f}" for q, n in zip(range(1, 9), hits)]
    assert out[-1] == "P_20                  \tall\t0.5063"
    exact = math.fsum(n / 20 for n in hits) / 8
    assert f"{exact:.4f}" == "0.5062"  # what the exact sum, which a job logs, prints


@pytest.mark.parametrize("which", ["qrels", "run"])
def test_the_null_device_is_named_for_what_it_is_not_a_missing_file(capsys, files, which):
    """``python -m metrics -c /dev/null RUN`` said "no such file": it exists, and reads as empty."""
    qrels, run = files
    status, out, err = cli(capsys, "-c", *((os.devnull, run) if which == "qrels" else (qrels, os.devnull)))
    assert status == 2 and out == []
    assert err == [f"python -m metrics: {os.devnull}: is the null device (it reads as empty), not a file"]


def test_a_qrels_file_without_a_judgment_is_said_so(capsys, files, tmp_path):
    empty = tmp_path / "empty.qrels"
    empty.write_text("# nothing judged yet\n")
    status, out, err = cli(capsys, "-c", str(empty), files[1])
    assert status == 2 and out == [] and err == [f"python -m metrics: {empty}: holds no judgment: nothing to evaluate "
                                                 f"against"]


def test_the_run_file_of_a_run_that_retrieved_nothing_scores_every_judged_query_zero_with_c(capsys, files, tmp_path):
    """A job whose retriever returned nothing writes one line for a question no qrels hold (metrics.trec): trec_eval
    reads it (it refuses an empty file), leaves that question out, and with -c scores every judged query 0."""
    import numpy as np

    from metrics.run import Run
    from metrics.trec import NO_RESULTS_LINE, write_trec_run

    none = np.array([], dtype=object)
    nothing = write_trec_run(Run(none, none, np.zeros((0, 0)), np.zeros((0, 0)), "EmptyFor"), tmp_path / "run.trec")
    assert nothing.read_text() == f"{NO_RESULTS_LINE} EmptyFor\n"
    status, out, err = cli(capsys, "-c", "-m", "official", "-m", "ndcg_cut.10", files[0], str(nothing))
    assert status == 0, err
    values = dict(line.split("\t")[::2] for line in out)
    assert values.pop("runid                 ") == "EmptyFor"
    assert values.pop("num_q                 ") == "3" and values.pop("num_rel               ") == "4"  # q1, q2, q4
    assert set(values.values()) == {"0", "0.0000"} and len(values) > 10
    assert err == ["note: the run retrieved nothing for any question (its one line, for question rankscope-no-results, "
                   "is there for trec_eval, which refuses an empty file): every judged question scores 0",
                   "note: 1 judged query has no relevant judgment at level 1, left out of the means (trec_eval would "
                   "score them 0): q3"]
    status, out, err = cli(capsys, files[0], str(nothing))  # without -c, as trec_eval: no query to score
    assert status == 2 and out == [] and err[0].endswith("; -c scores every judged question 0")
