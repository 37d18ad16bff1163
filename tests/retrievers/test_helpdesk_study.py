"""The help-desk study, reproduced to the printed precision with default settings: the expected figures are read from
the page that ships them (docs/helpdesk-reference.md), not copied here, so a changed figure or page fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metrics.evaluation import evaluate

PAGE = Path(__file__).resolve().parents[2] / "docs" / "helpdesk-reference.md"  # the study's figures, shipped
COLUMNS = ("hit@3", "recall@5", "MRR", "nDCG@5")
SYSTEMS = ("BM25", "LSA", "weighted", "RRF")


def expected_blocks() -> tuple[str, str]:
    """The means table and the first-relevant-rank block under the page's "Expected results"."""
    section = PAGE.read_text(encoding="utf-8").split("## Expected results", 1)[1].split("\n## ", 1)[0]
    means, ranks = re.findall(r"^```\n(.*?)^```", section, re.MULTILINE | re.DOTALL)[:2]
    return means, ranks


def expected_means() -> dict[str, tuple[float, ...]]:
    """hit@3, recall@5, MRR (2 decimals) and nDCG@5 (3 decimals) of each system, as the page prints them."""
    header, *rows = expected_blocks()[0].strip().splitlines()
    assert tuple(header.split()[1:]) == COLUMNS, header
    return {row.split()[0]: tuple(float(v) for v in row.split()[1:]) for row in rows}


def expected_not_first() -> dict[str, dict[str, int]]:
    """Each system's questions whose first relevant document is not at rank 1 (0 = not retrieved), read from entries
    such as ``q01 BM25=1 LSA=2 ...``, ``q08 all 1`` and ``q03..q07 all 1``."""
    found: dict[str, dict[str, int]] = {s: {} for s in SYSTEMS}
    pattern = r"q(\d\d)(?:\.\.q(\d\d))?\s+((?:all \d+)|(?:\w+=\S+\s*)+)"
    for first, last, rest in re.findall(pattern, expected_blocks()[1]):
        everyone = rest.startswith("all")
        pairs = [(s, rest.split()[1]) for s in SYSTEMS] if everyone else [p.split("=") for p in rest.split()]
        for number in range(int(first), int(last or first) + 1):
            for system, rank in pairs:
                value = 0 if rank == "--" else int(rank)
                if value != 1:
                    found[system][f"q{number:02d}"] = value
    return found


EXPECTED = expected_means()
NOT_FIRST = expected_not_first()


def test_the_page_gives_every_system_four_means_and_a_rank_on_every_question():
    assert list(EXPECTED) == list(SYSTEMS) and all(len(v) == 4 for v in EXPECTED.values())
    text = expected_blocks()[1]
    named = {int(q) for q in re.findall(r"q(\d\d)", text)}
    ranges = [range(int(a), int(b) + 1) for a, b in re.findall(r"q(\d\d)\.\.q(\d\d)", text)]
    assert named | {q for r in ranges for q in r} == set(range(1, 15))


@pytest.fixture(scope="module")
def runs(helpdesk_runs):
    return helpdesk_runs


@pytest.mark.parametrize("system", list(EXPECTED))
def test_means_match_the_spec_table(system, runs, helpdesk_collection):
    means = evaluate(runs[system], helpdesk_collection.qrels, "hit_rate@3,recall@5,mrr,ndcg@5").means()
    hit, rec, mrr, ndcg = EXPECTED[system]
    assert round(means["hit_rate@3"], 2) == hit
    assert round(means["recall@5"], 2) == rec
    assert round(means["mrr"], 2) == mrr
    assert round(means["ndcg@5"], 3) == ndcg


@pytest.mark.parametrize("system", list(EXPECTED))
def test_rank_of_first_relevant_document(system, runs, helpdesk_collection):
    ranks = evaluate(runs[system], helpdesk_collection.qrels, "mrr").first_relevant_rank.to_dict()
    expected = {q: NOT_FIRST[system].get(q, 1) for q in helpdesk_collection.query_ids}
    assert ranks == expected


def test_first_results_of_q01(runs):
    assert runs["BM25"].top("q01", 3) == ["pricing1", "sso1", "pricing2"]
    assert runs["LSA"].top("q01", 3) == ["sso1", "pricing1", "pricing2"]


@pytest.mark.parametrize("system", ["BM25", "LSA", "weighted", "RRF"])
def test_q02_retrieves_nothing(system, runs):
    assert runs[system].ranking("q02") == []


def test_every_question_is_scored_and_none_left_out(helpdesk_collection, runs):
    ev = evaluate(runs["BM25"], helpdesk_collection.qrels, "mrr")
    assert len(ev.per_question) == 14
    assert ev.without_judgments == [] and ev.missing_from_run == []
