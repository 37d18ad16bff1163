"""TREC qrels and run files are read as trec_eval reads them, and bad lines are named by file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from metrics.errors import InputError
from metrics.trec import read_trec_qrels, read_trec_run, write_trec_run


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_run_is_ordered_by_score_descending_then_docno_descending_ignoring_the_rank_column(tmp_path):
    path = write(tmp_path, "run", "\n".join([
        "q1 Q0 b 1 1.0 sys",
        "q1 Q0 a 2 2.0 sys",
        "q1 Q0 c 3 1.0 sys",
        "q1 Q0 d 4 0.5 sys",
        "q1 Q0 aa 5 1.0 sys",
        "q2 Q0 z 9 -1.0 sys",
        "q2 Q0 y 1 -2.0 sys",
    ]))
    run = read_trec_run(path)
    assert run.top("q1", 10) == ["a", "c", "b", "aa", "d"]
    assert run.ranking("q2") == [("z", -1.0), ("y", -2.0)]


def test_docno_ties_compare_as_trec_eval_strcmp_does_not_numerically(tmp_path):
    path = write(tmp_path, "run", "q Q0 D9 1 1.0 s\nq Q0 D10 2 1.0 s\nq Q0 D2 3 1.0 s\n")
    assert read_trec_run(path).top("q", 3) == ["D9", "D2", "D10"]


def test_junk_after_the_sixth_column_comments_and_blank_lines_are_ignored(tmp_path):
    path = write(tmp_path, "run", "# a comment\n\nq1\tQ0\ta\t1\t  2.5\tsys more junk at\n   \nq1 Q0 b 2 1.5 sys2\n")
    run = read_trec_run(path)
    assert run.ranking("q1") == [("a", 2.5), ("b", 1.5)]
    assert run.name == "sys2"  # trec_eval's runid: the tag of the last line


def test_qrels_keep_grades_including_negative_and_skip_comments(tmp_path):
    path = write(tmp_path, "qrels", "# judged by the pool\nq1 0 a 2\nq1 0 b -1\n\nq2 0 a 0\n")
    assert read_trec_qrels(path).to_dict() == {"q1": {"a": 2, "b": -1}, "q2": {"a": 0}}


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("q1 0 a 1\nq1 0 b\n", 2, "expected 4 fields"),
        ("q1 0 a 1 extra\n", 1, "expected 4 fields"),
        ("q1 0 a 1\n\nq1 0 b yes\n", 3, "not an integer"),
        ("q1 0 a 1\nq2 0 a 1\nq1 0 a 0\n", 3, "duplicate judgment for question q1 and document a (first on line 1)"),
    ],
)
def test_bad_qrels_lines_are_named(tmp_path, text, line, says):
    path = write(tmp_path, "qrels", text)
    with pytest.raises(InputError) as err:
        read_trec_qrels(path)
    assert (err.value.path, err.value.line) == (str(path), line)
    assert says in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("q1 Q0 a 1 1.0 s\nq1 Q0 b 2 0.5\n", 2, "expected 6 fields"),
        ("q1 Q0 a 1 high s\n", 1, "not a number"),
        ("q1 Q0 a 1 inf s\n", 1, "not finite"),
        ("q1 Q0 a 1 1.0 s\nq2 Q0 a 1 1.0 s\nq1 Q0 a 2 0.5 s\n", 3, "document a is listed twice for question q1 "
                                                                   "(first on line 1)"),
    ],
)
def test_bad_run_lines_are_named(tmp_path, text, line, says):
    path = write(tmp_path, "run", text)
    with pytest.raises(InputError) as err:
        read_trec_run(path)
    assert (err.value.path, err.value.line) == (str(path), line)
    assert says in str(err.value)


@pytest.mark.parametrize("reader", [read_trec_qrels, read_trec_run])
def test_a_missing_file_is_named(tmp_path, reader):
    with pytest.raises(InputError, match="no such file") as err:
        reader(tmp_path / "absent")
    assert err.value.path == str(tmp_path / "absent")


def test_an_empty_run_file_is_an_empty_run(tmp_path):
    run = read_trec_run(write(tmp_path, "run", ""))
    assert len(run.query_ids) == 0


def test_a_written_run_reads_back_in_the_same_order(tmp_path):
    run = read_trec_run(write(tmp_path, "run", "q Q0 b 1 1.0 s\nq Q0 a 2 1.0 s\nq Q0 c 3 3.0 s\nr Q0 a 1 1 s\n"))
    again = read_trec_run(write_trec_run(run, tmp_path / "again"))
    assert [again.ranking(q) for q in ("q", "r")] == [run.ranking(q) for q in ("q", "r")]
