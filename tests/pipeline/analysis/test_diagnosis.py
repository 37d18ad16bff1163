"""Failure diagnosis: SPEC.md's help-desk classes, the shared-terms evidence, and constructed cases per rule."""

from __future__ import annotations

import pytest

from metrics.evaluate import evaluate
from metrics.qrels import Qrels
from metrics.run import Run
from pipeline.analysis.diagnosis import (
    CLASSES,
    DiagnosisSettings,
    _remembered_columns,
    diagnose,
    diagnosis_text,
    failure_counts,
    failure_metrics,
    shingles,
)
from pipeline.data.collection import Collection
from retrievers.text import Tokenizer

SYSTEMS = ["BM25", "LSA", "weighted", "RRF"]


@pytest.fixture(scope="module")
def tables(helpdesk_collection, helpdesk_runs):
    c = helpdesk_collection
    return {name: diagnose(c, run, evaluate(run, c.qrels, ["mrr", "ndcg@5"])) for name, run in helpdesk_runs.items()}


def classes_of(table) -> dict[str, str]:
    return {q: row for q, row in table["classes"].items() if row}


# --- SPEC.md, "Failure diagnosis" -------------------------------------------------------------------------


def test_bm25_fails_exactly_q02_by_vocabulary_gap_and_q10_by_homonymy(tables):
    table = tables["BM25"]
    assert classes_of(table) == {"q02": "vocabulary_gap", "q10": "homonymy"}
    assert table.index[table["missed"]].tolist() == ["q02", "q10"]
    assert failure_metrics(table) == {
        "system/rankscope/failures/vocabulary_gap": 1, "system/rankscope/failures/homonymy": 1,
        "system/rankscope/failures/late_rank": 0, "system/rankscope/failures/duplicates": 0,
    }


def test_q02_has_no_candidate_at_all(tables):
    row = tables["BM25"].loc["q02"]
    assert row["retrieved"] == 0 and row["first_result"] == "" and row["rank"] == "not retrieved"
    assert row["shared_terms"] == {"refund1": [], "refund2": [], "refund3": []}
    assert "no candidate at all" in row["diagnosis"]


def test_q10_export1_wins_on_data_while_backups_share_nothing(tables):
    row = tables["BM25"].loc["q10"]
    assert row["first_result"] == "export1"
    assert row["first_result_shared"] == ["data"]
    assert row["shared_terms"] == {"backup3": [], "backup2": []}  # best grade first
    assert not row["vocabulary_gap"]  # homonymy takes precedence over the same evidence read as a gap


def test_shared_terms_follow_question_order_and_ignore_stop_words(tables):
    # q01 "how much does the Pro plan cost": pricing1 says "Pro plan costs" ("costs" is not "cost")
    assert tables["BM25"].loc["q01", "shared_terms"] == {"pricing1": ["pro", "plan"], "pricing2": ["plan"]}
    # q12 is found at rank 2 by BM25: within the cutoff, so no class although the first result is wrong
    row = tables["BM25"].loc["q12"]
    assert row["first_relevant_rank"] == 2 and not row["missed"] and row["classes"] == ""


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_system_shows_the_gap_and_the_homonymy(system, tables):
    table = tables[system]
    assert table.loc["q02", "vocabulary_gap"] and not table.loc["q02", "homonymy"]
    assert table.loc["q10", "homonymy"] and table.loc["q10", "first_result"] == "export1"
    assert set(table.index[table["missed"]]) == {"q02", "q10"}


def test_late_rank_says_which_kind(tables):
    assert tables["LSA"].loc["q10", "late_rank_kind"] == "beyond rank 10"  # SPEC: LSA finds q10 at 13
    assert tables["LSA"].loc["q10", "relevant_ranks"] == {"backup3": 0, "backup2": 13}
    # the weighted fusion keeps a full top 10, so q10's relevant documents may lie beyond that depth
    assert tables["weighted"].loc["q10", "late_rank_kind"] == "beyond depth 10"
    # BM25 scored only export1 for q10: its backups are not retrieved at all, which is not a late rank
    assert tables["BM25"].loc["q10", "late_rank_kind"] == ""


