"""TREC qrels and run files are read as trec_eval reads them, and bad lines are named by file and line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metrics import Qrels, Run, evaluate, trec
from metrics.errors import InputError
from metrics.run import PAD
from metrics.trec import (
    read_trec_qrels,
    read_trec_run,
    trec_lines,
    trec_run_bytes,
    write_trec_run,
    written_scores,
)


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
    assert [again.top(q, 10) for q in ("q", "r")] == [run.top(q, 10) for q in ("q", "r")] == [["c", "b", "a"], ["a"]]


def below(score: float, units: int = 1) -> float:
    """``units`` steps of a 32-bit float below ``score`` (what trec_eval can tell apart)."""
    value = np.float32(score)
    for _ in range(units):
        value = np.nextafter(value, np.float32(-np.inf))
    return float(value)


def written(run: Run, tmp_path: Path) -> list[tuple[str, str, str]]:
    lines = write_trec_run(run, tmp_path / "written.trec").read_text().splitlines()
    return [(f[0], f[2], f[4]) for f in (line.split() for line in lines)]


def test_tied_scores_are_written_one_float32_unit_apart_in_rankscope_order_and_other_scores_exactly(tmp_path):
    """rankscope orders ties by id ascending; trec_eval would order them by docno descending. Written a, b, c at
    2.0, 2.0 - 1 unit, 2.0 - 2 units, trec_eval reads them back in rankscope's order."""
    third = 1.2345678901234567
    run = Run.from_rankings({"q": [("a", 2.0), ("b", 2.0), ("c", 2.0), ("d", third), ("e", 0.5)]})
    assert written(run, tmp_path) == [("q", "a", "2.0"), ("q", "b", repr(below(2.0))),
                                      ("q", "c", repr(below(2.0, 2))), ("q", "d", repr(third)), ("q", "e", "0.5")]


def test_scores_trec_eval_reads_as_equal_or_rising_are_written_below_the_previous_one(tmp_path):
    """trec_eval keeps 32-bit scores: 1.0 and the next 64-bit value below it are a tie for it; a score above the
    previous one (a ranking not in score order) is written below it too."""
    close = float(np.nextafter(1.0, -np.inf))
    run = Run.from_rankings({"q": [("a", 1.0), ("b", close), ("c", 3.0), ("d", 0.25)]})
    assert [s for _, _, s in written(run, tmp_path)] == [
        "1.0", repr(below(1.0)), repr(below(1.0, 2)), "0.25"]


def test_scores_trec_eval_cannot_tell_apart_are_read_as_ties_ordered_by_docno_descending(tmp_path):
    close = float(np.nextafter(1.0, -np.inf))
    run = read_trec_run(write(tmp_path, "run", f"q Q0 a 1 1.0 s\nq Q0 b 2 {close!r} s\nq Q0 c 3 {below(1.0)!r} s\n"))
    assert run.top("q", 3) == ["b", "a", "c"]
    assert run.ranking("q")[0] == ("b", close)  # each score keeps its 64-bit value


