"""A job with a chunker ranks chunks with any retriever: a document takes its best chunk's rank, run.trec stays
document-level, chunks.tsv holds the ranking of chunks, and every span and budget figure comes back from the job's
own files through ``python -m metrics``. Chunks larger than any document give exactly the figures of no chunking."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from metrics.chunks import read_chunks, to_documents
from metrics.cli import main as metrics_cli
from metrics.trec import read_trec_run
from pipeline.common.names import (
    CHUNKING_FILE,
    CHUNKS_FILE,
    MEANS_FILE,
    PER_QUESTION_FILE,
    RUN_FILE,
    SPANS_FILE,
    TAG_OUTPUT_DIR,
)
from pipeline.data import HelpdeskPages
from tests.pipeline.helpers import REPO, log_run, run_pipeline
from tests.pipeline.job.test_round_trip import KINDS as ROUND_TRIP_KINDS

KINDS = {kind: args for kind, args in ROUND_TRIP_KINDS.items() if kind not in ("run_file", "http")}  # HTTP: below
CHUNK_MEASURES = ("metrics.measures=[hit_rate,recall,ndcg,span_recall,span_precision,span_iou,span_precision_omega]",
                  "metrics.k=[1,3,5]", "metrics.budgets=[16,48,128]", "metrics.bootstrap.resamples=50")


def needs(kind: str) -> None:
    if kind in ("dense", "rerank"):
        pytest.importorskip("onnxruntime", reason="the dense retriever needs onnxruntime")


@pytest.fixture(scope="module")
def place(tmp_path_factory, empty_store) -> Path:
    folder = tmp_path_factory.mktemp("chunked")
    shutil.copy(empty_store, folder / "mlflow.db")
    return folder


def job_folder(place: Path, run_id: str) -> Path:
    return Path(MlflowClient(f"sqlite:///{place / 'mlflow.db'}").get_run(run_id).data.tags[TAG_OUTPUT_DIR])


def figures(folder: Path) -> pd.DataFrame:
    table = pd.read_csv(folder / PER_QUESTION_FILE, dtype={"query_id": str}).set_index("query_id")
    return table[[c for c in table.columns if "@" in c or c == "mrr"]]


@pytest.mark.parametrize("kind", list(KINDS))
def test_chunks_larger_than_any_document_give_exactly_the_figures_of_no_chunking(place, kind):
    needs(kind)
    whole = job_folder(place, log_run(place, *KINDS[kind], "metrics.bootstrap.resamples=50"))
    chunked = job_folder(place, log_run(place, *KINDS[kind], "chunker=fixed", "chunker.size=2048",
                                        "metrics.bootstrap.resamples=50"))
    pd.testing.assert_frame_equal(figures(chunked), figures(whole))
    ours, theirs = read_trec_run(chunked / RUN_FILE), read_trec_run(whole / RUN_FILE)
    assert all(ours.ranking(q) == theirs.ranking(q) for q in theirs.query_ids)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_retriever_ranks_chunks_and_each_document_takes_its_best_chunks_rank(place, kind):
    needs(kind)
    folder = job_folder(place, log_run(place, "corpus=helpdesk_pages", "chunker=recursive", "chunker.size=24",
                                       *KINDS[kind], *CHUNK_MEASURES))
    chunks = read_chunks(folder / CHUNKS_FILE)
    pages = HelpdeskPages().load()
    texts = dict(zip(pages.doc_ids, pages.doc_texts))
    sizes = chunks.chunks.ends - chunks.chunks.starts
    assert (sizes < 300).all() and set(chunks.chunks.doc_ids) <= set(texts)  # pieces of pages, not pages
    documents, written = to_documents(chunks, 100), read_trec_run(folder / RUN_FILE)
    assert [documents.top(q, 100) for q in written.query_ids] == [written.top(q, 100) for q in written.query_ids]


def printed(folder: Path, qrels: Path, names: list[str], capsys) -> dict[str, str]:
    capsys.readouterr()
    args = ["-c", *[a for n in names for a in ("-m", n)], "--chunks", str(folder / CHUNKS_FILE),
            "--spans", str(folder / SPANS_FILE), "--chunking", str(folder / CHUNKING_FILE), str(qrels),
            str(folder / RUN_FILE)]
    assert metrics_cli(args) == 0, capsys.readouterr().err
    return {line.split("\t")[0].strip(): line.split("\t")[2] for line in capsys.readouterr().out.splitlines()}


@pytest.mark.parametrize("chunker", [["chunker=recursive", "chunker.size=24", "chunker.overlap=4"],
                                     ["chunker=markdown", "chunker.size=32"], ["chunker=none"]])
def test_span_and_budget_figures_come_back_from_the_jobs_own_files(place, chunker, capsys):
    folder = job_folder(place, log_run(place, "corpus=helpdesk_pages", *chunker, *CHUNK_MEASURES))
    means = pd.read_csv(folder / MEANS_FILE).set_index("metric")["mean"]
    names = [m for m in means.index if m.startswith("span_") or m.endswith("tok")]
    assert len(names) == 22  # 3 span measures at 3 cutoffs, omega, 4 budget measures at 3 budgets
    qrels = REPO / "pipeline" / "data" / "helpdesk_pages" / "qrels" / "test.tsv"
    shown = printed(folder, qrels, names, capsys)
    assert {name: f"{means[name]:.4f}" for name in names} == {name: shown[name] for name in names}


def test_token_budgets_let_no_chunk_size_win_by_size_alone(place):
    """Whole pages hold every evidence span in their top chunk, but no page fits a 48-token budget."""
    small = job_folder(place, log_run(place, "corpus=helpdesk_pages", "chunker=recursive", "chunker.size=24",
                                      *CHUNK_MEASURES))
    whole = job_folder(place, log_run(place, "corpus=helpdesk_pages", *CHUNK_MEASURES))
    small_means, whole_means = (pd.read_csv(f / MEANS_FILE).set_index("metric")["mean"] for f in (small, whole))
    assert whole_means["span_recall@5"] > small_means["span_recall@5"]
    assert whole_means["span_precision@5"] < small_means["span_precision@5"]
    assert whole_means["recall@48tok"] == 0.0 < small_means["recall@48tok"]


def test_a_sweep_over_chunk_sizes_and_retrievers_chunks_each_size_once(launch_dir):
    done = run_pipeline(launch_dir, "-m", "corpus=helpdesk_pages", "chunker=recursive", "chunker.size=16,32",
                        "retriever=bm25,lsa", "metrics.bootstrap.resamples=50", "quiet=true")
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{launch_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    runs = [r for r in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    counts = {r.data.params["chunker.size"]: [] for r in runs}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        m = run.data.metrics
        counts[run.data.params["chunker.size"]].append((m["system/cache_chunkings_computed"],
                                                        m["system/cache_chunkings_reused"]))
    assert counts == {"16": [(1.0, 0.0), (0.0, 1.0)], "32": [(1.0, 0.0), (0.0, 1.0)]}
    assert all(r.data.metrics["system/chunks"] > 4 for r in runs)  # more chunks than the four pages


@pytest.mark.parametrize(("args", "reason"), [
    (["chunker=recursive", "chunker.size=64", "chunker.overlap=64"],
     "chunker: overlap must be at least 0 and smaller than size (64), got 64"),
    (["chunker=recursive", "chunker.tokenizer=nosuch"], "chunker.tokenizer='nosuch' is neither a known tokenizer"),
    (["metrics.budgets=[512,0]"], "metrics.budgets: token budgets must be positive, got [512, 0]"),
    (["metrics.primary=recall@-5tok"], "cannot read metric 'recall@-5tok'"),
    (["chunker=custom", "chunker._target_=tests.pipeline.chunking.own.OffByOne"],
     "chunker OffByOne: on document pricing1, its chunk 1 says"),
])
def test_settings_that_cannot_chunk_or_budget_are_one_line(launch_dir, args, reason):
    done = run_pipeline(launch_dir, *args)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert reason in line, line


def test_a_search_engine_over_rankscopes_chunks_ranks_them_alike_as_a_class_or_behind_http(place):
    """tantivy indexes the chunking (its chunk ids and texts): called as a Python class it is handed the chunks by
    rankscope; served over HTTP it answers with the same chunk ids. Both give the same ranking of chunks."""
    pytest.importorskip("tantivy")
    from pipeline.chunking.chunked import chunking
    from pipeline.chunking.chunkers import Recursive
    from tests.pipeline.config.engines import TantivySearch
    from tests.retrievers.search_server import SearchServer

    split = ("corpus=helpdesk_pages", "chunker=recursive", "chunker.size=24", "metrics.bootstrap.resamples=50")
    made, _ = chunking(HelpdeskPages().load(), Recursive(size=24), None)
    engine = TantivySearch()
    engine.index(made.collection.doc_ids, made.collection.doc_texts)
    with SearchServer(engine) as server:
        http = job_folder(place, log_run(place, *split, "retriever=http", f"retriever.url={server.url('/search')}"))
    own = job_folder(place, log_run(place, *split, "retriever=custom",
                                    "retriever._target_=tests.pipeline.config.engines.TantivySearch"))
    theirs, ours = read_chunks(http / CHUNKS_FILE), read_chunks(own / CHUNKS_FILE)
    assert len(ours.chunks) > 4 and all(theirs.run.ranking(q) == ours.run.ranking(q) for q in ours.query_ids)
    pd.testing.assert_frame_equal(figures(http), figures(own))


@pytest.mark.slow  # SciFact: two jobs of 5,183 documents
def test_on_scifact_chunks_larger_than_any_abstract_give_exactly_the_figures_of_no_chunking(place):
    from tests import datasets

    folder = datasets.find("scifact", place / "unpacked")
    if folder is None:
        pytest.skip(datasets.missing("scifact"))
    corpus = ("corpus=beir", f"corpus.path={folder}", "metrics=beir", "metrics.bootstrap.resamples=50")
    whole = job_folder(place, log_run(place, *corpus))
    chunked = job_folder(place, log_run(place, *corpus, "chunker=fixed", "chunker.size=100000"))
    pd.testing.assert_frame_equal(figures(chunked), figures(whole))
    ours, theirs = read_trec_run(chunked / RUN_FILE), read_trec_run(whole / RUN_FILE)
    assert all(ours.ranking(q) == theirs.ranking(q) for q in theirs.query_ids)


def test_a_budget_metric_can_be_the_primary_metric_and_what_the_gate_decides_on(launch_dir):
    """Not among the shown columns, the primary metric joins them (the summary's verdict reads it); the gate compares
    the candidate with the baseline at the budget."""
    gated = ("corpus=helpdesk_pages", "chunker=recursive", "metrics.budgets=[64]", "metrics.primary=recall@64tok",
             "gate=default", "gate.metrics=[recall@64tok,span_recall@64tok]", "metrics.bootstrap.resamples=200",
             "gate.resamples=200", "gate.permutations=200", "quiet=true")
    first = run_pipeline(launch_dir, "chunker.size=32", *gated)
    assert first.returncode == 0 and "is now the baseline" in first.stdout, first.stderr[-2000:]
    second = run_pipeline(launch_dir, "chunker.size=16", *gated)
    assert "Traceback" not in second.stderr, second.stderr[-2000:]
    verdict = [line for line in second.stdout.splitlines() if line.startswith("rankscope gate:")]
    assert verdict and "recall@64tok" in second.stdout and "span_recall@64tok" in second.stdout, second.stdout[-3000:]
