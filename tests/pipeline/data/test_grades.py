"""Grades mean what the collection says: ``corpus.grades`` maps the grades a source holds to the gains measured, on
every route alike, and ``corpus.negative_grades`` says how a negative grade is read (trec_eval's "in the pool, not
judged" by default, checked against pytrec_eval). Cranfield's preset maps its relevance codes (1: a complete answer,
4: minimum interest) so that the best answer gains most."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import pipeline.app  # registers the schema and the rankscope.stamp resolver
from metrics import EvalSettings, evaluate
from metrics.errors import InputError
from metrics.spec import parse_metric
from metrics.trec import read_trec_qrels, run_from_frame
from pipeline.common.names import TAG_GRADES, TAG_QRELS_DIGEST
from pipeline.config.build import check_config, make_corpus
from pipeline.data import BeirFolder, Benchmark, Helpdesk, IrDatasets, Judgments, OwnFiles, Table, load_beir
from pipeline.data.grades import Grading
from pipeline.job.describe import data_identity
from tests.datasets import TREC_EVAL_SUITE

CONF = Path(pipeline.app.CONF_DIR)
OWN = Path(__file__).parent / "own_files"
SWAPPED = {1: 2, 2: 1}  # the help-desk corpus's two grades, exchanged: a mapping every judgment feels


def composed_corpus(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    check_config(cfg)
    return make_corpus(cfg.corpus, CONF.parent)


def swapped(qrels) -> dict[str, dict[str, int]]:
    return {q: {d: SWAPPED[g] for d, g in docs.items()} for q, docs in qrels.to_dict().items()}


# -- every route maps alike ---------------------------------------------------------------------------------------


def test_a_grade_mapping_applies_alike_on_a_beir_folder_and_own_files(helpdesk_folder):
    plain = load_beir(helpdesk_folder)
    folder = BeirFolder(helpdesk_folder, grades=SWAPPED).load()
    own = OwnFiles(Table(str(OWN / "chunks.parquet"), id="chunk_id", text=["title", "body"]),
                   Table(str(OWN / "questions.csv"), id="qid", text="question"),
                   Judgments(str(OWN / "judgments.csv"), question="qid", document="chunk_id"),
                   unjudged="drop", grades=SWAPPED).load()
    assert folder.qrels.to_dict() == own.qrels.to_dict() == swapped(plain.qrels)
    assert folder.qrels.digest() == own.qrels.digest() != plain.qrels.digest()
    assert folder.origin["grades"] == own.origin["grades"] == "1:2 2:1"
    assert Helpdesk(grades=SWAPPED).load().qrels.digest() == folder.qrels.digest()


def test_a_grade_mapping_applies_through_ir_datasets_and_the_preset_alike(irds_home, scifact_folder):
    doubled = {1: 2}  # SciFact is judged 1 only
    irds = IrDatasets("beir/scifact/test", grades=doubled).load()
    preset = Benchmark("beir/scifact", "scifact", grades=doubled).load()
    local = Benchmark("beir/scifact", "scifact", path=str(scifact_folder), grades=doubled).load()
    assert set(irds.qrels.grades.tolist()) == {2}
    assert irds.qrels.digest() == preset.qrels.digest() == local.qrels.digest()
    assert irds.qrels.digest() != load_beir(scifact_folder).qrels.digest()


def test_the_run_records_how_its_grades_became_gains(helpdesk_folder):
    """The judgments' digest is of the gains measured (two mappings of one file are two corpora for compare and
    the gate), and a tag says which mapping made it."""
    mapped, plain = BeirFolder(helpdesk_folder, grades=SWAPPED).load(), load_beir(helpdesk_folder)
    assert data_identity(mapped)[TAG_GRADES] == "grades=1:2 2:1"
    assert data_identity(mapped)[TAG_QRELS_DIGEST] != data_identity(plain)[TAG_QRELS_DIGEST]
    assert TAG_GRADES not in data_identity(plain)
    nonrelevant = BeirFolder(helpdesk_folder, negative_grades="nonrelevant").load()
    assert data_identity(nonrelevant)[TAG_GRADES] == "negative_grades=nonrelevant"


def test_a_grade_the_mapping_leaves_out_is_one_line_naming_it(helpdesk_folder):
    with pytest.raises(InputError, match=r"^corpus\.grades=\{1: 3\} gives no gain for grade\(s\) 2 "
                                         r"\(17 judgment\(s\)\) of .*test\.tsv: map each grade found \(1, 2\)$"):
        BeirFolder(helpdesk_folder, grades={1: 3}).load()


@pytest.mark.parametrize(("settings", "message"), [
    ({"grades": {"high": 2}}, r"corpus\.grades: grades and gains are integers; got 'high': 2"),
    ({"grades": {1: 1.5}}, r"corpus\.grades: grades and gains are integers; got 1: 1\.5"),
    ({"grades": [1, 2]}, r"corpus\.grades: expected a mapping of grade to gain"),
    ({"grades": {}}, r"corpus\.grades: the mapping is empty"),
    ({"negative_grades": "zero"}, r"corpus\.negative_grades=zero: expected unjudged or nonrelevant"),
])
def test_a_bad_setting_is_one_line_before_anything_is_read(settings, message):
    with pytest.raises(InputError, match=message):
        BeirFolder("/nowhere", **settings)


def test_the_mapping_is_given_on_the_command_line_negative_grades_included():
    source = composed_corpus("corpus=irds", "corpus.id=cranfield", "corpus.grades={1:1,2:1,3:1,4:1,-1:0}")
    assert source.grades == {1: 1, 2: 1, 3: 1, 4: 1, -1: 0}
    assert source.grading.table == {1: 1, 2: 1, 3: 1, 4: 1, -1: 0}


# -- Cranfield's codes --------------------------------------------------------------------------------------------


def test_the_cranfield_preset_gives_a_complete_answer_the_highest_gain(irds_cranfield, cranfield_folder):
    """Through the real ir_datasets (its cache seeded with the original codes): the preset's gains are 5 - code, the
    BEIR copy's (``../shared/datasets/README.md``), so both routes are the same corpus, digests included; read as
    they are, the codes would give "minimum interest" (4) four times the gain of "a complete answer" (1)."""
    preset = composed_corpus("corpus=cranfield", "corpus.path=null")
    assert isinstance(preset, Benchmark) and preset.path is None
    mapped, codes = preset.load(), composed_corpus("corpus=cranfield", "corpus.path=null", "corpus.grades=null").load()
    folder = load_beir(cranfield_folder)
    assert mapped.qrels.to_dict() == folder.qrels.to_dict()
    assert (mapped.corpus_digest, mapped.queries_digest, mapped.qrels.digest()) == (
        folder.corpus_digest, folder.queries_digest, folder.qrels.digest())
    as_codes = codes.qrels.to_dict()
    for q, docs in mapped.qrels.to_dict().items():
        assert {d: 5 - g for d, g in docs.items()} == as_codes[q]
    assert mapped.origin["grades"] == "1:4 2:3 3:2 4:1 -1:-1"


# -- negative grades against trec_eval ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trec_suite_folder(tmp_path_factory) -> Path:
    """trec_eval's own graded test suite (``qrels.rel_level``: grades -1 to 4, 304 of them -1) as a BEIR folder."""
    qrels = read_trec_qrels(TREC_EVAL_SUITE / "qrels.rel_level")
    run = pd.read_csv(TREC_EVAL_SUITE / "results.test", sep=r"\s+", header=None, usecols=[0, 2], dtype=str)
    folder = tmp_path_factory.mktemp("trec_suite")
    docs = sorted(set(qrels.doc_ids.tolist()) | set(run[2]))
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": d}) + "\n" for d in docs))
    questions = sorted(set(qrels.query_ids.tolist()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": q}) + "\n" for q in questions))
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, d, g in zip(qrels.query_ids, qrels.doc_ids, qrels.grades)))
    return folder