def test_trec_eval_scores_a_written_run_as_rankscope_scored_it_in_memory(tmp_path):
    """pytrec_eval (trec_eval's C code) on the written file, against rankscope on the in-memory run: scores drawn
    from a few values (ties everywhere), ranked by rankscope's rule (score descending, id ascending)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(5)
    rankings, judgments = {}, {}
    for q in range(60):
        docs = [f"d{i:02d}" for i in rng.choice(40, size=int(rng.integers(1, 40)), replace=False)]
        scores = rng.choice([3.0, 2.5, 1.0, 1 / 3, 1e-6], size=len(docs))
        rankings[f"q{q}"] = sorted(zip(docs, scores.tolist()), key=lambda p: (-p[1], p[0]))
        judgments[f"q{q}"] = {d: int(rng.integers(0, 3)) for d in rng.choice(docs, size=3)} | {docs[-1]: 1}
    run = Run.from_rankings(rankings)
    measures = {"map": "map", "recip_rank": "mrr", "P_5": "precision@5", "ndcg_cut_10": "ndcg@10", "bpref": "bpref"}
    ours = evaluate(run, Qrels.from_dict(judgments), list(measures.values())).per_question
    from_file: dict[str, dict[str, float]] = {}
    for q, d, s in written(run, tmp_path):
        from_file.setdefault(q, {})[d] = float(s)
    theirs = pytrec_eval.RelevanceEvaluator(judgments, set(measures)).evaluate(from_file)
    for q in ours.index:
        for trec_name, name in measures.items():
            assert ours.loc[q, name] == theirs[q][trec_name], (q, name)
    # the data can tell: the same scores written as computed give trec_eval other figures
    raw = pytrec_eval.RelevanceEvaluator(judgments, set(measures)).evaluate(
        {q: dict(r) for q, r in rankings.items()})
    assert any(raw[q][t] != theirs[q][t] for q in ours.index for t in measures)


def reference_run_text(run: Run, tag: str | None = None) -> str:
    """The run file as it was written line by line before the writer was vectorised: the bytes to keep."""
    tag = tag or run.name
    scores = written_scores(run.scores)
    text = "".join(f"{qid} Q0 {run.doc_ids[run.docs[i, j]]} {j + 1} {float(scores[i, j])!r} {tag}\n"
                   for i, qid in enumerate(run.query_ids) for j in range(int(run.lengths[i])))
    return text or f"{trec.NO_RESULTS_LINE} {tag}\n"  # no result at all: one line for a question no qrels hold


def odd_runs() -> dict[str, Run]:
    """Runs a vectorised writer could get wrong: ties, padded rows, questions with no result, no question at all,
    ids with odd characters or of other types, scores whose repr is exponent-shaped or long."""
    rng = np.random.default_rng(11)
    wide = {f"q{q}": [(f"d{d}", float(s)) for d, s in zip(rng.choice(500, size=n, replace=False),
                                                             np.sort(rng.normal(5, 3, size=n))[::-1])]
            for q, n in enumerate(rng.integers(0, 60, size=40))}
    return {
        "ties and padding": Run.from_rankings({"q": [("a", 2.0), ("b", 2.0), ("c", 2.0)], "r": [("a", 1.0)],
                                               "s": [("c", 0.5), ("a", 0.5)]}),
        "shapes of floats": Run.from_rankings({"q": [("a", 1e16), ("b", 123456789.125), ("c", 1 / 3), ("d", 1e-5),
                                                     ("e", 5e-324), ("f", 0.0), ("g", -0.0), ("h", -2.5e-7),
                                                     ("i", -1e300)]}),
        "odd ids": Run.from_rankings({"é\u00a0x": [("doc#1", 3.0), ("{d}", 2.0), ("ü—ß", 1.0)], "%s": [("🙂", 1.0)]}),
        "no result for some": Run(np.array(["a", "b", "c", "d"], dtype=object), np.array(["x", "y"], dtype=object),
                                  np.array([[PAD, PAD], [0, 1], [PAD, PAD], [1, PAD]]),
                                  np.array([[np.nan, np.nan], [2.0, 1.0], [np.nan, np.nan], [4.0, np.nan]])),
        "no result at all": Run(np.array(["a"], dtype=object), np.array([], dtype=object), np.full((1, 3), PAD),
                                np.full((1, 3), np.nan)),
        "no question": Run.from_rankings({}),
        "ids not text": Run(np.array([7, 8.5], dtype=object), np.array([1, np.int64(2)], dtype=object),
                            np.array([[0, 1], [1, PAD]]), np.array([[2.0, 1.0], [3.0, np.nan]])),
        "many questions": Run.from_rankings(wide, name="wide"),
    }


@pytest.mark.parametrize("lines_per_block", [1, 7, 50_000])
@pytest.mark.parametrize("case", list(odd_runs()))
def test_the_run_file_is_byte_for_byte_what_one_f_string_per_line_wrote(tmp_path, monkeypatch, case, lines_per_block):
    """Small blocks put block edges everywhere, after questions without results too."""
    monkeypatch.setattr(trec, "LINES_PER_BLOCK", lines_per_block)
    run = odd_runs()[case]
    for tag in (None, "my_tag"):
        path = write_trec_run(run, tmp_path / "run.trec", tag)
        assert path.read_bytes() == reference_run_text(run, tag).encode("utf-8") == trec_run_bytes(run, tag)
        assert "".join(f"{line}\n" for line in trec_lines(run, tag)) == reference_run_text(run, tag)


def test_a_sweep_sized_run_file_is_byte_for_byte_what_one_f_string_per_line_wrote(tmp_path):
    """300 questions x 100 documents with scores from a few values (long runs of ties, nudged below each other)."""
    rng = np.random.default_rng(3)
    docs = np.array([f"{i:05d}" for i in range(5000)], dtype=object)
    rankings = {f"q{q}": list(zip(rng.choice(docs, size=100, replace=False).tolist(),
                                  np.sort(rng.choice([12.5, 7.0, 7.0 + 1e-9, 3.25, 1 / 7], size=100))[::-1].tolist()))
                for q in range(300)}
    run = Run.from_rankings(rankings)
    assert write_trec_run(run, tmp_path / "run.trec", "bm25").read_bytes() == reference_run_text(run, "bm25").encode()
    assert trec_run_bytes(run, "bm25") == reference_run_text(run, "bm25").encode()
