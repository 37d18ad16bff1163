"""Every figure a job logs comes back from its own run.trec: ``python -m metrics -c -q`` on that file prints the
job's per-question values and means, and trec_eval's own ordering rule and code (pytrec_eval) agree.

For every retriever kind (and an engine that returns nothing), on the help-desk corpus, on a corpus built so that
scores tie everywhere, and (slow) on SciFact. A job orders ties by id ascending (docs/helpdesk-reference.md);
trec_eval orders them by docno descending: the run file a job writes encodes the job's order (``metrics.trec``), so
both read it back as the job scored it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.cli import main as metrics_cli
from metrics.spec import MetricSpec, parse_metric
from pipeline.common.names import PER_QUESTION_FILE, RECORD_FILE, RUN_FILE, TAG_OUTPUT_DIR
from tests import datasets
from tests.pipeline.helpers import REPO, log_run

MEASURES = "[hit_rate,recall,precision,mrr,ndcg,map,r_precision,bpref,judged]"
CUTOFFS = "[1,3,5,10]"
# trec_eval's names (pytrec_eval) for the measures it has; judged@k is checked through python -m metrics only
TREC = {"hit_rate": "success_{k}", "recall": "recall_{k}", "precision": "P_{k}", "ndcg": "ndcg_cut_{k}",
        "mrr": "recip_rank", "map": "map", "r_precision": "Rprec", "bpref": "bpref"}
ENGINE = "tests.pipeline.config.engines.ListSearch"
KINDS = {
    "bm25": ["retriever=bm25"],
    "lsa": ["retriever=lsa"],
    "weighted": ["retriever=weighted"],
    "rrf": ["retriever=rrf"],
    "dense": ["retriever=dense"],
    "rerank": ["retriever=rerank"],
    "run_file": ["retriever=run_file"],  # + retriever.path: a run file with ties and shuffled ranks, made below
    "custom": ["retriever=custom", f"retriever._target_={ENGINE}"],  # scores are word counts: ties everywhere
    "http": [],
}
# an engine that returns nothing for any question: its run.trec holds one line for a question no qrels hold (trec_eval
# and python -m metrics refuse an empty file), and -c gives back the job's zeros
NOTHING = {"nothing": ["retriever=custom", "retriever._target_=tests.pipeline.config.engines.EmptyFor"]}


def needs(kind: str) -> None:
    if kind == "http" and not (REPO / "retrievers" / "http.py").is_file():
        pytest.skip("retrievers/http.py is not in this tree (another change adds the HTTP engine); the round trip "
                    "of an HTTP engine goes through the same adapter as 'custom'")
    if kind in ("dense", "rerank"):
        pytest.importorskip("onnxruntime", reason="the dense retriever needs onnxruntime")


@dataclass
class Job:
    """A finished job's files and MLflow run."""

    folder: Path
    qrels: Path  # the judgments file it read
    run_id: str
    client: MlflowClient

    @property
    def record(self) -> dict:
        return json.loads((self.folder / RECORD_FILE).read_text(encoding="utf-8"))

    @property
    def table(self) -> pd.DataFrame:
        return pd.read_csv(self.folder / PER_QUESTION_FILE, dtype={"query_id": str}).set_index("query_id")

    def specs(self) -> list[MetricSpec]:
        return [parse_metric(c) for c in self.table.columns if "@" in c or c in TREC]


# -- the corpora -----------------------------------------------------------------------------------------------


def write_beir(folder: Path, docs: dict[str, str], queries: dict[str, str], qrels: list[tuple[str, str, int]]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                               + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels))
    return folder


TOPICS = ["apple orchard harvest", "banana bread recipe", "cherry tart pastry", "damson jam preserve",
          "elder flower cordial", "fig tree pruning", "grape vine trellis", "hazel nut roasting"]


