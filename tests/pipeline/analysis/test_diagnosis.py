"""Failure diagnosis: docs/helpdesk-reference.md's help-desk classes, the shared-terms evidence, and constructed cases
per rule (each rule firing, and a near miss that differs in the one piece of evidence the rule reads)."""

from __future__ import annotations

import pandas as pd
import pytest

from metrics.evaluation import evaluate
from metrics.qrels import Qrels
from metrics.run import PAD, Run
from pipeline.analysis.diagnosis import (
    CAUSES,
    CLASSES,
    DiagnosisSettings,
    _remembered_columns,
    diagnose,
    diagnosis_text,
    failure_counts,
    failure_metrics,
    shingles,
)
from pipeline.common.names import FAILURES_PREFIX as F
from pipeline.data.collection import Collection
from retrievers.text import Tokenizer, term_counts

SYSTEMS = ["BM25", "LSA", "weighted", "RRF"]


@pytest.fixture(scope="module")
def tables(helpdesk_collection, helpdesk_runs):
    c = helpdesk_collection
    return {name: diagnose(c, run, evaluate(run, c.qrels, ["mrr", "ndcg@5"])) for name, run in helpdesk_runs.items()}


def classes_of(table) -> dict[str, str]:
    return {q: row for q, row in table["classes"].items() if row}


# --- docs/helpdesk-reference.md, "Failure diagnosis"
# -------------------------------------------------------------------------