def trec_eval_says(qrels: dict[str, dict[str, int]], top10: dict[str, dict[str, float]],
                   run: dict[str, dict[str, float]]) -> dict[str, tuple[float, float]]:
    """trec_eval's (pytrec_eval's) bpref, and judged@10 as (judged relevant + judged non-relevant retrieved) / 10
    on each question's top 10 (trec_eval's order: score descending, docno descending)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    bpref = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}).evaluate(run)
    counts = pytrec_eval.RelevanceEvaluator(qrels, {"num_rel_ret", "num_nonrel_judged_ret"}).evaluate(top10)
    return {q: (bpref[q]["bpref"], (counts[q]["num_rel_ret"] + counts[q]["num_nonrel_judged_ret"]) / 10)
            for q in bpref}


@pytest.mark.parametrize("reading", ["unjudged", "nonrelevant"])
def test_negative_grades_are_read_as_trec_eval_reads_them_or_as_judged_non_relevant(trec_suite_folder, reading):
    """``unjudged`` (the default) is trec_eval on the judgments as written; ``nonrelevant`` is trec_eval on the same
    judgments with every negative grade made 0."""
    frame = pd.read_csv(TREC_EVAL_SUITE / "results.test", sep=r"\s+", header=None, usecols=[0, 2, 4],
                        names=["q", "d", "s"], dtype={"q": str, "d": str, "s": float})
    collection = BeirFolder(trec_suite_folder, negative_grades=reading).load()
    specs = [parse_metric("bpref"), parse_metric("judged@10")]
    ours = evaluate(run_from_frame(frame, "suite"), collection.qrels, specs, EvalSettings(missing="skip"),
                    query_ids=collection.query_ids).per_question
    written = read_trec_qrels(TREC_EVAL_SUITE / "qrels.rel_level").to_dict()
    assert min(g for docs in written.values() for g in docs.values()) == -1
    given = written if reading == "unjudged" else {q: {d: max(g, 0) for d, g in docs.items()}
                                                   for q, docs in written.items()}
    ordered = frame.sort_values(["q", "s", "d"], ascending=[True, False, False])
    run = {q: dict(zip(g.d, g.s)) for q, g in ordered.groupby("q")}
    top10 = {q: dict(zip(g.d[:10], g.s[:10])) for q, g in ordered.groupby("q")}
    theirs = trec_eval_says(given, top10, run)
    assert len(ours) == 3
    for q in ours.index:
        assert (ours.loc[q, "bpref"], ours.loc[q, "judged@10"]) == pytest.approx(theirs[q], abs=1e-12), (reading, q)


def test_the_two_readings_of_negative_grades_differ_on_the_suite(trec_suite_folder):
    unjudged = BeirFolder(trec_suite_folder).load()
    nonrelevant = BeirFolder(trec_suite_folder, negative_grades="nonrelevant").load()
    assert (unjudged.qrels.grades < 0).sum() == 304 and (nonrelevant.qrels.grades < 0).sum() == 0
    assert unjudged.qrels.digest() != nonrelevant.qrels.digest()
    assert Grading.of(None).plain and not Grading.of(None, "nonrelevant").plain
