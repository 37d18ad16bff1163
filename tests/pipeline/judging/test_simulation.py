"""The loop with a known answer (bench/judging_simulation.py): SciFact test with half its judgments hidden, a sweep
pooled, the pool graded from the hidden half; re-scored, every system's nDCG@10 moves toward its full-qrels value."""

from __future__ import annotations

import re

import pytest

from bench import judging_simulation as simulation

pytestmark = pytest.mark.slow


def figures(text: str) -> dict[str, tuple[float, float]]:
    """system -> (nDCG@10 before, after) from a re-scoring's table."""
    found = {}
    for line in text.split("system  ")[1].splitlines()[1:]:
        if not line.strip():
            break
        parts = line.split()
        found[" ".join(parts[:-5])] = (float(parts[-5]), float(parts[-4]))
    return found


def test_every_systems_ndcg_moves_toward_its_full_qrels_value(scifact_folder, tmp_path, capsys):
    assert simulation.main([str(tmp_path), "--retrievers", "bm25,lsa,rrf", "--scifact", str(scifact_folder)]) == 0
    out = capsys.readouterr().out
    new, full = out.split("Against the full test qrels (the known answer):")
    judged, known = figures(new), figures(full)
    assert set(judged) == set(known) and len(judged) == 3
    for system, (before, after) in judged.items():
        truth = known[system][1]
        assert abs(after - truth) < abs(before - truth), (system, before, after, truth)
    assert re.search(r"pairs to judge for judged@10 >= 0.8 in every system: \d+", out)
