"""The span judging loop with a known answer (bench/span_simulation.py): stitched SciFact with half its evidence
hidden, a chunked sweep pooled on its top chunks, the hidden evidence highlighted in the sheet (by text or offsets);
re-scored, every chunk size's span recall moves toward its value under the full judgments, and the ordering of the
chunk sizes agrees with the full judgments' at least as well as before."""

from __future__ import annotations

import re

import pytest

from bench import span_simulation as simulation

pytestmark = pytest.mark.slow


def known(text: str, metric: str) -> dict[str, tuple[float, float, float]]:
    """system ("BM25 128") -> (half, new, full) from the known-answer table of ``metric``."""
    block = text.split(f"\n{metric}:\n")[1].split("\n\n")[0].splitlines()[1:]
    return {" ".join(row.split()[:2]): tuple(float(x) for x in row.split()[2:5]) for row in block
            if not row.startswith("order")}


def taus(text: str, metric: str) -> dict[str, float]:
    block = text.split(f"\n{metric}:\n")[1].split("\n\n")[0]
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"ordering under (\w+): .* \(Kendall's tau with full "
                                                               r"(-?[0-9.]+)\)", block)}


def test_every_chunk_sizes_span_recall_moves_toward_its_full_judgment_value(scifact_folder, tmp_path, capsys):
    assert simulation.main([str(tmp_path), "--sizes", "128,256", "--retrievers", "bm25", "--scifact",
                            str(scifact_folder)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"simulated assessor: \d+ pooled pairs judged, [1-9]\d* hidden spans highlighted \([1-9]\d* by "
                     r"their text", out)
    for metric in ("span_recall@512tok", "span_recall@10"):
        found = known(out, metric)
        assert set(found) == {"BM25 128", "BM25 256"}
        for size, (half, new, full) in found.items():
            assert abs(new - full) < abs(half - full) / 5, (metric, size, half, new, full)
        tau = taus(out, metric)
        assert tau["new"] >= tau["half"] and tau["full"] == 1.0
    assert "mark(s) set aside" not in out  # every text the assessor gave was found once
