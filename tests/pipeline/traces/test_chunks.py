"""A traced application that retrieves chunks (LangChain's ``add_start_index``, or only a ``page_content`` its
document holds): ``retriever=traces`` ranks those chunks, each document at its best chunk's rank, and its span and
budget figures equal what rankscope scores cutting the same paragraphs and searching them with the same tantivy."""

from __future__ import annotations

import shutil
from json import loads
from pathlib import Path

import pandas as pd
import pytest

from metrics.chunks import read_chunks
from pipeline.common.names import CHUNKS_FILE, PER_QUESTION_FILE
from tests.pipeline.helpers import REPO, log_run
from tests.pipeline.traces.conftest import run_app
from tests.pipeline.traces.test_retriever import TANTIVY, job

PAGES = REPO / "pipeline" / "data" / "helpdesk_pages"
PAGES_CORPUS = (PAGES / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
MEASURED = ("corpus=helpdesk_pages", "depth=10", "metrics.measures=[recall,ndcg,span_recall,span_precision]",
            "metrics.k=[1,3,5]", "metrics.budgets=[32,64]", "metrics.bootstrap.resamples=100")


@pytest.fixture(scope="module")
def pages_store(tmp_path_factory, empty_store) -> Path:
    """The application over the help-desk topic pages, searching their paragraphs: with offsets, and without."""
    folder = tmp_path_factory.mktemp("traced-pages")
    shutil.copy(empty_store, folder / "mlflow.db")
    run_app(folder, "rag-chunks:v1:chunks", "rag-chunk-texts:v1:chunk_texts", "--corpus", str(PAGES))
    return folder


def figures(found: dict) -> pd.DataFrame:
    table = pd.read_csv(found["out"] / PER_QUESTION_FILE, dtype={"query_id": str}).set_index("query_id")
    return table[[c for c in table.columns if "@" in c]]


@pytest.mark.parametrize("experiment", ["rag-chunks", "rag-chunk-texts"])
def test_the_chunks_a_traced_application_ranked_score_as_rankscopes_own_chunking_of_them(pages_store, experiment):
    traced = job(pages_store, log_run(pages_store, "retriever=traces", f"retriever.experiment={experiment}",
                                      "retriever.score=score", "retriever.doc_id=[doc_uri]", *MEASURED))
    direct = job(pages_store, log_run(pages_store, "retriever=custom", f"retriever._target_={TANTIVY}",
                                      "chunker=custom", "chunker._target_=tests.pipeline.chunking.own.Paragraphs",
                                      "chunker.depth=10", *MEASURED))  # the application retrieves 10 chunks
    theirs, ours = read_chunks(traced["out"] / CHUNKS_FILE), read_chunks(direct["out"] / CHUNKS_FILE)
    assert len(ours.chunks) > 4  # paragraphs, not pages
    assert all(theirs.run.ranking(q) == ours.run.ranking(q) for q in ours.query_ids)
    pd.testing.assert_frame_equal(figures(traced), figures(direct))
    assert traced["ranking"] == direct["ranking"]


def test_with_chunks_off_the_traced_documents_are_ranked_whole(pages_store):
    whole = job(pages_store, log_run(pages_store, "retriever=traces", "retriever.experiment=rag-chunks",
                                     "retriever.chunks=off", "retriever.doc_id=[doc_uri]", *MEASURED))
    chunks = read_chunks(whole["out"] / CHUNKS_FILE).chunks  # span measures read the documents as whole chunks
    lengths = {page["_id"]: len(page["text"]) for page in map(loads, PAGES_CORPUS)}
    assert (chunks.starts == 0).all() and chunks.ends.tolist() == [lengths[d] for d in chunks.doc_ids]
