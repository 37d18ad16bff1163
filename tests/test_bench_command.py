"""``python -m bench`` at its edges: without the peers it compares with (the bench extra), one line saying what to
install, not a traceback from a child process; and a run never replaces the committed bench/RESULTS.md, which the
guides quote, unless told to with --out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import PEERS, make_parser, missing_peers

REPO = Path(__file__).resolve().parents[1]


def test_without_the_bench_extra_it_says_what_to_install_in_one_line():
    missing = missing_peers(bm25=True, metrics=True)
    if not missing:
        pytest.skip("the bench extra is installed here: nothing is missing")
    done = subprocess.run([sys.executable, "-m", "bench", "--quick"], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"python -m bench: the peers to compare with are not installed ({', '.join(missing)})")
    assert "pip install 'rankscope[bench]'" in line


def test_the_peers_looked_for_are_those_of_the_parts_asked_for():
    assert set(PEERS["bm25"]) | set(PEERS["metrics"]) >= {"bm25s", "numba", "rank_bm25", "pytrec_eval", "ranx"}
    assert missing_peers(bm25=False, metrics=False) == []


def test_the_committed_results_are_replaced_only_when_named():
    committed = REPO / "bench" / "RESULTS.md"
    assert make_parser().parse_args([]).out == REPO / "bench" / "results" / "RESULTS.md"  # git ignores bench/results
    assert make_parser().parse_args(["--quick"]).out != committed
    assert make_parser().parse_args(["--out", str(committed)]).out == committed
    ignored = subprocess.run(["git", "check-ignore", "-q", "bench/results/RESULTS.md"], cwd=REPO, check=False)
    assert ignored.returncode == 0 or not (REPO / ".git").exists()