def test_terminal_section_lists_each_failing_question_with_evidence(tables):
    text = diagnosis_text(tables["BM25"], "BM25")
    assert "2 of 14 questions" in text
    assert "q02" in text and "no candidate at all" in text
    assert "q10" in text and "export1 shares 'data'" in text and "backup3 (not retrieved) shares no term" in text
    assert "q01" not in text and "q12" not in text


# --- constructed cases ------------------------------------------------------------------------------------


def build(docs: dict[str, str], questions: dict[str, str], judgments: dict[str, dict[str, int]]) -> Collection:
    return Collection("constructed", list(docs), list(docs.values()), list(questions), list(questions.values()),
                      Qrels.from_dict(judgments))


def run_of(rankings: dict[str, list[str]], name: str = "run") -> Run:
    return Run.from_rankings({q: [(d, 10.0 - i) for i, d in enumerate(ds)] for q, ds in rankings.items()}, name)


def diagnose_rankings(collection: Collection, rankings: dict[str, list[str]], **settings):
    run = run_of(rankings)
    return diagnose(collection, run, evaluate(run, collection.qrels, ["mrr"]), settings=DiagnosisSettings(**settings))


FILLER = {f"f{i}": f"unrelated filler text number {i} about gardening tools" for i in range(12)}


def test_late_rank_between_cutoff_and_ten_beyond_ten_and_beyond_depth():
    docs = {**FILLER, "target": "the answer document"}
    collection = build(docs, {"a": "answer", "b": "answer", "c": "answer", "d": "answer"},
                       {q: {"target": 1} for q in "abcd"})
    fillers = list(FILLER)
    table = diagnose_rankings(collection, {
        "a": [*fillers[:4], "target"],  # rank 5
        "b": [*fillers[:11], "target"],  # rank 12
        "c": fillers[:12],  # full list, target absent: beyond the depth of 12
        "d": fillers[:3],  # the list ended early: not retrieved, not late
    })
    assert table["late_rank"].to_dict() == {"a": True, "b": True, "c": True, "d": False}
    assert table["late_rank_kind"].to_dict() == {"a": "rank 4-10", "b": "beyond rank 10", "c": "beyond depth 12",
                                                 "d": ""}
    assert table.loc["b", "rank"] == "12" and table.loc["d", "rank"] == "not retrieved"
    # "target" shares "answer" with every question, so an absent target is no vocabulary gap
    assert not table["vocabulary_gap"].any()
    assert failure_counts(table)["late_rank"] == 3


def test_the_cutoff_is_configurable():
    collection = build({**FILLER, "target": "answer"}, {"a": "answer"}, {"a": {"target": 1}})
    ranking = {"a": [*list(FILLER)[:4], "target"]}
    assert diagnose_rankings(collection, ranking)["late_rank"].all()
    assert not diagnose_rankings(collection, ranking, cutoff=5)["missed"].any()
    assert diagnose_rankings(collection, ranking, cutoff=2, late_limit=4).loc["a", "late_rank_kind"] == "beyond rank 4"


def test_duplicates_crowding_the_top_are_grouped_in_rank_order():
    base = "automatic backups run every night and are kept for thirty days on encrypted storage"
    docs = {
        "backup": base,
        "backup_v2": base + " in europe",  # a near-identical version
        "backup_v3": base.replace("thirty", "sixty"),  # another version, one word changed
        "restore": "open a ticket to restore a backup from a chosen date",
        "other": "the api accepts one hundred requests per minute",
    }
    collection = build(docs, {"q": "how long are backups kept", "r": "restore a backup"},
                       {"q": {"backup": 2, "restore": 1}, "r": {"restore": 2}})
    table = diagnose_rankings(collection, {
        "q": ["backup", "backup_v2", "other", "backup_v3", "restore"],
        "r": ["restore", "backup", "other"],
    })
    assert table.loc["q", "duplicate_groups"] == [["backup", "backup_v2", "backup_v3"]]
    assert table.loc["q", "duplicates"] and table.loc["q", "classes"] == "duplicates"
    assert not table.loc["q", "missed"]  # duplicates are flagged even when the first hit is on time
    assert table.loc["r", "duplicate_groups"] == [] and not table.loc["r", "duplicates"]
    # only the top k is inspected, and the threshold decides what "near-identical" means
    assert not diagnose_rankings(collection, {"q": ["backup", "other", "restore", "backup_v2"], "r": ["restore"]},
                                 duplicate_top_k=3).loc["q", "duplicates"]
    strict = diagnose_rankings(collection, {"q": ["backup", "backup_v2", "backup_v3"], "r": ["restore"]},
                               duplicate_threshold=0.85)
    assert strict.loc["q", "duplicate_groups"] == [["backup", "backup_v2"]]


