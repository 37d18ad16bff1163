"""The loop with a known answer (bench/judging_simulation.py): SciFact test with half its judgments hidden, a sweep
pooled, the pool graded from the hidden half; re-scored, every system's nDCG@10 moves toward its full-qrels value."""

from __future__ import annotations

import re

import pytest

from bench import judging_simulation as simulation

pytestmark = pytest.mark.slow


def known(text: str) -> dict[str, tuple[float, float, float]]:
    """system -> (half, new, full) from the known-answer table."""
    rows = text.split("|new-full|")[1].strip().splitlines()
    return {" ".join(r.split()[:-5]): tuple(float(x) for x in r.split()[-5:-2]) for r in rows}


def figures(text: str) -> dict[str, tuple[float, float]]:
    """system -> (nDCG@10 before, after) from a re-scoring's table (the sweep's own tables come before it)."""
    found = {}
    for line in text.split("\nsystem  ndcg@10 before")[1].splitlines()[1:]:
        if not line.strip():
            break
        parts = line.split()
        found[" ".join(parts[:-5])] = (float(parts[-5]), float(parts[-4]))
    return found


def test_every_systems_ndcg_moves_toward_its_full_qrels_value(scifact_folder, tmp_path, capsys):
    assert simulation.main([str(tmp_path), "--retrievers", "bm25,lsa,rrf", "--scifact", str(scifact_folder)]) == 0
    out = capsys.readouterr().out
    new, full = out.split("Against the full test qrels (the known answer):")
    judged, answer = figures(new), known(full)
    assert set(judged) == set(answer) and len(judged) == 3
    for system, (half, after, truth) in answer.items():
        assert abs(after - truth) < abs(half - truth) / 5, (system, half, after, truth)
        assert judged[system][0] == pytest.approx(figures(full)[system][0])  # both re-scorings start from the half
    assert re.search(r"pairs to judge for judged@10 >= 0.8 in every system: \d+", out)
    assert re.search(r"Gate RRF vs baseline BM25: on the old version (PASS|REGRESSION): .*; on the new one "
                     r"(PASS|REGRESSION): ", new)  # the gate decided on the half, decided again