def tie_corpus(folder: Path) -> Path:
    """Five identical documents per topic (ids 1..5), so every retriever ties them, and questions naming two topics,
    so whole groups tie with each other. The relevant documents are the ones the two tie rules place differently:
    the highest id (last by id ascending, first by docno descending), graded 2, and the middle one, graded 1; the
    lowest id is judged non-relevant (bpref and judged@k see it)."""
    docs, queries, qrels = {}, {}, []
    for t, text in enumerate(TOPICS):
        word = text.split()[0]
        for j in range(1, 6):
            docs[f"{word}-{j}"] = text
        queries[f"t{t}"] = text
        queries[f"u{t}"] = f"{text} {TOPICS[(t + 1) % len(TOPICS)]}"
        for q in (f"t{t}", f"u{t}"):
            qrels += [(q, f"{word}-5", 2), (q, f"{word}-3", 1), (q, f"{word}-1", 0)]
    docs["filler"] = "an unrelated note about nothing in particular"
    return write_beir(folder, docs, queries, qrels)


def tied_run_file(folder: Path, corpus: list[str]) -> Path:
    """BM25's top 20, scores rounded to one decimal (ties everywhere), rank column shuffled: a production system's
    file as trec_eval reads it (score descending, docno descending)."""
    from pipeline.data import BeirFolder, helpdesk
    from retrievers import BM25

    collection = helpdesk() if corpus == ["corpus=helpdesk"] else BeirFolder(corpus[1].split("=", 1)[1]).load()
    run = BM25().index(collection).rank(collection.query_ids, collection.query_texts, 20)
    rng = np.random.default_rng(0)
    lines = []
    for qid in run.query_ids:
        ranking = run.ranking(qid)
        for rank, (doc, score) in zip(rng.permutation(len(ranking)) + 1, ranking):
            lines.append(f"{qid} Q0 {doc} {rank} {round(score, 1)} production\n")
    path = folder / "production.trec"
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="module")
def place(tmp_path_factory, empty_store) -> Path:
    """One store and one cache for the module's jobs (dense embeddings are computed once per corpus)."""
    import shutil

    folder = tmp_path_factory.mktemp("round-trip")
    shutil.copy(empty_store, folder / "mlflow.db")
    return folder


def corpus(name: str, place: Path) -> tuple[list[str], Path]:
    """The overrides that select a corpus, and its judgments file."""
    if name == "helpdesk":
        return ["corpus=helpdesk"], REPO / "pipeline" / "data" / "helpdesk" / "qrels" / "test.tsv"
    if name == "ties":
        folder = place / "ties" if (place / "ties").is_dir() else tie_corpus(place / "ties")
    else:
        folder = datasets.find(name, place / "unpacked")
        if folder is None:
            pytest.skip(datasets.missing(name))
    return ["corpus=beir", f"corpus.path={folder}", f"corpus.name={name}"], folder / "qrels" / "test.tsv"


def run_job(place: Path, kind: str, name: str) -> Job:
    needs(kind)
    overrides, qrels = corpus(name, place)
    retriever = list({**KINDS, **NOTHING}[kind])
    if kind == "run_file":
        retriever.append(f"retriever.path={tied_run_file(place, overrides)}")
    run_id = log_run(place, *overrides, *retriever, f"metrics.measures={MEASURES}", f"metrics.k={CUTOFFS}",
                     "metrics.bootstrap.resamples=50")
    client = MlflowClient(f"sqlite:///{place / 'mlflow.db'}")
    folder = Path(client.get_run(run_id).data.tags[TAG_OUTPUT_DIR])
    return Job(folder, qrels, run_id, client)


# -- the checks ------------------------------------------------------------------------------------------------


def printed(value: float) -> str:
    return f"{value:.4f}"


def on_a_midpoint(mean: float) -> bool:
    """Is the mean (to within float error) halfway between two four-decimal values, like 0.36875 = 5.9 / 16 on the
    tie corpus? Then trec_eval's sum (one by one) and the correctly rounded one may print different neighbours."""
    return abs(mean * 10**4 % 1 - 0.5) < 1e-6