def test_bm25_fails_exactly_q02_by_vocabulary_gap_and_q10_by_homonymy(tables):
    table = tables["BM25"]
    assert classes_of(table) == {"q02": "vocabulary_gap", "q10": "homonymy"}
    assert table.index[table["missed"]].tolist() == ["q02", "q10"]
    assert failure_metrics(table) == {
        F + "no_results": 0, F + "vocabulary_gap": 1, F + "partial_gap": 0, F + "homonymy": 1, F + "common_terms": 0,
        F + "term_weighting": 0, F + "late_rank": 0, F + "duplicates": 0,
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
    # the evidence of homonymy: a rare word (one document of 28 has "data") that no relevant document has,
    # a small part of the question ("want", "yesterday" and "back" are in no document: nothing can match them),
    # and no relevant document near export1 (they share no word with it)
    assert row["rare_terms"] == ["data"] and row["distinguishing_terms"] == ["data"]
    assert 0 < row["first_result_match"] < 0.5 and row["relevant_match"] == 0
    assert row["closer_share"] == 1.0
    assert not row["vocabulary_gap"]  # one cause per question


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
    assert tables["LSA"].loc["q10", "late_rank_kind"] == "beyond rank 10"  # helpdesk-reference.md: LSA finds q10 at 13
    assert tables["LSA"].loc["q10", "relevant_ranks"] == {"backup3": 0, "backup2": 13}
    # the weighted fusion keeps a full top 10 without q10's relevant documents: they may lie beyond that depth,
    # but nothing says where, so that is no late rank (MRR and nDCG count them as not found)
    assert tables["weighted"].loc["q10", "rank"] == "beyond depth 10"
    assert tables["weighted"].loc["q10", "late_rank_kind"] == "" and not tables["weighted"].loc["q10", "late_rank"]
    # BM25 scored only export1 for q10: its backups are not retrieved at all, which is not a late rank either
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


def test_late_rank_between_cutoff_and_ten_and_beyond_ten_but_not_beyond_the_ranking():
    docs = {**FILLER, "target": "the answer document"}
    collection = build(docs, {"a": "answer", "b": "answer", "c": "answer", "d": "answer"},
                       {q: {"target": 1} for q in "abcd"})
    fillers = list(FILLER)
    table = diagnose_rankings(collection, {
        "a": [*fillers[:4], "target"],  # rank 5
        "b": [*fillers[:11], "target"],  # rank 12
        "c": fillers[:12],  # full list, target absent: it may lie beyond the depth of 12, nobody knows where
        "d": fillers[:3],  # the list ended early: not retrieved
    })
    assert table["late_rank"].to_dict() == {"a": True, "b": True, "c": False, "d": False}
    assert table["late_rank_kind"].to_dict() == {"a": "rank 4-10", "b": "beyond rank 10", "c": "", "d": ""}
    assert table["rank"].to_dict() == {"a": "5", "b": "12", "c": "beyond depth 12", "d": "not retrieved"}
    # "target" shares "answer" with every question, so an absent target is no vocabulary gap
    assert not table["vocabulary_gap"].any()
    assert failure_counts(table)["late_rank"] == 2


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


# The cause rules, each on one question over its own few documents and 80 office memos. A word of the memos is
# in over 5% of the 80-odd documents (common); a word of the given documents is in a handful (rare).
MEMOS = {f"memo{i}": f"office memo {i} on lunch and parking schedule" for i in range(80)}


def cause_of(docs: dict[str, str], question: str, relevant: list[str], first: str, **settings):
    """The diagnosis row of ``question`` when ``first`` ranks first and the relevant documents fifth and after."""
    collection = build({**MEMOS, **docs}, {"q": question}, {"q": {d: 1 for d in relevant}})
    ranking = [first, "memo77", "memo78", "memo79", *relevant]
    row = diagnose_rankings(collection, {"q": ranking}, **settings).loc["q"]
    assert row["missed"] and sum(bool(row[c]) for c in CAUSES) == 1  # exactly one cause per missed question
    return row


def cause(row) -> str:
    return next(c for c in CAUSES if row[c])


NO_SHARED_WORD = {
    "export": "data export writes a csv file",
    "backup": "nightly snapshots bring deleted work back",  # relevant: shares no word with the questions below
    "snapshot_help": "snapshots of deleted work and data are kept nightly",  # in the backup's context
}


def test_a_rare_word_alone_in_another_context_is_homonymy_when_the_relevant_documents_share_no_word():
    row = cause_of(NO_SHARED_WORD, "I want my lost data", ["backup"], "export")
    assert cause(row) == "homonymy" and row["relevant_match"] == 0
    assert row["distinguishing_terms"] == ["data"] and "data" in row["rare_terms"]
    assert row["first_result_match"] < 0.5 and row["closer_share"] == 1.0
    assert row["diagnosis"].startswith("surface homonymy (export wins on the rare 'data'")


def test_the_same_rare_word_on_the_relevant_documents_topic_is_a_vocabulary_gap():
    # snapshot_help has "data" too, but it is the backup document's nearest neighbour: the relevant document
    # only words the matter differently
    row = cause_of(NO_SHARED_WORD, "I want my lost data", ["backup"], "snapshot_help")
    assert cause(row) == "vocabulary_gap" and row["closer_share"] == 0.0


def test_a_first_result_matching_most_of_the_question_is_no_homonymy():
    row = cause_of(NO_SHARED_WORD, "where is my data", ["backup"], "export")  # "data" is the whole question
    assert cause(row) == "vocabulary_gap" and row["first_result_match"] == 1.0


def test_a_first_result_matching_only_common_words_is_no_homonymy():
    row = cause_of(NO_SHARED_WORD, "I want my lost parking permit", ["backup"], "memo0")
    assert cause(row) == "vocabulary_gap" and row["first_result_shared"] == ["parking"] and row["rare_terms"] == []


PRINTERS = {
    "manual": "printer manual",
    "jam_guide": "jam guide",
    "fix": "printer jam fix",
    "toner_fix": "printer toner fix",
    "schedule": "printer schedule",
}


def test_a_relevant_document_matching_as_much_weight_is_term_weighting_even_with_fewer_words():
    # memo0 shares two question words and the relevant document one, but a rare word weighs more than two common
    # ones. (The rule before weights, "more shared words than every relevant document", called this homonymy.)
    row = cause_of({**PRINTERS, "toner_manual": "toner cartridge manual"}, "toner lunch parking",
                   ["toner_manual"], "memo0")
    assert cause(row) == "term_weighting" and len(row["first_result_shared"]) == 2
    assert row["relevant_match"] > row["first_result_match"]


def test_a_first_result_whose_words_the_relevant_documents_all_have_is_term_weighting():
    # "fix" matches printer and jam together; the manual has "printer", the guide "jam": no distinguishing word
    row = cause_of(PRINTERS, "printer jam", ["manual", "jam_guide"], "fix")
    assert cause(row) == "term_weighting" and row["distinguishing_terms"] == []
    assert row["first_result_match"] > row["relevant_match"]


def test_a_rare_distinguishing_word_on_the_question_topic_is_a_partial_vocabulary_gap():
    # near miss of the case above: without the guide judged relevant, "jam" is in no relevant document
    row = cause_of(PRINTERS, "printer jam", ["manual"], "fix")
    assert cause(row) == "partial_gap" and row["distinguishing_terms"] == ["jam"]
    assert row["first_result_match"] == 1.0 and row["diagnosis"].startswith("partial vocabulary gap (fix has the "
                                                                            "rare 'jam'")


def test_only_common_distinguishing_words_are_common_terms():
    row = cause_of(PRINTERS, "printer schedule", ["manual"], "schedule")
    assert cause(row) == "common_terms" and row["distinguishing_terms"] == ["schedule"]
    assert "schedule" not in row["rare_terms"]


def test_a_rare_distinguishing_word_is_no_common_terms():
    row = cause_of(PRINTERS, "printer toner", ["manual"], "toner_fix")  # near miss: "toner" is rare
    assert cause(row) == "partial_gap" and row["distinguishing_terms"] == ["toner"]


ARCHIVES = {
    "scanning": "archive scanning service for libraries",  # relevant: shares "archive" with the question
    "vinyl": "restore old vinyl records",  # the question's "restore old", about records
    "prints": "restore old photo prints",  # the question's "restore old photo"
    "library_repair": "restore old scanning service for libraries",  # "restore old", near the relevant document
}
OLD_PHOTOS = "restore the old photo archive scans"


def test_rare_words_of_a_small_part_of_the_question_in_another_context_are_homonymy():
    row = cause_of(ARCHIVES, OLD_PHOTOS, ["scanning"], "vinyl")
    assert cause(row) == "homonymy" and row["distinguishing_terms"] == ["restore", "old"]
    assert row["relevant_match"] < row["first_result_match"] < 0.5 and row["closer_share"] > 0.02


def test_rare_words_of_most_of_the_question_are_a_partial_vocabulary_gap():
    row = cause_of(ARCHIVES, OLD_PHOTOS, ["scanning"], "prints")  # near miss: three question words of five
    assert cause(row) == "partial_gap" and row["first_result_match"] >= 0.5


def test_rare_words_near_a_relevant_document_are_a_partial_vocabulary_gap():
    row = cause_of(ARCHIVES, OLD_PHOTOS, ["scanning"], "library_repair")  # near miss: the relevant document's context
    assert cause(row) == "partial_gap" and row["first_result_match"] < 0.5 and row["closer_share"] == 0.0


def test_what_counts_as_most_of_the_question_is_configurable():
    row = cause_of(ARCHIVES, OLD_PHOTOS, ["scanning"], "vinyl", topic_share=0.3)  # vinyl matches 2 words of 5
    assert cause(row) == "partial_gap" and row["first_result_match"] >= 0.3


def test_the_rarity_threshold_is_configurable():
    # with "rare" meaning in at most 1 document in 1000 (and always: in one document), "jam" (3 documents) is common
    row = cause_of(PRINTERS, "printer jam", ["manual"], "fix", rare_share=0.001)
    assert cause(row) == "common_terms" and row["rare_terms"] == []


def test_a_question_missing_from_the_run_is_an_empty_ranking():
    collection = build({"d": "alpha"}, {"q": "beta", "p": "alpha"}, {"q": {"d": 1}, "p": {"d": 1}})
    table = diagnose_rankings(collection, {"p": ["d"]})
    assert table.loc["q", "retrieved"] == 0 and table.loc["q", "vocabulary_gap"]
    assert table.loc["p", "classes"] == ""


def test_shingles_and_settings_are_checked():
    assert shingles(["a", "b", "c"], 2) == {"a\x1fb", "b\x1fc"}
    assert shingles(["a"], 3) == {"a"} and shingles([], 2) == set()
    for bad in ({"cutoff": 0}, {"duplicate_threshold": 0}, {"duplicate_top_k": 1}, {"cutoff": 5, "late_limit": 4},
                {"rare_share": 0}, {"topic_share": 1.5}, {"context_share": 1.0}):
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
    # the pair memo knows the texts' shingle counts and the pairs' similarity: no document is even looked up
    assert after.hits == before.hits and after.misses == before.misses


def reference_groups(run: Run, rows, doc_text, tokenizer, settings) -> list[list[list[str]]]:
    """Near-duplicates in each top k, the plain way: every pair of places, Jaccard of Python sets, then connected
    groups of places (each in rank order, groups in the order of their best place)."""
    out = []
    k = min(settings.duplicate_top_k, run.depth)
    for row in rows:
        if row < 0 or k < 2:
            out.append([])
            continue
        places = [j for j in range(k) if run.docs[row, j] != PAD]
        names = {j: str(run.doc_ids[run.docs[row, j]]) for j in places}
        sets = {j: shingles(list(tokenizer(doc_text.get(names[j], ""))), settings.shingle_size) for j in places}
        linked = {j: {j} for j in places}
        for x in places:
            for y in places:
                union = len(sets[x] | sets[y])
                if x < y and union and len(sets[x] & sets[y]) / union >= settings.duplicate_threshold:
                    linked[x].add(y)
                    linked[y].add(x)
        groups, seen = [], set()
        for j in places:
            if j in seen or len(linked[j]) == 1:
                continue
            group, todo = set(), [j]
            while todo:
                x = todo.pop()
                if x not in group:
                    group.add(x)
                    todo.extend(linked[x])
            seen |= group
            groups.append([names[x] for x in sorted(group)])
        out.append(groups)
    return out


class ListTokenizer:
    """A tokenizer that cannot be hashed (a list of stop words): no process-wide memo can key it."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.stop = ["the"]

    def __call__(self, text: str) -> list[str]:
        return [t for t in text.lower().split() if t not in self.stop]


def duplicate_cases():
    """Documents that share shingles in every degree: copies under other ids, one-word edits, empty and one-word
    texts, a document listed twice in a ranking, ids not in the corpus; rankings shorter than k, a question absent
    from the run."""
    rng = __import__("random").Random(7)
    words = [f"w{i}" for i in range(30)]
    base = [" ".join(rng.choices(words, k=rng.randint(3, 25))) for _ in range(25)]
    docs = {f"d{i}": text for i, text in enumerate(base)}
    for i in range(25):  # near copies: one word changed, dropped or added
        text = base[i].split()
        text[rng.randrange(len(text))] = rng.choice(words)
        docs[f"e{i}"] = " ".join(text[:-1] if i % 3 == 0 else text + ([rng.choice(words)] if i % 3 == 1 else []))
    docs.update(copy=base[0], empty="", one="w1", the="the the")
    ids = list(docs)
    rankings = {f"q{n}": rng.sample(ids, rng.randint(1, 12)) for n in range(40)}
    rankings["twice"] = ["d0", "d0", "copy", "e0", "ghost"]
    return docs, rankings


@pytest.mark.parametrize("tokenizer", [Tokenizer(), ListTokenizer()], ids=["hashable", "unhashable"])
@pytest.mark.parametrize("threshold, top_k, size", [(0.6, 10, 2), (0.3, 5, 1), (1.0, 12, 3), (0.5, 2, 2)])
def test_duplicate_groups_are_the_plain_pairwise_ones_in_every_job_of_a_process(tokenizer, threshold, top_k, size,
                                                                                  monkeypatch):
    """Two 'jobs' share most documents: the second finds most pairs remembered, its new ones measured; a memo
    small enough to start again mid-way changes nothing either."""
    import numpy as np

    from pipeline.analysis import diagnosis

    docs, rankings = duplicate_cases()
    settings = DiagnosisSettings(duplicate_threshold=threshold, duplicate_top_k=top_k, shingle_size=size)
    second = {q: list(reversed(r)) for q, r in list(rankings.items())[::2]}
    for memo_pairs in (diagnosis.MEMO_PAIRS, 5):
        monkeypatch.setattr(diagnosis, "MEMO_PAIRS", memo_pairs)
        monkeypatch.setattr(diagnosis, "_PAIR_MEMOS", {})
        for job in (rankings, second, rankings):
            run = run_of(job)
            rows = np.array([*range(len(job)), -1])  # and a question the run does not hold
            assert diagnosis._duplicate_groups(run, rows, docs, tokenizer, settings) == reference_groups(
                run, rows, docs, tokenizer, settings)


def test_a_sweeps_later_jobs_reuse_closer_shares_equal_to_fresh_ones(helpdesk_collection, helpdesk_runs):
    c, tokenizer = helpdesk_collection, Tokenizer()
    shared = term_counts(c.doc_ids, c.doc_texts, tokenizer)  # one process's counts, as every job of a sweep sees
    for run in helpdesk_runs.values():
        evaluation = evaluate(run, c.qrels, ["mrr"])
        fresh = diagnose(c, run, evaluation, tokenizer, DiagnosisSettings(),
                         term_counts(c.doc_ids, c.doc_texts, tokenizer))
        remembered = diagnose(c, run, evaluation, tokenizer, DiagnosisSettings(), shared)
        pd.testing.assert_series_equal(remembered["closer_share"], fresh["closer_share"])
    memo = shared.derived["diagnosis"].closer
    assert memo  # the context test ran, and its shares were kept
    for key in memo:
        memo[key] = 0.5  # a value no share here has: the next job must read it rather than compute again
    shared.derived["diagnosis"]._records.clear()  # the questions themselves diagnosed again
    run = helpdesk_runs["BM25"]
    again = diagnose(c, run, evaluate(run, c.qrels, ["mrr"]), tokenizer, DiagnosisSettings(), shared)
    tested = again["closer_share"].dropna()
    assert len(tested) and (tested == 0.5).all()


def test_a_question_diagnosed_before_with_the_same_ranking_facts_gets_the_same_diagnosis(helpdesk_collection,
                                                                                         helpdesk_runs):
    """A sweep's jobs share their corpus's term counts: each question's diagnosis is kept under everything it reads
    (its text, first relevant rank, ranking length and first result, where its relevant documents rank, its
    duplicates), so every job's table is the one a fresh diagnosis gives, whichever job diagnosed a question first;
    a question whose ranking facts differ is diagnosed afresh."""
    c, tokenizer = helpdesk_collection, Tokenizer()
    shared = term_counts(c.doc_ids, c.doc_texts, tokenizer)
    runs = list(helpdesk_runs.values())
    for run in [*runs, *runs]:  # four systems twice: later jobs meet questions diagnosed before
        evaluation = evaluate(run, c.qrels, ["mrr"])
        fresh = diagnose(c, run, evaluation, tokenizer, DiagnosisSettings(),
                         term_counts(c.doc_ids, c.doc_texts, tokenizer))
        pd.testing.assert_frame_equal(diagnose(c, run, evaluation, tokenizer, DiagnosisSettings(), shared), fresh)
    memo = shared.derived["diagnosis"].records(tokenizer, DiagnosisSettings(), runs[0].depth)
    assert len(memo) < len(runs) * len(c.query_ids)  # some questions were diagnosed alike by several systems
    full = helpdesk_runs["LSA"]  # every question's ranking holds all 28 documents
    variants = []  # another first result, other ranks for relevant documents, another top 10 (duplicates)
    for a, b in ((0, 1), (1, 2), (2, 4), (3, 6), (0, 2), (1, 9)):
        docs = full.docs.copy()
        docs[:, [a, b]] = docs[:, [b, a]]
        variants.append(docs)
    docs = full.docs.copy()
    docs[:, 9] = docs[:, 0]  # the first result listed again at rank 10: a duplicate in the top 10, nothing else moves
    variants.append(docs)
    for docs in variants:
        swapped = Run(full.query_ids, full.doc_ids, docs, full.scores, "swapped")
        evaluation = evaluate(swapped, c.qrels, ["mrr"])
        fresh = diagnose(c, swapped, evaluation, tokenizer, DiagnosisSettings(),
                         term_counts(c.doc_ids, c.doc_texts, tokenizer))
        pd.testing.assert_frame_equal(diagnose(c, swapped, evaluation, tokenizer, DiagnosisSettings(), shared), fresh)
    for key, record in memo.items():
        memo[key] = {**record, "diagnosis": "remembered"}  # what is kept is what the next job shows
    run = helpdesk_runs["BM25"]
    again = diagnose(c, run, evaluate(run, c.qrels, ["mrr"]), tokenizer, DiagnosisSettings(), shared)
    assert (again["diagnosis"] == "remembered").all()
    other = diagnose(c, run, evaluate(run, c.qrels, ["mrr"]), tokenizer, DiagnosisSettings(cutoff=1), shared)
    assert not (other["diagnosis"] == "remembered").any()  # other settings: diagnosed afresh


# --- empty rankings: a user's engine may return nothing, for one question or all ------------------------------


def test_a_retriever_that_returns_nothing_for_every_question_is_a_class_of_its_own(helpdesk_collection):
    """Every question's ranking empty (a run of width 0): each relevant document is "not retrieved", and every missed
    question is "returned nothing", not a cause read from the words (it said "term weighting 12, vocabulary gap 2":
    argmax of an empty sequence crashed the job before that)."""
    c = helpdesk_collection
    run = run_of({q: [] for q in c.query_ids})
    assert run.depth == 0
    table = diagnose(c, run, evaluate(run, c.qrels, ["mrr"]))
    assert table["missed"].all() and (table["retrieved"] == 0).all() and (table["rank"] == "not retrieved").all()
    assert all(set(ranks.values()) == {0} for ranks in table["relevant_ranks"])
    assert (table[list(CAUSES)].sum(axis=1) == 1).all()
    assert failure_counts(table)["no_results"] == len(table) == 14
    assert table.loc["q03", "diagnosis"] == ("returned nothing (the retriever returned no document for any question; "
                                             "export2 matches 40% of the question's weight)")
    assert table.loc["q02", "diagnosis"] == "returned nothing (the retriever returned no document for any question)"
    text = diagnosis_text(table, "broken")
    assert text.splitlines()[0] == ("Diagnosis of broken: 14 of 14 questions fail at top 3 (returned nothing 14, "
                                    "vocabulary gap 0, partial vocabulary gap 0, surface homonymy 0, common terms 0, "
                                    "term weighting 0, late rank 0, duplicates 0)")


def test_an_empty_ranking_reads_as_one_when_the_relevant_documents_hold_question_terms(helpdesk_collection):
    c = helpdesk_collection
    rankings = {q: ["pricing1", "sso1"] for q in c.query_ids} | {"q01": [], "q02": [], "q03": []}
    table = diagnose(c, run_of(rankings), evaluate(run_of(rankings), c.qrels, ["mrr"]))
    row = table.loc["q03"]  # 'I want to take all my notes with me': export2 holds 'all' and 'notes'
    assert row["diagnosis"] == ("returned nothing (an empty ranking, though export2 matches 40% of the question's "
                                "weight)")  # the retriever weighed nothing: not "term weighting"
    assert "  " not in row["diagnosis"] and "yet  ranks" not in row["diagnosis"]
    assert table.loc["q01", "diagnosis"].startswith("returned nothing (an empty ranking, though pricing1 matches")
    # no relevant document holds a term, and the retriever ranks other questions: the words explain it, as before
    assert table.loc["q02", "diagnosis"] == "vocabulary gap (no candidate at all)"


def test_the_heading_counts_the_failing_questions_apart_from_those_found_in_time_with_a_class():
    """The causes add up to the questions missed at the cutoff; a question found in time whose top is crowded by
    duplicates carries a class but does not fail (Cranfield BM25: 70 failing, 1 more with duplicates)."""
    base = "automatic backups run every night and are kept for thirty days on encrypted storage"
    docs = {**FILLER, "backup": base, "backup_v2": base + " in europe", "restore": "restore a backup from a date"}
    collection = build(docs, {"q": "how long are backups kept", "r": "restore a backup", "s": "gardening"},
                       {"q": {"backup": 2}, "r": {"restore": 2}, "s": {"restore": 1}})
    table = diagnose_rankings(collection, {"q": ["backup", "backup_v2"], "r": ["restore"], "s": list(FILLER)[:5]})
    assert table["missed"].tolist() == [False, False, True] and table.loc["q", "duplicates"]
    heading = diagnosis_text(table, "X").splitlines()[0]
    assert heading.startswith("Diagnosis of X: 1 of 3 questions fail at top 3; 1 more found in time carries a "
                              "failure class (")
    alone = diagnosis_text(table.loc[["r", "s"]], "X").splitlines()[0]
    assert alone.startswith("Diagnosis of X: 1 of 2 questions fail at top 3 (")
