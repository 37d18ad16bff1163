"""A large run is read by pyarrow a block of questions at a time (metrics.trec_blocks): the command prints what the line
reader's path prints, for every measure and flag, on runs with ties, shuffled lines, tabs, questions missing on either
side; what the block reader cannot be sure of goes to the line reader; memory holds a block, not the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import metrics.trec_blocks as trec_blocks
from metrics.cli import main
from metrics.trec import read_qrels
from metrics.trec_blocks import Unsure, blocks

pytest.importorskip("pyarrow")


def write_collection(folder: Path, seed: int, shuffled: bool = False, tabs: bool = False) -> tuple[str, str]:
    """Judgments graded -1..3 and a run of 40 questions with many tied scores; some questions judged and not in the
    run, some in the run and not judged."""
    rng = np.random.default_rng(seed)
    qrels, lines = [], []
    for q in range(40):
        docs = rng.choice(200, size=int(rng.integers(1, 60)), replace=False)
        if q % 7 != 3:  # some questions have no judgment
            for d in rng.choice(200, size=int(rng.integers(1, 40)), replace=False):
                qrels.append(f"q{q:02d} 0 D{d:03d} {int(rng.integers(-1, 4))}\n")
        if q % 11 == 5:  # some judged questions are missing from the run
            continue
        scores = rng.integers(0, 8, size=len(docs)) / 4  # ties: docno descending breaks them
        rows = [f"q{q:02d} Q0 D{d:03d} {i + 1} {s} tag{seed}\n" for i, (d, s) in enumerate(zip(docs, scores))]
        if not shuffled:
            rows.sort(key=lambda r: -float(r.split()[4]))
        lines += rows
    if shuffled:
        rng.shuffle(lines)
    text = "".join(lines)
    if tabs:
        text = text.replace(" ", "\t")
    (folder / "qrels").write_text("".join(qrels))
    (folder / "run").write_text(text)
    return str(folder / "qrels"), str(folder / "run")


def printed(capsys, monkeypatch, args: list[str], block_bytes: int | None) -> tuple[int, str, str]:
    """The command's output, its run read by blocks of ``block_bytes`` and its judgments by pyarrow (None: both line
    by line)."""
    if block_bytes is not None:
        monkeypatch.setattr(trec_blocks, "FAST_BYTES", 0)
        monkeypatch.setattr(trec_blocks, "FAST_QRELS_BYTES", 0)
        monkeypatch.setattr(trec_blocks, "BLOCK_BYTES", block_bytes)
    else:
        monkeypatch.setattr(trec_blocks, "FAST_BYTES", 1 << 60)
        monkeypatch.setattr(trec_blocks, "FAST_QRELS_BYTES", 1 << 60)
    status = main(args)
    out, err = capsys.readouterr()
    return status, out, err


FLAGS = [[], ["-c"], ["-J"], ["-M", "7"], ["-l", "2"], ["-c", "-J", "-M", "20", "-l", "0"]]


@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: " ".join(f) or "none")
@pytest.mark.parametrize("layout", ["grouped", "shuffled", "tabs"])
def test_blocks_print_what_the_line_reader_prints(capsys, monkeypatch, tmp_path, layout, flags):
    qrels, run = write_collection(tmp_path, seed=len(flags) + 3, shuffled=layout == "shuffled", tabs=layout == "tabs")
    args = ["-q", "-m", "all_trec", "-m", "relstring.30", "-m", "judged@10", "-m", "rbp@0.5", *flags, qrels, run]
    want = printed(capsys, monkeypatch, args, None)
    assert want[0] == 0 and len(want[1].splitlines()) > 1000
    for block_bytes in (300, 4096, 1 << 20):  # a question per block and more, a few blocks, one block
        assert printed(capsys, monkeypatch, args, block_bytes) == want, block_bytes


def test_a_run_not_grouped_by_question_is_read_as_one_block(tmp_path):
    qrels, run = write_collection(tmp_path, seed=1, shuffled=True)
    with pytest.raises(trec_blocks.NotGrouped):
        list(blocks(run, read_qrels(qrels), block_bytes=300))
    whole = list(blocks(run, read_qrels(qrels), block_bytes=None))
    assert len(whole) == 1 and len(whole[0].query_ids) == 36


def test_a_block_holds_its_bytes_of_lines_and_one_question_more(tmp_path):
    """What keeps memory to the questions held at once: no block is more than its share of the file plus the question
    held back from the block before."""
    qrels, run = write_collection(tmp_path, seed=2)
    lines = Path(run).read_text().splitlines()
    longest_line = max(len(line) + 1 for line in lines)
    largest_question = max(np.unique([line.split()[0] for line in lines], return_counts=True)[1])
    found = list(blocks(run, read_qrels(qrels), block_bytes=2000))
    assert len(found) > 10
    assert sum(b.lines for b in found) == len(lines)
    assert max(b.lines for b in found) <= 2000 // (longest_line // 2) + largest_question
    assert [q for b in found for q in b.query_ids] == list(dict.fromkeys(line.split()[0] for line in lines))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("q1 Q0 a 1 1.0 s\n#q1 Q0 b 2 0.5 s\n", "comment"),
        ("q1 Q0 a 1 1.0 s extra\n", "6 columns"),
        ("q1 Q0 a 1 1.0 s\nq1  Q0 b 2 0.5 s\n", "6 columns"),
        ("q1 Q0 a 1 nan s\n", "finite"),
        ("q1 Q0 a 1 1.0 s\nq1 Q0 a 2 0.5 s\n", "twice"),
        ("q1 Q0 a 1 1_0 s\n", "double"),
    ],
)
def test_what_the_block_reader_is_not_sure_of_is_left_to_the_line_reader(tmp_path, text, why):
    (tmp_path / "run").write_text(text)
    (tmp_path / "qrels").write_text("q1 0 a 1\n")
    with pytest.raises(Unsure, match=why):
        list(blocks(tmp_path / "run", read_qrels(tmp_path / "qrels")))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"q1 Q0 a 1 1.0 s\nq1 Q0 b 2 nan s\n", ":2: score 'nan' is not finite"),
        (b"q1 Q0 a 1 1.0 s\nq1 Q0 a 2 0.5 s\n", ":2: document a is listed twice for question q1 (first on line 1)"),
        (b"q1 Q0 a 1 1.0 s\nq1 Q0 \xff 2 0.5 s\n", ":2: byte 0xff at byte offset 22 is not UTF-8"),
        (b"q1 Q0 a 1 1.0 s\nq1 Q0 b 2 s\n", ":2: expected 6 fields"),
    ],
)
def test_bad_lines_in_a_large_run_are_named_as_in_a_small_one(capsys, monkeypatch, tmp_path, content, says):
    (tmp_path / "run").write_bytes(content)
    (tmp_path / "qrels").write_text("q1 0 a 1\n")
    status, out, err = printed(capsys, monkeypatch, [str(tmp_path / "qrels"), str(tmp_path / "run")], 1 << 20)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and f"{tmp_path / 'run'}{says}" in err


def test_lines_after_the_sixth_field_are_read_as_trec_eval_reads_them(capsys, monkeypatch, tmp_path):
    (tmp_path / "run").write_text("q1 Q0 a 1 1.0 s junk\nq1 Q0 b 2 2.0 s\n")
    (tmp_path / "qrels").write_text("q1 0 a 1\n")
    args = ["-m", "map", "-m", "runid", str(tmp_path / "qrels"), str(tmp_path / "run")]
    assert printed(capsys, monkeypatch, args, 1 << 20) == printed(capsys, monkeypatch, args, None)


@pytest.mark.parametrize(
    "content",
    [
        "q1 0 a 2\nq1 0 b 1\nq2 0 a 0\nq2 0 c -1\nq10 0 dd 3\n",
        "q1\t0\ta\t2\nq1\t0\tb\t1\n",
        "query-id\tcorpus-id\tscore\nq1\ta\t2\nq1\tb\t1\nq2\ta\t0\n",
        "q1\ta\t2\nq1\tb\t1\nq2\ta\t0\n",
        "q1 0 a-very-long-document-identifier-0001 1\nq1 0 a-very-long-document-identifier-0002 0\n",
    ],
    ids=["trec", "trec-tabs", "beir-header", "beir", "long-ids"],
)
def test_judgments_read_by_pyarrow_are_those_the_line_reader_reads(tmp_path, content):
    path = tmp_path / "qrels"
    path.write_text(content)
    fast, slow = trec_blocks.read_qrels(path), read_qrels(path)
    for field in ("query_ids", "doc_ids", "grades"):
        assert getattr(fast, field).tolist() == getattr(slow, field).tolist()
    assert fast.codes.doc_codes.tolist() == slow.codes.doc_codes.tolist()
    assert fast.relevant_queries(1) == slow.relevant_queries(1)


@pytest.mark.parametrize("content", ["q1 0 a 1\nq1 0 a 2\n", "q1 0 a 1\n#q1 0 b 1\n", "q1 0 a x\n",
                                     "q1 0 a 1 extra\n", "q1 0 \xe9 1\n"],
                         ids=["pair twice", "comment", "grade", "fields", "not ascii"])
def test_judgments_pyarrow_is_not_sure_of_are_left_to_the_line_reader(tmp_path, content):
    (tmp_path / "qrels").write_text(content)
    with pytest.raises(Unsure):
        trec_blocks.read_qrels(tmp_path / "qrels")