def test_a_mean_halfway_between_two_printed_values_is_told_apart():
    assert on_a_midpoint(0.36874999999999997) and on_a_midpoint(0.36875000000000002)
    assert not on_a_midpoint(0.3416666666666667) and not on_a_midpoint(0.5)


def cli_output(job: Job, capsys) -> dict[tuple[str, str], str]:
    """``python -m metrics -c -q -m ... QRELS run.trec``: (metric, question or 'all') -> printed value."""
    capsys.readouterr()
    args = ["-c", "-q", *[a for spec in job.specs() for a in ("-m", spec.name)], str(job.qrels),
            str(job.folder / RUN_FILE)]
    assert metrics_cli(args) == 0, capsys.readouterr().err
    out = {}
    for line in capsys.readouterr().out.splitlines():
        name, query, value = line.split("\t")
        out[name.strip(), query] = value
    return out


def check_python_m_metrics(job: Job, capsys) -> None:
    """Per question and for the means, the job's figures (per_question.csv, record.json, MLflow) equal what
    ``python -m metrics -c`` prints from its run.trec, as printed. The command sums a mean as trec_eval does (one
    value after another, in query order), the job exactly: on a midpoint of the 4th decimal the two may print
    neighbours, and the command prints the running sum of the job's own per-question values."""
    table, record = job.table, job.record
    logged = job.client.get_run(job.run_id).data.metrics
    cli = cli_output(job, capsys)
    assert {q for (_, q) in cli if q != "all"} == set(table.index)
    for spec in job.specs():
        for query, value in table[spec.name].items():
            assert printed(value) == cli[spec.name, query], (spec.name, query)
        mean = record["metrics"][spec.mlflow_key]
        assert logged[spec.mlflow_key] == mean, spec.name  # MLflow holds what record.json holds
        running = 0.0
        for query in sorted(table.index, key=lambda q: q.encode()):
            running += table[spec.name][query]
        assert printed(running / len(table)) == cli[spec.name, "all"], spec.name
        if not on_a_midpoint(mean):
            assert printed(mean) == cli[spec.name, "all"], spec.name


def trec_eval_order(lines: list[list[str]]) -> dict[str, list[str]]:
    """trec_eval's rule, written out independently: per question, score descending as a 32-bit float (trec_eval's
    ``float sim``), ties by docno descending; the rank column ignored."""
    by_query: dict[str, list[tuple[np.float32, str]]] = {}
    for fields in lines:
        by_query.setdefault(fields[0], []).append((np.float32(float(fields[4])), fields[2]))
    order = {}
    for query, docs in by_query.items():
        docs.sort(key=lambda d: d[1], reverse=True)  # docno descending (byte order, as strcmp) ...
        docs.sort(key=lambda d: d[0], reverse=True)  # ... then, stable, score descending
        order[query] = [doc for _, doc in docs]
    return order