def test_homonymy_needs_the_wrong_document_to_share_more_terms_than_every_relevant_one():
    docs = {"wrong": "export data from yesterday", "right": "restore data", "noise": "gardening tools"}
    collection = build(docs, {"q": "restore my data from yesterday", "t": "data yesterday"},
                       {"q": {"right": 1}, "t": {"right": 1}})
    table = diagnose_rankings(collection, {"q": ["wrong"], "t": ["wrong", "noise", "right", "x"]}, cutoff=1)
    # q: "wrong" shares data+yesterday, "right" shares restore+data: a tie is no homonymy, and "right"
    # shares terms, so no vocabulary gap either: the question is missed but unclassified
    assert table.loc["q", "shared_terms"] == {"right": ["restore", "data"]}
    assert table.loc["q", "first_result_shared"] == ["data", "yesterday"]
    assert table.loc["q", "classes"] == "" and table.loc["q", "diagnosis"] == "unclassified"
    # t: "wrong" shares two terms, "right" one: homonymy, together with the late rank of "right"
    assert table.loc["t", "classes"] == "homonymy, late_rank"


def test_a_question_missing_from_the_run_is_an_empty_ranking():
    collection = build({"d": "alpha"}, {"q": "beta", "p": "alpha"}, {"q": {"d": 1}, "p": {"d": 1}})
    table = diagnose_rankings(collection, {"p": ["d"]})
    assert table.loc["q", "retrieved"] == 0 and table.loc["q", "vocabulary_gap"]
    assert table.loc["p", "classes"] == ""


def test_shingles_and_settings_are_checked():
    assert shingles(["a", "b", "c"], 2) == {"a\x1fb", "b\x1fc"}
    assert shingles(["a"], 3) == {"a"} and shingles([], 2) == set()
    for bad in ({"cutoff": 0}, {"duplicate_threshold": 0}, {"duplicate_top_k": 1}, {"cutoff": 5, "late_limit": 4}):
        with pytest.raises(ValueError):
            DiagnosisSettings(**bad)
    assert set(failure_counts(diagnose_rankings(build({"d": "x"}, {"q": "x"}, {"q": {"d": 1}}), {"q": ["d"]}))) == set(
        CLASSES)


def test_a_second_job_reuses_the_documents_shingles_and_finds_the_same_duplicates():
    docs = {"a": "nightly backups are kept thirty days on encrypted disks", "b": "nightly backups are kept thirty "
            "days on encrypted disks in europe", "c": "the api accepts one hundred requests per minute"}
    collection = build(docs, {"q": "how long are backups kept"}, {"q": {"a": 1}})
    run = run_of({"q": ["a", "c", "b"]})
    evaluation = evaluate(run, collection.qrels, ["mrr"])
    settings = DiagnosisSettings(shingle_size=3)  # a size no other test uses: nothing remembered yet
    first = diagnose(collection, run, evaluation, Tokenizer(), settings)
    before = _remembered_columns.cache_info()
    second = diagnose(collection, run, evaluation, Tokenizer(), settings)  # a new, equal tokenizer, as per job
    after = _remembered_columns.cache_info()
    assert first.loc["q", "duplicate_groups"] == second.loc["q", "duplicate_groups"] == [["a", "b"]]
    assert after.hits - before.hits == 3 and after.misses == before.misses