def check_trec_eval_rule(job: Job) -> float:
    """The written order is trec_eval's order; trec_eval's code (pytrec_eval) on the written file gives the job's
    per-question values to the last bit; its means print as logged and, correctly rounded, equal them exactly.
    Returns the largest per-question difference (0.0: none)."""
    lines = [line.split() for line in (job.folder / RUN_FILE).read_text(encoding="utf-8").splitlines()]
    written = {}
    for fields in lines:
        written.setdefault(fields[0], []).append(fields[2])
        assert int(fields[3]) == len(written[fields[0]])  # the rank column counts up: the job's order
    assert trec_eval_order(lines) == written

    pytrec_eval = pytest.importorskip("pytrec_eval")
    judgments: dict[str, dict[str, int]] = {}
    for line in job.qrels.read_text(encoding="utf-8").splitlines()[1:]:
        q, d, g = line.split("\t")
        judgments.setdefault(q, {})[d] = int(g)
    run = {q: {} for q in judgments}
    for fields in lines:
        run.setdefault(fields[0], {})[fields[2]] = float(fields[4])
    specs = [s for s in job.specs() if s.measure in TREC]
    names = {s.name: TREC[s.measure].format(k=s.k) for s in specs}
    theirs = pytrec_eval.RelevanceEvaluator(judgments, set(names.values())).evaluate(run)
    table, record = job.table, job.record
    worst = 0.0
    for spec in specs:
        column = table[spec.name]
        for query, value in column.items():
            worst = max(worst, abs(value - theirs[query][names[spec.name]]))
            assert printed(value) == printed(theirs[query][names[spec.name]]), (spec.name, query)
        values = [theirs[query][names[spec.name]] for query in sorted(column.index, key=lambda q: q.encode())]
        trec_eval_mean = 0.0
        for value in values:  # trec_eval adds them one by one, in query order
            trec_eval_mean += value
        mean = record["metrics"][spec.mlflow_key]
        if on_a_midpoint(mean):  # each sum's own rounding error picks the neighbour a print shows
            assert abs(float(printed(trec_eval_mean / len(values))) - float(printed(mean))) <= 1.5e-4, spec.name
        else:
            assert printed(trec_eval_mean / len(values)) == printed(mean), spec.name  # as trec_eval prints it
        assert math.fsum(values) / len(values) == mean, spec.name  # and exactly: the correctly rounded mean
    print(f"{len(table)} questions, {len(specs)} trec_eval measures, largest per-question difference {worst!r}, "
          f"means exactly equal")
    return worst


def check(place: Path, kind: str, corpus: str, capsys) -> float:
    """Both checks on one job; the largest per-question difference from trec_eval's values."""
    job = run_job(place, kind, corpus)
    check_python_m_metrics(job, capsys)
    print(f"round trip of {kind} on {corpus}: ", end="")
    return check_trec_eval_rule(job)


# -- the cases: every kind on the help-desk corpus and the tie corpus; SciFact (slow) -----------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_helpdesk_job_figures_come_back_from_its_run_file(place, kind, capsys):
    assert check(place, kind, "helpdesk", capsys) == 0.0


@pytest.mark.parametrize("corpus", ["helpdesk", "ties"])
def test_the_zeros_of_a_job_whose_retriever_returned_nothing_come_back_from_its_run_file(place, corpus, capsys):
    assert check(place, "nothing", corpus, capsys) == 0.0


@pytest.mark.parametrize("kind", ["bm25", "custom"])
def test_on_a_corpus_of_ties_a_job_figures_come_back_from_its_run_file(place, kind, capsys):
    assert check(place, kind, "ties", capsys) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["lsa", "weighted", "rrf", "dense", "rerank", "run_file", "http"])
def test_on_a_corpus_of_ties_every_other_kind_round_trips(place, kind, capsys):
    assert check(place, kind, "ties", capsys) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_scifact_job_figures_come_back_from_its_run_file(place, kind, capsys):
    assert check(place, kind, "scifact", capsys) == 0.0


def test_the_tie_corpus_does_tie_and_the_tie_rules_disagree_on_it(tmp_path):
    """Without the written order, trec_eval would score the tie corpus otherwise: the relevant documents sit where
    the two tie rules differ."""
    from metrics import evaluate
    from metrics.trec import run_from_frame
    from pipeline.data import BeirFolder
    from retrievers import BM25

    collection = BeirFolder(tie_corpus(tmp_path / "ties")).load()
    run = BM25().index(collection).rank(collection.query_ids, collection.query_texts, 100)
    rows = [(q, d, s) for q in run.query_ids for d, s in run.ranking(q)]
    as_trec_eval = run_from_frame(pd.DataFrame(rows, columns=["q", "d", "s"]), "bm25")
    ours = evaluate(run, collection.qrels, ["mrr", "ndcg@3"]).means()
    theirs = evaluate(as_trec_eval, collection.qrels, ["mrr", "ndcg@3"]).means()
    assert ours["mrr"] < 0.5 < theirs["mrr"]
    assert ours["ndcg@3"] != theirs["ndcg@3"]
